// page_bits.hpp - one bit per page of a chunk, for the bitmaps kept in a chunk's metadata: the
// dirty bitmap (dirty_bitmap.hpp) and the read-only bitmap (readonly_bitmap.hpp), each at its
// offset in the chunk. Touched only under the chunk's zone lock.
//
// A block of 2^order pages is aligned to its size, so for order >= 6 it covers whole 64-bit
// words and for smaller orders it is a mask inside one word: counting or setting a block's bits
// costs at most 16 words for the largest order.
#pragma once

#include "base/bits.hpp"
#include "page/page.hpp"

namespace slabkit {

template <size_t kOffset>
struct page_bitmap {
    static uint64_t *words(chunk *c) {
        return reinterpret_cast<uint64_t *>(reinterpret_cast<char *>(c) + kOffset);
    }
    // The number of the block's pages whose bit is set.
    static uint64_t count(chunk *c, size_t pfn, unsigned order) {
        const uint64_t *w = words(c) + pfn / 64;
        if (order < 6) {
            uint64_t mask = ((uint64_t{1} << (1u << order)) - 1) << (pfn % 64);
            return popcount64(*w & mask);
        }
        uint64_t n = 0;
        for (size_t i = 0; i < (size_t{1} << (order - 6)); ++i)
            n += w[i] == ~uint64_t{0} ? 64 : popcount64(w[i]); // whole words are the common case
        return n;
    }
    static void fill(chunk *c, size_t pfn, unsigned order, bool set) {
        uint64_t *w = words(c) + pfn / 64;
        if (order < 6) {
            uint64_t mask = ((uint64_t{1} << (1u << order)) - 1) << (pfn % 64);
            *w = set ? (*w | mask) : (*w & ~mask);
            return;
        }
        for (size_t i = 0; i < (size_t{1} << (order - 6)); ++i) w[i] = set ? ~uint64_t{0} : 0;
    }
};

} // namespace slabkit
