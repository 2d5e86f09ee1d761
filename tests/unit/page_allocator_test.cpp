// Unit tests of the buddy page allocator (src/page): blocks and descriptors, split and merge,
// per-slot lists, statistics, nodes, limits, configuration, giving memory back and validate().
//
// Every test makes its own allocator instances (page_allocator::create) and destroys them at the
// end. Each chunk reserves 1 GiB of address space that is only backed where it is touched.
#include "page/dirty_bitmap.hpp"
#include "page/page_allocator.hpp"
#include "platform/platform.hpp"
#include "slot/slot.hpp"
#include "support/page_support.hpp"

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

constexpr uint64_t kBlocksPerChunk = kUsablePages >> kMaxOrder; // 252 order-10 blocks

page_allocator_config one_node() {
    page_allocator_config cfg;
    cfg.nodes = 1;
    cfg.decay_ms = 0; // no time-driven behaviour unless a test asks for it
    return cfg;
}

using test::stats_of;
using test::valid;

// free + in_use + in_pcp == usable on every node.
::testing::AssertionResult pages_add_up(const page_stats &st) {
    for (unsigned n = 0; n < st.nodes; ++n) {
        const auto &ns = st.node[n];
        if (ns.free_pages + ns.in_use + ns.in_pcp != ns.usable_pages)
            return ::testing::AssertionFailure()
                   << "node " << n << ": free " << ns.free_pages << " + in_use " << ns.in_use
                   << " + in_pcp " << ns.in_pcp << " != usable " << ns.usable_pages;
    }
    return ::testing::AssertionSuccess();
}

// Nothing allocated, nothing parked on per-slot lists, every free page back in a max-order block.
::testing::AssertionResult all_merged(const page_stats &st) {
    if (st.in_use != 0 || st.in_pcp != 0)
        return ::testing::AssertionFailure() << "in_use " << st.in_use << ", in_pcp " << st.in_pcp;
    for (unsigned n = 0; n < st.nodes; ++n) {
        const auto &ns = st.node[n];
        for (unsigned o = 0; o < kMaxOrder; ++o)
            if (ns.free_blocks[o] != 0)
                return ::testing::AssertionFailure() << "node " << n << ": " << ns.free_blocks[o]
                                                     << " free blocks of order " << o;
        if (ns.free_blocks[kMaxOrder] << kMaxOrder != ns.free_pages ||
            ns.free_pages != ns.usable_pages)
            return ::testing::AssertionFailure()
                   << "node " << n << ": " << ns.free_blocks[kMaxOrder] << " max-order blocks, "
                   << ns.free_pages << " free pages, " << ns.usable_pages << " usable";
    }
    return ::testing::AssertionSuccess();
}

size_t resident(const void *addr, size_t pages) {
    platform::os_status status;
    size_t n = platform::resident_pages(addr, pages * kPageSize, &status);
    EXPECT_TRUE(status.ok());
    return n;
}

unsigned char *as_bytes(void *p) {
    return static_cast<unsigned char *>(p);
}

bool all_bytes_are(const void *p, size_t bytes, unsigned char value) {
    const auto *b = static_cast<const unsigned char *>(p);
    for (size_t i = 0; i < bytes; ++i)
        if (b[i] != value) return false;
    return true;
}

std::string describe(const alloc_failure &why) {
    char buf[256];
    return why.describe(buf, sizeof buf);
}

// Makes allocators and destroys them when the test ends.
class PageAllocatorFixture : public ::testing::Test {
  protected:
    void TearDown() override {
        for (page_allocator *pa : made_) page_allocator::destroy(pa);
    }
    page_allocator &make(const page_allocator_config &cfg) {
        page_allocator *pa = test::make_allocator(cfg);
        made_.push_back(pa);
        return *pa;
    }
    void destroy_now(page_allocator &pa) {
        made_.erase(std::find(made_.begin(), made_.end(), &pa));
        page_allocator::destroy(&pa);
    }

  private:
    std::vector<page_allocator *> made_;
};

// ---------------------------------------------------------------------------------------------
// Blocks and their descriptors
// ---------------------------------------------------------------------------------------------

using PageAllocatorBlocks = PageAllocatorFixture;

TEST_F(PageAllocatorBlocks, EveryOrderIsAlignedWritableAndDescribed) {
    page_allocator &pa = make(one_node());
    for (unsigned order = 0; order <= kMaxOrder; ++order) {
        SCOPED_TRACE("order " + std::to_string(order));
        const size_t pages = size_t{1} << order;
        const size_t bytes = kPageSize << order;
        unsigned char *p = as_bytes(pa.alloc(order));
        ASSERT_NE(p, nullptr);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % bytes, 0u) << static_cast<void *>(p);
        EXPECT_TRUE(in_arena(p));
        EXPECT_TRUE(in_arena(p + bytes - 1));
        memset(p, 0x5a, bytes);
        EXPECT_TRUE(all_bytes_are(p, bytes, 0x5a));

        page *head = virt_to_page(p);
        ASSERT_NE(head, nullptr);
        EXPECT_EQ(page_to_virt(head), p);
        EXPECT_EQ(head->flags(), PG_head | order);
        EXPECT_EQ(head->order(), order);
        EXPECT_EQ(page_to_nid(head), 0u);
        EXPECT_EQ(pa.block_order(p), static_cast<int>(order));
        EXPECT_EQ(stats_of(pa).in_use, pages);

        size_t bad_tails = 0;
        for (size_t i = 1; i < pages; ++i) {
            unsigned char *at = p + i * kPageSize;
            page *tail = virt_to_page(at);
            if (tail != head + i || page_to_virt(tail) != at || tail->flags() != PG_tail ||
                tail->head != head || pa.block_order(at) != -1)
                ++bad_tails;
        }
        EXPECT_EQ(bad_tails, 0u);
        // Any address inside the block, aligned or not, leads to the head.
        size_t bad_heads = 0;
        for (size_t off = 0; off < bytes; off += 1237)
            if (virt_to_head_page(p + off) != head) ++bad_heads;
        EXPECT_EQ(bad_heads, 0u);
        EXPECT_EQ(virt_to_head_page(p + bytes - 1), head);
        EXPECT_EQ(virt_to_page(p + bytes - 1), head + pages - 1);

        // Both free entry points: with the order, and with the order the block carries.
        if (order % 2)
            pa.free(p);
        else
            pa.free(p, order);
        EXPECT_EQ(head->flags() & PG_head, 0u);
        // Orders up to kPcpMaxOrder park on the per-slot list with their tails still marked
        // (no descriptor walk on the way in or out); larger blocks go to the buddy lists with
        // their tails cleared.
        const bool parked = order <= kPcpMaxOrder;
        EXPECT_EQ(head->flags(), parked ? uint32_t{PG_pcp} | order : head->flags());
        size_t still_tails = 0;
        for (size_t i = 1; i < pages; ++i)
            if ((head[i].flags() & PG_tail) && (!parked || head[i].head == head)) ++still_tails;
        EXPECT_EQ(still_tails, parked ? pages - 1 : 0u);
        EXPECT_EQ(pa.block_order(p), -1);
        EXPECT_EQ(stats_of(pa).in_use, 0u);
        EXPECT_TRUE(valid(pa));
    }
    pa.drain();
    EXPECT_TRUE(all_merged(stats_of(pa)));
}

