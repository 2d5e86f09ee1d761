// kmalloc and friends through the public C API, in the process's design (SLABKIT_ALLOCATOR;
// ctest runs these tests once per design): every size up to 10000 and many up to 64 MiB, ksize,
// alignment, zero and impossible sizes, kzalloc, kcalloc, krealloc, kmalloc_node.
#include "api/api_support.hpp"

#include <slabkit/slabkit.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#ifndef SLABKIT_API_TEST_DESIGNS
#define SLABKIT_API_TEST_DESIGNS "slqb"
#endif

namespace slabkit::apitest {
namespace {

constexpr size_t kClasses[] = {8, 16, 32, 64, 96, 128, 192, 256, 512, 1024, 2048, 4096, 8192};
constexpr size_t kMiB = size_t{1} << 20;

// SLOB serves kmalloc itself as the kernel's SLOB did (mm/slob.c of v6.3): an 8-byte header
// holding the size asked for before each block, below a page less those 8 bytes; its ksize is
// the size asked for in whole 2-byte units (the kernel's __ksize), not a class size, and its
// blocks are 8-aligned (power-of-two sizes aligned to themselves), not 16 from 16 bytes up.
bool slob() {
    return std::string(slabkit_allocator()) == "slob";
}
size_t slob_ksize(size_t size) {
    return (size + 1) & ~size_t{1};
}
constexpr size_t kSlobLimit = 4096 - 8; // from here, page blocks

size_t class_of(size_t size) {
    for (size_t c : kClasses)
        if (size <= c) return c;
    return 0;
}

// SLAB gives objects under 16 bytes 16-byte slots (one-byte index arrays, as the kernel's SLAB
// on x86-64: docs/slab.md), so kmalloc-8's blocks have 16 usable bytes there.
size_t ksize_of_class(size_t c) {
    return c < 16 && std::string(slabkit_allocator()) == "slab" ? 16 : c;
}

bool is_pow2(size_t n) {
    return n && (n & (n - 1)) == 0;
}

// The alignment the header promises for a block of `size` bytes (up to 4 MiB: page blocks are
// naturally aligned too; above, blocks come from the OS and are page-aligned).
size_t promised_align(size_t size) {
    size_t a = size >= 16 && !slob() ? 16 : 8;
    if (is_pow2(size) && size <= 4 * kMiB) a = std::max(a, size);
    if (size > 4 * kMiB) a = 4096;
    return a;
}

::testing::AssertionResult good_block(const void *p, size_t size) {
    if (!p) return ::testing::AssertionFailure() << "kmalloc(" << size << ") == NULL";
    if (p == SLABKIT_ZERO_SIZE_PTR)
        return ::testing::AssertionFailure() << "kmalloc(" << size << ") == ZERO_SIZE_PTR";
    size_t ks = slabkit_ksize(p);
    if (ks < size) return ::testing::AssertionFailure() << "ksize " << ks << " < size " << size;
    size_t a = promised_align(size);
    if (addr(p) % a != 0)
        return ::testing::AssertionFailure()
               << "kmalloc(" << size << ") = " << p << ", not " << a << "-aligned";
    return ::testing::AssertionSuccess();
}

// ---- designs ---------------------------------------------------------------------------------

TEST(KmallocDesign, ProcessDesignIsTheEnvironments) {
    const char *env = std::getenv("SLABKIT_ALLOCATOR");
    ASSERT_NE(slabkit_allocator(), nullptr);
    EXPECT_STREQ(slabkit_allocator(), env && *env ? env : "slqb");
    std::vector<std::string> d = designs();
    EXPECT_NE(std::find(d.begin(), d.end(), slabkit_allocator()), d.end());
}

TEST(KmallocDesign, DesignListIsWellFormed) {
    std::vector<std::string> d = designs();
    ASSERT_FALSE(d.empty());
    EXPECT_NE(std::find(d.begin(), d.end(), "slqb"), d.end());
    EXPECT_EQ(std::set<std::string>(d.begin(), d.end()).size(), d.size());
    // ctest runs the kmalloc tests once per design named in tests/api/CMakeLists.txt: that list
    // must be the build's.
    std::string listed = SLABKIT_API_TEST_DESIGNS;
    std::vector<std::string> ctest_designs;
    for (size_t pos = 0; pos < listed.size();) {
        size_t end = listed.find(' ', pos);
        if (end == std::string::npos) end = listed.size();
        if (end > pos) ctest_designs.push_back(listed.substr(pos, end - pos));
        pos = end + 1;
    }
    std::sort(d.begin(), d.end());
    std::sort(ctest_designs.begin(), ctest_designs.end());
    EXPECT_EQ(d, ctest_designs) << "update slabkit_api_designs in tests/api/CMakeLists.txt";
}

// ---- zero and impossible sizes -----------------------------------------------------------------

TEST(Kmalloc, ZeroSizeGivesZeroSizePtr) {
    EXPECT_EQ(slabkit_kmalloc(0, 0), SLABKIT_ZERO_SIZE_PTR);
    EXPECT_EQ(slabkit_kmalloc(0, SLABKIT_GFP_ZERO), SLABKIT_ZERO_SIZE_PTR);
    EXPECT_EQ(slabkit_kzalloc(0, 0), SLABKIT_ZERO_SIZE_PTR);
    EXPECT_EQ(slabkit_kcalloc(0, 8, 0), SLABKIT_ZERO_SIZE_PTR);
    EXPECT_EQ(slabkit_kcalloc(8, 0, 0), SLABKIT_ZERO_SIZE_PTR);
    EXPECT_EQ(slabkit_kmalloc_node(0, 0, SLABKIT_ANY_NODE), SLABKIT_ZERO_SIZE_PTR);
    EXPECT_EQ(slabkit_kmalloc_node(0, 0, 0), SLABKIT_ZERO_SIZE_PTR);
    EXPECT_EQ(slabkit_ksize(SLABKIT_ZERO_SIZE_PTR), 0u);
    EXPECT_EQ(slabkit_ksize(nullptr), 0u);
    slabkit_kfree(SLABKIT_ZERO_SIZE_PTR);
    slabkit_kfree(nullptr);
}

TEST(Kmalloc, ImpossibleSizesGiveNull) {
    ::testing::internal::CaptureStderr();
    for (size_t size : {SIZE_MAX, SIZE_MAX - 4095, SIZE_MAX / 2, SIZE_MAX / 2 + 1, size_t{1} << 62,
                        size_t{1} << 48}) {
        EXPECT_EQ(slabkit_kmalloc(size, 0), nullptr) << size;
        EXPECT_EQ(slabkit_kzalloc(size, 0), nullptr) << size;
        EXPECT_EQ(slabkit_kmalloc_node(size, 0, SLABKIT_ANY_NODE), nullptr) << size;
        EXPECT_EQ(slabkit_kmalloc_node(size, 0, 0), nullptr) << size;
        EXPECT_EQ(slabkit_kcalloc(1, size, 0), nullptr) << size;
        EXPECT_EQ(slabkit_krealloc(nullptr, size, 0), nullptr) << size;
    }
    ::testing::internal::GetCapturedStderr();
    // Still working afterwards.
    void *p = slabkit_kmalloc(100, 0);
    EXPECT_TRUE(good_block(p, 100));
    slabkit_kfree(p);
}

// ---- every size ------------------------------------------------------------------------------

TEST(Kmalloc, EverySizeUpTo10000) {
    for (size_t size = 1; size <= 10000; ++size) {
        void *p = slabkit_kmalloc(size, 0);
        ASSERT_TRUE(good_block(p, size));
        fill(p, size, size);
        ASSERT_TRUE(holds(p, size, size));
        // The whole usable size is usable.
        size_t ks = slabkit_ksize(p);
        fill(p, ks, size + 1);
        ASSERT_TRUE(holds(p, ks, size + 1));
        slabkit_kfree(p);
    }
}

// All sizes 1..10000 live at once: no block overlaps another over its ksize.
TEST(Kmalloc, EverySizeLiveAtOnceDoesNotOverlap) {
    std::vector<void *> blocks(10001, nullptr);
    for (size_t size = 1; size <= 10000; ++size) {
        blocks[size] = slabkit_kmalloc(size, 0);
        ASSERT_TRUE(good_block(blocks[size], size));
        fill(blocks[size], slabkit_ksize(blocks[size]), size);
    }
    for (size_t size = 1; size <= 10000; ++size)
        ASSERT_TRUE(holds(blocks[size], slabkit_ksize(blocks[size]), size));
    std::vector<std::pair<uintptr_t, size_t>> spans;
    for (size_t size = 1; size <= 10000; ++size)
        spans.emplace_back(addr(blocks[size]), slabkit_ksize(blocks[size]));
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i)
        ASSERT_GE(spans[i].first, spans[i - 1].first + spans[i - 1].second) << "overlap";
    // Free in a scattered order.
    for (size_t step : {7, 3, 1})
        for (size_t size = step; size <= 10000; size += step)
            if (blocks[size]) {
                slabkit_kfree(blocks[size]);
                blocks[size] = nullptr;
            }
    for (void *p : blocks) EXPECT_EQ(p, nullptr);
}

TEST(Kmalloc, KsizeIsTheSizeClass) {
    if (slob()) {
        for (size_t size = 1; size < kSlobLimit; ++size) {
            void *p = slabkit_kmalloc(size, 0);
            ASSERT_NE(p, nullptr);
            ASSERT_EQ(slabkit_ksize(p), slob_ksize(size)) << "size " << size;
            slabkit_kfree(p);
        }
        for (size_t size = kSlobLimit; size <= 4096; ++size) { // a page block
            void *p = slabkit_kmalloc(size, 0);
            ASSERT_NE(p, nullptr);
            ASSERT_EQ(slabkit_ksize(p), 4096u) << "size " << size;
            slabkit_kfree(p);
        }
        return;
    }
    for (size_t c : kClasses) {
        void *p = slabkit_kmalloc(c, 0);
        ASSERT_NE(p, nullptr);
        EXPECT_EQ(slabkit_ksize(p), ksize_of_class(c));
        slabkit_kfree(p);
    }
    for (size_t size = 1; size <= SLABKIT_KMALLOC_MAX_CACHE_SIZE; ++size) {
        void *p = slabkit_kmalloc(size, 0);
        ASSERT_NE(p, nullptr);
        ASSERT_EQ(slabkit_ksize(p), ksize_of_class(class_of(size))) << "size " << size;
        slabkit_kfree(p);
    }
}

// Power-of-two sizes are naturally aligned, including page blocks up to 4 MiB.
TEST(Kmalloc, PowerOfTwoSizesAreNaturallyAligned) {
    for (size_t size = 8; size <= 4 * kMiB; size *= 2) {
        std::vector<void *> blocks;
        int n = size <= 8192 ? 50 : 3;
        for (int i = 0; i < n; ++i) {
            void *p = slabkit_kmalloc(size, 0);
            ASSERT_NE(p, nullptr) << size;
            EXPECT_EQ(addr(p) % size, 0u) << "kmalloc(" << size << ") = " << p;
            blocks.push_back(p);
        }
        for (void *p : blocks) slabkit_kfree(p);
    }
}

// Sizes around every class boundary, every page order and the 4 MiB limit, up to 64 MiB.
std::vector<size_t> large_sizes() {
    std::vector<size_t> sizes;
    for (size_t c : kClasses)
        for (size_t s : {c - 1, c, c + 1}) sizes.push_back(s);
    for (unsigned order = 0; order <= 11; ++order) {
        size_t b = size_t{4096} << order;
        for (size_t s : {b - 4096 + 1, b - 1, b, b + 1, b + 4096, b + b / 2}) sizes.push_back(s);
    }
    for (size_t s : {5 * kMiB, 8 * kMiB - 1, 8 * kMiB, 16 * kMiB + 12345, 32 * kMiB, 64 * kMiB})
        sizes.push_back(s);
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    return sizes;
}

TEST(Kmalloc, LargeSizesUpTo64MiB) {
    for (size_t size : large_sizes()) {
        page_stats_t before = page_stats();
        void *p = slabkit_kmalloc(size, 0);
        ASSERT_TRUE(good_block(p, size)) << size;
        fill(p, size, size);
        if (size > 4 * kMiB) {
            EXPECT_GE(page_stats().large_os_bytes, before.large_os_bytes + size) << size;
        }
        ASSERT_TRUE(holds(p, size, size)) << size;
        size_t ks = slabkit_ksize(p);
        EXPECT_LT(ks, 2 * size + 4096) << size;
        // The last usable byte is writable.
        static_cast<unsigned char *>(p)[ks - 1] = 0x5a;
        slabkit_kfree(p);
        if (size > 4 * kMiB) {
            EXPECT_EQ(page_stats().large_os_bytes, before.large_os_bytes);
        }
    }
}

TEST(Kmalloc, LargeBlocksLiveAtOnce) {
    std::vector<void *> blocks;
    std::vector<size_t> sizes;
    for (size_t i = 0; i < 24; ++i) {
        size_t size = 9000 + i * 97 * 1024 + (i % 3 == 0 ? 5 * kMiB : 0);
        void *p = slabkit_kmalloc(size, 0);
        ASSERT_TRUE(good_block(p, size));
        fill(p, size, i);
        blocks.push_back(p);
        sizes.push_back(size);
    }
    for (size_t i = 0; i < blocks.size(); ++i) ASSERT_TRUE(holds(blocks[i], sizes[i], i));
    std::vector<std::pair<uintptr_t, size_t>> spans;
    for (void *p : blocks) spans.emplace_back(addr(p), slabkit_ksize(p));
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i)
        ASSERT_GE(spans[i].first, spans[i - 1].first + spans[i - 1].second) << "overlap";
    for (void *p : blocks) slabkit_kfree(p);
}

