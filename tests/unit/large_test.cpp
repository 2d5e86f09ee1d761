// Large blocks (kmalloc/large.hpp): blocks above the page allocator's largest order, carved from
// a region of their own, and the freed ones kept for reuse within the recent peak in use and
// SLABKIT_LARGE_RETAIN_MB (256 MiB by default; the LargeNoRetain tests run in a ctest entry of
// their own with it set to 0).
#include "kmalloc/large.hpp"
#include "kmalloc/large_extents.hpp"

#include "page/page.hpp"
#include "page/page_allocator.hpp"
#include "platform/platform.hpp"
#include "slabkit/slabkit.h"
#include "support/vm_flags.hpp"

#include <gtest/gtest.h>

#include <csignal>

#include <atomic>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <sys/mman.h>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace slabkit {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// True when every page of [p, p + size) is mapped (mincore fails with ENOMEM on an unmapped
// page) and, with `resident_too`, resident.
bool all_pages(const void *p, size_t size, bool resident_too) {
    unsigned char vec[64];
    size_t pages = size / kPageSize;
    auto *base = static_cast<const char *>(p);
    for (size_t done = 0; done < pages; done += 64) {
        size_t n = pages - done < 64 ? pages - done : 64;
        if (mincore(const_cast<char *>(base + done * kPageSize), n * kPageSize, vec) != 0)
            return false;
        for (size_t i = 0; resident_too && i < n; ++i)
            if (!(vec[i] & 1)) return false;
    }
    return true;
}
bool mapped(const void *p, size_t size) {
    return all_pages(p, size, false);
}
bool resident(const void *p, size_t size) {
    return all_pages(p, size, true);
}

class Large : public ::testing::Test {
  protected:
    void SetUp() override {
        if (large::retain_budget() == 0) GTEST_SKIP() << "SLABKIT_LARGE_RETAIN_MB=0";
        large::release_retained(0, true);
        // The page allocator's resident pages count in the peak (large.hpp): as few as can be.
        page_allocator::global().purge();
        // A large free unmaps instead of keeping when the page allocator passed its retain
        // bound since the last large free (earlier tests' churn may have): one free here brings
        // that mark up to date, so the test's own frees see only what the test does.
        void *sync = large::alloc(5 * kMiB);
        ASSERT_NE(sync, nullptr);
        ASSERT_TRUE(large::free(sync));
        large::release_retained(0, true);
    }
    void TearDown() override { large::release_retained(0, true); }
};

TEST_F(Large, FreedBlockIsKeptAndServesTheNextOfItsSize) {
    void *p = large::alloc(8 * kMiB);
    ASSERT_NE(p, nullptr);
    memset(p, 0x5a, 8 * kMiB);
    EXPECT_EQ(large::mapped_bytes(), 8 * kMiB);
    ASSERT_TRUE(large::free(p));
    EXPECT_EQ(large::mapped_bytes(), 0u);
    EXPECT_EQ(large::retained_bytes(), 8 * kMiB);
    EXPECT_EQ(large::retained_blocks(), 1u);
    EXPECT_TRUE(mapped(p, 8 * kMiB)); // kept, not unmapped

    void *q = large::alloc(8 * kMiB);
    EXPECT_EQ(q, p);
    EXPECT_EQ(large::retained_bytes(), 0u);
    EXPECT_EQ(large::size_of(q), 8 * kMiB);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % (8 * kMiB), 0u); // power of two: its own alignment
    EXPECT_TRUE(large::free(q));
}

TEST_F(Large, ZeroedReuseClearsTheLastUsersBytes) {
    void *p = large::alloc(6 * kMiB);
    ASSERT_NE(p, nullptr);
    memset(p, 0xa5, 6 * kMiB);
    ASSERT_TRUE(large::free(p));
    auto *q = static_cast<unsigned char *>(large::alloc(6 * kMiB, 0, true));
    ASSERT_EQ(q, p);
    for (size_t i = 0; i < 6 * kMiB; i += 4093) ASSERT_EQ(q[i], 0) << i;
    EXPECT_EQ(q[6 * kMiB - 1], 0);
    EXPECT_TRUE(large::free(q));
}