TEST_F(PageAllocatorBlocks, LiveBlocksOfAllOrdersAreDisjoint) {
    page_allocator &pa = make(one_node());
    struct block {
        unsigned char *p;
        unsigned order;
    };
    std::vector<block> live;
    uint64_t pages = 0;
    for (int round = 0; round < 3; ++round)
        for (unsigned order = 0; order <= kMaxOrder; ++order) {
            unsigned char *p = as_bytes(pa.alloc(order));
            ASSERT_NE(p, nullptr);
            // First and last byte carry the block's index: overlapping blocks would clobber them.
            p[0] = static_cast<unsigned char>(live.size());
            p[(kPageSize << order) - 1] = static_cast<unsigned char>(live.size());
            live.push_back({p, order});
            pages += size_t{1} << order;
        }
    page_stats st = stats_of(pa);
    EXPECT_EQ(st.in_use, pages);
    EXPECT_TRUE(pages_add_up(st));
    EXPECT_TRUE(valid(pa));

    std::vector<block> sorted = live;
    std::sort(sorted.begin(), sorted.end(),
              [](const block &a, const block &b) { return a.p < b.p; });
    for (size_t i = 0; i + 1 < sorted.size(); ++i)
        EXPECT_LE(sorted[i].p + (kPageSize << sorted[i].order), sorted[i + 1].p)
            << "blocks " << static_cast<void *>(sorted[i].p) << " and "
            << static_cast<void *>(sorted[i + 1].p) << " overlap";
    for (size_t i = 0; i < live.size(); ++i) {
        EXPECT_EQ(live[i].p[0], static_cast<unsigned char>(i));
        EXPECT_EQ(live[i].p[(kPageSize << live[i].order) - 1], static_cast<unsigned char>(i));
        EXPECT_EQ(pa.block_order(live[i].p), static_cast<int>(live[i].order));
        pa.free(live[i].p, live[i].order);
    }
    pa.drain();
    EXPECT_TRUE(valid(pa));
    EXPECT_TRUE(all_merged(stats_of(pa)));
}

int g_static_object;

TEST_F(PageAllocatorBlocks, ArenaMembership) {
    page_allocator &pa = make(one_node());
    int on_stack = 0;
    auto on_heap = std::make_unique<int>(0);
    const void *outside[] = {
        &on_stack,
        on_heap.get(),
        &g_static_object,
        nullptr,
        reinterpret_cast<void *>(uintptr_t{1} << kAddressBits), // past the chunk map
        reinterpret_cast<void *>(~uintptr_t{0}),
    };
    for (const void *addr : outside) {
        SCOPED_TRACE(addr);
        EXPECT_FALSE(in_arena(addr));
        EXPECT_EQ(virt_to_page(addr), nullptr);
        EXPECT_EQ(virt_to_head_page(addr), nullptr);
        EXPECT_EQ(pa.block_order(addr), -1);
    }

    unsigned char *p = as_bytes(pa.alloc(2));
    ASSERT_NE(p, nullptr);
    chunk *c = chunk_of(p);
    auto *base = reinterpret_cast<unsigned char *>(c);
    EXPECT_EQ(c->magic, chunk::kMagic);
    EXPECT_EQ(c->owner, &pa);
    EXPECT_EQ(c->node, 0u);
    // The metadata pages are in the arena but have no descriptor.
    EXPECT_TRUE(in_arena(base));
    EXPECT_EQ(virt_to_page(base), nullptr);
    EXPECT_EQ(virt_to_page(base + (kMetaPages - 1) * kPageSize), nullptr);
    EXPECT_EQ(pa.block_order(base + kPageSize), -1);
    EXPECT_NE(virt_to_page(base + kMetaPages * kPageSize), nullptr);
    EXPECT_TRUE(in_arena(base + kChunkSize - 1));
    // Unaligned addresses and addresses of other instances are not blocks.
    EXPECT_EQ(pa.block_order(p + 8), -1);
    page_allocator &other = make(one_node());
    EXPECT_EQ(other.block_order(p), -1);
    pa.free(p, 2);

    // A destroyed allocator's chunks leave the arena.
    page_allocator &gone = make(one_node());
    void *q = gone.alloc(0);
    ASSERT_NE(q, nullptr);
    EXPECT_TRUE(in_arena(q));
    gone.free(q);
    destroy_now(gone);
    EXPECT_FALSE(in_arena(q));
    EXPECT_EQ(virt_to_page(q), nullptr);
    EXPECT_TRUE(valid(pa));
}

// ---------------------------------------------------------------------------------------------
// Split and merge, buddyinfo
// ---------------------------------------------------------------------------------------------

using PageAllocatorBuddy = PageAllocatorFixture;

// Parses the "Node N, zone   Normal  n0 ... n10" line of node `node` out of the buddyinfo text.
bool parse_buddyinfo(const char *text, unsigned node, uint64_t counts[kNrOrders]) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "Node %u, zone", node);
    const char *line = strstr(text, prefix);
    if (!line) return false;
    const char *at = strstr(line, "Normal");
    if (!at) return false;
    at += strlen("Normal");
    for (unsigned o = 0; o <= kMaxOrder; ++o) {
        char *end = nullptr;
        counts[o] = strtoull(at, &end, 10);
        if (end == at) return false;
        at = end;
    }
    return *at == '\n';
}

TEST_F(PageAllocatorBuddy, OnePageSplitsAMaxOrderBlockAndMergesBack) {
    page_allocator_config cfg = one_node();
    cfg.pcp_high = 0; // straight to the buddy lists
    page_allocator &pa = make(cfg);
    void *p = pa.alloc(0);
    ASSERT_NE(p, nullptr);

    page_stats st = stats_of(pa);
    for (unsigned o = 0; o < kMaxOrder; ++o) EXPECT_EQ(st.node[0].free_blocks[o], 1u) << o;
    EXPECT_EQ(st.node[0].free_blocks[kMaxOrder], kBlocksPerChunk - 1);
    EXPECT_EQ(st.free_pages, kUsablePages - 1);
    EXPECT_EQ(st.in_use, 1u);

    char text[1024];
    size_t len = pa.format_buddyinfo(text, sizeof text);
    EXPECT_EQ(len, strlen(text));
    uint64_t counts[kNrOrders];
    ASSERT_TRUE(parse_buddyinfo(text, 0, counts)) << text;
    for (unsigned o = 0; o < kMaxOrder; ++o) EXPECT_EQ(counts[o], 1u) << text;
    EXPECT_EQ(counts[kMaxOrder], kBlocksPerChunk - 1) << text;
    EXPECT_NE(strstr(text, "in_use 1 "), nullptr) << text;
    EXPECT_EQ(strstr(text, "Node 1,"), nullptr) << text;
    EXPECT_TRUE(valid(pa));

    pa.free(p, 0);
    pa.drain();
    st = stats_of(pa);
    EXPECT_TRUE(all_merged(st));
    EXPECT_EQ(st.node[0].free_blocks[kMaxOrder], kBlocksPerChunk);
    pa.format_buddyinfo(text, sizeof text);
    ASSERT_TRUE(parse_buddyinfo(text, 0, counts)) << text;
    for (unsigned o = 0; o < kMaxOrder; ++o) EXPECT_EQ(counts[o], 0u) << text;
    EXPECT_EQ(counts[kMaxOrder], kBlocksPerChunk) << text;
    EXPECT_TRUE(valid(pa));
}

