// Unit tests of the buddy page allocator (src/page): per-slot page lists (orders 0..3): refill,
// flush, drain, inheritance, idle slots.
#include "page/dirty_bitmap.hpp"
#include "page/page_allocator.hpp"
#include "platform/platform.hpp"
#include "slot/slot.hpp"
#include "support/page_fixture.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace slabkit {
namespace {

using namespace test;

// ---------------------------------------------------------------------------------------------
// Per-slot page lists
// ---------------------------------------------------------------------------------------------

using PageAllocatorPcp = PageAllocatorFixture;

TEST_F(PageAllocatorPcp, AllocsRefillInBatches) {
    page_allocator &pa = make(small_pcp());
    ASSERT_NE(slots::current(), kNoSlot);
    std::vector<void *> pages;
    for (uint64_t k = 1; k <= 40; ++k) {
        void *p = pa.alloc(0);
        ASSERT_NE(p, nullptr);
        pages.push_back(p);
        page_stats st = stats_of(pa);
        const uint64_t refills = (k + 7) / 8;
        EXPECT_EQ(st.pcp_allocs, k);
        EXPECT_EQ(st.pcp_refills, refills) << "after " << k << " allocs";
        EXPECT_EQ(st.in_pcp, refills * 8 - k);
        EXPECT_EQ(st.in_use, k);
        EXPECT_TRUE(pages_add_up(st));
    }
    EXPECT_TRUE(valid(pa));
    for (void *p : pages) pa.free(p, 0);
    pa.drain();
    EXPECT_TRUE(all_merged(stats_of(pa)));
}

// Orders 1..kPcpMaxOrder have per-slot lists too: a refill brings batch >> order blocks (at
// least one), the blocks keep their tails while parked, and `high` counts pages of all orders.
TEST_F(PageAllocatorPcp, HigherOrdersRefillInBatchesAndKeepTails) {
    page_allocator_config cfg = small_pcp(); // batch 8
    cfg.pcp_high = 64;                       // two blocks of the largest order fit
    page_allocator &pa = make(cfg);
    for (unsigned order = 1; order <= kPcpMaxOrder; ++order) {
        SCOPED_TRACE(order);
        const uint64_t per_refill = (8u >> order) ? (8u >> order) : 1u;
        const uint64_t refills_before = stats_of(pa).pcp_refills;
        std::vector<void *> blocks;
        for (uint64_t i = 0; i < 2 * per_refill; ++i) {
            void *p = pa.alloc(order);
            ASSERT_NE(p, nullptr);
            EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (kPageSize << order), 0u);
            EXPECT_EQ(pa.block_order(p), static_cast<int>(order));
            blocks.push_back(p);
        }
        page_stats st = stats_of(pa);
        EXPECT_EQ(st.pcp_refills - refills_before, 2u);
        EXPECT_EQ(st.in_pcp, 0u);
        for (void *p : blocks) pa.free(p, order);
        st = stats_of(pa);
        EXPECT_EQ(st.in_pcp, (2 * per_refill) << order);
        page *head = virt_to_page(blocks.back());
        EXPECT_EQ(head->flags(), uint32_t{PG_pcp} | order);
        for (size_t t = 1; t < (size_t{1} << order); ++t) {
            EXPECT_EQ(head[t].flags(), uint32_t{PG_tail});
            EXPECT_EQ(head[t].head, head);
        }
        // The newest block comes back first, without a refill.
        EXPECT_EQ(pa.alloc(order), blocks.back());
        EXPECT_EQ(stats_of(pa).pcp_refills - refills_before, 2u);
        pa.free(blocks.back(), order);
        EXPECT_TRUE(valid(pa));
        pa.drain();
        EXPECT_TRUE(all_merged(stats_of(pa)));
        // Back on the buddy lists, the tails are plain free pages again.
        EXPECT_EQ(head[1].flags(), 0u);
    }
    EXPECT_TRUE(valid(pa));
}

