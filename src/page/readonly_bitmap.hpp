// readonly_bitmap.hpp - one bit per page of a chunk: set while the page is write-protected
// (mprotect PROT_READ) because a freed block it belonged to was protected at its free
// (page_allocator_config::protect_order), so that a write after free faults instead of
// corrupting whoever gets the page next. Free pages only: a block taken off the free lists with
// any bit set is made writable again and its bits cleared (zone_take). Under the zone lock.
#pragma once

#include "page/page_bits.hpp"

namespace slabkit {

inline uint64_t *readonly_words(chunk *c) {
    return chunk_bitmap(c, kReadOnlyBitmapOffset);
}

inline uint64_t readonly_count(chunk *c, size_t pfn, unsigned order) {
    return page_bits_count(readonly_words(c), pfn, order);
}

inline void readonly_fill(chunk *c, size_t pfn, unsigned order, bool readonly) {
    page_bits_fill(readonly_words(c), pfn, order, readonly);
}

} // namespace slabkit