TEST_F(PageAllocatorBuddy, PcpRefillSplitsOneBatch) {
    page_allocator_config cfg = one_node();
    cfg.pcp_batch = 32;
    cfg.pcp_high = 192;
    page_allocator &pa = make(cfg);
    void *p = pa.alloc(0);
    ASSERT_NE(p, nullptr);
    // 32 pages came off the first max-order block: the upper halves of orders 5..9 are free.
    page_stats st = stats_of(pa);
    for (unsigned o = 0; o < 5; ++o) EXPECT_EQ(st.node[0].free_blocks[o], 0u) << o;
    for (unsigned o = 5; o < kMaxOrder; ++o) EXPECT_EQ(st.node[0].free_blocks[o], 1u) << o;
    EXPECT_EQ(st.node[0].free_blocks[kMaxOrder], kBlocksPerChunk - 1);
    EXPECT_EQ(st.in_pcp, 31u);
    EXPECT_EQ(st.in_use, 1u);
    EXPECT_TRUE(pages_add_up(st));
    pa.free(p);
    EXPECT_EQ(stats_of(pa).in_pcp, 32u);
    pa.drain();
    EXPECT_TRUE(all_merged(stats_of(pa)));
    EXPECT_TRUE(valid(pa));
}

TEST_F(PageAllocatorBuddy, WholeBlockOfSinglePagesMergesInAnyFreeOrder) {
    page_allocator_config cfg = one_node();
    cfg.pcp_high = 0;
    page_allocator &pa = make(cfg);
    std::vector<void *> pages;
    for (size_t i = 0; i < (size_t{1} << kMaxOrder); ++i) {
        void *p = pa.alloc(0);
        ASSERT_NE(p, nullptr);
        pages.push_back(p);
    }
    page_stats st = stats_of(pa);
    for (unsigned o = 0; o < kMaxOrder; ++o) EXPECT_EQ(st.node[0].free_blocks[o], 0u) << o;
    EXPECT_EQ(st.node[0].free_blocks[kMaxOrder], kBlocksPerChunk - 1);
    std::sort(pages.begin(), pages.end());
    EXPECT_EQ(static_cast<char *>(pages.back()) - static_cast<char *>(pages.front()),
              static_cast<ptrdiff_t>(((size_t{1} << kMaxOrder) - 1) * kPageSize))
        << "one max-order block was split into its single pages";

    std::mt19937 rng(7);
    std::shuffle(pages.begin(), pages.end(), rng);
    for (size_t i = 0; i < pages.size(); ++i) {
        pa.free(pages[i], 0);
        if (i % 128 == 0) {
            ASSERT_TRUE(valid(pa)) << "after " << i << " frees";
        }
    }
    EXPECT_TRUE(valid(pa));
    EXPECT_TRUE(all_merged(stats_of(pa)));
}

TEST_F(PageAllocatorBuddy, BuddyinfoTextIsBoundedAndTerminated) {
    page_allocator_config cfg = one_node();
    cfg.nodes = 2;
    page_allocator &pa = make(cfg);
    void *a = pa.alloc(3, 0, kThisNode);
    void *b = pa.alloc(3, 1, kThisNode);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    char text[2048];
    size_t full = pa.format_buddyinfo(text, sizeof text);
    EXPECT_EQ(full, strlen(text));
    uint64_t counts[kNrOrders];
    EXPECT_TRUE(parse_buddyinfo(text, 0, counts)) << text;
    EXPECT_TRUE(parse_buddyinfo(text, 1, counts)) << text;
    EXPECT_EQ(counts[3], 1u) << text;
    for (size_t size : {size_t{1}, size_t{10}, size_t{64}, full, full + 1}) {
        std::vector<char> small(size, '#');
        size_t len = pa.format_buddyinfo(small.data(), size);
        EXPECT_LT(len, size);
        EXPECT_EQ(small[len], '\0');
        EXPECT_EQ(strlen(small.data()), len);
        EXPECT_EQ(std::string(small.data()), std::string(text, len));
    }
    EXPECT_EQ(pa.format_buddyinfo(nullptr, 0), 0u);
    pa.free(a);
    pa.free(b);
    EXPECT_TRUE(valid(pa));
}

// ---------------------------------------------------------------------------------------------
// Per-slot page lists
// ---------------------------------------------------------------------------------------------

using PageAllocatorPcp = PageAllocatorFixture;

page_allocator_config small_pcp() {
    page_allocator_config cfg = one_node();
    cfg.pcp_batch = 8;
    cfg.pcp_high = 32;
    return cfg;
}

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
    page_allocator &pa = make(small_pcp()); // batch 8, high 32
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
        // Slow paths of this thread (order 4 has no per-slot list) after the slot has idled.
        for (int round = 0; round < 50 && stats_of(pa).in_pcp != 0; ++round) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
            pa.free(pa.alloc(4), 4);
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

// ---------------------------------------------------------------------------------------------
// Statistics and growth
// ---------------------------------------------------------------------------------------------

using PageAllocatorStats = PageAllocatorFixture;

TEST_F(PageAllocatorStats, PagesAddUpAtQuiescentPoints) {
    page_allocator_config cfg = one_node();
    cfg.nodes = 2;
    page_allocator &pa = make(cfg);
    struct block {
        void *p;
        unsigned order;
    };
    std::vector<block> live;
    uint64_t per_node[2] = {0, 0};
    std::mt19937 rng(11);
    for (int i = 0; i < 300; ++i) {
        unsigned order = rng() % 6;
        int node = static_cast<int>(rng() % 2);
        void *p = pa.alloc(order, node, kThisNode);
        ASSERT_NE(p, nullptr);
        EXPECT_EQ(page_to_nid(virt_to_page(p)), static_cast<unsigned>(node));
        per_node[node] += size_t{1} << order;
        live.push_back({p, order});
    }
    page_stats st = stats_of(pa);
    EXPECT_EQ(st.nodes, 2u);
    EXPECT_EQ(st.node[0].in_use, per_node[0]);
    EXPECT_EQ(st.node[1].in_use, per_node[1]);
    EXPECT_EQ(st.in_use, per_node[0] + per_node[1]);
    EXPECT_TRUE(pages_add_up(st));
    EXPECT_EQ(st.resident, st.in_use + st.in_pcp + st.free_resident);
    EXPECT_EQ(st.node[0].chunks + st.node[1].chunks, st.chunks);
    EXPECT_EQ(st.chunks, 2u);
    EXPECT_EQ(st.reserved_bytes, 2 * kChunkSize);
    EXPECT_TRUE(valid(pa));

    for (size_t i = 0; i < live.size(); i += 2) {
        per_node[page_to_nid(virt_to_page(live[i].p))] -= size_t{1} << live[i].order;
        pa.free(live[i].p, live[i].order);
    }
    st = stats_of(pa);
    EXPECT_EQ(st.node[0].in_use, per_node[0]);
    EXPECT_EQ(st.node[1].in_use, per_node[1]);
    EXPECT_TRUE(pages_add_up(st));
    EXPECT_TRUE(valid(pa));

    for (size_t i = 1; i < live.size(); i += 2) pa.free(live[i].p);
    pa.drain();
    st = stats_of(pa);
    EXPECT_TRUE(all_merged(st));
    EXPECT_EQ(st.errors, 0u);
    EXPECT_TRUE(valid(pa));
}

