// dwcas.hpp - a double-word compare-and-swap: two adjacent, 16-byte-aligned words replaced
// together only if both still hold what the caller read (SLUB's cmpxchg_double of a slab's
// {freelist, counters}).
//
// x86-64 only (cmpxchg16b, which every x86-64 CPU of the last fifteen years has). Built with
// -mcx16 (as CMake builds slabkit), the __sync builtin is expanded inline by g++ and clang (the
// __atomic one would call libatomic, which the library does not link) and ThreadSanitizer
// instruments it as a 16-byte atomic operation; without -mcx16 (a tool compiling these sources
// on its own) the same instruction is written out. Either way it is a full barrier.
#pragma once

#include "base/compiler.hpp"

#include <cstdint>

#if !defined(__x86_64__)
#error "slabkit's SLUB needs a double-word compare-and-swap: x86-64 (cmpxchg16b)"
#endif

namespace slabkit {

// Replaces {pair[0], pair[1]} = {old0, old1} with {new0, new1}; false (nothing written) if the
// pair held anything else. `pair` must be 16-byte aligned.
SLABKIT_ALWAYS_INLINE bool dwcas(uintptr_t *pair, uintptr_t old0, uintptr_t old1, uintptr_t new0,
                                 uintptr_t new1) {
    using u128 = unsigned __int128;
#if defined(__GCC_HAVE_SYNC_COMPARE_AND_SWAP_16)
    u128 expected = (static_cast<u128>(old1) << 64) | old0;
    u128 desired = (static_cast<u128>(new1) << 64) | new0;
    return __sync_bool_compare_and_swap(reinterpret_cast<u128 *>(pair), expected, desired);
#else
    // cmpxchg16b: compares rdx:rax with the 16 bytes, and if equal stores rcx:rbx there.
    bool swapped;
    __asm__ __volatile__("lock cmpxchg16b %1"
                         : "=@ccz"(swapped), "+m"(*reinterpret_cast<u128 *>(pair)), "+a"(old0),
                           "+d"(old1)
                         : "b"(new0), "c"(new1)
                         : "memory");
    return swapped;
#endif
}

// One word of such a pair, read on its own (relaxed; acquire for a freelist head whose objects
// the reader then follows).
SLABKIT_ALWAYS_INLINE uintptr_t load_word(const uintptr_t *word) {
    return __atomic_load_n(word, __ATOMIC_RELAXED);
}
SLABKIT_ALWAYS_INLINE uintptr_t load_word_acquire(const uintptr_t *word) {
    return __atomic_load_n(word, __ATOMIC_ACQUIRE);
}

} // namespace slabkit
