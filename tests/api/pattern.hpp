// pattern.hpp - content patterns of the API tests and the fuzz target: every live block is
// filled with a pattern derived from its id and checked before it is freed or resized.
// No GoogleTest here (the fuzz target includes it too).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

// The fuzz target spends most of its time here: keep libFuzzer's comparison tracing out.
#if defined(__clang__)
#define SLABKIT_TEST_NO_COVERAGE __attribute__((no_sanitize("coverage")))
#else
#define SLABKIT_TEST_NO_COVERAGE
#endif

namespace slabkit::apitest {

SLABKIT_TEST_NO_COVERAGE inline uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// Word k of the pattern of block `id`.
SLABKIT_TEST_NO_COVERAGE inline uint64_t pattern_word(uint64_t id, size_t k) {
    return mix(id * 0x100000001b3ull + k);
}

// Fills bytes [0, n) of p with the pattern of `id`.
SLABKIT_TEST_NO_COVERAGE inline void fill(void *p, size_t n, uint64_t id) {
    auto *b = static_cast<unsigned char *>(p);
    size_t words = n / 8;
    for (size_t k = 0; k < words; ++k) {
        uint64_t w = pattern_word(id, k);
        std::memcpy(b + k * 8, &w, 8);
    }
    if (n % 8) {
        uint64_t w = pattern_word(id, words);
        std::memcpy(b + words * 8, &w, n % 8);
    }
}

// Offset of the first byte of [0, n) that differs from the pattern of `id`, or n.
SLABKIT_TEST_NO_COVERAGE inline size_t first_mismatch(const void *p, size_t n, uint64_t id) {
    const auto *b = static_cast<const unsigned char *>(p);
    size_t words = n / 8;
    for (size_t k = 0; k < words; ++k) {
        uint64_t w = pattern_word(id, k);
        uint64_t x;
        std::memcpy(&x, b + k * 8, 8);
        if (x != w) {
            for (size_t i = 0; i < 8; ++i)
                if (b[k * 8 + i] != reinterpret_cast<const unsigned char *>(&w)[i])
                    return k * 8 + i;
        }
    }
    if (n % 8) {
        uint64_t w = pattern_word(id, words);
        for (size_t i = 0; i < n % 8; ++i)
            if (b[words * 8 + i] != reinterpret_cast<const unsigned char *>(&w)[i])
                return words * 8 + i;
    }
    return n;
}

// Like first_mismatch, on a sample of a large block (its first and last 4 KiB and one word of
// every 4 KiB), for checks of every live block.
SLABKIT_TEST_NO_COVERAGE inline size_t first_mismatch_sampled(const void *p, size_t n,
                                                              uint64_t id) {
    constexpr size_t kEdge = 4096;
    if (n <= 4 * kEdge) return first_mismatch(p, n, id);
    const auto *b = static_cast<const unsigned char *>(p);
    size_t at = first_mismatch(p, kEdge, id);
    if (at != kEdge) return at;
    for (size_t k = kEdge / 8; k < (n - kEdge) / 8; k += kEdge / 8) {
        uint64_t x;
        std::memcpy(&x, b + k * 8, 8);
        if (x != pattern_word(id, k)) return k * 8;
    }
    size_t tail = (n - kEdge) / 8 * 8; // a word boundary of the pattern
    for (size_t k = tail / 8; k < n / 8; ++k) {
        uint64_t x;
        std::memcpy(&x, b + k * 8, 8);
        if (x != pattern_word(id, k)) return k * 8;
    }
    if (n % 8) {
        uint64_t w = pattern_word(id, n / 8);
        for (size_t i = 0; i < n % 8; ++i)
            if (b[n / 8 * 8 + i] != reinterpret_cast<const unsigned char *>(&w)[i])
                return n / 8 * 8 + i;
    }
    return n;
}

SLABKIT_TEST_NO_COVERAGE inline bool all_bytes_are(const void *p, size_t n, unsigned char v) {
    const auto *b = static_cast<const unsigned char *>(p);
    uint64_t w = 0x0101010101010101ull * v;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x;
        std::memcpy(&x, b + i, 8);
        if (x != w) return false;
    }
    for (; i < n; ++i)
        if (b[i] != v) return false;
    return true;
}

} // namespace slabkit::apitest