TEST_F(Large, SmallerRequestTakesAKeptRangeAndItsTailStaysKept) {
    auto *p = static_cast<char *>(large::alloc(8 * kMiB));
    ASSERT_NE(p, nullptr);
    memset(p, 1, 8 * kMiB);
    ASSERT_TRUE(large::free(p));
    void *q = large::alloc(6 * kMiB + kMiB / 2 + 100, kPageSize);
    ASSERT_EQ(q, p);
    const size_t whole = 6 * kMiB + kMiB / 2 + kPageSize;
    EXPECT_EQ(large::size_of(q), whole);
    EXPECT_EQ(large::mapped_bytes(), whole);
    // The tail stays kept, resident: no call to the OS split it off.
    EXPECT_EQ(large::retained_bytes(), 8 * kMiB - whole);
    EXPECT_TRUE(resident(p + whole, 8 * kMiB - whole));
    EXPECT_TRUE(large::free(q));
    // Freed again, the block joins its tail: one range of 8 MiB.
    EXPECT_EQ(large::retained_bytes(), 8 * kMiB);
    EXPECT_EQ(large::retained_blocks(), 1u);
    large::release_retained(0, true);
    EXPECT_FALSE(resident(p, kPageSize)); // given back, the range stays for reuse
    EXPECT_EQ(large::retained_bytes(), 0u);
}

TEST_F(Large, ABigTailStaysKeptAndServesTheNextBlock) {
    auto *p = static_cast<char *>(large::alloc(16 * kMiB));
    ASSERT_NE(p, nullptr);
    memset(p, 7, 16 * kMiB);
    ASSERT_TRUE(large::free(p));
    void *q = large::alloc(6 * kMiB, kPageSize);
    ASSERT_EQ(q, p);
    EXPECT_EQ(large::size_of(q), 6 * kMiB);
    EXPECT_EQ(large::retained_bytes(), 10 * kMiB); // the tail, still mapped and resident
    EXPECT_EQ(large::retained_blocks(), 1u);
    EXPECT_TRUE(mapped(p + 6 * kMiB, 10 * kMiB));
    auto *r = static_cast<unsigned char *>(large::alloc(9 * kMiB, kPageSize, true));
    EXPECT_EQ(r, reinterpret_cast<unsigned char *>(p) + 6 * kMiB);
    for (size_t i = 0; i < 9 * kMiB; i += 4093) ASSERT_EQ(r[i], 0) << i; // zeroed on reuse
    EXPECT_EQ(large::retained_bytes(), 1 * kMiB);                        // its own tail stays kept
    EXPECT_TRUE(resident(p + 15 * kMiB, kMiB));
    // Both halves of the old mapping free independently.
    EXPECT_TRUE(large::free(q));
    EXPECT_TRUE(large::free(r));
}

TEST_F(Large, LargerRequestGrowsAKeptBlock) {
    auto *p = static_cast<char *>(large::alloc(5 * kMiB + 3 * kPageSize));
    ASSERT_NE(p, nullptr);
    ASSERT_TRUE(large::free(p));
    auto *q = static_cast<unsigned char *>(large::alloc(9 * kMiB + kPageSize, 0, true));
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(large::retained_bytes(), 0u); // taken, and grown past it
    EXPECT_EQ(large::size_of(q), 9 * kMiB + kPageSize);
    for (size_t i = 0; i < 9 * kMiB + kPageSize; i += 4099) ASSERT_EQ(q[i], 0) << i;
    memset(q, 1, 9 * kMiB + kPageSize);
    EXPECT_TRUE(large::free(q));
}

