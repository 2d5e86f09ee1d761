// new_delete.cpp - every replaceable operator new and delete of C++17 and later, on the malloc
// family. Compiled with exceptions (the only such file): a failed operator new calls the
// installed new-handler and retries, and throws std::bad_alloc when there is none.
#include "override/malloc.hpp"

#include <new>

#define SLABKIT_EXPORT __attribute__((visibility("default")))

using namespace slabkit;

namespace {

// Alignments up to malloc's own need nothing more than a large enough size.
SLABKIT_ALWAYS_INLINE void *alloc_aligned(size_t size, size_t align) {
    if (align <= libc::kMallocAlign) return libc::malloc(size < align ? align : size);
    return libc::memalign(align, size);
}

// The standard's loop: retry after each call of the new-handler; without one, throw.
SLABKIT_NOINLINE void *new_slow(size_t size, size_t align) {
    for (;;) {
        void *p = alloc_aligned(size, align);
        if (p) return p;
        std::new_handler handler = std::get_new_handler();
        if (!handler) throw std::bad_alloc();
        handler();
    }
}

SLABKIT_NOINLINE void *new_nothrow_slow(size_t size, size_t align) noexcept {
    try {
        return new_slow(size, align);
    } catch (...) {
        return nullptr;
    }
}

SLABKIT_ALWAYS_INLINE void *new_impl(size_t size) {
    void *p = libc::malloc(size);
    if (SLABKIT_LIKELY(p != nullptr)) return p;
    return new_slow(size, 1);
}

SLABKIT_ALWAYS_INLINE void *new_nothrow_impl(size_t size) noexcept {
    void *p = libc::malloc(size);
    if (SLABKIT_LIKELY(p != nullptr)) return p;
    return new_nothrow_slow(size, 1);
}

SLABKIT_ALWAYS_INLINE void *new_aligned_impl(size_t size, std::align_val_t align) {
    void *p = alloc_aligned(size, static_cast<size_t>(align));
    if (SLABKIT_LIKELY(p != nullptr)) return p;
    return new_slow(size, static_cast<size_t>(align));
}

SLABKIT_ALWAYS_INLINE void *new_aligned_nothrow_impl(size_t size, std::align_val_t align) noexcept {
    void *p = alloc_aligned(size, static_cast<size_t>(align));
    if (SLABKIT_LIKELY(p != nullptr)) return p;
    return new_nothrow_slow(size, static_cast<size_t>(align));
}

} // namespace

// The sizes and alignments that delete passes are not needed: a block is found by its address.
SLABKIT_EXPORT void *operator new(size_t size) {
    return new_impl(size);
}
SLABKIT_EXPORT void *operator new[](size_t size) {
    return new_impl(size);
}
SLABKIT_EXPORT void *operator new(size_t size, const std::nothrow_t &) noexcept {
    return new_nothrow_impl(size);
}
SLABKIT_EXPORT void *operator new[](size_t size, const std::nothrow_t &) noexcept {
    return new_nothrow_impl(size);
}
SLABKIT_EXPORT void *operator new(size_t size, std::align_val_t align) {
    return new_aligned_impl(size, align);
}
SLABKIT_EXPORT void *operator new[](size_t size, std::align_val_t align) {
    return new_aligned_impl(size, align);
}
SLABKIT_EXPORT void *operator new(size_t size, std::align_val_t align,
                                  const std::nothrow_t &) noexcept {
    return new_aligned_nothrow_impl(size, align);
}
SLABKIT_EXPORT void *operator new[](size_t size, std::align_val_t align,
                                    const std::nothrow_t &) noexcept {
    return new_aligned_nothrow_impl(size, align);
}

SLABKIT_EXPORT void operator delete(void *p) noexcept {
    libc::free(p);
}
SLABKIT_EXPORT void operator delete[](void *p) noexcept {
    libc::free(p);
}
SLABKIT_EXPORT void operator delete(void *p, const std::nothrow_t &) noexcept {
    libc::free(p);
}
SLABKIT_EXPORT void operator delete[](void *p, const std::nothrow_t &) noexcept {
    libc::free(p);
}
SLABKIT_EXPORT void operator delete(void *p, size_t) noexcept {
    libc::free(p);
}
SLABKIT_EXPORT void operator delete[](void *p, size_t) noexcept {
    libc::free(p);
}
SLABKIT_EXPORT void operator delete(void *p, std::align_val_t) noexcept {
    libc::free(p);
}
SLABKIT_EXPORT void operator delete[](void *p, std::align_val_t) noexcept {
    libc::free(p);
}
SLABKIT_EXPORT void operator delete(void *p, std::align_val_t, const std::nothrow_t &) noexcept {
    libc::free(p);
}
SLABKIT_EXPORT void operator delete[](void *p, std::align_val_t, const std::nothrow_t &) noexcept {
    libc::free(p);
}
SLABKIT_EXPORT void operator delete(void *p, size_t, std::align_val_t) noexcept {
    libc::free(p);
}
SLABKIT_EXPORT void operator delete[](void *p, size_t, std::align_val_t) noexcept {
    libc::free(p);
}
