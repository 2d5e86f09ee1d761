// pcp.cpp - per-slot lists of free blocks of orders 0..kPcpMaxOrder (the kernel's per-CPU
// pages, which hold orders 0..3 since Linux 5.13; here up to 5, see page_allocator.hpp).
//
// Fast path: pop or push at the front of the calling slot's list for the order - no lock, no
// atomic read-modify-write (the counters are owner-written with a plain load and store). The
// zone lock is taken once per `batch` pages: to refill an empty list (batch >> order blocks, at
// least one), or to flush the coldest `batch` pages when the lists hold more than `high` pages.
// A slot's lists only hold blocks of one node (`pcp_list::node`); a block of another node is
// freed straight to its zone.
//
// A block on a list keeps its tail pages marked (PG_tail, pointing at the head), so taking it
// off and putting it back costs no walk over its descriptors; the head says PG_pcp|order. Tails
// are cleared only when the block goes back to the buddy lists.
#include "page/page_allocator.hpp"

#include <cstring>

namespace slabkit {

namespace {
// Owner-only counter bump: a relaxed load and store, which compile to a plain add.
inline void bump(std::atomic<uint64_t> &counter, uint64_t by = 1) {
    counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}
} // namespace

void *page_allocator::pcp_alloc(unsigned slot, unsigned order, int node, unsigned flags,
                                alloc_failure *why) {
    pcp_list &pcp = pcp_[slot];
    page_list &list = pcp.lists[order];
    if (SLABKIT_UNLIKELY(list.empty())) {
        // The lists hold one node's blocks: refill from that node while they hold any.
        unsigned held = pcp.node.load(std::memory_order_relaxed);
        unsigned want = node != kAnyNode ? static_cast<unsigned>(node)
                        : pcp.pages != 0 ? held
                                         : preferred_node(slot);
        if (pcp.pages != 0 && held != want) return alloc_from_zones(order, node, flags, why);
        if (pcp_refill(pcp, order, want) == 0) return alloc_from_zones(order, node, flags, why);
    } else if (SLABKIT_UNLIKELY(node != kAnyNode && pcp.node.load(std::memory_order_relaxed) !=
                                                        static_cast<unsigned>(node))) {
        return alloc_from_zones(order, node, flags, why);
    }
    page *pg = list.pop_front();
    pcp.pages -= size_t{1} << order;
    pcp.count.store(pcp.pages, std::memory_order_relaxed);
    bump(pcp.allocs);
    pg->set_state(PG_head | order);
    void *addr = page_to_virt(pg);
    if (flags & kZero) memset(addr, 0, kPageSize << order);
    return addr;
}

void page_allocator::pcp_free(unsigned slot, page *pg, unsigned order) {
    pcp_list &pcp = pcp_[slot];
    unsigned node = page_to_nid(pg);
    if (pcp.pages == 0)
        pcp.node.store(node, std::memory_order_relaxed);
    else if (SLABKIT_UNLIKELY(pcp.node.load(std::memory_order_relaxed) != node))
        return zone_free(pg, order);
    pg->set_state(PG_pcp | order);
    pcp.lists[order].push_front(pg);
    pcp.pages += size_t{1} << order;
    pcp.count.store(pcp.pages, std::memory_order_relaxed);
    bump(pcp.frees);
    if (SLABKIT_UNLIKELY(pcp.pages > (pcp.high ? pcp.high : cfg_.pcp_high))) {
        const uint64_t now = platform::now_coarse_ms();
        if (pcp.pages > pcp_high_of(pcp, now)) {
            pcp.flushed = true;
            pcp_flush(pcp, cfg_.pcp_batch, order);
        }
        drain_idle_slots(now);
    }
}

uint64_t page_allocator::pcp_high_of(pcp_list &pcp, uint64_t now) {
    // A raised bound falls back once it has not had to grow for decay_ms: the slot stopped
    // cycling that much.
    if (pcp.high > cfg_.pcp_high &&
        now - pcp.high_grown_ms > (cfg_.decay_ms ? cfg_.decay_ms : 1000))
        pcp.high = 0;
    return pcp.high ? pcp.high : cfg_.pcp_high;
}

// Takes batch >> order blocks (at least one) of `order` from `node`'s zone, growing it if it is
// empty. Returns how many were added; 0 when the node has no memory to give.
unsigned page_allocator::pcp_refill(pcp_list &pcp, unsigned order, unsigned node) {
    const uint64_t start = platform::now_coarse_ms();
    drain_idle_slots(start);
    const uint64_t bound = pcp_high_of(pcp, start); // a stale raised bound falls back here too
    if (pcp.flushed && cfg_.pcp_high_max > cfg_.pcp_high) {
        // The lists gave pages back and now need pages again: they cycle more than their bound
        // lets them keep, so each round trip went through the zone lock. Let them keep a batch
        // more (up to pcp_high_max).
        const uint64_t high = bound + cfg_.pcp_batch;
        pcp.high = high < cfg_.pcp_high_max ? high : cfg_.pcp_high_max;
        pcp.high_grown_ms = start;
    }
    pcp.flushed = false;
    zone &z = zones_[node];
    const unsigned want = cfg_.pcp_batch >> order ? cfg_.pcp_batch >> order : 1;
    page_list &list = pcp.lists[order];
    unsigned got = 0;
    for (int attempt = 0; attempt < 2 && got == 0; ++attempt) {
        uint64_t now = platform::now_coarse_ms();
        purge_batch decayed;
        {
            platform::lock_guard guard(z.lock);
            // Decay before taking: a split re-stamps the halves as just freed (see
            // alloc_from_zones).
            select_decayed(z, now, decayed);
            while (got < want) {
                page *pg = zone_take(z, order, now);
                if (!pg) break;
                pg->set_state(PG_pcp | order);
                // Lower addresses first out: blocks come off the split block in address order.
                list.push_back(pg);
                ++got;
            }
        }
        if (decayed.count) decommit_batch(z, decayed);
        if (got == 0 && !grow(node, order, nullptr)) break;
    }
    if (got) {
        // Tails point at their heads for as long as the block is off the buddy lists.
        if (order)
            for (page *pg = list.first; pg; pg = pg->next) mark_allocated(pg, order);
        pcp.node.store(node, std::memory_order_relaxed);
        pcp.pages += static_cast<uint64_t>(got) << order;
        pcp.count.store(pcp.pages, std::memory_order_relaxed);
        bump(pcp.refills);
    }
    return got;
}

// Returns at least `pages` pages (everything when pages >= what the lists hold) to the zone, the
// coldest blocks first: from the list of `first_order` (the one that grew), then the others.
void page_allocator::pcp_flush(pcp_list &pcp, uint64_t pages, unsigned first_order) {
    if (pcp.pages == 0) return;
    zone &z = zones_[pcp.node.load(std::memory_order_relaxed)];
    uint64_t now = platform::now_coarse_ms();
    uint64_t flushed = 0;
    purge_batch batch;
    {
        platform::lock_guard guard(z.lock);
        // Decay before the puts: merging re-stamps the buddies as just freed.
        select_decayed(z, now, batch);
        for (unsigned i = 0; i < kPcpOrders && flushed < pages; ++i) {
            unsigned order = (first_order + i) % kPcpOrders;
            page_list &list = pcp.lists[order];
            while (flushed < pages && !list.empty()) {
                page *pg = list.pop_back();
                for (size_t t = 1; t < (size_t{1} << order); ++t) {
                    pg[t].set_state(0);
                    pg[t].head = nullptr;
                }
                zone_put(z, pg, order, now);
                flushed += size_t{1} << order;
            }
        }
        select_over_retain(z, batch);
    }
    if (batch.count) {
        bool full = batch.full();
        decommit_batch(z, batch);
        if (full) enforce_retain(z); // one batch may not have been enough for the bound
    }
    pcp.pages -= flushed;
    pcp.count.store(pcp.pages, std::memory_order_relaxed);
    bump(pcp.flushes);
}

void page_allocator::drain_slot_cb(unsigned slot, void *arg) {
    auto *pa = static_cast<page_allocator *>(arg);
    pcp_list &pcp = pa->pcp_[slot];
    pa->pcp_flush(pcp, UINT64_MAX, 0);
    pcp.high = 0; // drained: back to pcp_high
    pcp.flushed = false;
}

// Slots that no thread has taken for decay_ms keep what their last thread parked until someone
// drains them; the slow paths do it here, at most every decay_ms/4 (decay_ms = 0: never; drain()
// still does). A thread arriving sooner inherits the lists warm. Never called with a zone lock
// held; may be called under a cache's locks (a slab freed under its list lock), so it only tries
// the slot registry lock: a busy registry (another visitor, or a fork) skips this round.
void page_allocator::drain_idle_slots(uint64_t now) {
    if (cfg_.decay_ms == 0) return;
    uint64_t next = next_idle_drain_ms_.load(std::memory_order_relaxed);
    if (SLABKIT_LIKELY(now < next)) return;
    const uint64_t step = cfg_.decay_ms / 4 ? cfg_.decay_ms / 4 : 1;
    if (!next_idle_drain_ms_.compare_exchange_strong(next, now + step, std::memory_order_relaxed))
        return; // another thread is on it
    if (now < cfg_.decay_ms) return;
    slots::try_for_each_idle_since(now - cfg_.decay_ms, drain_slot_cb, this);
}

void page_allocator::drain() {
    {
        slots::hold mine;
        if (mine.slot() != kNoSlot) drain_slot_cb(mine.slot(), this);
    }
    slots::for_each_idle(drain_slot_cb, this);
}

} // namespace slabkit
