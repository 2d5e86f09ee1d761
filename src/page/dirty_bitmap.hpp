// dirty_bitmap.hpp - one bit per page of a chunk: set while the page may be resident (it has
// been handed out since it was last decommitted). Touched only under the chunk's zone lock.
#pragma once

#include "page/page_bits.hpp"

namespace slabkit {

inline uint64_t *dirty_words(chunk *c) {
    return chunk_bitmap(c, kDirtyBitmapOffset);
}

inline uint64_t dirty_count(chunk *c, size_t pfn, unsigned order) {
    return page_bits_count(dirty_words(c), pfn, order);
}

inline void dirty_fill(chunk *c, size_t pfn, unsigned order, bool dirty) {
    page_bits_fill(dirty_words(c), pfn, order, dirty);
}

} // namespace slabkit
