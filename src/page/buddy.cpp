// buddy.cpp - the buddy free lists of a zone: take a block (splitting larger ones), put a block
// back (merging it with its free buddy as far as it goes), and grow a node by a chunk.
#include "page/dirty_bitmap.hpp"
#include "page/page_allocator.hpp"
#include "page/readonly_bitmap.hpp"

#include <cerrno>

namespace slabkit {

namespace detail {
std::atomic<uint8_t> g_chunk_map[kMaxChunks];
}

namespace {

// kChunkWhole, kChunkPartial, or 0 (gone).
void chunk_map_set(chunk *c, uint8_t kind) {
    uintptr_t index = reinterpret_cast<uintptr_t>(c) >> kChunkShift;
    detail::g_chunk_map[index].store(kind, std::memory_order_release);
}

// Pages of memory for use added to a node (zone lock held): free, fresh max-order blocks that
// carve_fresh hands out in order.
void add_fresh(page_allocator::zone &z, size_t pages) {
    z.usable_pages += pages;
    z.free_pages += pages;
    z.fresh_blocks += pages >> kMaxOrder;
}

// Puts a free block on the right list of its order and marks its head.
void link_free(page_allocator::zone &z, page *pg, unsigned order, uint64_t resident, uint64_t now) {
    pg->priv[0] = now;
    if (resident) {
        pg->set_state(PG_buddy | order);
        z.dirty[order].push_front(pg);
    } else {
        pg->set_state(PG_buddy | PG_clean | order);
        z.clean[order].push_front(pg);
    }
}

void unlink_free(page_allocator::zone &z, page *pg, unsigned order) {
    if (pg->flags() & PG_clean)
        z.clean[order].remove(pg);
    else
        z.dirty[order].remove(pg);
}

} // namespace

// The next never-used max-order block of the zone's chunks, off no list (state clean, as if it
// had just been taken from the clean list); nullptr when every chunk is carved. Zone lock held.
page *page_allocator::carve_fresh(zone &z) {
    if (z.fresh_blocks == 0) return nullptr;
    for (chunk *c = z.chunks; c; c = c->next) {
        const size_t end = c->end_pfn.load(std::memory_order_relaxed);
        if (c->fresh_pfn >= end) continue;
        // A node past huge_after_pages asks for huge pages on the never-used rest of the chunk,
        // once: no page there is resident yet, so nothing that is in use grows, and the blocks
        // carved from it later are backed 2 MiB at a time when first touched.
        if (c->huge_pfn == kPagesPerChunk && cfg_.huge_after_pages &&
            z.out >= cfg_.huge_after_pages) {
            c->huge_pfn = c->fresh_pfn;
            platform::huge_pages(reinterpret_cast<char *>(c) + (c->fresh_pfn << kPageShift),
                                 (end - c->fresh_pfn) << kPageShift);
        }
        page *pg = pfn_to_page(c, c->fresh_pfn);
        c->fresh_pfn += size_t{1} << kMaxOrder;
        --z.fresh_blocks;
        pg->priv[0] = 0;
        pg->set_state(PG_buddy | PG_clean | kMaxOrder);
        return pg;
    }
    return nullptr;
}

// Removes a block of exactly `order` from the zone, splitting a larger one if needed; the
// halves split off go back to the free lists. Dirty blocks (warm memory) are preferred at any
// order over clean ones. Called with z.lock held; nullptr when the zone has no block that big.
page *page_allocator::zone_take(zone &z, unsigned order, uint64_t now,
                                platform::os_status *os_error) {
    page *pg = nullptr;
    unsigned found = order;
    for (unsigned pass = 0; pass < 2 && !pg; ++pass)
        for (found = order; found <= kMaxOrder; ++found) {
            page_list &list = pass == 0 ? z.dirty[found] : z.clean[found];
            if (!list.empty()) {
                pg = list.pop_front();
                break;
            }
        }
    if (!pg) {
        // Fresh memory last: blocks already split, warm or decommitted, come first.
        pg = carve_fresh(z);
        found = kMaxOrder;
    }
    if (!pg) return nullptr;

    chunk *c = chunk_of(pg);
    size_t pfn = page_pfn(pg);
    uint64_t dirty = dirty_count(c, pfn, found);
    z.free_pages -= size_t{1} << found;
    z.free_resident -= dirty;
    // Split down to the order asked for, keeping the warmer half each time (the one with more
    // resident pages; the lower on a tie) and giving the other back: a block merged from warm
    // and decommitted parts then hands out warm pages first, and needs no fault to be used. A
    // block wholly dirty or wholly clean splits into halves of the same kind without counting.
    while (found > order) {
        --found;
        const size_t half = size_t{1} << found;
        uint64_t upper_dirty = dirty == 0 ? 0
                               : dirty == (uint64_t{2} << found)
                                   ? half
                                   : dirty_count(c, pfn + half, found);
        const bool keep_upper = upper_dirty > dirty - upper_dirty;
        const size_t given = keep_upper ? pfn : pfn + half;
        const uint64_t given_dirty = keep_upper ? dirty - upper_dirty : upper_dirty;
        if (keep_upper) pfn += half;
        link_free(z, pfn_to_page(c, given), found, given_dirty, now);
        z.free_pages += half;
        z.free_resident += given_dirty;
        dirty -= given_dirty;
    }
    pg = pfn_to_page(c, pfn);
    // Pages write-protected at a free (protect_freed) are made writable again, all at once: one
    // system call, under the lock, so that no other thread sees the block half protected. A
    // block split off a protected one keeps its bits and its protection until it is taken. The
    // zone's count first: with no protected free page (the option off, or every size reused) a
    // take reads no bitmap.
    if (z.readonly_pages != 0 && readonly_bitmap::count(c, pfn, order) != 0) {
        platform::os_status st = platform::commit(page_to_virt(pg), kPageSize << order);
        if (SLABKIT_UNLIKELY(!st.ok())) {
            // Back to the free lists as it was (still protected); the caller fails.
            if (os_error) *os_error = st;
            z.free_pages += size_t{1} << order;
            z.free_resident += dirty;
            merge_and_link(z, pg, order, now, false);
            return nullptr;
        }
        z.readonly_pages -= readonly_bitmap::count(c, pfn, order);
        readonly_bitmap::fill(c, pfn, order, false);
        // The program wants blocks of this size again: from now on they stay writable.
        if (cfg_.protect_freed == kProtectUntilReuse && order >= protect_order())
            protect_order_.store(order + 1, std::memory_order_relaxed);
    }
    // From now on the block counts as resident while it is out and after it comes back.
    dirty_fill(c, pfn, order, true);
    pg->set_state(PG_head | order);
    z.out += size_t{1} << order;
    return pg;
}

// Returns a block (all of whose pages are dirty) to the zone and merges it with its buddies.
// Called with z.lock held.
void page_allocator::zone_put(zone &z, page *pg, unsigned order, uint64_t now) {
    z.out -= size_t{1} << order;
    z.free_pages += size_t{1} << order;
    z.free_resident += size_t{1} << order;
    merge_and_link(z, pg, order, now, true);
}

// Merges a free block (already counted as free) with its free buddies as far as it goes and puts
// the result on the right list. `known_dirty`: the block has resident pages, so the merged one
// does too, without counting. Called with z.lock held.
void page_allocator::merge_and_link(zone &z, page *pg, unsigned order, uint64_t now,
                                    bool known_dirty) {
    chunk *c = chunk_of(pg);
    size_t pfn = page_pfn(pg);
    pg->set_state(0);
    // Buddies of blocks inside the usable part of a chunk are inside it too: the usable part
    // starts max-order aligned, and the metadata pages are never free, so merging stops there.
    while (order < kMaxOrder) {
        size_t buddy_pfn = pfn ^ (size_t{1} << order);
        if (buddy_pfn < kMetaPages) break;
        page *buddy = pfn_to_page(c, buddy_pfn);
        if ((buddy->flags() & ~PG_clean) != (PG_buddy | order)) break;
        unlink_free(z, buddy, order);
        buddy->set_state(0);
        pfn &= ~(size_t{1} << order);
        ++order;
    }
    page *merged = pfn_to_page(c, pfn);
    link_free(z, merged, order, known_dirty ? 1 : dirty_count(c, pfn, order), now);
}

// Grows a partial chunk of `node` in place (arena lock held): maps the address space right
// after it, as much as it has for use (so a heap that keeps growing takes few steps), less where
// the limit or a neighbouring mapping leaves less, at least one max-order block. False when no
// chunk of the node can grow.
bool page_allocator::extend_chunk(zone &z, unsigned node, uint64_t reserved) {
    constexpr size_t kBlock = size_t{1} << kMaxOrder;
    for (chunk *c = z.chunks; c; c = c->next) {
        const size_t end = c->end_pfn.load(std::memory_order_relaxed);
        if (end >= kPagesPerChunk || c->grow_blocked) continue;
        size_t want = end - kMetaPages;
        if (want < (cfg_.grow_bytes >> kPageShift)) want = cfg_.grow_bytes >> kPageShift;
        if (want > kPagesPerChunk - end) want = kPagesPerChunk - end;
        for (size_t step = want; step >= kBlock; step = (step / 2) & ~(kBlock - 1)) {
            const size_t bytes = step << kPageShift;
            if (cfg_.max_bytes && reserved + bytes > cfg_.max_bytes) continue;
            char *at = reinterpret_cast<char *>(c) + (end << kPageShift);
            platform::os_status st = platform::map_at(at, bytes);
            if (!st.ok()) {
                // Something else lives right after the chunk: it can never grow.
                if (step == kBlock && st.err == EEXIST) c->grow_blocked = true;
                continue;
            }
            platform::bind_to_node(at, bytes, node);
            if (c->huge_pfn < kPagesPerChunk)
                platform::huge_pages(at, bytes); // the rest of the chunk asked for them already
            else
                platform::no_huge_pages(at, bytes);
            reserved_bytes_.store(reserved + bytes, std::memory_order_relaxed);
            // The map and end_pfn before the pages reach the free lists (see grow).
            c->end_pfn.store(end + step, std::memory_order_release);
            if (end + step == kPagesPerChunk) chunk_map_set(c, kChunkWhole);
            platform::lock_guard zone_guard(z.lock);
            add_fresh(z, step);
            return true;
        }
    }
    return false;
}

// Reserves a new chunk for `node` and adds its usable pages to the zone as max-order blocks
// (unless, by the time the arena lock is ours, the zone has a block of `order` again). With
// cfg_.grow_bytes, a partial chunk of the node grows first, and a new one is partial too.
bool page_allocator::grow(unsigned node, unsigned order, alloc_failure *why) {
    platform::lock_guard guard(arena_lock_);
    zone &z = zones_[node];
    for (;;) {
        // Another thread may have grown this node while we waited for the arena lock. Blocks
        // being decommitted outside the lock come back soon: wait for them rather than grow
        // (or, under an arena limit, fail) while the node has the memory.
        bool purging;
        {
            platform::lock_guard zone_guard(z.lock);
            for (unsigned o = order; o <= kMaxOrder; ++o)
                if (!z.dirty[o].empty() || !z.clean[o].empty()) return true;
            if (z.fresh_blocks) return true;
            purging = z.purging_pages >= (size_t{1} << order);
        }
        if (!purging) break;
        z.purge_lock.lock(); // sleeps until the decommits in flight are back on the lists
        z.purge_lock.unlock();
    }
    uint64_t reserved = reserved_bytes_.load(std::memory_order_relaxed);
    if (cfg_.grow_bytes && extend_chunk(z, node, reserved)) return true;
    // A whole chunk, or its metadata and grow_bytes of pages.
    const size_t pages =
        cfg_.grow_bytes ? kMetaPages + (cfg_.grow_bytes >> kPageShift) : kPagesPerChunk;
    const size_t bytes = pages << kPageShift;
    if (cfg_.max_bytes && reserved + bytes > cfg_.max_bytes) {
        if (why) {
            why->code = alloc_failure::limit;
            why->limit_bytes = cfg_.max_bytes;
        }
        return false;
    }
    platform::os_status status;
    void *base;
    if (pages < kPagesPerChunk) {
        // No over-reservation for the alignment: under an address-space limit it may not fit.
        base = platform::map_aligned_exact(bytes, kChunkSize, &status);
    } else {
        base = platform::reserve(kChunkSize, kChunkSize, &status);
        if (base) {
            status = platform::commit(base, kChunkSize);
            if (!status.ok()) {
                platform::release(base, kChunkSize);
                base = nullptr;
            }
        }
    }
    if (base && reinterpret_cast<uintptr_t>(base) >> kChunkShift >= kMaxChunks) {
        // Above the 47-bit space our chunk map covers (5-level paging); give it back.
        platform::release(base, bytes);
        base = nullptr;
        status = {"reserve (address above 47 bits)", ENOMEM};
    }
    if (!base) {
        if (why) {
            why->code = alloc_failure::os;
            why->os_error = status;
        }
        return false;
    }
    platform::bind_to_node(base, bytes, node); // best effort: placement only
    // Pages are handed out and given back 4 KiB at a time: huge pages would make one touched
    // page cost 2 MiB of RSS. Best effort (kernels without THP refuse it harmlessly).
    platform::no_huge_pages(base, bytes);

    chunk *c = static_cast<chunk *>(base);
    c->magic = chunk::kMagic;
    c->owner = this;
    c->node = node;
    c->end_pfn.store(pages, std::memory_order_relaxed);
    c->grow_blocked = false;
    reserved_bytes_.store(reserved + bytes, std::memory_order_relaxed);
    // Into the chunk map before its pages reach the free lists: once they are there another
    // thread can take one and hand it to a third, whose free() must find it in the arena.
    chunk_map_set(c, pages == kPagesPerChunk ? kChunkWhole : kChunkPartial);
    {
        platform::lock_guard zone_guard(z.lock);
        c->next = z.chunks;
        z.chunks = c;
        ++z.nr_chunks;
        // Fresh pages were never touched: carved into clean max-order blocks when the free
        // lists run out (carve_fresh).
        c->fresh_pfn = kMetaPages;
        c->huge_pfn = kPagesPerChunk;
        add_fresh(z, pages - kMetaPages);
    }
    return true;
}

void page_allocator::destroy(page_allocator *pa) {
    if (!pa) return;
    for (unsigned n = 0; n < pa->nodes_; ++n) {
        for (chunk *c = pa->zones_[n].chunks; c;) {
            chunk *next = c->next;
            const size_t bytes = c->end_pfn.load(std::memory_order_relaxed) << kPageShift;
            chunk_map_set(c, 0);
            platform::release(c, bytes);
            c = next;
        }
        pa->zones_[n].chunks = nullptr;
    }
    pa->~page_allocator();
    platform::release(pa, (sizeof(page_allocator) + kPageSize - 1) & ~(kPageSize - 1));
}

} // namespace slabkit