TEST_F(PageAllocatorPcp, HighCountsPagesOfAllOrders) {
    page_allocator &pa = make(small_pcp()); // batch 8, high 32
    std::vector<void *> order3, order0;
    for (int i = 0; i < 4; ++i) order3.push_back(pa.alloc(3)); // 32 pages
    for (int i = 0; i < 8; ++i) order0.push_back(pa.alloc(0));
    for (void *p : order3) pa.free(p, 3);
    page_stats st = stats_of(pa);
    EXPECT_EQ(st.in_pcp, 32u + 0u); // the order-0 refill's 8 pages are all handed out
    EXPECT_EQ(st.pcp_flushes, 0u);
    pa.free(order0[0], 0); // 33 pages > high: flush 8 pages, from order 0's list first
    st = stats_of(pa);
    EXPECT_EQ(st.pcp_flushes, 1u);
    EXPECT_EQ(st.in_pcp, 24u); // the order-0 page, then one order-3 block (the coldest)
    EXPECT_NE(virt_to_page(order3.back())->flags() & PG_pcp, 0u) << "hottest block stays";
    EXPECT_EQ(virt_to_page(order3.front())->flags() & PG_pcp, 0u) << "coldest block went";
    for (size_t i = 1; i < order0.size(); ++i) pa.free(order0[i], 0);
    EXPECT_TRUE(valid(pa));
    pa.drain();
    EXPECT_TRUE(all_merged(stats_of(pa)));
    EXPECT_TRUE(valid(pa));
}

TEST_F(PageAllocatorPcp, PassingHighFlushesTheColdestBatch) {
    page_allocator &pa = make(small_pcp());
    std::vector<void *> pages;
    for (int i = 0; i < 40; ++i) pages.push_back(pa.alloc(0));
    page_stats st = stats_of(pa);
    ASSERT_EQ(st.in_pcp, 0u); // five refills of 8, all handed out
    const uint64_t free_before = st.free_pages;

    for (uint64_t i = 1; i <= 32; ++i) {
        pa.free(pages[i - 1], 0);
        st = stats_of(pa);
        EXPECT_EQ(st.in_pcp, i);
        EXPECT_EQ(st.pcp_flushes, 0u);
        EXPECT_EQ(st.free_pages, free_before);
    }
    pa.free(pages[32], 0); // 33 > high: flush 8
    st = stats_of(pa);
    EXPECT_EQ(st.pcp_flushes, 1u);
    EXPECT_EQ(st.in_pcp, 25u);
    EXPECT_EQ(st.free_pages, free_before + 8);
    EXPECT_EQ(st.pcp_frees, 33u);
    // The flushed pages are the 8 freed first (the cold end of the list).
    for (int i = 0; i < 33; ++i) {
        bool on_list = virt_to_page(pages[i])->flags() == PG_pcp;
        EXPECT_EQ(on_list, i >= 8) << "page " << i;
    }
    EXPECT_TRUE(valid(pa));
    for (int i = 33; i < 40; ++i) pa.free(pages[i], 0);
    st = stats_of(pa);
    EXPECT_EQ(st.in_pcp, 32u);
    EXPECT_EQ(st.pcp_flushes, 1u);
    EXPECT_EQ(st.in_use, 0u);
    EXPECT_TRUE(pages_add_up(st));

    pa.drain();
    st = stats_of(pa);
    EXPECT_EQ(st.in_pcp, 0u);
    EXPECT_EQ(st.pcp_flushes, 2u);
    EXPECT_TRUE(all_merged(st));
    EXPECT_TRUE(valid(pa));
}

