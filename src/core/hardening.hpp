// hardening.hpp - what every cache does against heap corruption without the debug layer's cost
// (docs/debug.md, "Hardening"): free pointers stored obfuscated, new slabs' freelists in random
// order, and objects zeroed when handed out or when freed. The double-free check against a
// list's first free object is report.hpp's kFreelistCheck.
//
// Each has its switch:
//   obfuscated free pointers   the CMake option SLABKIT_FREELIST_HARDENED (a build choice: the
//                              fast paths' loads and stores of free pointers change);
//   random freelist order      SLABKIT_FREELIST_RANDOM=0|1 (slow path only: a new slab);
//   init on alloc / on free    SLABKIT_INIT=alloc|free|alloc,free (a per-cache byte the API's
//                              fast paths test).
#pragma once

#include "base/compiler.hpp"

#include <cstdint>

namespace slabkit::hardening {

// Free pointers are stored as next ^ secret ^ byteswap(where they are stored): a pointer written
// by an overflow or a use after free decodes to a wild address rather than to one the attacker
// chose, and a free object's bytes no longer reveal a heap address. The byte swap puts the
// storage address's varying low bits into the pointer's high bits, which a decoded forgery then
// makes non-canonical.
inline constexpr bool kFreelistHardened = SLABKIT_FREELIST_HARDENED != 0;

// A secret for one cache: random per process (getrandom, read once) and per cache (mixed with
// the descriptor's address), in every build; never the same for two descriptors of one process.
uint64_t cache_key(const void *cache_descriptor);
// The secret of one cache's free pointers: cache_key, or zero when the build does not
// obfuscate them.
uint64_t cache_secret(const void *cache_descriptor);

// SLABKIT_FREELIST_RANDOM (default: see docs/debug.md): whether new slabs link their objects in
// random order, so that consecutive allocations are not neighbours an overflow can predict.
bool freelist_random();

// A new slab's object order: seed 0 for address order (0, 1, ..., n - 1), any other seed for an
// order drawn from it. The order needs no array: a random bijection of [0, 2^k) (2^k >= n, made
// of multiply-add and xor-shift steps, each invertible modulo 2^k) applied to 0, 1, ..., 2^k - 1,
// keeping the images below n: each appears exactly once, and at most 2n steps are taken.
// new_slab_seed() is 0 unless SLABKIT_FREELIST_RANDOM is on.
uint64_t new_slab_seed();
struct object_order {
    uint64_t mask = 0, mul1 = 0, add1 = 0, mul2 = 0, add2 = 0;
    unsigned shift = 0;
    uint32_t n;

    object_order(uint32_t nr, uint64_t seed) : n(nr) {
        if (seed == 0 || n < 2) return;
        unsigned bits = 32 - static_cast<unsigned>(__builtin_clz(n - 1)); // 2^bits >= n
        mask = (uint64_t{1} << bits) - 1;
        mul1 = (seed | 1) & mask;
        add1 = (seed >> 20) & mask;
        mul2 = ((seed >> 40) | 1) & mask;
        add2 = (seed >> 8) & mask;
        shift = bits / 2 + 1;
    }
    uint64_t image(uint64_t i) const {
        uint64_t x = (i * mul1 + add1) & mask;
        x ^= x >> shift;
        x = (x * mul2 + add2) & mask;
        return x ^ (x >> shift);
    }
    // Calls emit(i) for every object index, in this order.
    template <class F>
    SLABKIT_ALWAYS_INLINE void for_each(F &&emit) const {
        if (mask == 0) {
            for (uint32_t i = 0; i < n; ++i) emit(i);
            return;
        }
        for (uint64_t i = 0; i <= mask; ++i)
            if (uint64_t x = image(i); x < n) emit(static_cast<uint32_t>(x));
    }
    // The index for_each emits last.
    uint32_t last() const {
        if (mask == 0) return n - 1;
        for (uint64_t i = mask;; --i)
            if (uint64_t x = image(i); x < n) return static_cast<uint32_t>(x);
    }
};

// SLABKIT_INIT: "alloc", "free" or both ("alloc,free"), read once. Caches without a constructor
// then zero objects when they are handed out (init on alloc) or when they are freed (init on
// free); debug caches zero instead of filling with their patterns (core/debug.hpp).
// Init on free also zeroes at allocation: a freed object is zero but for the word the allocator
// kept in it while it was free, which allocation must clear (the kernel wipes that word; here
// the whole object is zeroed, which costs about the same for objects already in cache).
enum init_mode : uint8_t { kInitOnAlloc = 1, kInitOnFree = 2 };
unsigned init_mode();
// Whether allocations must be zeroed under the mode.
inline bool zero_on_alloc(unsigned mode) {
    return mode != 0;
}

} // namespace slabkit::hardening
