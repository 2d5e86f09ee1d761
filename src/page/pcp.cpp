// pcp.cpp - per-slot order-0 page lists (the kernel's per-CPU pages).
//
// Fast path: pop or push at the front of the calling slot's list - no lock, no atomic
// read-modify-write (the counters are owner-written with a plain load and store). The zone lock
// is taken once per `batch` pages: to refill an empty list, or to flush the coldest `batch`
// pages when the list passes `high`. A list only holds pages of one node (`pcp_list::node`);
// a page of another node is freed straight to its zone.
#include "page/page_allocator.hpp"

#include <cstring>

namespace slabkit {

namespace {
// Owner-only counter bump: a relaxed load and store, which compile to a plain add.
inline void bump(std::atomic<uint64_t> &counter, uint64_t by = 1) {
    counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}
} // namespace

void *page_allocator::pcp_alloc(unsigned slot, int node, unsigned flags, alloc_failure *why) {
    pcp_list &pcp = pcp_[slot];
    if (SLABKIT_UNLIKELY(pcp.pages.empty())) {
        unsigned want = node == kAnyNode ? preferred_node(slot) : static_cast<unsigned>(node);
        if (pcp_refill(pcp, want) == 0) return alloc_from_zones(0, node, flags, why);
    } else if (SLABKIT_UNLIKELY(node != kAnyNode && pcp.node.load(std::memory_order_relaxed) !=
                                                        static_cast<unsigned>(node))) {
        return alloc_from_zones(0, node, flags, why);
    }
    page *pg = pcp.pages.pop_front();
    pcp.count.store(pcp.pages.count, std::memory_order_relaxed);
    bump(pcp.allocs);
    pg->set_state(PG_head);
    void *addr = page_to_virt(pg);
    if (flags & kZero) memset(addr, 0, kPageSize);
    return addr;
}

void page_allocator::pcp_free(unsigned slot, page *pg) {
    pcp_list &pcp = pcp_[slot];
    unsigned node = page_to_nid(pg);
    if (pcp.pages.empty())
        pcp.node.store(node, std::memory_order_relaxed);
    else if (SLABKIT_UNLIKELY(pcp.node.load(std::memory_order_relaxed) != node))
        return zone_free(pg, 0);
    pg->set_state(PG_pcp);
    pcp.pages.push_front(pg);
    pcp.count.store(pcp.pages.count, std::memory_order_relaxed);
    bump(pcp.frees);
    if (SLABKIT_UNLIKELY(pcp.pages.count > cfg_.pcp_high)) pcp_flush(pcp, cfg_.pcp_batch);
}

// Takes up to `batch` order-0 pages from `node`'s zone (growing it if it is empty). Returns how
// many were added; 0 when the node has no memory to give.
unsigned page_allocator::pcp_refill(pcp_list &pcp, unsigned node) {
    zone &z = zones_[node];
    unsigned got = 0;
    for (int attempt = 0; attempt < 2 && got == 0; ++attempt) {
        uint64_t now = platform::now_coarse_ms();
        {
            platform::lock_guard guard(z.lock);
            // Decay before taking: a split re-stamps the halves as just freed (see
            // alloc_from_zones).
            purge_decayed(z, now);
            while (got < cfg_.pcp_batch) {
                page *pg = zone_take(z, 0, now);
                if (!pg) break;
                pg->set_state(PG_pcp);
                // Lower addresses first out: pages come off the split block in address order.
                pcp.pages.push_back(pg);
                ++got;
            }
        }
        if (got == 0 && !grow(node, 0, nullptr)) break;
    }
    if (got) {
        pcp.node.store(node, std::memory_order_relaxed);
        pcp.count.store(pcp.pages.count, std::memory_order_relaxed);
        bump(pcp.refills);
    }
    return got;
}

// Returns the coldest `pages` pages of the list (all of them when pages >= count) to the zone.
void page_allocator::pcp_flush(pcp_list &pcp, uint64_t pages) {
    if (pcp.pages.empty()) return;
    zone &z = zones_[pcp.node.load(std::memory_order_relaxed)];
    uint64_t now = platform::now_coarse_ms();
    {
        platform::lock_guard guard(z.lock);
        // Decay before the puts: merging re-stamps the buddies as just freed.
        purge_decayed(z, now);
        for (uint64_t i = 0; i < pages && !pcp.pages.empty(); ++i)
            zone_put(z, pcp.pages.pop_back(), 0, now);
        purge_over_retain(z);
    }
    pcp.count.store(pcp.pages.count, std::memory_order_relaxed);
    bump(pcp.flushes);
}

void page_allocator::drain_slot_cb(unsigned slot, void *arg) {
    auto *pa = static_cast<page_allocator *>(arg);
    pa->pcp_flush(pa->pcp_[slot], UINT64_MAX);
}

void page_allocator::drain() {
    unsigned mine = slots::current();
    if (mine != kNoSlot) pcp_flush(pcp_[mine], UINT64_MAX);
    slots::for_each_idle(drain_slot_cb, this);
}

} // namespace slabkit
