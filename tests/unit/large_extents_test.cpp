// The large blocks' free ranges (kmalloc/large_extents.hpp): merging, placing and taking, and a
// randomized run against a model that keeps one state per page.
#include "kmalloc/large_extents.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace slabkit::large {
namespace {

constexpr uintptr_t kBase = uintptr_t{1} << 40;
constexpr size_t kPg = 4096;

TEST(LargeExtents, NeighboursOfOneKindMergeAndOfTwoKindsDoNot) {
    extent_map m;
    ASSERT_TRUE(m.add(kBase, 4 * kPg, true, 10));
    ASSERT_TRUE(m.add(kBase + 8 * kPg, 4 * kPg, true, 30));
    EXPECT_EQ(m.count(), 2u);
    ASSERT_TRUE(m.add(kBase + 4 * kPg, 4 * kPg, true, 20)); // fills the gap: one range
    ASSERT_EQ(m.count(), 1u);
    EXPECT_EQ(m[0].addr, kBase);
    EXPECT_EQ(m[0].size, 12 * kPg);
    EXPECT_EQ(m[0].freed_ms, 30u); // the newest free
    EXPECT_EQ(m.dirty_bytes(), 12 * kPg);
    ASSERT_TRUE(m.add(kBase + 12 * kPg, 4 * kPg, false, 0)); // clean beside dirty: two ranges
    EXPECT_EQ(m.count(), 2u);
    EXPECT_EQ(m.dirty_bytes(), 12 * kPg);
    // The middle of the dirty range goes clean: dirty, clean, dirty, clean merged with the last.
    ASSERT_TRUE(m.make_clean(0, kBase + 4 * kPg, 4 * kPg));
    EXPECT_EQ(m.count(), 4u);
    EXPECT_EQ(m.dirty_bytes(), 8 * kPg);
    ASSERT_TRUE(m.make_clean(2, kBase + 8 * kPg, 4 * kPg));
    ASSERT_EQ(m.count(), 2u); // dirty [0, 4), clean [4, 16)
    EXPECT_EQ(m[1].addr, kBase + 4 * kPg);
    EXPECT_EQ(m[1].size, 12 * kPg);
    EXPECT_FALSE(m[1].dirty);
    // Growing a range counts its new bytes in its kind.
    m.grow(1, 4 * kPg);
    EXPECT_EQ(m.dirty_bytes(), 4 * kPg);
    m.grow(0, 0);
    ASSERT_TRUE(m.add(kBase + 32 * kPg, 2 * kPg, true, 0));
    m.grow(2, 2 * kPg);
    EXPECT_EQ(m.dirty_bytes(), 8 * kPg);
    ASSERT_TRUE(m.take_span(kBase + 32 * kPg, 4 * kPg));
    EXPECT_EQ(m.dirty_bytes(), 4 * kPg);
}

TEST(LargeExtents, PlaceCoversTheMostDirtyBytesThenTheShortestRun) {
    extent_map m;
    // A clean run of 16 pages, then apart a run of clean 4 + dirty 6 pages.
    ASSERT_TRUE(m.add(kBase, 16 * kPg, false, 0));
    ASSERT_TRUE(m.add(kBase + 32 * kPg, 4 * kPg, false, 0));
    ASSERT_TRUE(m.add(kBase + 36 * kPg, 6 * kPg, true, 5));
    size_t dirty = 0;
    // 6 pages: on the dirty range, all of it dirty.
    EXPECT_EQ(m.place(6 * kPg, kPg, kBase + 100 * kPg, kBase + 200 * kPg, &dirty),
              kBase + 36 * kPg);
    EXPECT_EQ(dirty, 6 * kPg);
    // 10 pages: the second run from its start covers the 6 dirty ones.
    EXPECT_EQ(m.place(10 * kPg, kPg, kBase + 100 * kPg, kBase + 200 * kPg, &dirty),
              kBase + 32 * kPg);
    EXPECT_EQ(dirty, 6 * kPg);
    // 12 pages: only the first run holds it, no dirty byte.
    EXPECT_EQ(m.place(12 * kPg, kPg, kBase + 100 * kPg, kBase + 200 * kPg, &dirty), kBase);
    EXPECT_EQ(dirty, 0u);
    // 20 pages: nothing holds it, unless the second run ends at the top and may grow.
    EXPECT_EQ(m.place(20 * kPg, kPg, kBase + 100 * kPg, kBase + 200 * kPg, &dirty), 0u);
    EXPECT_EQ(m.place(20 * kPg, kPg, kBase + 42 * kPg, kBase + 200 * kPg, &dirty),
              kBase + 32 * kPg);
    // Alignment: 8 pages at a multiple of 8 pages start the second run (4 dirty pages); at a
    // multiple of 64 pages, only the first run's start.
    EXPECT_EQ(m.place(8 * kPg, 8 * kPg, kBase + 100 * kPg, kBase + 200 * kPg, &dirty),
              kBase + 32 * kPg);
    EXPECT_EQ(dirty, 4 * kPg);
    EXPECT_EQ(m.place(8 * kPg, 64 * kPg, kBase + 100 * kPg, kBase + 200 * kPg, &dirty), kBase);
    // take_span across the clean and the dirty range of the second run.
    ASSERT_TRUE(m.take_span(kBase + 34 * kPg, 6 * kPg));
    ASSERT_EQ(m.count(), 3u);
    EXPECT_EQ(m[1].addr, kBase + 32 * kPg);
    EXPECT_EQ(m[1].size, 2 * kPg);
    EXPECT_EQ(m[2].addr, kBase + 40 * kPg);
    EXPECT_EQ(m[2].size, 2 * kPg);
    EXPECT_TRUE(m[2].dirty);
    EXPECT_EQ(m.dirty_bytes(), 2 * kPg);
}

TEST(LargeExtents, AFullMapRefusesWhatNeedsARangeMore) {
    extent_map m;
    for (unsigned i = 0; i < extent_map::kCapacity; ++i)
        ASSERT_TRUE(m.add(kBase + 2 * i * kPg, kPg, i % 2, 0));
    EXPECT_FALSE(m.add(kBase + 2 * extent_map::kCapacity * kPg + kPg, kPg, true, 0));
    // One that touches a range of its kind merges and needs none (ASan caught a first version
    // writing one entry past the array here).
    EXPECT_TRUE(m.add(kBase + kPg, kPg, false, 0));
    EXPECT_EQ(m.count(), extent_map::kCapacity);
    EXPECT_EQ(m[0].size, 2 * kPg);
    // And one after a range of its kind (the next being of the other kind).
    EXPECT_TRUE(m.add(kBase + 3 * kPg, kPg, true, 0));
    EXPECT_EQ(m.count(), extent_map::kCapacity);
    EXPECT_EQ(m[1].addr, kBase + 2 * kPg);
    EXPECT_EQ(m[1].size, 2 * kPg);
    // A split in the middle needs one more.
    extent_map f;
    ASSERT_TRUE(f.add(kBase, 3 * kPg, true, 0));
    for (unsigned i = 1; i < extent_map::kCapacity; ++i)
        ASSERT_TRUE(f.add(kBase + (4 + 2 * i) * kPg, kPg, true, 0));
    EXPECT_FALSE(f.take_span(kBase + kPg, kPg));
    EXPECT_FALSE(f.make_clean(0, kBase + kPg, kPg));
    EXPECT_TRUE(f.take_span(kBase, kPg)); // at an end: no split
    EXPECT_EQ(f[0].addr, kBase + kPg);
}

// Every operation against a model with one state per page (in use, dirty, clean).
TEST(LargeExtents, RandomOperationsMatchAPageModel) {
    enum : uint8_t { kUsed, kDirty, kClean };
    constexpr size_t kPages = 512;
    std::vector<uint8_t> model(kPages, kUsed);
    extent_map m;
    std::mt19937 rng(2026);
    auto check = [&](int step) {
        std::vector<uint8_t> seen(kPages, kUsed);
        uint64_t dirty = 0;
        for (unsigned i = 0; i < m.count(); ++i) {
            if (i > 0) {
                ASSERT_LE(m[i - 1].end(), m[i].addr) << step;
                if (m[i - 1].end() == m[i].addr) {
                    ASSERT_NE(m[i - 1].dirty, m[i].dirty) << "unmerged neighbours, step " << step;
                }
            }
            for (uintptr_t a = m[i].addr; a < m[i].end(); a += kPg)
                seen[(a - kBase) / kPg] = m[i].dirty ? kDirty : kClean;
            if (m[i].dirty) dirty += m[i].size;
        }
        ASSERT_EQ(seen, model) << "step " << step;
        ASSERT_EQ(m.dirty_bytes(), dirty) << step;
    };
    for (int step = 0; step < 20000; ++step) {
        const size_t first = rng() % kPages, n = 1 + rng() % 16;
        if (first + n > kPages) continue;
        const uintptr_t at = kBase + first * kPg;
        switch (rng() % 3) {
        case 0: { // free a used span
            bool used = true;
            for (size_t p = first; p < first + n; ++p) used &= model[p] == kUsed;
            if (!used) break;
            const bool dirty = rng() % 2;
            if (m.add(at, n * kPg, dirty, static_cast<uint64_t>(step)))
                for (size_t p = first; p < first + n; ++p) model[p] = dirty ? kDirty : kClean;
            break;
        }
        case 1: { // place and take
            size_t dirty = 0;
            const uintptr_t got = m.place(n * kPg, kPg << (rng() % 3), kBase + kPages * kPg,
                                          kBase + kPages * kPg, &dirty);
            if (!got) break;
            size_t want = 0;
            for (size_t p = (got - kBase) / kPg; p < (got - kBase) / kPg + n; ++p) {
                ASSERT_NE(model[p], kUsed) << "placed over a used page, step " << step;
                want += model[p] == kDirty ? kPg : 0;
            }
            ASSERT_EQ(dirty, want) << step;
            if (m.take_span(got, n * kPg))
                for (size_t p = (got - kBase) / kPg; p < (got - kBase) / kPg + n; ++p)
                    model[p] = kUsed;
            break;
        }
        default: { // the oldest dirty range, part of it clean
            const int i = m.oldest_dirty();
            if (i < 0) break;
            const extent x = m[static_cast<unsigned>(i)];
            const size_t pages = x.size / kPg, k = rng() % pages, len = 1 + rng() % (pages - k);
            if (m.make_clean(static_cast<unsigned>(i), x.addr + k * kPg, len * kPg))
                for (size_t p = (x.addr - kBase) / kPg + k; p < (x.addr - kBase) / kPg + k + len;
                     ++p)
                    model[p] = kClean;
            break;
        }
        }
        check(step);
        if (HasFatalFailure()) return;
    }
}

} // namespace
} // namespace slabkit::large