// ---- zeroing -----------------------------------------------------------------------------------

std::vector<size_t> zero_sizes() {
    std::vector<size_t> sizes;
    for (size_t s = 1; s <= 10000; s += 37) sizes.push_back(s);
    for (size_t c : kClasses) sizes.push_back(c);
    for (size_t s : {size_t{20000}, size_t{100000}, size_t{1000000}, 4 * kMiB, 5 * kMiB})
        sizes.push_back(s);
    return sizes;
}

TEST(Kmalloc, KzallocAndGfpZeroGiveZeroedMemory) {
    for (size_t size : zero_sizes()) {
        // Dirty blocks of the size first, so that the zeroed ones are likely reused memory.
        std::vector<void *> dirty;
        for (int i = 0; i < 4; ++i) {
            void *p = slabkit_kmalloc(size, 0);
            ASSERT_NE(p, nullptr);
            std::memset(p, 0xee, slabkit_ksize(p));
            dirty.push_back(p);
        }
        for (void *p : dirty) slabkit_kfree(p);
        void *z = slabkit_kzalloc(size, 0);
        void *g = slabkit_kmalloc(size, SLABKIT_GFP_ZERO);
        void *n = slabkit_kmalloc_node(size, SLABKIT_GFP_ZERO, 0);
        ASSERT_TRUE(good_block(z, size));
        ASSERT_TRUE(good_block(g, size));
        ASSERT_TRUE(good_block(n, size));
        EXPECT_TRUE(all_zero(z, size)) << size;
        EXPECT_TRUE(all_zero(g, size)) << size;
        EXPECT_TRUE(all_zero(n, size)) << size;
        slabkit_kfree(z);
        slabkit_kfree(g);
        slabkit_kfree(n);
    }
}

