// Unit tests of the buddy page allocator (src/page): giving memory back: the retain bound, recency,
// purge, zeroing, decay, warm splits; and huge pages once a node has enough out.
#include "page/dirty_bitmap.hpp"
#include "page/page_allocator.hpp"
#include "platform/platform.hpp"
#include "slot/slot.hpp"
#include "support/page_fixture.hpp"
#include "support/vm_flags.hpp"

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
#include <unistd.h>
#include <utility>
#include <vector>

namespace slabkit {
namespace {

using namespace test;

// ---------------------------------------------------------------------------------------------
// Giving memory back: the retain bound, recency, purge, zeroing, decay
// ---------------------------------------------------------------------------------------------

using PageAllocatorDecommit = PageAllocatorFixture;

// A free whose purge batch fills up with decayed blocks must still bring the node back under
// its retain bound (a single batch of 32 blocks once left it over the bound until the next
// free).
TEST_F(PageAllocatorDecommit, RetainHoldsWhenDecayedBlocksFillThePurgeBatch) {
    constexpr uint64_t kRetain = 64;
    page_allocator_config cfg = no_pcp_retain(kRetain);
    cfg.decay_ms = 20;
    page_allocator &pa = make(cfg);
    // 60 isolated free pages (every other page of a run stays allocated, so none merge): under
    // the bound, they stay resident.
    std::vector<void *> pages;
    for (int i = 0; i < 120; ++i) {
        void *p = pa.alloc(0);
        ASSERT_NE(p, nullptr);
        memset(p, 1, kPageSize);
        pages.push_back(p);
    }
    std::sort(pages.begin(), pages.end());
    void *big = pa.alloc(6); // 64 pages
    ASSERT_NE(big, nullptr);
    memset(big, 1, kPageSize << 6);
    for (size_t i = 0; i < pages.size(); i += 2) pa.free(pages[i], 0);
    ASSERT_LE(stats_of(pa).free_resident, kRetain);
    // Let them decay, then free the big block: the purge batch fills with 32 decayed pages
    // before the retain check runs.
    std::this_thread::sleep_for(std::chrono::milliseconds(80));
    pa.free(big, 6);
    page_stats st = stats_of(pa);
    EXPECT_LE(st.free_resident, kRetain);
    EXPECT_TRUE(valid(pa));
    for (size_t i = 1; i < pages.size(); i += 2) pa.free(pages[i], 0);
    EXPECT_LE(stats_of(pa).free_resident, kRetain);
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
// Huge pages past huge_after_pages
// ---------------------------------------------------------------------------------------------

// A node asks for transparent huge pages on the never-used rest of a chunk once it has
// huge_after_pages out, and not before: the blocks carved before stay 4 KiB pages ("nh"), those
// carved after are in a range marked "hg". Memory there reads and writes as any other, and is
// given back and reused the same way.
TEST_F(PageAllocatorDecommit, HugePagesOnlyPastTheThreshold) {
    if (access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) != 0)
        GTEST_SKIP() << "no transparent huge pages in this kernel";
    constexpr uint64_t kBlock = uint64_t{1} << kMaxOrder;
    page_allocator_config cfg = one_node();
    cfg.pcp_high = 0;
    cfg.huge_after_pages = 2 * kBlock; // two max-order blocks out
    page_allocator &pa = make(cfg);
    std::vector<char *> blocks;
    for (int i = 0; i < 4; ++i) {
        auto *p = static_cast<char *>(pa.alloc(kMaxOrder));
        ASSERT_NE(p, nullptr);
        blocks.push_back(p);
    }
    // Carved at 0, 1024, 2048 and 3072 pages out: the third is the first past the threshold.
    EXPECT_TRUE(test::has_vm_flag(blocks[0], "nh")) << test::vm_flags_of(blocks[0]);
    EXPECT_TRUE(test::has_vm_flag(blocks[1], "nh")) << test::vm_flags_of(blocks[1]);
    EXPECT_FALSE(test::has_vm_flag(blocks[1], "hg"));
    EXPECT_TRUE(test::has_vm_flag(blocks[2], "hg")) << test::vm_flags_of(blocks[2]);
    EXPECT_TRUE(test::has_vm_flag(blocks[3], "hg")) << test::vm_flags_of(blocks[3]);
    for (char *p : blocks) memset(p, 0x3c, kBlock * kPageSize);
    for (char *p : blocks) EXPECT_EQ(p[kBlock * kPageSize - 1], 0x3c);
    for (char *p : blocks) pa.free(p, kMaxOrder);
    EXPECT_GT(pa.purge(), 0u);
    page_stats st = stats_of(pa);
    EXPECT_EQ(st.free_resident, 0u);
    EXPECT_TRUE(all_merged(st));
    // Reused after being given back: zero, as decommitted memory reads.
    auto *again = static_cast<char *>(pa.alloc(kMaxOrder, kAnyNode, kZero));
    ASSERT_NE(again, nullptr);
    EXPECT_EQ(again[0], 0);
    EXPECT_EQ(again[kBlock * kPageSize - 1], 0);
    pa.free(again, kMaxOrder);
    EXPECT_TRUE(valid(pa));
}

// huge_after_pages 0 (every allocator the tests make, unless they ask): no range is ever
// marked, however much is out.
TEST_F(PageAllocatorDecommit, NoHugePagesWhenTurnedOff) {
    page_allocator_config cfg = one_node();
    cfg.pcp_high = 0;
    ASSERT_EQ(cfg.huge_after_pages, 0u);
    page_allocator &pa = make(cfg);
    std::vector<void *> blocks;
    for (int i = 0; i < 6; ++i) {
        void *p = pa.alloc(kMaxOrder);
        ASSERT_NE(p, nullptr);
        blocks.push_back(p);
        EXPECT_FALSE(test::has_vm_flag(p, "hg")) << "block " << i << ": " << test::vm_flags_of(p);
    }
    for (void *p : blocks) pa.free(p, kMaxOrder);
    EXPECT_EQ(stats_of(pa).in_use, 0u);
}

} // namespace
} // namespace slabkit
