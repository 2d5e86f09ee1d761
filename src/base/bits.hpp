// bits.hpp - bit tricks used on slabkit's paths (header-only, no OS calls).
#pragma once

#include <cstdint>

namespace slabkit {

// Population count without a call: the build targets baseline x86-64 (no POPCNT instruction
// assumed), where __builtin_popcountll becomes a libgcc call. This is a dozen ALU operations.
inline unsigned popcount64(uint64_t x) {
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return static_cast<unsigned>((x * 0x0101010101010101ull) >> 56);
}

} // namespace slabkit
