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
//
// How: the blocks are chosen under the zone lock and set aside (off the free lists, on the
// zone's `purging` list, state PG_purging so no merge touches them, still counted as free). The
// madvise calls run after the lock is released - a 4 MiB MADV_DONTNEED takes tens to hundreds of
// microseconds, which other threads of the node would otherwise wait out. Then, under the lock
// again, the blocks lose their dirty bits and are merged back onto the free lists. At most
// purge_batch::kMax blocks per round. The zone's purge_lock is held over that phase, so grow()
// can sleep on it instead of reserving (or failing under an arena limit) while the node still
// has free memory in flight, and fork's prepare can wait for it.
#include "page/dirty_bitmap.hpp"
#include "page/page_allocator.hpp"

namespace slabkit {

// Takes a dirty free block off its list for decommitting. Called with z.lock held.
void page_allocator::set_aside(zone &z, page *pg, unsigned order, purge_batch &batch) {
    z.dirty[order].remove(pg);
    pg->set_state(PG_purging | order);
    z.purging.push_back(pg);
    z.purging_pages += size_t{1} << order;
    z.purging_resident += dirty_count(chunk_of(pg), page_pfn(pg), order);
    batch.blocks[batch.count++] = pg;
}

void page_allocator::select_over_retain(zone &z, purge_batch &batch) {
    if (SLABKIT_LIKELY(z.free_resident - z.purging_resident <= retain_pages_)) return;
    over_retain_.fetch_add(1, std::memory_order_relaxed);
    const uint64_t target = retain_pages_ - retain_pages_ / 4;
    while (!batch.full() && z.free_resident - z.purging_resident > target) {
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
        set_aside(z, oldest, oldest_order, batch);
    }
}

void page_allocator::select_decayed(zone &z, uint64_t now, purge_batch &batch) {
    if (cfg_.decay_ms == 0 || now < z.next_decay_ms || now < cfg_.decay_ms) return;
    const uint64_t cutoff = now - cfg_.decay_ms;
    for (unsigned o = 0; o <= kMaxOrder && !batch.full(); ++o) {
        // Dirty lists are newest first, so the decayed blocks are a run at the back.
        while (!batch.full() && z.dirty[o].last && z.dirty[o].last->priv[0] <= cutoff)
            set_aside(z, z.dirty[o].last, o, batch);
    }
    // A full batch may have left decayed blocks behind: look again on the next slow path.
    if (!batch.full()) z.next_decay_ms = now + (cfg_.decay_ms / 4 ? cfg_.decay_ms / 4 : 1);
}

// Decommits the blocks set aside, without the zone lock, then puts them back. Returns the pages
// given back to the OS.
uint64_t page_allocator::decommit_batch(zone &z, purge_batch &batch) {
    platform::lock_guard purging(z.purge_lock);
    bool done[purge_batch::kMax];
    platform::os_status failure;
    for (unsigned i = 0; i < batch.count; ++i) {
        page *pg = batch.blocks[i];
        platform::os_status status =
            platform::decommit(page_to_virt(pg), kPageSize << (pg->flags() & PG_order_mask));
        done[i] = status.ok();
        if (!done[i]) failure = status;
    }
    if (!failure.ok()) {
        // The memory stays ours and usable; only the RSS is not given back. Say so once.
        static std::atomic<bool> said{false};
        if (!said.exchange(true)) {
            char buf[160];
            platform::print_error("slabkit: page allocator: cannot give memory back to the OS: "
                                  "%s\n",
                                  platform::describe(failure, buf, sizeof buf));
        }
    }
    uint64_t returned = 0;
    const uint64_t now = platform::now_coarse_ms();
    platform::lock_guard guard(z.lock);
    for (unsigned i = 0; i < batch.count; ++i) {
        page *pg = batch.blocks[i];
        const unsigned order = pg->flags() & PG_order_mask;
        chunk *c = chunk_of(pg);
        const size_t pfn = page_pfn(pg);
        const uint64_t resident = dirty_count(c, pfn, order);
        z.purging.remove(pg);
        z.purging_pages -= size_t{1} << order;
        z.purging_resident -= resident;
        if (done[i]) {
            dirty_fill(c, pfn, order, false);
            z.free_resident -= resident;
            z.returned += resident;
            z.decommits += 1;
            returned += resident;
        }
        merge_and_link(z, pg, order, now, false);
    }
    batch.count = 0;
    return returned;
}

void page_allocator::enforce_retain(zone &z) {
    for (;;) {
        purge_batch batch;
        {
            platform::lock_guard guard(z.lock);
            select_over_retain(z, batch);
        }
        if (batch.count == 0) return;
        bool more = batch.full();
        if (decommit_batch(z, batch) == 0 || !more) return; // the OS refuses: do not spin
    }
}

uint64_t page_allocator::purge() {
    drain();
    uint64_t total = 0;
    for (unsigned n = 0; n < nodes_; ++n) {
        zone &z = zones_[n];
        for (;;) {
            purge_batch batch;
            {
                platform::lock_guard guard(z.lock);
                for (unsigned o = 0; o <= kMaxOrder && !batch.full(); ++o)
                    while (!batch.full() && z.dirty[o].last)
                        set_aside(z, z.dirty[o].last, o, batch);
            }
            if (batch.count == 0) break;
            uint64_t returned = decommit_batch(z, batch);
            total += returned;
            if (returned == 0) break; // the OS refuses: do not spin on it
        }
    }
    return total;
}

} // namespace slabkit
