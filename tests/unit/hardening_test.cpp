// The hardening helpers (core/hardening.hpp): new slabs' object order and obfuscated free
// pointers. Their effect through every design is tests/api/hardening_test.cpp's.
#include "core/cache.hpp"
#include "core/hardening.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace slabkit {
namespace {

std::vector<uint32_t> order_of(uint32_t n, uint64_t seed) {
    std::vector<uint32_t> out;
    hardening::object_order(n, seed).for_each([&](uint32_t i) { out.push_back(i); });
    return out;
}

TEST(ObjectOrder, SeedZeroIsAddressOrder) {
    for (uint32_t n : {1u, 2u, 7u, 64u, 513u}) {
        auto o = order_of(n, 0);
        ASSERT_EQ(o.size(), n);
        for (uint32_t i = 0; i < n; ++i) EXPECT_EQ(o[i], i);
        EXPECT_EQ(hardening::object_order(n, 0).last(), n - 1);
    }
}

TEST(ObjectOrder, EverySeedGivesEachIndexOnceAndLastIsTheLastGiven) {
    uint64_t seed = 0x243f6a8885a308d3ull;
    for (uint32_t n = 1; n <= 1100; n += (n < 70 ? 1 : 37)) {
        for (int round = 0; round < 4; ++round) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            auto o = order_of(n, seed | 1);
            ASSERT_EQ(o.size(), n) << "n " << n;
            std::vector<bool> seen(n);
            for (uint32_t i : o) {
                ASSERT_LT(i, n);
                ASSERT_FALSE(seen[i]) << "index " << i << " twice, n " << n;
                seen[i] = true;
            }
            EXPECT_EQ(hardening::object_order(n, seed | 1).last(), o.back()) << "n " << n;
        }
    }
}

// A random order: few neighbours follow each other, and two seeds give two orders.
TEST(ObjectOrder, SeedsShuffle) {
    const uint32_t n = 128;
    auto a = order_of(n, 0x9e3779b97f4a7c15ull);
    auto b = order_of(n, 0xd1b54a32d192ed03ull);
    EXPECT_NE(a, b);
    unsigned adjacent = 0;
    for (uint32_t i = 1; i < n; ++i) adjacent += a[i] == a[i - 1] + 1 || a[i] + 1 == a[i - 1];
    EXPECT_LT(adjacent, n / 4) << "the order keeps too many neighbours together";
}

TEST(FreePointer, RoundTripsAndIsStoredObfuscatedInHardenedBuilds) {
    cache c;
    c.offset = 8;
    c.freelist_secret = hardening::cache_secret(&c);
    alignas(16) unsigned char obj[32] = {};
    alignas(16) unsigned char next[32] = {};
    set_freepointer(&c, obj, next);
    EXPECT_EQ(get_freepointer(&c, obj), static_cast<void *>(next));
    uintptr_t stored;
    memcpy(&stored, obj + 8, sizeof stored);
    if (hardening::kFreelistHardened) {
        EXPECT_NE(c.freelist_secret, 0u);
        EXPECT_NE(stored, reinterpret_cast<uintptr_t>(next));
    } else {
        EXPECT_EQ(stored, reinterpret_cast<uintptr_t>(next));
    }
    set_freepointer(&c, obj, nullptr);
    EXPECT_EQ(get_freepointer(&c, obj), nullptr);
    // Another cache's secret decodes the same word to something else.
    cache other;
    other.offset = 8;
    other.freelist_secret = hardening::cache_secret(&other);
    set_freepointer(&c, obj, next);
    if (hardening::kFreelistHardened) {
        EXPECT_NE(get_freepointer(&other, obj), static_cast<void *>(next));
    }
}

} // namespace
} // namespace slabkit