TEST_F(PageAllocatorPcp, DrainEmptiesTheCallersList) {
    page_allocator &pa = make(small_pcp());
    void *p[5];
    for (void *&x : p) x = pa.alloc(0);
    for (void *x : p) pa.free(x);
    page_stats st = stats_of(pa);
    EXPECT_EQ(st.in_pcp, 8u);
    EXPECT_EQ(st.in_use, 0u);
    EXPECT_TRUE(valid(pa));
    pa.drain();
    st = stats_of(pa);
    EXPECT_EQ(st.in_pcp, 0u);
    EXPECT_TRUE(all_merged(st));
    for (void *x : p) EXPECT_NE(virt_to_page(x)->flags(), uint32_t{PG_pcp});
    pa.drain(); // nothing left: harmless
    EXPECT_TRUE(all_merged(stats_of(pa)));
    EXPECT_TRUE(valid(pa));
}

TEST_F(PageAllocatorPcp, DrainCollectsPagesOfExitedThreads) {
    page_allocator &pa = make(small_pcp());
    unsigned worker_slot = kNoSlot;
    std::thread worker([&] {
        void *p[20];
        for (void *&x : p) x = pa.alloc(0);
        for (void *x : p) pa.free(x, 0);
        worker_slot = slots::current();
    });
    worker.join();
    ASSERT_NE(worker_slot, kNoSlot);
    EXPECT_FALSE(slots::owned(worker_slot));

    page_stats st = stats_of(pa);
    EXPECT_EQ(st.in_pcp, 24u); // three refills of 8, every page back on the list
    EXPECT_EQ(st.in_use, 0u);
    EXPECT_TRUE(pages_add_up(st));
    EXPECT_TRUE(valid(pa)); // walks the idle slot's list too

    pa.drain();
    st = stats_of(pa);
    EXPECT_EQ(st.in_pcp, 0u);
    EXPECT_TRUE(all_merged(st));
    EXPECT_TRUE(valid(pa));
}

// A slot that no thread takes for decay_ms is drained by the next slow path, so the pages an
// exited thread parked do not stay parked for ever; with decay off they wait for drain().
TEST_F(PageAllocatorPcp, SlotsIdleForDecayMsAreDrainedBySlowPaths) {
    for (unsigned decay_ms : {20u, 0u}) {
        SCOPED_TRACE(decay_ms);
        page_allocator_config cfg = small_pcp();
        cfg.decay_ms = decay_ms;
        page_allocator &pa = make(cfg);
        // This thread holds a slot, so it cannot inherit the other thread's when it exits.
        ASSERT_NE(slots::current(), kNoSlot);
        std::thread([&] {
            std::vector<void *> pages;
            for (int i = 0; i < 8; ++i) pages.push_back(pa.alloc(0));
            for (void *p : pages) pa.free(p, 0);
        }).join();
        ASSERT_EQ(stats_of(pa).in_pcp, 8u);
        // Slow paths of this thread (an order above kPcpMaxOrder has no per-slot list) after
        // the slot has idled.
        constexpr unsigned kUnlisted = kPcpMaxOrder + 1;
        for (int round = 0; round < 50 && stats_of(pa).in_pcp != 0; ++round) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
            pa.free(pa.alloc(kUnlisted), kUnlisted);
        }
        page_stats st = stats_of(pa);
        if (decay_ms) {
            EXPECT_EQ(st.in_pcp, 0u);
            EXPECT_TRUE(all_merged(st));
        } else {
            EXPECT_EQ(st.in_pcp, 8u) << "decay off: only drain() takes them back";
            pa.drain();
            EXPECT_TRUE(all_merged(stats_of(pa)));
        }
        EXPECT_TRUE(valid(pa));
    }
}

TEST_F(PageAllocatorPcp, NextThreadInheritsAnIdleList) {
    page_allocator &pa = make(small_pcp());
    unsigned first_slot = kNoSlot, second_slot = kNoSlot;
    std::thread first([&] {
        void *p[4];
        for (void *&x : p) x = pa.alloc(0);
        for (void *x : p) pa.free(x, 0);
        first_slot = slots::current();
    });
    first.join();
    page_stats st = stats_of(pa);
    ASSERT_EQ(st.in_pcp, 8u);
    ASSERT_EQ(st.pcp_refills, 1u);

    std::thread second([&] {
        second_slot = slots::current();
        void *p = pa.alloc(0);
        EXPECT_NE(p, nullptr);
        pa.free(p, 0);
    });
    second.join();
    // Both threads took the lowest free slot; the second found the first one's pages there.
    ASSERT_EQ(first_slot, second_slot);
    st = stats_of(pa);
    EXPECT_EQ(st.pcp_refills, 1u);
    EXPECT_EQ(st.pcp_allocs, 5u);
    EXPECT_EQ(st.in_pcp, 8u);
    EXPECT_TRUE(valid(pa));
    pa.drain();
    EXPECT_TRUE(all_merged(stats_of(pa)));
}

