// SLOB internals: first fit inside a page, the free-block encoding (one-unit blocks included),
// merging with both neighbours in every position - before the page's first free block too (seed
// 002's fix) - aligned requests, the three lists, pages given back once all free, constructors
// on every allocation, kmalloc's header, and the invariant checker after stress phases.
#include "designs/designs.hpp"
#include "page/page_allocator.hpp"
#include "slob/slob_internal.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace slabkit::slob {
namespace {

::testing::AssertionResult valid() {
    char report[1024];
    unsigned problems = validate(&arena(), report, sizeof report);
    if (problems == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << problems << " problem(s):\n" << report;
}

using blocks = std::vector<std::pair<unsigned, unsigned>>; // {offset, units}

// A page of the test's own, one free block, on no list: first fit inside it is deterministic.
class SlobPage : public ::testing::Test {
  protected:
    void SetUp() override {
        bootstrap();
        mem_ = page_allocator::global().alloc(0, kAnyNode, 0);
        ASSERT_NE(mem_, nullptr);
        platform::lock_guard guard(lock());
        add_page(mem_, 16); // the small list, at its head
    }
    void TearDown() override {
        // Whatever the test left allocated goes back through block_free, which gives the page
        // back once it is all free.
        for (auto &[p, bytes] : live_) drop(p, bytes);
        EXPECT_TRUE(valid());
    }
    page *pg() { return virt_to_page(mem_); }
    char *base() { return static_cast<char *>(mem_); }
    void *take(size_t bytes, size_t align = 0, size_t offset = 0) {
        platform::lock_guard guard(lock());
        void *p = alloc_in_page(pg(), bytes, align, offset);
        if (p) live_.emplace_back(p, bytes);
        return p;
    }
    void drop(void *p, size_t bytes) {
        void *page_out = nullptr;
        {
            platform::lock_guard guard(lock());
            ASSERT_EQ(block_free(p, bytes, &page_out), free_error::none);
        }
        if (page_out) release_page(page_out);
    }
    void give(void *p) {
        for (size_t i = 0; i < live_.size(); ++i) {
            if (live_[i].first != p) continue;
            size_t bytes = live_[i].second;
            live_.erase(live_.begin() + static_cast<long>(i));
            drop(p, bytes);
            return;
        }
        ADD_FAILURE() << "not live: " << p;
    }
    blocks free_blocks() {
        blocks out;
        platform::lock_guard guard(lock());
        for_each_free_block(
            pg(),
            [](unsigned off, unsigned units, void *arg) {
                static_cast<blocks *>(arg)->emplace_back(off, units);
            },
            &out);
        return out;
    }
    void *mem_ = nullptr;
    std::vector<std::pair<void *, size_t>> live_;
};

TEST_F(SlobPage, FirstFitFromThePageStart) {
    void *a = take(100), *b = take(100), *c = take(100);
    EXPECT_EQ(a, base());
    EXPECT_EQ(b, base() + 100);
    EXPECT_EQ(c, base() + 200);
    give(b);
    EXPECT_EQ(free_blocks(), (blocks{{50, 50}, {150, kPageUnits - 150}}));
    // The first block that fits: the hole b left, for a smaller request.
    void *d = take(60);
    EXPECT_EQ(d, base() + 100);
    EXPECT_EQ(free_blocks(), (blocks{{80, 20}, {150, kPageUnits - 150}}));
    // Too big for the hole: after c.
    void *e = take(200);
    EXPECT_EQ(e, base() + 300);
    EXPECT_TRUE(valid());
}

// Freeing merges with the free block after it, the one before it, both, or neither - and with
// the page's first free block when the freed block lies just before it (seed 002's fix: without
// it the two stayed apart, side by side, and the checker would report them).
TEST_F(SlobPage, MergesWithBothNeighboursInEveryPosition) {
    void *b[6];
    for (void *&p : b) p = take(64); // 32 units each, then the rest of the page
    const unsigned tail = kPageUnits - 6 * 32;
    give(b[1]); // neither neighbour free
    EXPECT_EQ(free_blocks(), (blocks{{32, 32}, {192, tail}}));
    give(b[3]); // neither
    EXPECT_EQ(free_blocks(), (blocks{{32, 32}, {96, 32}, {192, tail}}));
    give(b[2]); // both: 1..3 become one
    EXPECT_EQ(free_blocks(), (blocks{{32, 96}, {192, tail}}));
    give(b[5]); // the one after it (the page's tail)
    EXPECT_EQ(free_blocks(), (blocks{{32, 96}, {160, tail + 32}}));
    give(b[4]); // the one before it and the one after it
    EXPECT_EQ(free_blocks(), (blocks{{32, kPageUnits - 32}}));
    EXPECT_TRUE(valid());
}

TEST_F(SlobPage, FreeJustBeforeTheFirstFreeBlockMerges) {
    void *a = take(64), *b = take(64), *c = take(64);
    (void)c;
    give(b); // the first free block is now b's, at 32
    EXPECT_EQ(free_blocks(), (blocks{{32, 32}, {96, kPageUnits - 96}}));
    give(a); // a ends where the first free block starts
    EXPECT_EQ(free_blocks(), (blocks{{0, 64}, {96, kPageUnits - 96}}));
    EXPECT_TRUE(valid());
}

// A one-unit free block stores the negative offset of the next one (no room for two fields).
TEST_F(SlobPage, OneUnitBlocks) {
    void *a = take(10), *b = take(2), *c = take(10);
    EXPECT_EQ(b, base() + 10);
    (void)a;
    (void)c;
    give(b);
    EXPECT_EQ(free_blocks(), (blocks{{5, 1}, {11, kPageUnits - 11}}));
    {
        platform::lock_guard guard(lock());
        EXPECT_EQ(reinterpret_cast<slobidx *>(base())[5], -11) << "one unit: -(next offset)";
    }
    EXPECT_EQ(take(2), base() + 10); // reused
    EXPECT_EQ(free_blocks(), (blocks{{11, kPageUnits - 11}}));
    EXPECT_TRUE(valid());
}

// Alignment moves the block up inside the first free block that still holds it; the part
// skipped stays free in front of it. kmalloc's form: start + offset aligned (its header).
TEST_F(SlobPage, AlignedRequestsSplitTheHead) {
    void *a = take(10);
    (void)a;
    void *p = take(100, 64);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    EXPECT_EQ(p, base() + 64);
    EXPECT_EQ(free_blocks(), (blocks{{5, 27}, {82, kPageUnits - 82}}));
    void *q = take(40, 16, 8); // q + 8 aligned to 16
    EXPECT_EQ((reinterpret_cast<uintptr_t>(q) + 8) % 16, 0u);
    EXPECT_EQ(q, base() + 24); // in the head's hole: 10 -> 24, leaving 10..24 free
    EXPECT_TRUE(valid());
}

// ---- through caches and kmalloc -----------------------------------------------------------

design_stats arena_stats() {
    design_stats st;
    statistics(&arena(), &st);
    return st;
}

int g_ctor_calls = 0;
void ctor(void *p) {
    ++g_ctor_calls;
    memset(p, 0x3c, 16);
}

TEST(Slob, ThreeListsByRequestSize) {
    bootstrap();
    const char *why = nullptr;
    slob_cache *small = create(cache_args{"slob-l-small", 100, 0, 0, nullptr}, &why);
    slob_cache *medium = create(cache_args{"slob-l-medium", 500, 0, 0, nullptr}, &why);
    slob_cache *large = create(cache_args{"slob-l-large", 2000, 0, 0, nullptr}, &why);
    ASSERT_TRUE(small && medium && large);
    design_stats before = arena_stats();
    std::vector<std::pair<slob_cache *, void *>> objs;
    for (int i = 0; i < 200; ++i)
        for (slob_cache *s : {small, medium, large})
            objs.emplace_back(s, alloc(s, kAnyNode, false));
    design_stats after = arena_stats();
    EXPECT_GT(after.counters[NEW_PAGES], before.counters[NEW_PAGES]);
    // Pages in use end up full (on no list) or on their request's list; each list got some.
    EXPECT_GE(after.counters[PAGES_SMALL] + after.counters[PAGES_MEDIUM] +
                  after.counters[PAGES_LARGE] + after.counters[PAGES_FULL],
              after.counters[NEW_PAGES] - after.counters[PAGES_FREED]);
    EXPECT_TRUE(valid());
    for (auto &[s, p] : objs) free(s, p);
    EXPECT_TRUE(valid());
    for (slob_cache *s : {small, medium, large}) destroy(s);
}

TEST(Slob, PagesGoBackWhenAllTheirBlocksAreFree) {
    bootstrap();
    const char *why = nullptr;
    slob_cache *s = create(cache_args{"slob-back", 300, 0, 0, nullptr}, &why);
    ASSERT_NE(s, nullptr);
    design_stats before = arena_stats();
    std::vector<void *> objs;
    for (int i = 0; i < 500; ++i) objs.push_back(alloc(s, kAnyNode, false));
    EXPECT_GE(arena_stats().counters[NEW_PAGES] - before.counters[NEW_PAGES], 500u * 300 / 4096);
    std::shuffle(objs.begin(), objs.end(), std::mt19937(7));
    for (void *p : objs) free(s, p);
    design_stats after = arena_stats();
    // Every page this test made went back (other pages may have come and gone meanwhile).
    EXPECT_EQ(after.counters[NEW_PAGES] - before.counters[NEW_PAGES],
              after.counters[PAGES_FREED] - before.counters[PAGES_FREED]);
    EXPECT_GT(after.counters[MERGES], before.counters[MERGES]);
    EXPECT_TRUE(valid());
    destroy(s);
}

TEST(Slob, ConstructorRunsOnEveryAllocation) {
    bootstrap();
    const char *why = nullptr;
    slob_cache *s = create(cache_args{"slob-ctor", 64, 0, 0, ctor}, &why);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->size, 64u); // no free-pointer word: SLOB keeps free blocks' records in them
    int before = g_ctor_calls;
    for (int i = 0; i < 5; ++i) {
        void *p = alloc(s, kAnyNode, false);
        EXPECT_EQ(static_cast<unsigned char *>(p)[15], 0x3c);
        free(s, p);
    }
    EXPECT_EQ(g_ctor_calls - before, 5);
    destroy(s);
}

TEST(Slob, KmallocHeaderHoldsTheSize) {
    bootstrap();
    void *p = kmalloc(100, 16, false, kAnyNode, 0);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 16, 0u);
    EXPECT_EQ(usable_size(&arena(), p), 104u);       // 100 + 8-byte header, rounded to 16, less it
    void *q = kmalloc(1024, 16, false, kAnyNode, 0); // a power of two: naturally aligned
    EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % 1024, 0u);
    EXPECT_EQ(usable_size(&arena(), q), 1024u);
    EXPECT_EQ(usable_size(&arena(), static_cast<char *>(p) + 16), 0u); // no header there
    free_to_slab(&arena(), virt_to_page(p), p);
    free_to_slab(&arena(), virt_to_page(q), q);
    EXPECT_TRUE(valid());
}

