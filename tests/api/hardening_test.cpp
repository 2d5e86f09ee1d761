// Hardening through the public API, for every design (docs/debug.md, "Hardening"): init on alloc
// and on free (SLABKIT_INIT), the order of new slabs' objects (SLABKIT_FREELIST_RANDOM), and free
// pointers stored obfuscated (the build option SLABKIT_FREELIST_HARDENED). The settings are read
// once per process, so ctest runs these again under each (tests/api/CMakeLists.txt); each test
// reads the environment to know what to expect.
#include "api/api_support.hpp"

#include <slabkit/slabkit.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace slabkit::apitest {
namespace {

std::string env_or(const char *name, const char *fallback) {
    const char *v = getenv(name);
    return v ? v : fallback;
}
bool init_on_alloc() {
    std::string v = env_or("SLABKIT_INIT", "");
    return v == "alloc" || v == "alloc,free" || v == "free,alloc";
}
bool init_on_free() {
    std::string v = env_or("SLABKIT_INIT", "");
    return v == "free" || v == "alloc,free" || v == "free,alloc";
}
bool freelist_random() {
    return env_or("SLABKIT_FREELIST_RANDOM", "0") == "1";
}

// Bytes of p[0..n) that are not 0, read through a volatile pointer (the compiler must not assume
// what a block holds after the allocator had it).
size_t nonzero(const void *p, size_t n) {
    asm volatile("" ::: "memory");
    const volatile unsigned char *b = static_cast<const volatile unsigned char *>(p);
    size_t k = 0;
    for (size_t i = 0; i < n; ++i) k += b[i] != 0;
    return k;
}
void dirty(void *p, size_t n) {
    memset(p, 0xab, n);
    asm volatile("" : : "r"(p) : "memory");
}

class Hardening : public DesignTest {};

// A freed object's bytes: the free pointer (8 bytes somewhere) or SLOB's block header (at most
// 8) may be written over them; everything else is zero with init on free and still the caller's
// bytes without it.
TEST_P(Hardening, InitOnFreeZeroesFreedObjects) {
    const size_t size = 96;
    slabkit_cache *c = create(name("init-free"), size);
    ASSERT_NE(c, nullptr);
    std::vector<void *> objs;
    for (int i = 0; i < 8; ++i) objs.push_back(slabkit_cache_alloc(c, 0));
    for (void *p : objs) dirty(p, size);
    // Free all but the first, so that their slab stays (the bytes stay readable).
    for (size_t i = 1; i < objs.size(); ++i) slabkit_cache_free(c, objs[i]);
    for (size_t i = 1; i < objs.size(); ++i) {
        size_t nz = nonzero(objs[i], size);
        if (init_on_free())
            EXPECT_LE(nz, 8u) << "object " << i;
        else
            EXPECT_GE(nz, size - 8) << "object " << i;
    }
    slabkit_cache_free(c, objs[0]);
}

TEST_P(Hardening, InitOnAllocZeroesReusedObjects) {
    const size_t size = 200;
    slabkit_cache *c = create(name("init-alloc"), size);
    ASSERT_NE(c, nullptr);
    void *keep = slabkit_cache_alloc(c, 0); // keeps the slab
    void *p = slabkit_cache_alloc(c, 0);
    dirty(p, size);
    slabkit_cache_free(c, p);
    void *q = slabkit_cache_alloc(c, 0); // LIFO: p again in every design
    ASSERT_NE(q, nullptr);
    size_t nz = nonzero(q, size);
    if (init_on_alloc() || init_on_free()) {
        EXPECT_EQ(nz, 0u);
    } else if (q == p) {
        EXPECT_GE(nz, size - 8); // off: the old bytes are still there
    }
    slabkit_cache_free(c, q);
    slabkit_cache_free(c, keep);
}

// Constructed state survives: caches with a constructor are never zeroed.
void construct(void *p) {
    memset(p, 0x5c, 48);
}
TEST_P(Hardening, CachesWithAConstructorKeepTheirState) {
    slabkit_cache *c = create(name("init-ctor"), 48, 0, 0, construct);
    ASSERT_NE(c, nullptr);
    void *keep = slabkit_cache_alloc(c, 0);
    void *p = slabkit_cache_alloc(c, 0);
    slabkit_cache_free(c, p);
    void *q = slabkit_cache_alloc(c, 0);
    const unsigned char *b = static_cast<const unsigned char *>(q);
    for (int i = 0; i < 48; ++i) ASSERT_EQ(b[i], 0x5c) << "byte " << i;
    slabkit_cache_free(c, q);
    slabkit_cache_free(c, keep);
}

// A bad free is refused before anything is written: init on free must not zero a live object
// through an interior pointer.
std::vector<std::string> g_reports;
void collect(const char *report) {
    g_reports.emplace_back(report);
}
TEST_P(Hardening, ABadFreeIsReportedBeforeAnythingIsZeroed) {
    slabkit_cache *c = create(name("init-bad"), 64);
    ASSERT_NE(c, nullptr);
    auto *p = static_cast<unsigned char *>(slabkit_cache_alloc(c, 0));
    dirty(p, 64);
    g_reports.clear();
    slabkit_set_error_hook(collect);
    slabkit_cache_free(c, p + 16);
    slabkit_set_error_hook(nullptr);
    EXPECT_EQ(g_reports.size(), 1u);
    EXPECT_EQ(nonzero(p, 64), 64u);
    slabkit_cache_free(c, p);
}

// Consecutive allocations from new slabs: with the random order few of them are neighbours;
// in address order nearly all are (SLAB hands a batch out from its array's end: neighbours
// downwards). SLOB has no slabs of its own to order: its blocks come in address order.
TEST_P(Hardening, NewSlabsHandOutObjectsInTheOrderTheSettingAsks) {
    const size_t size = 64;
    slabkit_cache *c = create(name("order"), size);
    ASSERT_NE(c, nullptr);
    std::vector<char *> objs;
    for (int i = 0; i < 640; ++i) objs.push_back(static_cast<char *>(slabkit_cache_alloc(c, 0)));
    unsigned pairs = 0, neighbours = 0;
    for (size_t i = 1; i < objs.size(); ++i) {
        ptrdiff_t d = objs[i] - objs[i - 1];
        if (d > 4096 || d < -4096) continue; // another slab
        ++pairs;
        neighbours += d == static_cast<ptrdiff_t>(size) || d == -static_cast<ptrdiff_t>(size);
    }
    ASSERT_GT(pairs, 300u);
    if (freelist_random() && GetParam() != "slob")
        EXPECT_LT(neighbours, pairs / 4) << neighbours << " of " << pairs;
    else
        EXPECT_GT(neighbours, pairs * 3 / 4) << neighbours << " of " << pairs;
    for (char *p : objs) slabkit_cache_free(c, p);
}

// A free object's free pointer is never its neighbour's plain address in hardened builds (SLQB
// and SLUB keep free pointers in objects; SLAB keeps indices in arrays, SLOB unit counts, and the
// sheaves a freed object's pointer in a sheaf).
TEST_P(Hardening, FreePointersAreNotPlainAddressesInHardenedBuilds) {
    if (GetParam() == "slab" || GetParam() == "slob" || GetParam() == "sheaves")
        GTEST_SKIP() << GetParam() << " keeps no free pointers in freed objects";
    slabkit_cache *c = create(name("obfuscated"), 64);
    ASSERT_NE(c, nullptr);
    void *keep = slabkit_cache_alloc(c, 0);
    void *a = slabkit_cache_alloc(c, 0);
    void *b = slabkit_cache_alloc(c, 0);
    slabkit_cache_free(c, a);
    slabkit_cache_free(c, b); // b's free pointer: a
    asm volatile("" ::: "memory");
    bool plain = false;
    for (size_t off = 0; off + 8 <= 64; off += 8) {
        uintptr_t w;
        memcpy(&w, static_cast<char *>(b) + off, sizeof w);
        plain = plain || w == reinterpret_cast<uintptr_t>(a);
    }
#if SLABKIT_FREELIST_HARDENED
    EXPECT_FALSE(plain);
#else
    EXPECT_TRUE(plain);
#endif
    slabkit_cache_free(c, keep);
}

SLABKIT_INSTANTIATE_FOR_DESIGNS(Hardening);

// kmalloc and the malloc family follow SLABKIT_INIT too (the process's design).
TEST(HardeningKmalloc, InitOnAllocAndFree) {
    for (size_t size : {24u, 100u, 700u, 3000u, 20000u}) {
        void *keep = slabkit_malloc(size);
        void *p = slabkit_malloc(size);
        ASSERT_NE(p, nullptr);
        dirty(p, size);
        slabkit_free(p);
        if (size <= 3000) { // slab objects stay readable; page blocks may go back
            size_t nz = nonzero(p, size);
            // Zeroed but for the free pointer and the double-free key (core/free_key.hpp).
            if (init_on_free()) {
                EXPECT_LE(nz, 16u) << size;
            }
        }
        void *q = slabkit_malloc(size);
        if (init_on_alloc() || init_on_free()) {
            EXPECT_EQ(nonzero(q, size), 0u) << size;
        }
        void *k = slabkit_kmalloc(size, 0);
        if (init_on_alloc()) {
            EXPECT_EQ(nonzero(k, size), 0u) << size;
        }
        slabkit_kfree(k);
        slabkit_free(q);
        slabkit_free(keep);
    }
}

} // namespace
} // namespace slabkit::apitest