TEST(Kmalloc, KcallocZeroesAndChecksOverflow) {
    for (auto [n, size] : std::vector<std::pair<size_t, size_t>>{
             {1, 1}, {3, 7}, {100, 40}, {1000, 8}, {7, 1000}, {300, 4096}, {2, 3 * kMiB}}) {
        void *d = slabkit_kmalloc(n * size, 0);
        ASSERT_NE(d, nullptr);
        std::memset(d, 0x77, n * size);
        slabkit_kfree(d);
        void *p = slabkit_kcalloc(n, size, 0);
        ASSERT_TRUE(good_block(p, n * size));
        EXPECT_TRUE(all_zero(p, n * size)) << n << " x " << size;
        slabkit_kfree(p);
    }
    ::testing::internal::CaptureStderr();
    for (auto [n, size] :
         std::vector<std::pair<size_t, size_t>>{{SIZE_MAX, 2},
                                                {2, SIZE_MAX},
                                                {size_t{1} << 32, size_t{1} << 32},
                                                {SIZE_MAX / 2 + 1, 2},
                                                {(SIZE_MAX / 8) + 1, 8},
                                                {3, SIZE_MAX / 3 + 1},
                                                {size_t{1} << 33, size_t{1} << 31}}) {
        EXPECT_EQ(slabkit_kcalloc(n, size, 0), nullptr) << n << " x " << size;
    }
    ::testing::internal::GetCapturedStderr();
}