TEST_F(Large, StricterAlignmentIsNeverServedByAMisalignedBlock) {
    // A 5 MiB + 1 page block is only page-aligned; a 16 MiB-aligned request must not take it
    // unless it happens to be aligned.
    void *p = large::alloc(5 * kMiB + kPageSize);
    ASSERT_NE(p, nullptr);
    ASSERT_TRUE(large::free(p));
    void *q = large::alloc(5 * kMiB, 16 * kMiB);
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % (16 * kMiB), 0u);
    EXPECT_TRUE(large::free(q));
}

// Kept blocks never take resident memory past what the program had in use at its peak, nor past
// the budget.
TEST_F(Large, KeptBlocksStayWithinThePeakInUseAndTheBudget) {
    const uint64_t budget = large::retain_budget();
    ASSERT_GE(budget, 64 * kMiB) << "the default budget is 256 MiB";
    // Four of 12 MiB in use at once, then freed: all four kept (48 MiB, the peak).
    void *blocks[4];
    for (auto &b : blocks) {
        b = large::alloc(12 * kMiB);
        ASSERT_NE(b, nullptr);
    }
    for (auto *b : blocks) ASSERT_TRUE(large::free(b));
    EXPECT_EQ(large::retained_bytes(), 48 * kMiB);
    EXPECT_GE(large::retained_blocks(), 1u); // neighbours merge into one range
    EXPECT_LE(large::retained_blocks(), 4u);
    large::release_retained(0, true);
    // A random program: up to 4 blocks of 5 to 24 MiB in use; after every free, what is in use
    // and what is kept together stay within the most it had in use at once.
    std::mt19937 rng(7);
    std::vector<std::pair<void *, size_t>> live;
    uint64_t peak = 0, in_use = 0;
    for (int step = 0; step < 200; ++step) {
        if (live.size() < 4 && (live.empty() || rng() % 2)) {
            const size_t size = (5 + rng() % 20) * kMiB + (rng() % 3) * kPageSize;
            void *p = large::alloc(size, kPageSize);
            ASSERT_NE(p, nullptr);
            memset(p, static_cast<int>(step), size);
            live.emplace_back(p, size);
            in_use += size;
            if (in_use > peak) peak = in_use;
        } else {
            const size_t k = rng() % live.size();
            ASSERT_TRUE(large::free(live[k].first));
            in_use -= live[k].second;
            live.erase(live.begin() + static_cast<long>(k));
            // (and a sixteenth of that peak, which counts the page allocator's resident pages
            // too, for the kept ranges' fragmentation)
            const uint64_t pages = page_allocator::global().resident_pages() * kPageSize;
            EXPECT_LE(large::mapped_bytes() + large::retained_bytes(), peak + (peak + pages) / 16)
                << "step " << step;
            EXPECT_LE(large::retained_bytes(), budget);
        }
    }
    for (auto [p, size] : live) ASSERT_TRUE(large::free(p));
    // A block over the budget is never kept.
    auto *huge = static_cast<char *>(large::alloc(budget + kMiB));
    ASSERT_NE(huge, nullptr);
    memset(huge, 1, kPageSize);
    memset(huge + budget, 1, kMiB);
    ASSERT_TRUE(large::free(huge));
    EXPECT_FALSE(resident(huge + budget, kPageSize)); // its newest part was the oldest kept
    EXPECT_LE(large::retained_bytes(), budget);
}

