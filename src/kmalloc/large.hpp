// large.hpp - blocks above the page allocator's largest order, mapped from the OS directly.
//
// Each block is its own reservation, committed whole; a fixed open-addressing table (static,
// zero until used) maps its address to its size so that kfree and ksize can find it. The table
// holds kLargeMax blocks at once (each over 4 MiB: 64 GiB and more in all); past that an
// allocation fails like any other out-of-memory.
#pragma once

#include <cstddef>
#include <cstdint>

namespace slabkit::large {

inline constexpr size_t kLargeMax = 16384;

// A block of at least `size` bytes, aligned to `align` (a power of two) or, when align is 0, to
// `size` if that is a power of two, else to a page; nullptr when the OS refuses or the table is
// full. Fresh mappings read as zeros.
void *alloc(size_t size, size_t align = 0);
// Moves or resizes a block to hold `size` bytes (mremap: no copy through user space); the
// result is page-aligned. nullptr, the block untouched, when p is not a large block or the OS
// refuses.
void *resize(void *p, size_t size);
// Frees a block; false (nothing done) if p is not the start of a large block.
bool free(void *p);
// The block's usable size, or 0 if p is not the start of a large block.
size_t size_of(const void *p);
// Bytes mapped for large blocks now, and how many blocks.
uint64_t mapped_bytes();
uint64_t mapped_blocks();

} // namespace slabkit::large