// ---- krealloc ----------------------------------------------------------------------------------

TEST(Kmalloc, KreallocStaysInPlaceWithinTheBlock) {
    void *p = slabkit_kmalloc(100, 0);
    ASSERT_TRUE(good_block(p, 100));
    const size_t ks100 = slabkit_ksize(p);
    ASSERT_EQ(ks100, slob() ? slob_ksize(100) : 128u);
    fill(p, 100, 1);
    EXPECT_EQ(slabkit_krealloc(p, (100 + ks100) / 2, 0), p);
    EXPECT_TRUE(holds(p, 100, 1));
    EXPECT_EQ(slabkit_krealloc(p, ks100, 0), p);
    EXPECT_TRUE(holds(p, 100, 1));
    EXPECT_EQ(slabkit_krealloc(p, 50, 0), p); // shrinking
    EXPECT_TRUE(holds(p, 50, 1));
    EXPECT_EQ(slabkit_krealloc(p, 1, 0), p);
    EXPECT_TRUE(holds(p, 1, 1));
    slabkit_kfree(p);

    // A page block: in place up to its ksize, and when shrinking.
    void *big = slabkit_kmalloc(100000, 0);
    ASSERT_TRUE(good_block(big, 100000));
    fill(big, 100000, 2);
    size_t ks = slabkit_ksize(big);
    EXPECT_EQ(slabkit_krealloc(big, ks, 0), big);
    EXPECT_TRUE(holds(big, 100000, 2));
    EXPECT_EQ(slabkit_krealloc(big, 90000, 0), big);
    EXPECT_TRUE(holds(big, 90000, 2));
    slabkit_kfree(big);
}