// Blocks freed side by side merge into one kept range, which serves a larger block in place:
// its pages resident, no call to the OS, no fault.
TEST_F(Large, FreedNeighboursMergeAndServeALargerBlock) {
    // One 11 MiB range first, so that the two blocks below lie side by side in it.
    void *c = large::alloc(11 * kMiB, kPageSize);
    ASSERT_NE(c, nullptr);
    memset(c, 0, 11 * kMiB);
    ASSERT_TRUE(large::free(c));
    auto *a = static_cast<unsigned char *>(large::alloc(6 * kMiB, kPageSize));
    auto *b = static_cast<unsigned char *>(large::alloc(5 * kMiB, kPageSize));
    ASSERT_EQ(a, c);
    ASSERT_EQ(b, a + 6 * kMiB);
    memset(a, 0xa1, 6 * kMiB);
    memset(b, 0xb2, 5 * kMiB);
    ASSERT_TRUE(large::free(a));
    ASSERT_TRUE(large::free(b));
    ASSERT_EQ(large::retained_bytes(), 11 * kMiB);
    EXPECT_EQ(large::retained_blocks(), 1u);
    auto *q = static_cast<unsigned char *>(large::alloc(10 * kMiB, kPageSize));
    ASSERT_EQ(q, a);
    EXPECT_EQ(large::size_of(q), 10 * kMiB);
    EXPECT_EQ(large::retained_bytes(), 1 * kMiB);
    EXPECT_TRUE(resident(q, 10 * kMiB)) << "kept pages are resident before any touch";
    EXPECT_EQ(q[0], 0xa1);
    EXPECT_EQ(q[6 * kMiB - 1], 0xa1);
    EXPECT_EQ(q[6 * kMiB], 0xb2);
    EXPECT_EQ(q[10 * kMiB - 1], 0xb2);
    ASSERT_TRUE(large::free(q));
    // Zeroed on request, from kept pages or not.
    auto *z = static_cast<unsigned char *>(large::alloc(16 * kMiB, kPageSize, true));
    ASSERT_NE(z, nullptr);
    for (size_t i = 0; i < 16 * kMiB; i += 4093) ASSERT_EQ(z[i], 0) << i;
    ASSERT_TRUE(large::free(z));
}

// Resize: a shrink keeps the tail as a free range, a growth takes what follows in place when it
// is free (or the region's top), and otherwise the pages move (no copy) to a range that holds
// the new size, the old range staying for reuse.
TEST_F(Large, ResizeShrinksAndGrowsInPlaceOrMovesThePages) {
    // A 12 MiB range, so that the 6 MiB block below has free space after it.
    void *c = large::alloc(12 * kMiB, kPageSize);
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(large::free(c));
    auto *p = static_cast<unsigned char *>(large::alloc(6 * kMiB, kPageSize));
    ASSERT_EQ(p, c);
    memset(p, 0x3c, 6 * kMiB);
    EXPECT_EQ(large::retained_bytes(), 6 * kMiB);
    // Shrink: in place, the tail joins the free range after it.
    EXPECT_EQ(large::resize(p, 5 * kMiB), p);
    EXPECT_EQ(large::size_of(p), 5 * kMiB);
    EXPECT_EQ(large::mapped_bytes(), 5 * kMiB);
    EXPECT_EQ(large::retained_bytes(), 7 * kMiB);
    EXPECT_EQ(large::retained_blocks(), 1u);
    // Grow into the free range after it: in place.
    EXPECT_EQ(large::resize(p, 11 * kMiB), p);
    EXPECT_EQ(large::size_of(p), 11 * kMiB);
    EXPECT_EQ(large::mapped_bytes(), 11 * kMiB);
    EXPECT_EQ(large::retained_bytes(), 1 * kMiB);
    EXPECT_EQ(p[5 * kMiB - 1], 0x3c);
    // A block right after it: a growth past it moves the pages.
    auto *q = static_cast<unsigned char *>(large::alloc(1 * kMiB + kMiB / 2, kPageSize));
    ASSERT_NE(q, nullptr);
    memset(q, 0x77, kMiB + kMiB / 2);
    auto *r = static_cast<unsigned char *>(large::resize(p, 20 * kMiB));
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(large::size_of(r), 20 * kMiB);
    EXPECT_EQ(large::size_of(p), r == p ? 20 * kMiB : 0u);
    EXPECT_EQ(r[0], 0x3c);
    EXPECT_EQ(r[5 * kMiB - 1], 0x3c);
    memset(r, 0x11, 20 * kMiB);
    EXPECT_EQ(q[0], 0x77); // the neighbour untouched
    EXPECT_EQ(q[kMiB + kMiB / 2 - 1], 0x77);
    EXPECT_EQ(large::mapped_bytes(), 20 * kMiB + kMiB + kMiB / 2);
    ASSERT_TRUE(large::free(q));
    ASSERT_TRUE(large::free(r));
    EXPECT_EQ(large::mapped_bytes(), 0u);
    EXPECT_EQ(large::mapped_blocks(), 0u);
    // Whatever moved, the old range is usable again: blocks over all of it come out whole.
    std::vector<unsigned char *> blocks;
    for (int i = 0; i < 8; ++i) {
        auto *b = static_cast<unsigned char *>(large::alloc(5 * kMiB, kPageSize, true));
        ASSERT_NE(b, nullptr);
        EXPECT_EQ(b[0], 0);
        EXPECT_EQ(b[5 * kMiB - 1], 0);
        memset(b, i, 5 * kMiB);
        blocks.push_back(b);
    }
    for (auto *b : blocks) ASSERT_TRUE(large::free(b));
    EXPECT_LE(large::retained_bytes(), large::retain_budget());
}

