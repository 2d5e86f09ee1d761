// Unit tests of the buddy page allocator (src/page): statistics and growth, nodes, bad requests and
// the arena limit.
#include "page/dirty_bitmap.hpp"
#include "page/page_allocator.hpp"
#include "platform/platform.hpp"
#include "slot/slot.hpp"
#include "support/page_fixture.hpp"

#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>

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

// Keeps the calling thread on the CPU it runs on until the end of the scope. With the CPUs'
// slots (SLABKIT_SLOTS=cpu, ctest's slabkit_tests_cpu) a thread's per-slot page list is its
// CPU's: a thread that moves between a free and the next allocation meets another list.
class stay_on_this_cpu {
  public:
    stay_on_this_cpu() {
        had_ = pthread_getaffinity_np(pthread_self(), sizeof old_, &old_) == 0;
        const int cpu = sched_getcpu();
        if (!had_ || cpu < 0) return;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    }
    ~stay_on_this_cpu() {
        if (had_) pthread_setaffinity_np(pthread_self(), sizeof old_, &old_);
    }
    stay_on_this_cpu(const stay_on_this_cpu &) = delete;
    stay_on_this_cpu &operator=(const stay_on_this_cpu &) = delete;

  private:
    cpu_set_t old_{};
    bool had_ = false;
};

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
    const stay_on_this_cpu pinned; // the per-slot list the free fills is the one alloc reads
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

} // namespace
} // namespace slabkit