// "in place when the new size fits its block (shrinking included)": also when a page block
// shrinks to a size a slab class would serve.
TEST(Kmalloc, KreallocShrinkingAPageBlockStaysInPlace) {
    for (size_t size : {size_t{20000}, size_t{256} << 10, kMiB, 5 * kMiB}) {
        void *p = slabkit_kmalloc(size, 0);
        ASSERT_TRUE(good_block(p, size));
        fill(p, size, 6);
        void *q = slabkit_krealloc(p, 100, 0);
        ASSERT_NE(q, nullptr);
        EXPECT_EQ(q, p) << size << " -> 100 moved";
        EXPECT_TRUE(holds(q, 100, 6));
        slabkit_kfree(q);
    }
}

TEST(Kmalloc, KreallocMovesAndKeepsContents) {
    // Growth through every class and into pages and OS blocks.
    size_t size = 1;
    void *p = slabkit_kmalloc(size, 0);
    ASSERT_NE(p, nullptr);
    fill(p, size, 42);
    while (size < 10 * kMiB) {
        size_t next = size + size / 2 + 1;
        void *q = slabkit_krealloc(p, next, 0);
        ASSERT_TRUE(good_block(q, next)) << size << " -> " << next;
        ASSERT_TRUE(holds(q, size, 42)) << size << " -> " << next;
        fill(q, next, 42);
        p = q;
        size = next;
    }
    // And back down: contents of the new size kept (moved or not).
    while (size > 2) {
        size_t next = size / 3;
        void *q = slabkit_krealloc(p, next, 0);
        ASSERT_TRUE(good_block(q, next)) << size << " -> " << next;
        ASSERT_TRUE(holds(q, next, 42)) << size << " -> " << next;
        p = q;
        size = next;
    }
    slabkit_kfree(p);
}

