// slot_array.hpp - the per-slot pointer array of a created cache: kMaxSlots + 1 pointers to the
// design's per-slot structures (the last, index kMaxSlots, is what slots::index() gives a thread
// without a slot: always null, so fast paths need no range check). Just over 8 KiB: an order-2
// block from the page allocator, zeroed; only the pages the slots in use touch become resident.
// Static caches (kmalloc's) keep theirs in static storage instead.
#pragma once

#include "page/page.hpp"
#include "slot/slot.hpp"

#include <atomic>

namespace slabkit {

inline constexpr unsigned kSlotArrayOrder = 2;
static_assert((kMaxSlots + 1) * sizeof(void *) <= kPageSize << kSlotArrayOrder,
              "the per-slot pointer array fits its block");

void *alloc_slot_array_block();
void free_slot_array(void *array);

// A zeroed array of kMaxSlots + 1 pointers; nullptr when memory is short.
template <class T>
std::atomic<T *> *alloc_slot_array() {
    static_assert(sizeof(std::atomic<T *>) == sizeof(void *));
    return static_cast<std::atomic<T *> *>(alloc_slot_array_block());
}

} // namespace slabkit