TEST_F(PageAllocatorPcp, HighZeroBypassesTheLists) {
    page_allocator_config cfg = small_pcp();
    cfg.pcp_high = 0;
    page_allocator &pa = make(cfg);
    std::vector<void *> pages;
    for (int i = 0; i < 10; ++i) pages.push_back(pa.alloc(0));
    page_stats st = stats_of(pa);
    EXPECT_EQ(st.in_use, 10u);
    EXPECT_EQ(st.in_pcp, 0u);
    EXPECT_EQ(st.free_pages, kUsablePages - 10);
    pa.free(pages[0], 0);
    pa.free(pages[1]);
    st = stats_of(pa);
    EXPECT_EQ(st.free_pages, kUsablePages - 8); // straight back to the buddy lists
    EXPECT_EQ(st.in_pcp, 0u);
    EXPECT_EQ(virt_to_page(pages[0])->flags() & PG_pcp, 0u);
    for (size_t i = 2; i < pages.size(); ++i) pa.free(pages[i], 0);
    st = stats_of(pa);
    EXPECT_EQ(st.pcp_allocs + st.pcp_frees + st.pcp_refills + st.pcp_flushes, 0u);
    EXPECT_TRUE(all_merged(st)); // nothing to drain
    EXPECT_TRUE(valid(pa));
}

TEST_F(PageAllocatorPcp, ListHoldsPagesOfOneNode) {
    page_allocator_config cfg = small_pcp();
    cfg.nodes = 2;
    page_allocator &pa = make(cfg);
    void *zero = pa.alloc(0, 0);
    ASSERT_NE(zero, nullptr);
    EXPECT_EQ(page_to_nid(virt_to_page(zero)), 0u);
    page_stats st = stats_of(pa);
    EXPECT_EQ(st.node[0].in_pcp, 7u);

    // The list holds node-0 pages: a node-1 page comes from node 1's zone and goes back there.
    void *one = pa.alloc(0, 1);
    ASSERT_NE(one, nullptr);
    EXPECT_EQ(page_to_nid(virt_to_page(one)), 1u);
    st = stats_of(pa);
    EXPECT_EQ(st.pcp_allocs, 1u);
    EXPECT_EQ(st.node[1].in_use, 1u);
    pa.free(one, 0);
    st = stats_of(pa);
    EXPECT_EQ(st.pcp_frees, 0u);
    EXPECT_EQ(st.node[1].in_use, 0u);
    EXPECT_EQ(st.node[1].free_pages, st.node[1].usable_pages);
    EXPECT_NE(virt_to_page(one)->flags(), uint32_t{PG_pcp});
    EXPECT_TRUE(valid(pa));

    pa.free(zero, 0);
    EXPECT_EQ(stats_of(pa).node[0].in_pcp, 8u);
    pa.drain();
    EXPECT_TRUE(all_merged(stats_of(pa)));
    EXPECT_TRUE(valid(pa));
}

} // namespace
} // namespace slabkit