TEST_F(PageAllocatorStats, ChunksGrowWhenOneIsFull) {
    page_allocator_config cfg = one_node();
    cfg.pcp_high = 0;
    page_allocator &pa = make(cfg);
    page_stats st = stats_of(pa);
    EXPECT_EQ(st.chunks, 0u);
    EXPECT_EQ(st.reserved_bytes, 0u);

    // 252 max-order blocks fill one chunk (1008 MiB); the memory is never touched.
    std::vector<void *> blocks;
    for (uint64_t i = 0; i < kBlocksPerChunk; ++i) {
        void *p = pa.alloc(kMaxOrder);
        ASSERT_NE(p, nullptr);
        blocks.push_back(p);
    }
    st = stats_of(pa);
    EXPECT_EQ(st.chunks, 1u);
    EXPECT_EQ(st.reserved_bytes, kChunkSize);
    EXPECT_EQ(st.free_pages, 0u);
    EXPECT_EQ(st.in_use, kUsablePages);
    EXPECT_TRUE(valid(pa));

    void *more = pa.alloc(kMaxOrder);
    ASSERT_NE(more, nullptr);
    blocks.push_back(more);
    EXPECT_NE(chunk_of(more), chunk_of(blocks.front()));
    st = stats_of(pa);
    EXPECT_EQ(st.chunks, 2u);
    EXPECT_EQ(st.node[0].chunks, 2u);
    EXPECT_EQ(st.reserved_bytes, 2 * kChunkSize);
    EXPECT_EQ(st.node[0].usable_pages, 2 * kUsablePages);
    EXPECT_EQ(st.in_use, kUsablePages + (size_t{1} << kMaxOrder));
    EXPECT_TRUE(pages_add_up(st));
    EXPECT_TRUE(valid(pa));

    for (void *p : blocks) pa.free(p, kMaxOrder);
    st = stats_of(pa);
    EXPECT_TRUE(all_merged(st));
    EXPECT_EQ(st.node[0].free_blocks[kMaxOrder], 2 * kBlocksPerChunk);
    // Every page handed out counts as possibly resident once free: the retain bound applies.
    EXPECT_LE(st.free_resident, cfg.retain_pages);
    EXPECT_EQ(st.free_resident + st.returned, (kBlocksPerChunk + 1) << kMaxOrder);
    EXPECT_TRUE(valid(pa));
}

// ---------------------------------------------------------------------------------------------
// Nodes, bad requests, the arena limit
// ---------------------------------------------------------------------------------------------

using PageAllocatorNodes = PageAllocatorFixture;

// kThisNode with kAnyNode means "the calling thread's node and no other", also when the
// thread's per-slot lists hold another node's pages.
TEST_F(PageAllocatorNodes, AnyNodeWithThisNodeMeansTheCallersNode) {
    page_allocator_config cfg = one_node();
    cfg.nodes = 2;
    page_allocator &pa = make(cfg);
    const unsigned mine = platform::numa().cpu_node[platform::current_cpu()] % 2;
    // Assumes the thread stays on its node's CPUs (true on one-node machines, where mine == 0).
    if (platform::numa().nodes != 1) GTEST_SKIP() << "needs a one-node machine";
    const int other = static_cast<int>(1 - mine);
    pa.drain();
    void *foreign = pa.alloc(0, other, kThisNode);
    ASSERT_NE(foreign, nullptr);
    pa.free(foreign, 0); // the (empty) per-slot list now holds the other node's page
    void *p = pa.alloc(0, kAnyNode, kThisNode);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(page_to_nid(virt_to_page(p)), mine);
    EXPECT_NE(p, foreign);
    // Without kThisNode, kAnyNode takes what the list has.
    void *q = pa.alloc(0);
    EXPECT_EQ(q, foreign);
    pa.free(p, 0);
    pa.free(q, 0);
    EXPECT_TRUE(valid(pa));
}

// As the kernel's free_pages(0, order): freeing nullptr does nothing and reports nothing.
TEST_F(PageAllocatorBlocks, FreeOfNullDoesNothing) {
    page_allocator &pa = make(one_node());
    testing::internal::CaptureStderr();
    pa.free(nullptr, 0);
    pa.free(nullptr, 5);
    pa.free(nullptr);
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
    EXPECT_EQ(pa.errors(), 0u);
    EXPECT_TRUE(valid(pa));
}

TEST_F(PageAllocatorNodes, ThisNodeLandsOnTheNodeAsked) {
    page_allocator_config cfg = one_node();
    cfg.nodes = 3;
    page_allocator &pa = make(cfg);
    EXPECT_EQ(pa.nodes(), 3u);
    struct block {
        void *p;
        unsigned order;
    };
    std::vector<block> live;
    for (int node = 0; node < 3; ++node)
        for (unsigned order : {0u, 1u, 3u, kMaxOrder}) {
            void *p = pa.alloc(order, node, kThisNode);
            ASSERT_NE(p, nullptr) << "node " << node << " order " << order;
            EXPECT_EQ(page_to_nid(virt_to_page(p)), static_cast<unsigned>(node));
            EXPECT_EQ(chunk_of(p)->node, static_cast<unsigned>(node));
            live.push_back({p, order});
        }
    page_stats st = stats_of(pa);
    EXPECT_EQ(st.nodes, 3u);
    for (unsigned n = 0; n < 3; ++n) {
        EXPECT_EQ(st.node[n].chunks, 1u) << n;
        EXPECT_EQ(st.node[n].in_use, 1u + 2u + 8u + 1024u) << n;
    }
    EXPECT_TRUE(pages_add_up(st));
    EXPECT_TRUE(valid(pa));
    for (const block &b : live) pa.free(b.p, b.order);
    pa.drain();
    EXPECT_TRUE(all_merged(stats_of(pa)));
    EXPECT_TRUE(valid(pa));
}

TEST_F(PageAllocatorNodes, BadNodeAndBadOrderAreRefused) {
    page_allocator_config cfg = one_node();
    cfg.nodes = 3;
    page_allocator &pa = make(cfg);
    for (int node : {-2, 3, 99}) {
        for (unsigned order : {0u, 4u}) {
            alloc_failure why;
            EXPECT_EQ(pa.alloc(order, node, 0, &why), nullptr);
            EXPECT_EQ(why.code, alloc_failure::bad_node);
            EXPECT_EQ(why.node, node);
            std::string text = describe(why);
            EXPECT_NE(text.find("node " + std::to_string(node)), std::string::npos) << text;
        }
    }
    for (int node : {kAnyNode, 0}) {
        alloc_failure why;
        EXPECT_EQ(pa.alloc(kMaxOrder + 1, node, 0, &why), nullptr);
        EXPECT_EQ(why.code, alloc_failure::bad_order);
        EXPECT_EQ(why.order, kMaxOrder + 1);
        std::string text = describe(why);
        EXPECT_NE(text.find("order 11"), std::string::npos) << text;
    }
    // No reason asked for: still refused, nothing grown.
    EXPECT_EQ(pa.alloc(0, 5), nullptr);
    EXPECT_EQ(pa.alloc(40), nullptr);
    page_stats st = stats_of(pa);
    EXPECT_EQ(st.chunks, 0u);
    EXPECT_EQ(st.in_use, 0u);
    EXPECT_TRUE(valid(pa));
    // The allocator is fine afterwards.
    alloc_failure why;
    void *p = pa.alloc(2, 2, kThisNode, &why);
    ASSERT_NE(p, nullptr);
    pa.free(p);
    EXPECT_TRUE(valid(pa));
}

TEST_F(PageAllocatorNodes, FallsBackWhenThePreferredNodeCannotGrow) {
    page_allocator_config cfg = one_node();
    cfg.nodes = 3;
    cfg.max_bytes = kChunkSize; // one chunk in all
    cfg.pcp_high = 0;
    page_allocator &pa = make(cfg);
    void *first = pa.alloc(3, 0, kThisNode);
    ASSERT_NE(first, nullptr);

    alloc_failure why;
    EXPECT_EQ(pa.alloc(3, 1, kThisNode, &why), nullptr);
    EXPECT_EQ(why.code, alloc_failure::limit);
    why = {};
    EXPECT_EQ(pa.alloc(0, 2, kThisNode, &why), nullptr);
    EXPECT_EQ(why.code, alloc_failure::limit);

    // Without kThisNode, nodes 1 and 2 fall back to node 0.
    for (int node : {1, 2, kAnyNode})
        for (unsigned order : {0u, 3u}) {
            void *p = pa.alloc(order, node);
            ASSERT_NE(p, nullptr) << "node " << node << " order " << order;
            EXPECT_EQ(page_to_nid(virt_to_page(p)), 0u);
            pa.free(p, order);
        }
    page_stats st = stats_of(pa);
    EXPECT_EQ(st.chunks, 1u);
    EXPECT_EQ(st.node[1].chunks + st.node[2].chunks, 0u);
    pa.free(first, 3);
    EXPECT_TRUE(all_merged(stats_of(pa)));
    EXPECT_TRUE(valid(pa));
}

