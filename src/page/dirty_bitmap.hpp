// dirty_bitmap.hpp - one bit per page of a chunk: set while the page may be resident (it has
// been handed out since it was last decommitted). Touched only under the chunk's zone lock.
#pragma once

#include "page/page_bits.hpp"

namespace slabkit {

using dirty_bitmap = page_bitmap<kDirtyBitmapOffset>;

inline uint64_t dirty_count(chunk *c, size_t pfn, unsigned order) {
    return dirty_bitmap::count(c, pfn, order);
}
inline void dirty_fill(chunk *c, size_t pfn, unsigned order, bool dirty) {
    dirty_bitmap::fill(c, pfn, order, dirty);
}

} // namespace slabkit
