// readonly_bitmap.hpp - one bit per page of a chunk: set while the page is write-protected
// (mprotect PROT_READ) because a freed block it belonged to was protected at its free
// (page_allocator_config::protect_freed), so that a write after free faults instead of
// corrupting whoever gets the page next. Free pages only: a block taken off the free lists with
// any bit set is made writable again and its bits cleared (zone_take). Under the zone lock.
#pragma once

#include "page/page_bits.hpp"

namespace slabkit {

using readonly_bitmap = page_bitmap<kReadOnlyBitmapOffset>;

} // namespace slabkit