// A node that can still grow is grown before memory of another node is used: a thread's pages
// stay local even when another node already has free memory.
TEST_F(PageAllocatorNodes, PreferredNodeGrowsBeforeFallingBack) {
    for (unsigned pcp_high : {0u, 192u}) {
        SCOPED_TRACE("pcp_high " + std::to_string(pcp_high));
        page_allocator_config cfg = one_node();
        cfg.nodes = 2;
        cfg.pcp_high = pcp_high;
        page_allocator &pa = make(cfg);
        void *on_one = pa.alloc(3, 1, kThisNode);
        ASSERT_NE(on_one, nullptr);
        for (unsigned order : {0u, 3u}) {
            void *p = pa.alloc(order, 0);
            ASSERT_NE(p, nullptr);
            EXPECT_EQ(page_to_nid(virt_to_page(p)), 0u) << "order " << order;
            pa.free(p, order);
        }
        page_stats st = stats_of(pa);
        EXPECT_EQ(st.node[0].chunks, 1u);
        EXPECT_EQ(st.node[1].chunks, 1u);
        pa.free(on_one, 3);
        pa.drain();
        EXPECT_TRUE(all_merged(stats_of(pa)));
        EXPECT_TRUE(valid(pa));
    }
}

using PageAllocatorLimit = PageAllocatorFixture;

TEST_F(PageAllocatorLimit, ReachingTheLimitFailsCleanlyAndRecovers) {
    page_allocator_config cfg = one_node();
    cfg.max_bytes = kChunkSize;
    page_allocator &pa = make(cfg);
    std::vector<void *> blocks;
    alloc_failure why;
    for (;;) {
        void *p = pa.alloc(kMaxOrder, kAnyNode, 0, &why);
        if (!p) break;
        blocks.push_back(p);
        ASSERT_LE(blocks.size(), kBlocksPerChunk) << "the limit of one chunk is not enforced";
        if (blocks.size() % 64 == 0) {
            ASSERT_TRUE(valid(pa));
        }
    }
    EXPECT_EQ(blocks.size(), kBlocksPerChunk);
    EXPECT_EQ(why.code, alloc_failure::limit);
    EXPECT_EQ(why.limit_bytes, kChunkSize);
    std::string text = describe(why);
    EXPECT_NE(text.find("limit"), std::string::npos) << text;
    EXPECT_NE(text.find(std::to_string(kChunkSize)), std::string::npos) << text;
    EXPECT_TRUE(valid(pa));

    // Every order fails now, through the per-slot path too.
    for (unsigned order : {0u, 1u, 5u}) {
        alloc_failure w;
        EXPECT_EQ(pa.alloc(order, kAnyNode, 0, &w), nullptr) << order;
        EXPECT_EQ(w.code, alloc_failure::limit) << order;
    }
    page_stats st = stats_of(pa);
    EXPECT_EQ(st.chunks, 1u);
    EXPECT_EQ(st.reserved_bytes, kChunkSize);
    EXPECT_EQ(st.free_pages, 0u);
    EXPECT_TRUE(pages_add_up(st));
    EXPECT_TRUE(valid(pa));

    // One block back: the allocator is usable again.
    pa.free(blocks.back(), kMaxOrder);
    blocks.pop_back();
    void *small = pa.alloc(0);
    ASSERT_NE(small, nullptr);
    void *mid = pa.alloc(6);
    ASSERT_NE(mid, nullptr);
    EXPECT_EQ(pa.alloc(kMaxOrder), nullptr); // the block was split
    pa.free(small, 0);
    pa.free(mid, 6);
    pa.drain();
    void *big = pa.alloc(kMaxOrder);
    ASSERT_NE(big, nullptr);
    blocks.push_back(big);
    EXPECT_TRUE(valid(pa));

    for (void *p : blocks) pa.free(p, kMaxOrder);
    pa.drain();
    EXPECT_TRUE(all_merged(stats_of(pa)));
    EXPECT_TRUE(valid(pa));
}

// ---------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------

using PageAllocatorConfig = PageAllocatorFixture;

TEST_F(PageAllocatorConfig, InvalidConfigsAreRejected) {
    struct bad_case {
        const char *name;
        page_allocator_config cfg;
        const char *mentions;
    };
    std::vector<bad_case> cases;
    auto add = [&](const char *name, auto change, const char *mentions) {
        page_allocator_config cfg = one_node();
        change(cfg);
        cases.push_back({name, cfg, mentions});
    };
    add(
        "high below batch",
        [](page_allocator_config &c) {
            c.pcp_batch = 16;
            c.pcp_high = 8;
        },
        "pcp_high");
    add(
        "limit below a chunk", [](page_allocator_config &c) { c.max_bytes = kChunkSize / 2; },
        "max_bytes");
    add(
        "limit of one byte", [](page_allocator_config &c) { c.max_bytes = 1; }, "max_bytes");
    add(
        "too many nodes", [](page_allocator_config &c) { c.nodes = 65; }, "nodes");
    add(
        "batch zero", [](page_allocator_config &c) { c.pcp_batch = 0; }, "pcp_batch");
    add(
        "batch too big", [](page_allocator_config &c) { c.pcp_batch = 5000; }, "pcp_batch");
    add(
        "high too big", [](page_allocator_config &c) { c.pcp_high = (1u << 20) + 1; }, "pcp_high");
    add(
        "decay over an hour", [](page_allocator_config &c) { c.decay_ms = 3600u * 1000u + 1; },
        "decay_ms");
    for (const bad_case &c : cases) {
        SCOPED_TRACE(c.name);
        const char *reason = c.cfg.invalid();
        ASSERT_NE(reason, nullptr);
        EXPECT_NE(strstr(reason, c.mentions), nullptr) << reason;
        const char *why = nullptr;
        EXPECT_EQ(page_allocator::create(c.cfg, &why), nullptr);
        ASSERT_NE(why, nullptr);
        EXPECT_STREQ(why, reason);
        EXPECT_EQ(page_allocator::create(c.cfg), nullptr); // no reason asked for
    }
}

TEST_F(PageAllocatorConfig, EdgeConfigsAreAccepted) {
    std::vector<page_allocator_config> good;
    good.push_back(page_allocator_config{});
    page_allocator_config c = one_node();
    c.pcp_high = 0;
    c.pcp_batch = 4096; // no per-slot lists: the batch does not matter
    good.push_back(c);
    c = one_node();
    c.max_bytes = kChunkSize;
    good.push_back(c);
    c = one_node();
    c.pcp_batch = 1;
    c.pcp_high = 1;
    good.push_back(c);
    c = one_node();
    c.nodes = platform::kMaxNodes;
    c.retain_pages = 0;
    c.decay_ms = 3600u * 1000u;
    good.push_back(c);
    for (const page_allocator_config &cfg : good) {
        EXPECT_EQ(cfg.invalid(), nullptr) << cfg.invalid();
        page_allocator &pa = make(cfg);
        EXPECT_EQ(pa.settings().pcp_high, cfg.pcp_high);
        EXPECT_EQ(pa.nodes(), cfg.nodes ? cfg.nodes : platform::numa().nodes);
        const int last_node = static_cast<int>(pa.nodes()) - 1;
        void *a = pa.alloc(0);
        void *b = pa.alloc(1, last_node, kThisNode);
        ASSERT_NE(a, nullptr);
        ASSERT_NE(b, nullptr);
        EXPECT_EQ(page_to_nid(virt_to_page(b)), static_cast<unsigned>(last_node));
        pa.free(a);
        pa.free(b);
        pa.drain();
        EXPECT_TRUE(all_merged(stats_of(pa)));
        EXPECT_TRUE(valid(pa));
    }
}

