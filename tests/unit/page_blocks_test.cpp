// Unit tests of the buddy page allocator (src/page): blocks and their descriptors, split and merge,
// buddyinfo.
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

} // namespace
} // namespace slabkit