TEST_F(Large, OldBlocksDecayAndTrimGivesAllBack) {
    void *p = large::alloc(6 * kMiB);
    void *q = large::alloc(7 * kMiB);
    ASSERT_TRUE(p && q);
    memset(p, 1, 6 * kMiB);
    ASSERT_TRUE(large::free(p));
    ASSERT_TRUE(large::free(q));
    EXPECT_EQ(large::retained_bytes(), 13 * kMiB);
    // Kept since before a time in the future: both are old enough.
    EXPECT_EQ(large::release_retained(platform::now_coarse_ms() + 1000, false), 13 * kMiB);
    EXPECT_EQ(large::retained_bytes(), 0u);
    EXPECT_FALSE(resident(p, kPageSize)); // its pages went back

    void *r = large::alloc(6 * kMiB);
    ASSERT_NE(r, nullptr);
    memset(r, 1, 6 * kMiB);
    ASSERT_TRUE(large::free(r));
    // Freed just now: a cut-off in the past keeps it.
    EXPECT_EQ(large::release_retained(0, false), 0u);
    EXPECT_EQ(large::retained_bytes(), 6 * kMiB);
    slabkit_trim(); // gives back every kept block
    EXPECT_EQ(large::retained_bytes(), 0u);
    EXPECT_FALSE(resident(r, kPageSize));
}

TEST_F(Large, AShrinkingHeapLetsGoOfKeptBlocks) {
    void *p = large::alloc(6 * kMiB);
    ASSERT_NE(p, nullptr);
    ASSERT_TRUE(large::free(p));
    ASSERT_EQ(large::retained_blocks(), 1u);
    // Free more page blocks than the page allocator may keep resident (16 MiB by default): it
    // gives its oldest back, which the next large free reads as the program shrinking.
    page_allocator &pa = page_allocator::global();
    const uint64_t events = pa.over_retain_events();
    void *blocks[12];
    for (auto &b : blocks) {
        b = pa.alloc(kMaxOrder);
        ASSERT_NE(b, nullptr);
        memset(b, 1, kPageSize << kMaxOrder);
    }
    for (auto *b : blocks) pa.free(b);
    ASSERT_GT(pa.over_retain_events(), events);
    void *q = large::alloc(7 * kMiB);
    ASSERT_NE(q, nullptr);
    ASSERT_TRUE(large::free(q));
    EXPECT_EQ(large::retained_blocks(), 0u);
    EXPECT_EQ(large::retained_bytes(), 0u);
    // Cycling again without the page allocator shrinking (and without the pages it keeps, which
    // would take the room) keeps blocks again.
    pa.purge();
    void *r = large::alloc(7 * kMiB);
    ASSERT_NE(r, nullptr);
    ASSERT_TRUE(large::free(r));
    EXPECT_EQ(large::retained_blocks(), 1u);
}