TEST_F(PageAllocatorConfig, FromEnvironmentClampsAndWarns) {
    const char *names[] = {"SLABKIT_ARENA_MAX_MB", "SLABKIT_PCP_BATCH",
                           "SLABKIT_PCP_HIGH",     "SLABKIT_RETAIN_KB",
                           "SLABKIT_DECAY_MS",     "SLABKIT_CONTINUE_ON_ERROR"};
    // Whatever the environment of the test run says is put back at the end.
    std::vector<std::pair<const char *, std::string>> saved;
    for (const char *name : names)
        if (const char *value = getenv(name)) saved.emplace_back(name, value);
    setenv("SLABKIT_ARENA_MAX_MB", "100", 1);
    setenv("SLABKIT_PCP_BATCH", "16", 1);
    setenv("SLABKIT_PCP_HIGH", "4", 1);
    setenv("SLABKIT_RETAIN_KB", "400", 1);
    setenv("SLABKIT_DECAY_MS", "50", 1);
    setenv("SLABKIT_CONTINUE_ON_ERROR", "1", 1);
    testing::internal::CaptureStderr();
    page_allocator_config cfg = page_allocator_config::from_env();
    std::string err = testing::internal::GetCapturedStderr();
    for (const char *name : names) unsetenv(name);
    page_allocator_config defaults = page_allocator_config::from_env();
    for (const auto &[name, value] : saved) setenv(name, value.c_str(), 1);

    EXPECT_EQ(cfg.max_bytes, kChunkSize);
    EXPECT_EQ(cfg.pcp_batch, 16u);
    EXPECT_EQ(cfg.pcp_high, 16u);
    EXPECT_EQ(cfg.retain_pages, 100u);
    EXPECT_EQ(cfg.decay_ms, 50u);
    EXPECT_TRUE(cfg.continue_on_error);
    EXPECT_EQ(cfg.invalid(), nullptr);
    EXPECT_NE(err.find("SLABKIT_ARENA_MAX_MB"), std::string::npos) << err;
    EXPECT_NE(err.find("SLABKIT_PCP_HIGH"), std::string::npos) << err;

    page_allocator_config plain;
    EXPECT_EQ(defaults.max_bytes, plain.max_bytes);
    EXPECT_EQ(defaults.pcp_batch, plain.pcp_batch);
    EXPECT_EQ(defaults.pcp_high, plain.pcp_high);
    EXPECT_EQ(defaults.retain_pages, plain.retain_pages);
    EXPECT_EQ(defaults.decay_ms, plain.decay_ms);
    EXPECT_FALSE(defaults.continue_on_error);
}

// ---------------------------------------------------------------------------------------------
// Giving memory back: the retain bound, recency, purge, zeroing, decay
// ---------------------------------------------------------------------------------------------

using PageAllocatorDecommit = PageAllocatorFixture;

page_allocator_config no_pcp_retain(uint64_t retain_pages) {
    page_allocator_config cfg = one_node();
    cfg.pcp_high = 0;
    cfg.retain_pages = retain_pages;
    cfg.decay_ms = 0;
    return cfg;
}

TEST_F(PageAllocatorDecommit, FreeResidentStaysWithinRetain) {
    constexpr uint64_t kRetain = 256;
    page_allocator &pa = make(no_pcp_retain(kRetain));
    constexpr unsigned kOrder = 2;
    constexpr size_t kBlocks = 128; // 512 pages: twice the bound
    std::vector<unsigned char *> blocks;
    for (size_t i = 0; i < kBlocks; ++i) {
        unsigned char *p = as_bytes(pa.alloc(kOrder));
        ASSERT_NE(p, nullptr);
        memset(p, 0x11, kPageSize << kOrder);
        blocks.push_back(p);
    }
    std::vector<unsigned char *> sorted = blocks;
    std::sort(sorted.begin(), sorted.end());
    const size_t span_pages = static_cast<size_t>(sorted.back() - sorted.front()) / kPageSize + 4;
    EXPECT_EQ(resident(sorted.front(), span_pages), kBlocks << kOrder);
    page_stats st = stats_of(pa);
    EXPECT_EQ(st.free_resident, 0u); // all taken from never-touched blocks

    uint64_t last_returned = 0;
    for (size_t i = 0; i < kBlocks; ++i) {
        pa.free(blocks[i], kOrder);
        st = stats_of(pa);
        ASSERT_LE(st.free_resident, kRetain) << "after " << i + 1 << " frees";
        EXPECT_GE(st.returned, last_returned);
        last_returned = st.returned;
        // Each freed page is either still counted as resident or was given back.
        EXPECT_EQ(st.free_resident + st.returned, (i + 1) << kOrder);
        if (i % 16 == 15) {
            ASSERT_TRUE(valid(pa));
        }
    }
    EXPECT_GE(st.returned, (kBlocks << kOrder) - kRetain);
    EXPECT_GT(st.node[0].decommits, 0u);
    // The OS agrees: what is resident of the freed blocks is within what the counters allow.
    EXPECT_LE(resident(sorted.front(), span_pages), st.free_resident);
    EXPECT_TRUE(valid(pa));
    EXPECT_TRUE(all_merged(st));
}

TEST_F(PageAllocatorDecommit, RecentlyFreedBlocksAreTheOnesKept) {
    // Blocks of a quarter of a max-order block: the old batch fills four max-order blocks, the
    // new one a fifth, so old and new blocks never merge with each other.
    constexpr uint64_t kRetain = 2048;
    constexpr unsigned kOrder = kMaxOrder - 2;
    constexpr size_t kBlockPages = size_t{1} << kOrder;
    page_allocator &pa = make(no_pcp_retain(kRetain));
    std::vector<unsigned char *> old_batch, new_batch;
    for (int i = 0; i < 16; ++i) old_batch.push_back(as_bytes(pa.alloc(kOrder)));
    for (int i = 0; i < 4; ++i) new_batch.push_back(as_bytes(pa.alloc(kOrder)));
    for (unsigned char *p : old_batch) ASSERT_NE(p, nullptr);
    for (unsigned char *p : new_batch) ASSERT_NE(p, nullptr);
    auto lowest = [](const std::vector<unsigned char *> &v) {
        return *std::min_element(v.begin(), v.end());
    };
    unsigned char *old_start = lowest(old_batch), *new_start = lowest(new_batch);
    // Each batch is one contiguous run, in its own max-order blocks.
    ASSERT_EQ(reinterpret_cast<uintptr_t>(old_start) % (kPageSize << kMaxOrder), 0u);
    ASSERT_EQ(reinterpret_cast<uintptr_t>(new_start) % (kPageSize << kMaxOrder), 0u);
    for (unsigned char *p : old_batch)
        ASSERT_LT(static_cast<size_t>(p - old_start), 16 * kBlockPages * kPageSize);
    for (unsigned char *p : new_batch)
        ASSERT_LT(static_cast<size_t>(p - new_start), 4 * kBlockPages * kPageSize);
    for (unsigned char *p : old_batch) memset(p, 0x22, kBlockPages * kPageSize);
    for (unsigned char *p : new_batch) memset(p, 0x33, kBlockPages * kPageSize);

    for (unsigned char *p : old_batch) {
        pa.free(p, kOrder);
        ASSERT_LE(stats_of(pa).free_resident, kRetain);
    }
    for (unsigned char *p : new_batch) {
        pa.free(p, kOrder);
        ASSERT_LE(stats_of(pa).free_resident, kRetain);
    }
    page_stats st = stats_of(pa);
    const size_t old_resident = resident(old_start, 16 * kBlockPages);
    const size_t new_resident = resident(new_start, 4 * kBlockPages);
    EXPECT_EQ(new_resident, 4 * kBlockPages) << "the newest free pages were given back";
    EXPECT_LE(old_resident + new_resident, st.free_resident);
    EXPECT_LE(old_resident, kRetain - 4 * kBlockPages) << "old free pages stayed resident";
    EXPECT_GE(st.returned, 16 * kBlockPages - (kRetain - 4 * kBlockPages));
    EXPECT_TRUE(valid(pa));
}

