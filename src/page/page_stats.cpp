// page_stats.cpp - statistics snapshots, the buddyinfo text and the invariant checker.
#include "page/dirty_bitmap.hpp"
#include "page/page_allocator.hpp"
#include "page/readonly_bitmap.hpp"

#include <cstdarg>
#include <cstdio>

namespace slabkit {

uint64_t page_allocator::resident_pages() const {
    auto *self = const_cast<page_allocator *>(this);
    uint64_t pages = 0;
    for (unsigned n = 0; n < nodes_; ++n) {
        zone &z = self->zones_[n];
        platform::lock_guard guard(z.lock);
        pages += z.out + z.free_resident;
    }
    return pages;
}

void page_allocator::snapshot(page_stats *out) const {
    *out = page_stats{};
    out->nodes = nodes_;
    auto *self = const_cast<page_allocator *>(this);
    for (unsigned n = 0; n < nodes_; ++n) {
        zone &z = self->zones_[n];
        page_stats::node_stats &ns = out->node[n];
        platform::lock_guard guard(z.lock);
        for (unsigned o = 0; o <= kMaxOrder; ++o)
            ns.free_blocks[o] = z.dirty[o].count + z.clean[o].count;
        ns.free_blocks[kMaxOrder] += z.fresh_blocks;
        ns.free_pages = z.free_pages;
        ns.free_resident = z.free_resident;
        ns.in_use = z.out; // per-slot pages are taken off below
        ns.usable_pages = z.usable_pages;
        ns.chunks = z.nr_chunks;
        ns.returned = z.returned;
        ns.decommits = z.decommits;
        ns.readonly = z.readonly_pages;
    }
    const unsigned slots = slots::high_water();
    for (unsigned s = 0; s < slots; ++s) {
        const pcp_list &pcp = pcp_[s];
        uint64_t count = pcp.count.load(std::memory_order_relaxed);
        unsigned node = pcp.node.load(std::memory_order_relaxed); // racy: the owner may change it
        if (node >= nodes_) node = 0;
        out->node[node].in_pcp += count;
        out->pcp_allocs += pcp.allocs.load(std::memory_order_relaxed);
        out->pcp_frees += pcp.frees.load(std::memory_order_relaxed);
        out->pcp_refills += pcp.refills.load(std::memory_order_relaxed);
        out->pcp_flushes += pcp.flushes.load(std::memory_order_relaxed);
    }
    for (unsigned n = 0; n < nodes_; ++n) {
        page_stats::node_stats &ns = out->node[n];
        // Racy reads of per-slot counts can momentarily exceed what the zone handed out.
        ns.in_use = ns.in_use > ns.in_pcp ? ns.in_use - ns.in_pcp : 0;
        out->in_use += ns.in_use;
        out->in_pcp += ns.in_pcp;
        out->free_pages += ns.free_pages;
        out->free_resident += ns.free_resident;
        out->readonly += ns.readonly;
        out->returned += ns.returned;
        out->chunks += ns.chunks;
    }
    out->resident = out->in_use + out->in_pcp + out->free_resident;
    out->reserved_bytes = reserved_bytes_.load(std::memory_order_relaxed);
    out->errors = errors();
    out->refusals = refusals_.load(std::memory_order_relaxed);
}

namespace {
// Appends printf-style text to a bounded buffer, tracking the length.
struct text_sink {
    char *buf;
    size_t size;
    size_t len = 0;
    void add(const char *fmt, ...) __attribute__((format(printf, 2, 3))) {
        if (!buf || size == 0 || len + 1 >= size) return;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(buf + len, size - len, fmt, ap);
        va_end(ap);
        if (n > 0)
            len += static_cast<size_t>(n) < size - len ? static_cast<size_t>(n) : size - len - 1;
    }
};
} // namespace

size_t page_allocator::format_buddyinfo(char *buf, size_t size) const {
    if (buf && size) buf[0] = '\0';
    page_stats st;
    snapshot(&st);
    text_sink out{buf, size};
    for (unsigned n = 0; n < st.nodes; ++n) {
        out.add("Node %u, zone   Normal ", n);
        for (unsigned o = 0; o <= kMaxOrder; ++o)
            out.add(" %6llu", static_cast<unsigned long long>(st.node[n].free_blocks[o]));
        out.add("\n");
    }
    out.add(
        "pages: in_use %llu  in_pcp %llu  free %llu  free_resident %llu  resident %llu  "
        "returned_to_os %llu  chunks %llu  readonly %llu\n",
        static_cast<unsigned long long>(st.in_use), static_cast<unsigned long long>(st.in_pcp),
        static_cast<unsigned long long>(st.free_pages),
        static_cast<unsigned long long>(st.free_resident),
        static_cast<unsigned long long>(st.resident), static_cast<unsigned long long>(st.returned),
        static_cast<unsigned long long>(st.chunks), static_cast<unsigned long long>(st.readonly));
    return out.len;
}

unsigned page_allocator::validate(char *report, size_t size) const {
    if (report && size) report[0] = '\0';
    text_sink out{report, size};
    unsigned problems = 0;
    auto problem = [&](const char *what, const void *addr, unsigned order) {
        if (problems < 8) out.add("%s: block %p order %u\n", what, addr, order);
        ++problems;
    };
    auto *self = const_cast<page_allocator *>(this);
    for (unsigned n = 0; n < nodes_; ++n) {
        zone &z = self->zones_[n];
        platform::lock_guard guard(z.lock);
        uint64_t pages = 0, resident = 0, readonly = 0;
        for (unsigned o = 0; o <= kMaxOrder; ++o) {
            for (int which = 0; which < 2; ++which) {
                const page_list &list = which == 0 ? z.dirty[o] : z.clean[o];
                uint64_t walked = 0;
                const page *prev = nullptr;
                for (const page *pg = list.first; pg; prev = pg, pg = pg->next) {
                    ++walked;
                    if (walked > list.count) break;
                    void *addr = page_to_virt(pg);
                    chunk *c = chunk_of(pg);
                    size_t pfn = page_pfn(pg);
                    uint32_t want = PG_buddy | o | (which ? uint32_t{PG_clean} : 0u);
                    if (pg->prev != prev) problem("broken back link", addr, o);
                    if (pg->flags() != want) problem("free block with a wrong state", addr, o);
                    if (c->owner != this || c->node != n)
                        problem("block on the wrong zone", addr, o);
                    if (pfn < kMetaPages || (pfn & ((size_t{1} << o) - 1)))
                        problem("misplaced or misaligned free block", addr, o);
                    uint64_t dirty = dirty_count(c, pfn, o);
                    if (which == 1 && dirty) problem("clean block with resident pages", addr, o);
                    if (which == 0 && !dirty) problem("dirty block with no resident page", addr, o);
                    for (size_t i = 1; i < (size_t{1} << o); ++i)
                        if (pg[i].flags() != 0) {
                            problem("page inside a free block is in use or listed", addr, o);
                            break;
                        }
                    pages += size_t{1} << o;
                    resident += dirty;
                    readonly += readonly_bitmap::count(c, pfn, o);
                }
                if (walked != list.count || list.last != prev)
                    problem("free list count or tail is wrong", nullptr, o);
            }
        }
        // Blocks being decommitted outside the lock are free but on no list.
        uint64_t purging = 0, purging_resident = 0, walked = 0;
        for (const page *pg = z.purging.first; pg && walked <= z.purging.count; pg = pg->next) {
            ++walked;
            unsigned o = pg->flags() & PG_order_mask;
            if ((pg->flags() & ~PG_order_mask) != PG_purging)
                problem("block being decommitted has a wrong state", page_to_virt(pg), o);
            purging += size_t{1} << o;
            purging_resident += dirty_count(chunk_of(pg), page_pfn(pg), o);
            readonly += readonly_bitmap::count(chunk_of(pg), page_pfn(pg), o);
        }
        if (walked != z.purging.count || purging != z.purging_pages ||
            purging_resident != z.purging_resident)
            problem("blocks being decommitted are miscounted", nullptr, 0);
        // Fresh blocks: the uncarved tails of the chunks, free and on no list.
        uint64_t fresh = 0;
        for (const chunk *ch = z.chunks; ch; ch = ch->next) {
            const size_t end = ch->end_pfn.load(std::memory_order_relaxed);
            if (end <= kMetaPages || end > kPagesPerChunk ||
                (end - kMetaPages) % (size_t{1} << kMaxOrder) != 0)
                problem("chunk's end is misplaced", ch, kMaxOrder);
            else if (ch->fresh_pfn < kMetaPages || ch->fresh_pfn > end ||
                     (ch->fresh_pfn - kMetaPages) % (size_t{1} << kMaxOrder) != 0)
                problem("chunk's fresh boundary is misplaced", ch, kMaxOrder);
            else
                fresh += (end - ch->fresh_pfn) >> kMaxOrder;
        }
        if (fresh != z.fresh_blocks) problem("fresh block count is wrong", nullptr, kMaxOrder);
        pages += z.fresh_blocks << kMaxOrder;
        if (pages + purging != z.free_pages) problem("zone free page count is wrong", nullptr, 0);
        if (resident + purging_resident != z.free_resident)
            problem("zone resident page count is wrong", nullptr, 0);
        // Only free pages are write-protected: a block taken was made writable (zone_take).
        if (readonly != z.readonly_pages)
            problem("write-protected free pages are miscounted (or an allocated block is "
                    "protected)",
                    nullptr, 0);
        if (z.free_pages + z.out != z.usable_pages)
            problem("zone pages do not add up (free + out != usable)", nullptr, 0);
    }
    // Per-slot lists: the caller's own and those of idle slots (others are their owners').
    struct ctx {
        const page_allocator *pa;
        unsigned *problems;
        text_sink *out;
    } c{this, &problems, &out};
    auto check_slot = [](unsigned slot, void *arg) {
        auto *cx = static_cast<ctx *>(arg);
        const pcp_list &pcp = cx->pa->pcp_[slot];
        const unsigned node = pcp.node.load(std::memory_order_relaxed);
        uint64_t pages = 0;
        auto complain = [&](const char *what, const page *pg) {
            if (*cx->problems < 8)
                cx->out->add("%s: %p (slot %u)\n", what, pg ? page_to_virt(pg) : nullptr, slot);
            ++*cx->problems;
        };
        for (unsigned order = 0; order < kPcpOrders; ++order) {
            const page_list &list = pcp.lists[order];
            uint64_t walked = 0;
            for (const page *pg = list.first; pg && walked <= list.count; pg = pg->next) {
                ++walked;
                pages += size_t{1} << order;
                if (pg->flags() != (PG_pcp | order) || page_to_nid(pg) != node)
                    complain("per-slot block with a wrong state or node", pg);
                for (size_t t = 1; t < (size_t{1} << order); ++t)
                    if (pg[t].flags() != PG_tail || pg[t].head != pg) {
                        complain("per-slot block with a wrong tail page", pg);
                        break;
                    }
            }
            if (walked != list.count) complain("per-slot list count is wrong", nullptr);
        }
        if (pages != pcp.pages) complain("per-slot page total is wrong", nullptr);
    };
    {
        slots::hold mine;
        if (mine.slot() != kNoSlot) check_slot(mine.slot(), &c);
    }
    slots::for_each_idle(check_slot, &c);
    return problems;
}

void page_allocator::for_each_allocated(void (*fn)(page *head, void *arg), void *arg) {
    for (unsigned n = 0; n < nodes_; ++n) {
        zone &z = zones_[n];
        platform::lock_guard guard(z.lock);
        for (chunk *ch = z.chunks; ch; ch = ch->next) {
            size_t end = ch->fresh_pfn < kPagesPerChunk ? ch->fresh_pfn : kPagesPerChunk;
            for (size_t pfn = kMetaPages; pfn < end;) {
                page *pg = pfn_to_page(ch, pfn);
                uint32_t st = pg->flags();
                // A head (allocated) or a free block's first page: skip the block; anything
                // else (a tail, a page inside a free block): one page on.
                size_t step = 1;
                if (st & (PG_head | PG_buddy | PG_pcp | PG_purging))
                    step = size_t{1} << (st & PG_order_mask);
                if (st & PG_head) fn(pg, arg);
                pfn += step;
            }
        }
    }
}

} // namespace slabkit