// The peak counts the page allocator's resident pages too: pages it took since the peak leave
// less room for kept large blocks, so that both together stay within the peak.
TEST_F(Large, PagesThePageAllocatorTookShareTheRoom) {
    page_allocator &pa = page_allocator::global();
    auto *p = static_cast<char *>(large::alloc(12 * kMiB, kPageSize));
    ASSERT_NE(p, nullptr);
    memset(p, 1, 12 * kMiB);
    ASSERT_TRUE(large::free(p)); // kept whole: resident memory stays at its peak
    EXPECT_EQ(large::retained_bytes(), 12 * kMiB);
    // 4 MiB of page blocks taken, and kept in use.
    void *blocks[2];
    for (auto &b : blocks) {
        b = pa.alloc(kMaxOrder - 1);
        ASSERT_NE(b, nullptr);
        memset(b, 1, kPageSize << (kMaxOrder - 1));
    }
    // A 6 MiB block from the kept range: of the 6 MiB left, only what the page blocks left of
    // the peak and its sixteenth stays kept, about 2.75 MiB (the newest end of the range went
    // back).
    void *q = large::alloc(6 * kMiB, kPageSize);
    ASSERT_EQ(q, p);
    EXPECT_LE(large::retained_bytes(), 3 * kMiB);
    EXPECT_GE(large::retained_bytes(), 2 * kMiB);
    EXPECT_FALSE(resident(p + 12 * kMiB - kPageSize, kPageSize));
    EXPECT_TRUE(resident(p + 6 * kMiB, kPageSize));
    ASSERT_TRUE(large::free(q));
    for (auto *b : blocks) pa.free(b);
    pa.purge();
}

// SLABKIT_PROTECT_FREED: a freed block of the region is read-only while it is kept, writable
// again when reused; sizes above 32 MiB always, smaller ones until a block of the size is reused.
TEST_F(Large, AKeptBlockIsReadOnlyUntilReused) {
    if (large::protected_above() == ~size_t{0}) GTEST_SKIP() << "SLABKIT_PROTECT_FREED=0";
    const size_t size = 40 * kMiB;
    auto *p = static_cast<char *>(large::alloc(size));
    ASSERT_NE(p, nullptr);
    p[0] = 'a';
    p[size - 1] = 'z';
    const unsigned before = large::protected_ranges();
    ASSERT_TRUE(large::free(p));
    EXPECT_EQ(large::protected_ranges(), before + 1);
    EXPECT_EQ(static_cast<volatile char *>(p)[size - 1], 'z'); // still readable
    // (A death by SIGSEGV, or under ASan its report and exit status.)
    EXPECT_DEATH(static_cast<volatile char *>(p)[4096] = 1, "");
    auto *q = static_cast<char *>(large::alloc(size));
    ASSERT_EQ(q, p);
    memset(q, 0x5a, size); // writable again, all of it
    EXPECT_EQ(large::protected_ranges(), before);
    if (large::protected_above() != 0) { // 0: SLABKIT_PROTECT_FREED=2, every size protected
        EXPECT_EQ(large::protected_above(), 32 * kMiB); // capped: bigger ones stay protected
    }
    // A shrink's tail is kept, and protected like a freed block.
    ASSERT_EQ(large::resize(q, 4 * kMiB), q);
    EXPECT_EQ(large::protected_ranges(), before + 1);
    EXPECT_DEATH(static_cast<volatile char *>(q)[8 * kMiB] = 1, "");
    q[4 * kMiB - 1] = 1;
    // Grown in place again over the protected tail: writable.
    ASSERT_EQ(large::resize(q, size), q);
    memset(q, 0x6b, size);
    EXPECT_EQ(large::protected_ranges(), before);
    ASSERT_TRUE(large::free(q));
}