TEST(SlobDeathTest, DoubleFreeIsCaughtWhenItOverlapsAFreeBlock) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    bootstrap();
    const char *why = nullptr;
    slob_cache *s = create(cache_args{"slob-double", 48, 0, 0, nullptr}, &why);
    ASSERT_NE(s, nullptr);
    void *a = alloc(s, kAnyNode, false);
    void *b = alloc(s, kAnyNode, false);
    free(s, a);
    EXPECT_DEATH(free(s, a), "slob-double.*double free");
    free(s, b);
    destroy(s);
}

// Several threads, caches of several sizes and kmalloc, the checker after each phase.
TEST(Slob, StressKeepsInvariants) {
    bootstrap();
    const char *why = nullptr;
    std::vector<slob_cache *> caches;
    for (size_t size : {8, 24, 100, 250, 700, 1500, 3000, 5000})
        caches.push_back(create(
            cache_args{("slob-st-" + std::to_string(size)).c_str(), size, 0, 0, nullptr}, &why));
    for (int phase = 0; phase < 3; ++phase) {
        std::vector<std::thread> threads;
        std::mutex mu;
        std::vector<std::pair<int, void *>> handed; // cache index (-1: kmalloc), object
        for (int t = 0; t < 4; ++t) {
            threads.emplace_back([&, t] {
                std::mt19937 rng(static_cast<unsigned>(phase * 7 + t));
                std::vector<std::pair<int, void *>> mine;
                for (int i = 0; i < 4000; ++i) {
                    if (!mine.empty() && rng() % 2) {
                        size_t k = rng() % mine.size();
                        auto [ci, p] = mine[k];
                        if (ci < 0)
                            free_to_slab(&arena(), virt_to_page(p), p);
                        else
                            free(caches[static_cast<size_t>(ci)], p);
                        mine[k] = mine.back();
                        mine.pop_back();
                    } else if (rng() % 3 == 0) {
                        mine.emplace_back(-1, kmalloc(1 + rng() % 2000, 16, false, kAnyNode, 0));
                    } else {
                        int ci = static_cast<int>(rng() % caches.size());
                        mine.emplace_back(
                            ci, alloc(caches[static_cast<size_t>(ci)], kAnyNode, rng() % 5 == 0));
                    }
                }
                std::lock_guard<std::mutex> g(mu);
                handed.insert(handed.end(), mine.begin(), mine.end());
            });
        }
        for (auto &th : threads) th.join();
        EXPECT_TRUE(valid()) << "phase " << phase;
        for (auto [ci, p] : handed) {
            if (ci < 0)
                free_to_slab(&arena(), virt_to_page(p), p);
            else
                free(caches[static_cast<size_t>(ci)], p);
        }
        EXPECT_TRUE(valid()) << "phase " << phase;
    }
    for (slob_cache *s : caches) {
        EXPECT_EQ(s->live, 0u);
        destroy(s);
    }
}

} // namespace
} // namespace slabkit::slob