namespace slabkit {
namespace {

using namespace test;

using PageAllocatorPcpHigh = PageAllocatorFixture;

// Rounds of `count` order-0 blocks allocated, then freed: returns the flushes the last round
// made, and checks that the lists never hold more than `bound` pages.
uint64_t cycle(page_allocator &pa, unsigned count, unsigned rounds, uint64_t bound) {
    std::vector<void *> blocks(count);
    uint64_t last = 0;
    for (unsigned r = 0; r < rounds; ++r) {
        const uint64_t before = stats_of(pa).pcp_flushes;
        for (auto &b : blocks) {
            b = pa.alloc(0);
            EXPECT_NE(b, nullptr);
        }
        for (void *b : blocks) {
            pa.free(b, 0);
            EXPECT_LE(stats_of(pa).in_pcp, bound);
        }
        last = stats_of(pa).pcp_flushes - before;
    }
    return last;
}

page_allocator_config auto_tuned(unsigned high_max) {
    page_allocator_config cfg = small_pcp(); // batch 8, high 32
    cfg.pcp_high_max = high_max;
    cfg.decay_ms = 60000; // no fall back during the test unless it asks
    return cfg;
}

TEST_F(PageAllocatorPcpHigh, AFixedBoundFlushesEveryRound) {
    page_allocator &pa = make(auto_tuned(0));
    EXPECT_GT(cycle(pa, 64, 20, 32 + 8), 0u); // 64 pages cycled through a bound of 32
    EXPECT_TRUE(valid(pa));
}

TEST_F(PageAllocatorPcpHigh, ListsThatCycleMoreRaiseTheirBoundUpToTheMax) {
    page_allocator &pa = make(auto_tuned(128));
    // Each round that flushed and then refilled raises the bound by a batch (8): from 32 to 64
    // in four rounds, after which the 64 pages stay on the list.
    EXPECT_EQ(cycle(pa, 64, 12, 128), 0u);
    EXPECT_EQ(stats_of(pa).in_pcp, 64u);
    // More than the max: the bound stops at 128 and the rounds flush again.
    EXPECT_GT(cycle(pa, 200, 30, 128), 0u);
    EXPECT_TRUE(valid(pa));
}

TEST_F(PageAllocatorPcpHigh, DrainPutsTheBoundBack) {
    page_allocator &pa = make(auto_tuned(128));
    EXPECT_EQ(cycle(pa, 64, 12, 128), 0u);
    pa.drain();
    EXPECT_EQ(stats_of(pa).in_pcp, 0u);
    // Back at 32: the next round flushes again.
    EXPECT_GT(cycle(pa, 64, 1, 128), 0u);
    pa.drain();
    EXPECT_TRUE(all_merged(stats_of(pa)));
}

TEST_F(PageAllocatorPcpHigh, ARaisedBoundFallsBackWhenItStopsGrowing) {
    page_allocator_config cfg = auto_tuned(128);
    cfg.decay_ms = 50;
    page_allocator &pa = make(cfg);
    EXPECT_EQ(cycle(pa, 64, 12, 128), 0u);
    std::this_thread::sleep_for(std::chrono::milliseconds(120));
    // The next refill finds the raised bound stale (it has not grown for decay_ms): back to
    // 32, and the frees that follow flush down to it.
    std::vector<void *> blocks(70);
    const uint64_t flushes = stats_of(pa).pcp_flushes;
    for (auto &b : blocks) b = pa.alloc(0);
    for (void *b : blocks) pa.free(b, 0);
    EXPECT_GT(stats_of(pa).pcp_flushes, flushes);
    EXPECT_LE(stats_of(pa).in_pcp, 32u + 8u);
}

TEST(PageAllocatorPcpHighConfig, TheMaxMustBeZeroOrAtLeastHigh) {
    page_allocator_config cfg = small_pcp();
    cfg.pcp_high_max = 16; // below pcp_high (32)
    ASSERT_NE(cfg.invalid(), nullptr);
    EXPECT_NE(std::string(cfg.invalid()).find("pcp_high_max"), std::string::npos);
    cfg.pcp_high_max = 0;
    EXPECT_EQ(cfg.invalid(), nullptr);
    cfg.pcp_high_max = 32;
    EXPECT_EQ(cfg.invalid(), nullptr);
}

} // namespace
} // namespace slabkit
