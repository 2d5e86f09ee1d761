// pattern.hpp - content patterns of the API tests and the fuzz target: every live block is
// filled with a pattern derived from its id and checked before it is freed or resized.
// No GoogleTest here (the fuzz target includes it too).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace slabkit::apitest {

inline uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// Word k of the pattern of block `id`.
inline uint64_t pattern_word(uint64_t id, size_t k) {
    return mix(id * 0x100000001b3ull + k);
}

// Fills bytes [0, n) of p with the pattern of `id`.
inline void fill(void *p, size_t n, uint64_t id) {
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
inline size_t first_mismatch(const void *p, size_t n, uint64_t id) {
    const auto *b = static_cast<const unsigned char *>(p);
    size_t words = n / 8;
    for (size_t k = 0; k < words; ++k) {
        uint64_t w = pattern_word(id, k);
        if (std::memcmp(b + k * 8, &w, 8) != 0) {
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

// The block holds the pattern of `id` in its first n bytes.
inline bool all_bytes_are(const void *p, size_t n, unsigned char v) {
    const auto *b = static_cast<const unsigned char *>(p);
    for (size_t i = 0; i < n; ++i)
        if (b[i] != v) return false;
    return true;
}

} // namespace slabkit::apitest