TEST_F(Large, ASizeReusedIsNoLongerProtected) {
    const size_t above = large::protected_above();
    if (above == ~size_t{0}) GTEST_SKIP() << "SLABKIT_PROTECT_FREED=0";
    const size_t size = (above / kMiB + 2) * kMiB;
    if (size > 32 * kMiB) GTEST_SKIP() << "every size up to 32 MiB was reused already";
    void *p = large::alloc(size);
    ASSERT_NE(p, nullptr);
    if (large::protected_above() == 0) {
        // SLABKIT_PROTECT_FREED=2: every free protected, reused or not.
        for (int round = 0; round < 2; ++round) {
            const unsigned before = large::protected_ranges();
            ASSERT_TRUE(large::free(p));
            EXPECT_EQ(large::protected_ranges(), before + 1);
            p = large::alloc(size);
            ASSERT_NE(p, nullptr);
        }
        ASSERT_TRUE(large::free(p));
        return;
    }
    if (large::protected_above() < size) {
        // Nothing protected was reused for it: its free is protected, and taking it again is
        // the reuse.
        const unsigned before = large::protected_ranges();
        ASSERT_TRUE(large::free(p));
        ASSERT_EQ(large::protected_ranges(), before + 1);
        void *q = large::alloc(size);
        ASSERT_EQ(q, p);
        EXPECT_EQ(large::protected_ranges(), before);
    }
    EXPECT_GE(large::protected_above(), size);
    const unsigned before = large::protected_ranges();
    ASSERT_TRUE(large::free(p));
    EXPECT_EQ(large::protected_ranges(), before); // the size stays writable now
    static_cast<volatile char *>(p)[0] = 2;
}

TEST_F(Large, DoubleFreeOfAKeptBlockIsRefused) {
    void *p = large::alloc(5 * kMiB);
    ASSERT_NE(p, nullptr);
    ASSERT_TRUE(large::free(p));
    EXPECT_FALSE(large::free(p)); // no longer a block: the caller reports a bad free
    EXPECT_EQ(large::size_of(p), 0u);
    EXPECT_EQ(large::retained_blocks(), 1u);
}

TEST_F(Large, ThreadsSharingKeptBlocksNeverShareABlock) {
    // Each thread writes its own byte over each block it gets and checks it before freeing: a
    // kept block handed to two threads at once, or reused while still in use, shows.
    constexpr int kThreads = 4, kRounds = 40;
    std::vector<std::thread> threads;
    std::atomic<int> bad{0};
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([t, &bad] {
            std::mt19937 rng(1234 + t);
            for (int r = 0; r < kRounds; ++r) {
                size_t size = (5 + rng() % 12) * kMiB + (rng() % 4) * kPageSize;
                auto *p = static_cast<unsigned char *>(large::alloc(size, 0, r % 3 == 0));
                if (!p) {
                    ++bad;
                    return;
                }
                if (r % 3 == 0 && (p[0] != 0 || p[size - 1] != 0)) ++bad;
                const auto mark = static_cast<unsigned char>(t * 50 + r);
                for (size_t i = 0; i < size; i += kPageSize) p[i] = mark;
                std::this_thread::yield();
                for (size_t i = 0; i < size; i += kPageSize)
                    if (p[i] != mark) {
                        ++bad;
                        break;
                    }
                if (!large::free(p)) ++bad;
            }
        });
    }
    for (auto &th : threads) th.join();
    EXPECT_EQ(bad.load(), 0);
    EXPECT_EQ(large::mapped_bytes(), 0u);
    EXPECT_LE(large::retained_bytes(), large::retain_budget());
    EXPECT_LE(large::retained_blocks(), large::extent_map::kCapacity);
}