// Blocks that cannot merge (each one's buddy stays allocated) are given back strictly in the
// order they were freed: the longest-free first.
TEST_F(PageAllocatorDecommit, GivesBackInTheOrderFreed) {
    constexpr uint64_t kRetain = 256;
    constexpr unsigned kOrder = 2;
    constexpr size_t kBlockPages = size_t{1} << kOrder;
    constexpr size_t kData = 96; // 384 pages freed in all, 1.5 times the bound
    page_allocator &pa = make(no_pcp_retain(kRetain));
    std::vector<unsigned char *> data, spacers;
    for (size_t i = 0; i < 2 * kData; ++i) {
        unsigned char *p = as_bytes(pa.alloc(kOrder));
        ASSERT_NE(p, nullptr);
        memset(p, 0x66, kBlockPages * kPageSize);
        (i % 2 ? spacers : data).push_back(p);
    }
    // A fresh allocator hands out consecutive blocks: each data block's buddy is a spacer.
    for (size_t i = 0; i < kData; ++i) ASSERT_EQ(data[i] + kBlockPages * kPageSize, spacers[i]);

    for (size_t i = 0; i < kData; ++i) {
        pa.free(data[i], kOrder);
        ASSERT_LE(stats_of(pa).free_resident, kRetain);
    }
    page_stats st = stats_of(pa);
    EXPECT_EQ(st.free_resident + st.returned, kData * kBlockPages);
    EXPECT_GT(st.returned, 0u);
    // Residency along the freeing order: given back (0) first, then resident (all pages).
    size_t given_back = 0;
    bool seen_resident = false;
    for (size_t i = 0; i < kData; ++i) {
        size_t r = resident(data[i], kBlockPages);
        EXPECT_TRUE(r == 0 || r == kBlockPages) << "block " << i << ": " << r << " pages";
        if (r == 0) {
            EXPECT_FALSE(seen_resident) << "block " << i << " was given back before older ones";
            ++given_back;
        } else {
            seen_resident = true;
        }
    }
    EXPECT_EQ(given_back * kBlockPages, st.returned);
    // The spacers, in use all along, were never touched by any of this.
    size_t spacer_resident = 0;
    for (unsigned char *p : spacers) spacer_resident += resident(p, kBlockPages);
    EXPECT_EQ(spacer_resident, kData * kBlockPages);
    for (unsigned char *p : spacers) {
        EXPECT_TRUE(all_bytes_are(p, kBlockPages * kPageSize, 0x66));
        pa.free(p, kOrder);
    }
    EXPECT_TRUE(valid(pa));
}

TEST_F(PageAllocatorDecommit, PurgeGivesBackEveryFreePage) {
    page_allocator_config cfg = one_node(); // per-slot lists on, the default retain bound
    page_allocator &pa = make(cfg);
    struct block {
        unsigned char *p;
        unsigned order;
    };
    std::vector<block> blocks;
    for (int i = 0; i < 100; ++i) blocks.push_back({as_bytes(pa.alloc(0)), 0});
    for (int i = 0; i < 10; ++i) blocks.push_back({as_bytes(pa.alloc(3)), 3});
    for (int i = 0; i < 2; ++i) blocks.push_back({as_bytes(pa.alloc(8)), 8});
    uint64_t touched = 0;
    for (const block &b : blocks) {
        ASSERT_NE(b.p, nullptr);
        memset(b.p, 0x44, kPageSize << b.order);
        touched += size_t{1} << b.order;
    }
    for (const block &b : blocks) pa.free(b.p, b.order);
    page_stats st = stats_of(pa);
    EXPECT_GT(st.in_pcp, 0u);
    EXPECT_GE(st.free_resident + st.in_pcp, touched);
    EXPECT_EQ(st.returned, 0u);

    uint64_t given = pa.purge();
    EXPECT_GE(given, touched);
    st = stats_of(pa);
    EXPECT_EQ(st.free_resident, 0u);
    EXPECT_EQ(st.in_pcp, 0u);
    EXPECT_EQ(st.returned, given);
    EXPECT_EQ(st.resident, 0u);
    EXPECT_TRUE(all_merged(st));
    size_t still = 0;
    for (const block &b : blocks) still += resident(b.p, size_t{1} << b.order);
    EXPECT_EQ(still, 0u);
    EXPECT_EQ(pa.purge(), 0u); // nothing left
    EXPECT_TRUE(valid(pa));
}

// A free block merged from a decommitted part and a warm part hands out the warm pages first:
// splitting keeps the half with more resident pages, whichever half it is.
TEST_F(PageAllocatorDecommit, SplitsKeepTheWarmHalf) {
    page_allocator &pa = make(no_pcp_retain(1u << 20)); // nothing decommitted unless asked
    auto *low = as_bytes(pa.alloc(0));
    auto *high = as_bytes(pa.alloc(0));
    ASSERT_EQ(high, low + kPageSize) << "two pages of one split block, in address order";
    memset(low, 1, kPageSize);
    memset(high, 2, kPageSize);
    pa.free(low, 0);
    EXPECT_GT(pa.purge(), 0u); // the lower page is decommitted, alone (its buddy is in use)
    EXPECT_EQ(resident(low, 1), 0u);
    pa.free(high, 0); // merges with the clean lower page: a block with one warm page, the upper
    EXPECT_TRUE(valid(pa));
    page_stats st = stats_of(pa);
    EXPECT_EQ(st.free_resident, 1u);
    EXPECT_EQ(pa.alloc(0), high) << "the warm page comes back, not the lower, cold one";
    EXPECT_EQ(resident(high, 1), 1u);
    EXPECT_EQ(stats_of(pa).free_resident, 0u);
    EXPECT_EQ(pa.alloc(0), low);
    pa.free(low, 0);
    pa.free(high, 0);
    EXPECT_TRUE(valid(pa));
    EXPECT_TRUE(all_merged(stats_of(pa)));
}

TEST_F(PageAllocatorDecommit, DecommittedMemoryReadsBackAsZero) {
    page_allocator &pa = make(no_pcp_retain(4096));
    constexpr unsigned kOrder = 4;
    constexpr size_t kBytes = kPageSize << kOrder;
    unsigned char *p = as_bytes(pa.alloc(kOrder));
    ASSERT_NE(p, nullptr);
    memset(p, 0xab, kBytes);
    pa.free(p, kOrder);
    EXPECT_EQ(resident(p, size_t{1} << kOrder), size_t{1} << kOrder);
    EXPECT_GT(pa.purge(), 0u);
    EXPECT_EQ(resident(p, size_t{1} << kOrder), 0u);
    // The purged block is the front clean block, so the same memory comes back.
    unsigned char *q = as_bytes(pa.alloc(kOrder));
    ASSERT_EQ(q, p);
    EXPECT_TRUE(all_bytes_are(q, kBytes, 0));
    pa.free(q, kOrder);
    EXPECT_TRUE(valid(pa));
}

