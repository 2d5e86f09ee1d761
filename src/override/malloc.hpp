// malloc.hpp - the C library's allocation calls with their exact C and glibc semantics, on
// kmalloc of the process's design. The prefixed C API (slabkit_malloc, ...) and the malloc
// replacement (libslabkit-malloc.so: malloc, free, ..., operator new/delete) are both thin
// wrappers over these, so the fast paths are inlined into each exported symbol.
//
// What C asks of malloc beyond kmalloc: a size of 0 still gives a unique pointer (kmalloc's
// zero-size pointer is not unique), failure sets errno to ENOMEM, sizes above PTRDIFF_MAX fail
// (pointer differences within a block must be representable), free keeps errno, and the
// aligned calls check their alignment as their standards say.
#pragma once

#include "base/compiler.hpp"
#include "core/cache.hpp"
#include "kmalloc/kmalloc.hpp"

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace slabkit::libc {

// glibc's MALLOC_ALIGNMENT on x86-64: blocks of 16 bytes and more are 16-aligned without asking.
inline constexpr size_t kMallocAlign = 16;
inline constexpr size_t kMaxRequest = PTRDIFF_MAX;
// The malloc family's size classes (kmalloc.hpp): denser than the kernel's.
inline constexpr auto kMallocTable = kmalloc::class_table::malloc;

namespace detail {
// Size 0, sizes above kmalloc's caches, and failures (errno ENOMEM).
void *malloc_slow(size_t size);
void *calloc_slow(size_t n, size_t size);
// NULL with errno ENOMEM: calloc's fast path found no block.
void *calloc_failed();
void *aligned_slow(size_t align, size_t size); // align: a power of two above kMallocAlign
// operator new's and new[]'s slow paths: malloc_slow, and while debugging the block is marked
// as theirs, so that the other form of delete is reported (debug::set_origin).
void *new_object_slow(size_t size);
void *new_array_slow(size_t size);
} // namespace detail

// malloc with another slow path (operator new's): the same fast path.
template <void *(*Slow)(size_t)>
SLABKIT_ALWAYS_INLINE void *malloc_or(size_t size) {
    return kmalloc::alloc_fast_or<kMallocTable>(process_design_hint(), size, Slow);
}

SLABKIT_ALWAYS_INLINE void *malloc(size_t size) {
    // The queue pop or a tail call: no stack frame. A thread on the CPUs' slots goes on to its
    // CPU's; everything else (size 0, large sizes, an empty queue, the first call, which reads
    // the design) is malloc_slow's.
    return kmalloc::alloc_fast_or<kMallocTable>(process_design_hint(), size, detail::malloc_slow);
}

SLABKIT_ALWAYS_INLINE void *calloc(size_t n, size_t size) {
    size_t total;
    if (SLABKIT_LIKELY(!__builtin_mul_overflow(n, size, &total) &&
                       total - 1 < kmalloc::kMaxCacheSize)) {
        // The block from the fast path, zeroed here: a zeroing allocation would take every
        // design's slow path (SLUB's calloc pair took 237 instructions, 146 this way).
        // (The block's key word is cleared by the allocation: `total` may be below it, and
        // SLOB's blocks may end before 16 bytes.)
        void *p = kmalloc::alloc<kMallocTable>(process_design(), total, false, kAnyNode);
        if (SLABKIT_LIKELY(p != nullptr)) return memset(p, 0, total);
        // The class had no block: no second try (fault injection asks once per call).
        return detail::calloc_failed();
    }
    return detail::calloc_slow(n, size);
}

SLABKIT_ALWAYS_INLINE void free(void *p) {
    kmalloc::free(p, "free");
}

namespace detail {
// A sized free (sized operator delete, free_sized, free_aligned_sized) checked against the block:
// a size or alignment that does not match is reported, and the block left alone.
SLABKIT_NOINLINE void checked_sized_free(void *p, size_t size, size_t align, const char *caller);
} // namespace detail

// Sizes and alignments are not needed to find a block; while debugging they are checked.
SLABKIT_ALWAYS_INLINE void free_sized(void *p, size_t size, size_t align, const char *caller) {
    if (SLABKIT_UNLIKELY(kmalloc::debugging_decided()))
        return detail::checked_sized_free(p, size, align, caller);
    kmalloc::free(p, caller);
}

// memalign: alignments up to 16 are malloc's; others are rounded up to a power of two; one
// above SIZE_MAX / 2 + 1 cannot be and gives EINVAL (glibc).
void *memalign(size_t align, size_t size);
// posix_memalign: EINVAL unless align is a power of two multiple of sizeof(void *); ENOMEM on
// failure; *out untouched and errno kept either way.
int posix_memalign(void **out, size_t align, size_t size);
// aligned_alloc: EINVAL (errno) unless align is a power of two (C23, glibc 2.38).
void *aligned_alloc(size_t align, size_t size);
void *valloc(size_t size);
void *pvalloc(size_t size);
// realloc(NULL, n) = malloc(n); realloc(p, 0) frees p and returns NULL (glibc).
void *realloc(void *p, size_t size);
void *reallocarray(void *p, size_t n, size_t size);
// 0 for NULL; a pointer slabkit did not hand out is reported (0 in continue-on-error mode).
size_t usable_size(const void *p);
// Trims every cache and the page allocator: true if pages went back to the OS.
bool trim();

} // namespace slabkit::libc
