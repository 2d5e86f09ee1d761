// kmalloc.hpp - general-purpose allocation by size over a design's caches.
//
//   size 0                      the zero-size pointer (16): unique, never dereferenceable
//   1 .. 8192                   caches kmalloc-8 16 32 64 96 128 192 256 512 1k 2k 4k 8k
//   8193 .. 4 MiB               a block from the page allocator (2^order pages, naturally aligned)
//   above                       a mapping from the OS (large.hpp)
//
// Alignment: power-of-two classes are naturally aligned (each cache's alignment is its size,
// up to a page; 8k slabs are order-1 blocks holding one object), 96 and 192 are 16-aligned.
// Every design has its own set of kmalloc caches, opened on first use from static descriptors.
#pragma once

#include "core/cache.hpp"

#include <cstddef>

namespace slabkit::kmalloc {

inline constexpr size_t kMaxCacheSize = 8192;
inline constexpr unsigned kNrClasses = 13;
inline void *const kZeroSizePtr = reinterpret_cast<void *>(16);

// The class index serving `size` (1..kMaxCacheSize).
unsigned class_of(size_t size);
// The bytes of class i.
size_t class_size(unsigned i);

// The design's kmalloc cache of class i (opened on first call); nullptr if it could not be.
cache *cache_for(design d, unsigned i);

void *alloc(design d, size_t size, bool zero, int node);
void free(void *p);
size_t usable_size(const void *p);
// Resizes in place when the block can hold `size` (and, for page and OS blocks, would not waste
// more than half); otherwise allocates, copies and frees. nullptr (p untouched) on failure.
void *realloc(design d, void *p, size_t size, bool zero);

} // namespace slabkit::kmalloc
