// counter.hpp - statistics counters that cost no atomic read-modify-write on fast paths.
//
// A per-slot counter has one writer at a time (the slot's owner, or whoever drains an idle slot
// under the slot registry lock), so an increment is a relaxed load and store: plain moves on
// x86, and no torn or undefined reads for the stats walker that reads it from another thread.
// Counters that several threads may bump (per-node lists, the no-slot paths) use add_shared.
#pragma once

#include "base/compiler.hpp"

#include <atomic>
#include <cstdint>

namespace slabkit {

// One writer's `word += n`, which concurrent readers see whole: on x86-64 a single add to memory
// (one instruction where a relaxed load and store are three; without a lock prefix, as nothing
// else writes the word, and an aligned store is never torn). Under ThreadSanitizer, which cannot
// see inside asm, the relaxed load and store it checks.
#if defined(__x86_64__) && !defined(SLABKIT_TSAN)
#define SLABKIT_ONE_WRITER_ADD_ASM 1
#endif
template <class T>
SLABKIT_ALWAYS_INLINE void one_writer_add(std::atomic<T> &word, T n) {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8);
    static_assert(sizeof(std::atomic<T>) == sizeof(T));
#ifdef SLABKIT_ONE_WRITER_ADD_ASM
    if constexpr (sizeof(T) == 8)
        asm("addq %1, %0" : "+m"(word) : "er"(n));
    else
        asm("addl %1, %0" : "+m"(word) : "er"(n));
#else
    word.store(word.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
#endif
}

struct counter {
    std::atomic<uint64_t> value{0};

    SLABKIT_ALWAYS_INLINE void add(uint64_t n = 1) { one_writer_add(value, n); }
    void add_shared(uint64_t n = 1) { value.fetch_add(n, std::memory_order_relaxed); }
    uint64_t get() const { return value.load(std::memory_order_relaxed); }
    void reset() { value.store(0, std::memory_order_relaxed); }
    // The word itself, for the increments inside rseq critical sections (platform/rseq.hpp).
    uint64_t *raw() { return reinterpret_cast<uint64_t *>(&value); }
};

} // namespace slabkit
