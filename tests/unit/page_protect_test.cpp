// Unit tests of write-protected free blocks (page_allocator_config::protect_freed): a freed block
// above the per-slot orders is read-only while free, writable again whenever a block that covers
// any of its pages is handed out, whole, split or merged, and the zone counts its protected pages.
#include "page/page_allocator.hpp"
#include "page/readonly_bitmap.hpp"
#include "support/page_fixture.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace slabkit {
namespace {

using namespace test;

page_allocator_config protecting() {
    page_allocator_config cfg = one_node();
    cfg.protect_freed = kProtectAlways;
    return cfg;
}

uint64_t readonly_pages(page_allocator &pa) {
    page_stats st;
    pa.snapshot(&st);
    return st.readonly;
}

void expect_valid(page_allocator &pa) {
    char report[512];
    EXPECT_EQ(pa.validate(report, sizeof report), 0u) << report;
}

using PageAllocatorProtect = PageAllocatorFixture;

TEST_F(PageAllocatorProtect, AFreedLargeBlockIsReadOnlyUntilItIsTakenAgain) {
    page_allocator &pa = make(protecting());
    const unsigned order = kProtectMinOrder;
    const size_t bytes = kPageSize << order;
    char *p = static_cast<char *>(pa.alloc(order));
    ASSERT_NE(p, nullptr);
    memset(p, 'x', bytes);
    pa.free(p, order);
    EXPECT_EQ(readonly_pages(pa), size_t{1} << order);
    expect_valid(pa);
    // Readable, with the old bytes; a write faults (the child dies of it, the parent goes on).
    EXPECT_EQ(static_cast<volatile char *>(p)[bytes - 1], 'x');
    // (A death by SIGSEGV, or under ASan its report and exit status.)
    EXPECT_DEATH(static_cast<volatile char *>(p)[100] = 1, "");
    // The same block handed out again is writable and counts no protected page.
    char *q = static_cast<char *>(pa.alloc(order));
    ASSERT_EQ(q, p);
    memset(q, 'y', bytes);
    EXPECT_EQ(readonly_pages(pa), 0u);
    expect_valid(pa);
    pa.free(q, order);
}

TEST_F(PageAllocatorProtect, SmallBlocksAndTheOptionOffAreNeverProtected) {
    page_allocator &off = make(one_node());
    void *big = off.alloc(kMaxOrder);
    ASSERT_NE(big, nullptr);
    off.free(big, kMaxOrder);
    EXPECT_EQ(readonly_pages(off), 0u);
    static_cast<volatile char *>(big)[0] = 1; // no fault: nothing was protected
    page_allocator &on = make(protecting());
    for (unsigned order = 0; order < kProtectMinOrder; ++order) {
        void *p = on.alloc(order);
        ASSERT_NE(p, nullptr);
        on.free(p, order);
        EXPECT_EQ(readonly_pages(on), 0u) << "order " << order;
    }
}

TEST_F(PageAllocatorProtect, PartsOfAProtectedBlockAreWritableWhenHandedOut) {
    page_allocator &pa = make(protecting());
    char *big = static_cast<char *>(pa.alloc(kMaxOrder));
    ASSERT_NE(big, nullptr);
    pa.free(big, kMaxOrder);
    ASSERT_EQ(readonly_pages(pa), size_t{1} << kMaxOrder);
    // Pages split off it for small orders (through the per-slot lists) and for a large one.
    std::vector<std::pair<char *, unsigned>> out;
    for (unsigned order : {0u, 3u, 5u, 7u, 0u, 6u}) {
        char *p = static_cast<char *>(pa.alloc(order));
        ASSERT_NE(p, nullptr);
        memset(p, 0x5a, kPageSize << order); // faults if any page of it were still protected
        out.emplace_back(p, order);
    }
    expect_valid(pa);
    EXPECT_LT(readonly_pages(pa), size_t{1} << kMaxOrder);
    for (auto [p, order] : out) pa.free(p, order);
    pa.drain();
    expect_valid(pa);
}

TEST_F(PageAllocatorProtect, UntilReuseStopsProtectingAnOrderOnceABlockOfItIsTakenAgain) {
    page_allocator_config cfg = one_node();
    cfg.protect_freed = kProtectUntilReuse;
    page_allocator &pa = make(cfg);
    EXPECT_EQ(pa.protect_order(), kProtectMinOrder);
    const unsigned order = kProtectMinOrder + 1;
    void *p = pa.alloc(order);
    ASSERT_NE(p, nullptr);
    pa.free(p, order);
    EXPECT_EQ(readonly_pages(pa), size_t{1} << order); // the first free of the order: protected
    void *q = pa.alloc(order);                         // taken again: the program reuses them
    ASSERT_EQ(q, p);
    EXPECT_EQ(pa.protect_order(), order + 1);
    pa.free(q, order);
    EXPECT_EQ(readonly_pages(pa), 0u);      // no longer protected, nor those below
    static_cast<volatile char *>(q)[0] = 1; // no fault
    void *r = pa.alloc(kProtectMinOrder);
    ASSERT_NE(r, nullptr);
    pa.free(r, kProtectMinOrder);
    EXPECT_EQ(readonly_pages(pa), 0u);
    void *big = pa.alloc(order + 1); // larger blocks still are
    ASSERT_NE(big, nullptr);
    pa.free(big, order + 1);
    EXPECT_EQ(readonly_pages(pa), size_t{2} << order);
    expect_valid(pa);
}

TEST_F(PageAllocatorProtect, OffProtectsNothingAndABadModeIsRefused) {
    page_allocator_config cfg = one_node();
    EXPECT_EQ(cfg.protect_freed, kProtectOff); // instances made by code: off unless asked
    page_allocator &pa = make(cfg);
    EXPECT_EQ(pa.protect_order(), kNrOrders);
    cfg.protect_freed = 3;
    ASSERT_NE(cfg.invalid(), nullptr);
    EXPECT_NE(std::string(cfg.invalid()).find("protect_freed"), std::string::npos);
}

// A random program of large and small blocks: every block handed out is writable, the counts of
// protected pages always match the bitmap, and the freed large blocks are protected.
TEST_F(PageAllocatorProtect, RandomBlocksStayWritableAndCounted) {
    page_allocator &pa = make(protecting());
    std::mt19937 rng(7);
    std::vector<std::pair<char *, unsigned>> live;
    for (int step = 0; step < 3000; ++step) {
        if (live.size() < 40 && (live.empty() || rng() % 2)) {
            unsigned order = rng() % 3 == 0 ? rng() % (kMaxOrder + 1) : kProtectMinOrder;
            char *p = static_cast<char *>(pa.alloc(order));
            ASSERT_NE(p, nullptr);
            p[0] = 1;
            p[(kPageSize << order) - 1] = 2;
            live.emplace_back(p, order);
        } else {
            size_t i = rng() % live.size();
            pa.free(live[i].first, live[i].second);
            live[i] = live.back();
            live.pop_back();
        }
        if (step % 500 == 0) expect_valid(pa);
    }
    for (auto [p, order] : live) pa.free(p, order);
    pa.drain();
    expect_valid(pa);
    EXPECT_GT(readonly_pages(pa), 0u);
    // Purging (decommitting) protected free pages keeps them protected and counted.
    pa.purge();
    expect_valid(pa);
}

} // namespace
} // namespace slabkit