TEST_F(PageAllocatorDecommit, ZeroFlagClearsWarmPages) {
    page_allocator &pa = make(no_pcp_retain(4096));
    constexpr unsigned kOrder = 3;
    constexpr size_t kBytes = kPageSize << kOrder;
    unsigned char *p = as_bytes(pa.alloc(kOrder));
    ASSERT_NE(p, nullptr);
    memset(p, 0xcd, kBytes);
    pa.free(p, kOrder);
    // Warm memory is reused as it is...
    unsigned char *q = as_bytes(pa.alloc(kOrder));
    ASSERT_EQ(q, p);
    EXPECT_TRUE(all_bytes_are(q, kBytes, 0xcd));
    pa.free(q, kOrder);
    // ...unless the caller asks for zeroes.
    unsigned char *z = as_bytes(pa.alloc(kOrder, kAnyNode, kZero));
    ASSERT_EQ(z, p);
    EXPECT_TRUE(all_bytes_are(z, kBytes, 0));
    pa.free(z, kOrder);

    // The same through a per-slot list.
    page_allocator &lists = make(one_node());
    unsigned char *a = as_bytes(lists.alloc(0));
    ASSERT_NE(a, nullptr);
    memset(a, 0xef, kPageSize);
    lists.free(a, 0);
    unsigned char *b = as_bytes(lists.alloc(0, kAnyNode, kZero));
    ASSERT_EQ(b, a);
    EXPECT_TRUE(all_bytes_are(b, kPageSize, 0));
    lists.free(b, 0);
    EXPECT_TRUE(valid(pa));
    EXPECT_TRUE(valid(lists));
}

TEST_F(PageAllocatorDecommit, DecayGivesBackIdlePagesEventually) {
    page_allocator_config cfg = one_node();
    cfg.pcp_high = 0;
    cfg.retain_pages = uint64_t{1} << 20; // the bound never applies here
    cfg.decay_ms = 20;
    page_allocator &pa = make(cfg);
    constexpr unsigned kOrder = 2;
    constexpr size_t kBlocks = 64; // 256 pages
    std::vector<unsigned char *> blocks;
    for (size_t i = 0; i < kBlocks; ++i) {
        unsigned char *p = as_bytes(pa.alloc(kOrder));
        ASSERT_NE(p, nullptr);
        memset(p, 0x55, kPageSize << kOrder);
        blocks.push_back(p);
    }
    for (unsigned char *p : blocks) pa.free(p, kOrder);
    const uint64_t freed = kBlocks << kOrder;

    // Each round: stay idle for well over decay_ms, then take a slow path (an order-1 alloc and
    // free), which is where decay is applied. Bounded: a fixed number of rounds, no clock.
    page_stats st = stats_of(pa);
    int rounds = 0;
    for (; rounds < 10 && st.returned < freed; ++rounds) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        void *t = pa.alloc(1);
        ASSERT_NE(t, nullptr);
        pa.free(t, 1);
        st = stats_of(pa);
    }
    EXPECT_GE(st.returned, freed) << "decay gave back nothing within " << rounds << " rounds";
    EXPECT_LE(st.free_resident, 2u) << "only the pages of the last slow path may stay";
    size_t still = 0;
    for (unsigned char *p : blocks) still += resident(p, size_t{1} << kOrder);
    EXPECT_LE(still, st.free_resident);
    EXPECT_TRUE(valid(pa));
}

// ---------------------------------------------------------------------------------------------
// validate() finds corruption
// ---------------------------------------------------------------------------------------------

using PageAllocatorValidate = PageAllocatorFixture;

// Corrupts something, checks that validate() reports it (mentioning `expect`), then repairs it
// and checks that validate() is happy again.
template <typename Corrupt, typename Repair>
void expect_detected(const page_allocator &pa, const char *expect, Corrupt corrupt, Repair repair) {
    SCOPED_TRACE(expect);
    ASSERT_TRUE(valid(pa));
    corrupt();
    char report[1024];
    unsigned problems = pa.validate(report, sizeof report);
    EXPECT_GT(problems, 0u);
    EXPECT_GT(strlen(report), 0u);
    EXPECT_NE(strstr(report, expect), nullptr) << report;
    EXPECT_EQ(pa.validate(), problems); // no report buffer: same count
    char tiny[12];
    EXPECT_EQ(pa.validate(tiny, sizeof tiny), problems);
    EXPECT_LT(strlen(tiny), sizeof tiny);
    repair();
    EXPECT_TRUE(valid(pa));
}

TEST_F(PageAllocatorValidate, DetectsCorruptedFreeBlocks) {
    page_allocator &pa = make(no_pcp_retain(4096));
    // One page taken from a fresh allocator: its buddies of orders 0..9 follow it, all clean.
    unsigned char *p = as_bytes(pa.alloc(0));
    ASSERT_NE(p, nullptr);
    page *head = virt_to_page(p);
    chunk *c = chunk_of(p);
    const size_t pfn = page_pfn(head);
    ASSERT_EQ(head[1].flags(), PG_buddy | PG_clean | 0u);
    ASSERT_EQ(head[2].flags(), PG_buddy | PG_clean | 1u);
    ASSERT_EQ(head[4].flags(), PG_buddy | PG_clean | 2u);
    ASSERT_EQ(head[8].flags(), PG_buddy | PG_clean | 3u);

    const uint32_t saved = head[1].flags();
    expect_detected(
        pa, "wrong state", [&] { head[1].set_state(PG_buddy | PG_clean | 1u); },
        [&] { head[1].set_state(saved); });
    expect_detected(
        pa, "wrong state", [&] { head[1].set_state(PG_buddy | 0u); },
        [&] { head[1].set_state(saved); });

    page *const saved_prev = head[2].prev;
    expect_detected(
        pa, "broken back link", [&] { head[2].prev = &head[1]; },
        [&] { head[2].prev = saved_prev; });

    expect_detected(
        pa, "inside a free block", [&] { head[5].set_state(PG_tail); },
        [&] { head[5].set_state(0); });

    // A clean block with bits set in the dirty bitmap: the block and the zone count disagree.
    expect_detected(
        pa, "clean block with resident pages", [&] { dirty_fill(c, pfn + 8, 3, true); },
        [&] { dirty_fill(c, pfn + 8, 3, false); });

    pa.free(p, 0);
    EXPECT_TRUE(valid(pa));
}

TEST_F(PageAllocatorValidate, DetectsCorruptedPerSlotList) {
    page_allocator &pa = make(small_pcp());
    void *p = pa.alloc(0);
    ASSERT_NE(p, nullptr);
    pa.free(p, 0);
    page *pg = virt_to_page(p);
    ASSERT_EQ(pg->flags(), uint32_t{PG_pcp});
    expect_detected(
        pa, "per-slot block with a wrong state", [&] { pg->set_state(PG_head); },
        [&] { pg->set_state(PG_pcp); });
    // A link that skips pages: the walk no longer matches the count.
    page *const saved_next = pg->next;
    ASSERT_NE(saved_next, nullptr);
    expect_detected(
        pa, "per-slot list count is wrong", [&] { pg->next = nullptr; },
        [&] { pg->next = saved_next; });
    pa.drain();
    EXPECT_TRUE(all_merged(stats_of(pa)));
    EXPECT_TRUE(valid(pa));
}

} // namespace
} // namespace slabkit