// Run with the address space limited (ctest large_limited_address_space: ulimit -v): the
// region is smaller than 64 GiB, and still serves and keeps blocks.
TEST(LargeLimitedAddressSpace, ASmallerRegionServesAndKeeps) {
    struct rlimit lim {};
    ASSERT_EQ(getrlimit(RLIMIT_AS, &lim), 0);
    if (lim.rlim_cur == RLIM_INFINITY) GTEST_SKIP() << "needs a limit on the address space";
    auto *p = static_cast<char *>(large::alloc(8 * kMiB));
    ASSERT_NE(p, nullptr);
    const uint64_t region = large::region_bytes();
    EXPECT_GE(region, uint64_t{1} << 30);
    EXPECT_LT(region, uint64_t{64} << 30);
    memset(p, 1, 8 * kMiB);
    ASSERT_TRUE(large::free(p));
    EXPECT_EQ(large::alloc(8 * kMiB), p); // kept and reused
    ASSERT_TRUE(large::free(p));
}

// Large blocks are on transparent huge pages unless SLABKIT_LARGE_HUGE_PAGES=0 (ctest
// large_no_huge_pages runs this again with it): the region's mapping carries the kernel's
// "hg" flag (MADV_HUGEPAGE) exactly when region_huge_pages() says so, and a block written
// whole reads back and gives its pages back when freed, whichever way.
TEST(LargeHugePages, TheRegionAsksForHugePagesUnlessTurnedOff) {
    const char *env = getenv("SLABKIT_LARGE_HUGE_PAGES");
    const bool off = env && strcmp(env, "0") == 0;
    const bool thp = access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) == 0;
    auto *p = static_cast<char *>(large::alloc(8 * kMiB));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(large::region_huge_pages(), !off && thp);
    const std::string flags = test::vm_flags_of(p);
    ASSERT_FALSE(flags.empty()) << "no mapping holds the block in /proc/self/smaps";
    EXPECT_EQ(test::has_vm_flag(p, "hg"), large::region_huge_pages()) << flags;
    // A block that grew by moving its pages leaves its old range mapped afresh: that range
    // asks for huge pages again.
    auto *q = static_cast<char *>(large::alloc(2 * kMiB));
    ASSERT_NE(q, nullptr);
    auto *fence = static_cast<char *>(large::alloc(2 * kMiB)); // nothing to grow into after q
    ASSERT_NE(fence, nullptr);
    auto *moved = static_cast<char *>(large::resize(q, 64 * kMiB));
    ASSERT_NE(moved, nullptr);
    if (moved != q) {
        const std::string old_range = test::vm_flags_of(q);
        EXPECT_EQ(test::has_vm_flag(q, "hg"), large::region_huge_pages()) << old_range;
    }
    EXPECT_EQ(test::has_vm_flag(moved, "hg"), large::region_huge_pages());
    ASSERT_TRUE(large::free(moved));
    ASSERT_TRUE(large::free(fence));
    memset(p, 0x5a, 8 * kMiB);
    EXPECT_EQ(p[0], 0x5a);
    EXPECT_EQ(p[8 * kMiB - 1], 0x5a);
    ASSERT_TRUE(large::free(p));
    large::release_retained(0, true);
    EXPECT_FALSE(resident(p, kPageSize));
    EXPECT_FALSE(resident(p + 4 * kMiB, kPageSize));
}

// Run with SLABKIT_LARGE_RETAIN_MB=0 (ctest large_no_retain): every freed block's pages go back.
TEST(LargeNoRetain, FreedBlocksGiveTheirPagesBack) {
    if (large::retain_budget() != 0) GTEST_SKIP() << "needs SLABKIT_LARGE_RETAIN_MB=0";
    auto *p = static_cast<char *>(large::alloc(8 * kMiB));
    ASSERT_NE(p, nullptr);
    memset(p, 1, 8 * kMiB);
    ASSERT_TRUE(large::free(p));
    EXPECT_EQ(large::retained_bytes(), 0u);
    EXPECT_FALSE(resident(p, kPageSize));
    EXPECT_FALSE(resident(p + 8 * kMiB - kPageSize, kPageSize));
}

} // namespace
} // namespace slabkit