TEST(Kmalloc, KreallocToALargerClassMoves) {
    void *p = slabkit_kmalloc(100, 0);
    ASSERT_NE(p, nullptr);
    fill(p, 100, 3);
    void *q = slabkit_krealloc(p, 129, 0);
    ASSERT_TRUE(good_block(q, 129));
    EXPECT_NE(q, p);
    EXPECT_TRUE(holds(q, 100, 3));
    EXPECT_EQ(slabkit_ksize(q), slob() ? slob_ksize(129) : 192u);
    slabkit_kfree(q);
}

TEST(Kmalloc, KreallocEdgeCases) {
    // NULL: kmalloc.
    void *p = slabkit_krealloc(nullptr, 300, 0);
    ASSERT_TRUE(good_block(p, 300));
    fill(p, 300, 4);
    // Impossible size: NULL, p untouched.
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(slabkit_krealloc(p, SIZE_MAX, 0), nullptr);
    EXPECT_EQ(slabkit_krealloc(p, SIZE_MAX / 2, 0), nullptr);
    ::testing::internal::GetCapturedStderr();
    EXPECT_TRUE(holds(p, 300, 4));
    EXPECT_EQ(slabkit_ksize(p), slob() ? slob_ksize(300) : 512u);
    // Zero: frees p, ZERO_SIZE_PTR.
    EXPECT_EQ(slabkit_krealloc(p, 0, 0), SLABKIT_ZERO_SIZE_PTR);
    EXPECT_EQ(slabkit_krealloc(nullptr, 0, 0), SLABKIT_ZERO_SIZE_PTR);
    // ZERO_SIZE_PTR grows like NULL.
    void *z = slabkit_krealloc(SLABKIT_ZERO_SIZE_PTR, 40, 0);
    ASSERT_TRUE(good_block(z, 40));
    fill(z, 40, 5);
    EXPECT_TRUE(holds(z, 40, 5));
    EXPECT_EQ(slabkit_krealloc(z, 0, 0), SLABKIT_ZERO_SIZE_PTR);
    EXPECT_EQ(slabkit_krealloc(SLABKIT_ZERO_SIZE_PTR, 0, 0), SLABKIT_ZERO_SIZE_PTR);
}

// ---- nodes and threads -------------------------------------------------------------------------

TEST(Kmalloc, KmallocNode) {
    for (size_t size : {size_t{8}, size_t{100}, size_t{5000}, size_t{100000}, 5 * kMiB}) {
        for (int node : {SLABKIT_ANY_NODE, 0}) {
            void *p = slabkit_kmalloc_node(size, 0, node);
            ASSERT_TRUE(good_block(p, size)) << "node " << node;
            fill(p, size, size);
            EXPECT_TRUE(holds(p, size, size));
            slabkit_kfree(p);
        }
    }
}

TEST(Kmalloc, FreedByAnotherThread) {
    std::vector<void *> blocks;
    for (size_t i = 0; i < 2000; ++i) {
        size_t size = 1 + (i * 37) % 9000;
        void *p = slabkit_kmalloc(size, 0);
        ASSERT_NE(p, nullptr);
        fill(p, size, i);
        blocks.push_back(p);
    }
    std::thread t([&] {
        for (size_t i = 0; i < blocks.size(); ++i) {
            EXPECT_TRUE(holds(blocks[i], 1 + (i * 37) % 9000, i));
            slabkit_kfree(blocks[i]);
        }
    });
    t.join();
}

} // namespace
} // namespace slabkit::apitest
