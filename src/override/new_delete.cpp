// new_delete.cpp - every replaceable operator new and delete of C++17 and later, on the malloc
// family.
//
// The library does not depend on the C++ runtime: a C program that preloads it (python3,
// sqlite3, cc1plus) should not load libstdc++, which costs it about 1.5 MiB of resident memory.
// What a failed operator new needs from the runtime - the installed new-handler, and throwing
// std::bad_alloc - is reached through weak references, which find libstdc++ in any C++ program
// (it is loaded there already) and are null in a C program, where no handler can be installed.
// This file is compiled without exceptions (no personality routine, no catch): a bad_alloc
// thrown by the runtime unwinds through these frames with their unwind tables.
#include "override/malloc.hpp"
#include "platform/platform.hpp"

#include <new>

#define SLABKIT_EXPORT __attribute__((visibility("default")))

using namespace slabkit;

// std::get_new_handler() and std::__throw_bad_alloc() of libstdc++, if it is loaded.
extern "C" std::new_handler slabkit_cxx_get_new_handler() __asm__("_ZSt15get_new_handlerv")
    __attribute__((weak));
extern "C" [[noreturn]] void slabkit_cxx_throw_bad_alloc() __asm__("_ZSt17__throw_bad_allocv")
    __attribute__((weak));

namespace {

std::new_handler current_handler() {
    return slabkit_cxx_get_new_handler ? slabkit_cxx_get_new_handler() : nullptr;
}

// Alignments up to malloc's own need nothing more than a large enough size.
SLABKIT_ALWAYS_INLINE void *alloc_aligned(size_t size, size_t align) {
    if (align <= libc::kMallocAlign) return libc::malloc(size < align ? align : size);
    return libc::memalign(align, size);
}

// The standard's loop, after the caller's allocation failed: the new-handler, then a retry;
// without one, throw. (No retry before the handler: fault injection asks once per call.)
SLABKIT_NOINLINE void *new_slow(size_t size, size_t align) {
    for (;;) {
        std::new_handler handler = current_handler();
        if (!handler) {
            if (slabkit_cxx_throw_bad_alloc) slabkit_cxx_throw_bad_alloc();
            platform::fatal("slabkit: operator new(%zu): out of memory, and no C++ runtime to "
                            "throw std::bad_alloc\n",
                            size);
        }
        handler();
        if (void *p = alloc_aligned(size, align)) return p;
    }
}

// A nothrow new whose allocation failed (the caller's). Without a new-handler the answer is
// NULL. With one, the handler may throw, and the exception must become NULL: that takes a
// catch, which this runtime-free file cannot have, so the C++ runtime's own nothrow operator
// (the next definition of the symbol, which wraps the throwing operator new - ours - in a
// try/catch) does it.
SLABKIT_NOINLINE void *new_nothrow_slow(size_t size, size_t align) noexcept {
    if (!current_handler()) return nullptr;
    const std::nothrow_t tag{}; // not std::nothrow: that object lives in libstdc++
    if (align <= libc::kMallocAlign) {
        using nothrow_new = void *(*)(size_t, const std::nothrow_t &) noexcept;
        auto next = reinterpret_cast<nothrow_new>(platform::next_symbol("_ZnwmRKSt9nothrow_t"));
        return next ? next(size, tag) : nullptr;
    }
    using nothrow_aligned_new =
        void *(*)(size_t, std::align_val_t, const std::nothrow_t &) noexcept;
    auto next = reinterpret_cast<nothrow_aligned_new>(
        platform::next_symbol("_ZnwmSt11align_val_tRKSt9nothrow_t"));
    return next ? next(size, std::align_val_t{align}, tag) : nullptr;
}

// kArray: new[] rather than new. Both are malloc's fast path; while debugging every block comes
// from their slow paths, which mark it with its form (libc::detail::new_array_slow).
template <bool kArray>
SLABKIT_ALWAYS_INLINE void *new_impl(size_t size) {
    void *p = libc::malloc_or < kArray ? libc::detail::new_array_slow
                                       : libc::detail::new_object_slow > (size);
    if (SLABKIT_LIKELY(p != nullptr)) return p;
    return new_slow(size, 1);
}

template <bool kArray>
SLABKIT_ALWAYS_INLINE void *new_nothrow_impl(size_t size) noexcept {
    void *p = libc::malloc_or < kArray ? libc::detail::new_array_slow
                                       : libc::detail::new_object_slow > (size);
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
// While debugging, the sized deletes check them against the block.
SLABKIT_EXPORT void *operator new(size_t size) {
    return new_impl<false>(size);
}
SLABKIT_EXPORT void *operator new[](size_t size) {
    return new_impl<true>(size);
}
SLABKIT_EXPORT void *operator new(size_t size, const std::nothrow_t &) noexcept {
    return new_nothrow_impl<false>(size);
}
SLABKIT_EXPORT void *operator new[](size_t size, const std::nothrow_t &) noexcept {
    return new_nothrow_impl<true>(size);
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

// The plain deletes name themselves to kmalloc's free: while debugging, a block made by the
// other form of new is reported (core/debug.cpp, free).
SLABKIT_EXPORT void operator delete(void *p) noexcept {
    kmalloc::free(p, "operator delete");
}
SLABKIT_EXPORT void operator delete[](void *p) noexcept {
    kmalloc::free(p, "operator delete[]");
}
SLABKIT_EXPORT void operator delete(void *p, const std::nothrow_t &) noexcept {
    kmalloc::free(p, "operator delete");
}
SLABKIT_EXPORT void operator delete[](void *p, const std::nothrow_t &) noexcept {
    kmalloc::free(p, "operator delete[]");
}
SLABKIT_EXPORT void operator delete(void *p, size_t size) noexcept {
    libc::free_sized(p, size, 0, "operator delete");
}
SLABKIT_EXPORT void operator delete[](void *p, size_t size) noexcept {
    libc::free_sized(p, size, 0, "operator delete[]");
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
SLABKIT_EXPORT void operator delete(void *p, size_t size, std::align_val_t align) noexcept {
    libc::free_sized(p, size, static_cast<size_t>(align), "operator delete");
}
SLABKIT_EXPORT void operator delete[](void *p, size_t size, std::align_val_t align) noexcept {
    libc::free_sized(p, size, static_cast<size_t>(align), "operator delete[]");
}
