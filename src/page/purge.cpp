// purge.cpp - giving free memory back to the OS.
//
// Policy (docs/page-allocator.md has the reasoning):
//  1. Bound: after a free, if a node holds more than `retain_pages` free pages that may be
//     resident, the oldest dirty free blocks (by the time they were freed, across all orders)
//     are decommitted until the node is under 3/4 of the bound. Recently freed blocks stay warm.
//  2. Decay: at most every decay_ms/4, a slow path of the zone decommits the dirty blocks that
//     have been free for decay_ms or longer (decay_ms = 0 turns this off).
//  3. On demand: purge() drains the per-slot lists and decommits every free dirty block.
// A decommitted block moves to the clean list of its order; allocation takes clean blocks only
// when no dirty block of a suitable order is left.
#include "page/dirty_bitmap.hpp"
#include "page/page_allocator.hpp"

namespace slabkit {

// Decommits one free dirty block. Called with z.lock held. Returns the pages given back.
uint64_t page_allocator::decommit_block(zone &z, page *pg, unsigned order) {
    chunk *c = chunk_of(pg);
    size_t pfn = page_pfn(pg);
    uint64_t resident = dirty_count(c, pfn, order);
    platform::os_status status = platform::decommit(page_to_virt(pg), kPageSize << order);
    if (!status.ok()) {
        // The memory stays ours and usable; only the RSS is not given back. Say so once.
        static std::atomic<bool> said{false};
        if (!said.exchange(true)) {
            char buf[160];
            platform::print_error("slabkit: page allocator: cannot give memory back to the OS: "
                                  "%s\n",
                                  platform::describe(status, buf, sizeof buf));
        }
        // Move it to the back so that the purge loops move on to other blocks.
        z.dirty[order].remove(pg);
        z.dirty[order].push_back(pg);
        return 0;
    }
    dirty_fill(c, pfn, order, false);
    z.free_resident -= resident;
    z.returned += resident;
    z.decommits += 1;
    z.dirty[order].remove(pg);
    pg->set_state(PG_buddy | PG_clean | order);
    z.clean[order].push_front(pg);
    return resident;
}

void page_allocator::purge_over_retain(zone &z) {
    if (SLABKIT_LIKELY(z.free_resident <= retain_pages_)) return;
    const uint64_t target = retain_pages_ - retain_pages_ / 4;
    // Bounded: each pass decommits one block or stops.
    for (uint64_t pass = 0; z.free_resident > target && pass < (uint64_t{1} << 20); ++pass) {
        page *oldest = nullptr;
        unsigned oldest_order = 0;
        for (unsigned o = 0; o <= kMaxOrder; ++o) {
            page *tail = z.dirty[o].last;
            if (tail && (!oldest || tail->priv[0] <= oldest->priv[0])) {
                oldest = tail;
                oldest_order = o;
            }
        }
        if (!oldest) break;
        if (decommit_block(z, oldest, oldest_order) == 0 && (oldest->flags() & PG_clean) == 0)
            break; // the OS refused: stop trying for now
    }
}

void page_allocator::purge_decayed(zone &z, uint64_t now) {
    if (cfg_.decay_ms == 0 || now < z.next_decay_ms) return;
    z.next_decay_ms = now + (cfg_.decay_ms / 4 ? cfg_.decay_ms / 4 : 1);
    if (now < cfg_.decay_ms) return;
    const uint64_t cutoff = now - cfg_.decay_ms;
    for (unsigned o = 0; o <= kMaxOrder; ++o) {
        // Dirty lists are newest first, so the decayed blocks are a run at the back.
        for (uint64_t n = z.dirty[o].count; n > 0; --n) {
            page *tail = z.dirty[o].last;
            if (!tail || tail->priv[0] > cutoff) break;
            if (decommit_block(z, tail, o) == 0 && (tail->flags() & PG_clean) == 0) break;
        }
    }
}

uint64_t page_allocator::purge() {
    drain();
    uint64_t total = 0;
    for (unsigned n = 0; n < nodes_; ++n) {
        zone &z = zones_[n];
        platform::lock_guard guard(z.lock);
        for (unsigned o = 0; o <= kMaxOrder; ++o)
            for (uint64_t left = z.dirty[o].count; left > 0 && !z.dirty[o].empty(); --left) {
                page *pg = z.dirty[o].last;
                total += decommit_block(z, pg, o);
            }
    }
    return total;
}

} // namespace slabkit
