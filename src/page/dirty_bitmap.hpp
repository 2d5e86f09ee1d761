// dirty_bitmap.hpp - one bit per page of a chunk: set while the page may be resident (it has
// been handed out since it was last decommitted). Touched only under the chunk's zone lock.
//
// A block of 2^order pages is aligned to its size, so for order >= 6 it covers whole 64-bit
// words and for smaller orders it is a mask inside one word: counting or setting a block's bits
// costs at most 16 words for the largest order.
#pragma once

#include "base/bits.hpp"
#include "page/page.hpp"

namespace slabkit {

inline uint64_t *dirty_words(chunk *c) {
    return reinterpret_cast<uint64_t *>(reinterpret_cast<char *>(c) + kDirtyBitmapOffset);
}

inline uint64_t dirty_count(chunk *c, size_t pfn, unsigned order) {
    uint64_t *w = dirty_words(c) + pfn / 64;
    if (order < 6) {
        uint64_t mask = ((uint64_t{1} << (1u << order)) - 1) << (pfn % 64);
        return popcount64(*w & mask);
    }
    uint64_t n = 0;
    for (size_t i = 0; i < (size_t{1} << (order - 6)); ++i)
        n += w[i] == ~uint64_t{0} ? 64 : popcount64(w[i]); // whole words are the common case
    return n;
}

inline void dirty_fill(chunk *c, size_t pfn, unsigned order, bool dirty) {
    uint64_t *w = dirty_words(c) + pfn / 64;
    if (order < 6) {
        uint64_t mask = ((uint64_t{1} << (1u << order)) - 1) << (pfn % 64);
        *w = dirty ? (*w | mask) : (*w & ~mask);
        return;
    }
    for (size_t i = 0; i < (size_t{1} << (order - 6)); ++i) w[i] = dirty ? ~uint64_t{0} : 0;
}

} // namespace slabkit
