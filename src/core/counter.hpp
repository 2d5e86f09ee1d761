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

struct counter {
    std::atomic<uint64_t> value{0};

    SLABKIT_ALWAYS_INLINE void add(uint64_t n = 1) {
        value.store(value.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    }
    void add_shared(uint64_t n = 1) { value.fetch_add(n, std::memory_order_relaxed); }
    uint64_t get() const { return value.load(std::memory_order_relaxed); }
    void reset() { value.store(0, std::memory_order_relaxed); }
    // The word itself, for the increments inside rseq critical sections (platform/rseq.hpp).
    uint64_t *raw() { return reinterpret_cast<uint64_t *>(&value); }
};

} // namespace slabkit
