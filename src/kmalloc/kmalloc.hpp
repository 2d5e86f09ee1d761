// kmalloc.hpp - general-purpose allocation by size over a design's caches.
//
//   size 0                      the zero-size pointer (16): unique, never dereferenceable
//   1 .. 8192                   caches kmalloc-8 16 32 64 96 128 192 256 512 1k 2k 4k 8k
//   8193 .. 4 MiB               a block from the page allocator (2^order pages, naturally aligned)
//   above                       a mapping from the OS (large.hpp)
//
// A block's kind is found from its address alone (the page descriptor, else the OS block
// table), so free needs no size and no header.
//
// Alignment: power-of-two classes are naturally aligned (each cache's alignment is its size,
// up to a page), 96 and 192 are 16-aligned.
//
// Every design has its own set of kmalloc caches (class_set<D>), static descriptors opened on
// first use, so that objects of several designs live in one process: allocation goes to the set
// of the design asked for (the process's design, in the C API and malloc), and kfree finds a
// block's design from its slab page's owner cache.
#pragma once

#include "core/cache.hpp"
#include "designs/designs.hpp"

#include <cstddef>

namespace slabkit::kmalloc {

inline constexpr size_t kMaxCacheSize = 8192;
inline constexpr unsigned kNrClasses = 13;
inline void *const kZeroSizePtr = reinterpret_cast<void *>(16);

namespace detail {
// Sizes 1..192 by (size - 1) / 8.
inline constexpr uint8_t kSmallIndex[24] = {0, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4,
                                            5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6};

// One design's kmalloc caches: static descriptors, the design's static per-slot storage for
// each, and which are open (set, with release order, once the cache is usable).
template <class D>
struct class_set {
    typename D::cache_type caches[kNrClasses];
    std::atomic<bool> open[kNrClasses];
    typename D::slot_storage slots[kNrClasses];
};
// Every design's set, one static object (zero until classes are opened: the per-slot storage
// costs no memory until slots use it).
struct all_classes {
#define SLABKIT_DESIGN_SET(name) class_set<name::ops> name;
    SLABKIT_DESIGN_LIST(SLABKIT_DESIGN_SET)
#undef SLABKIT_DESIGN_SET
};
extern SLABKIT_HIDDEN all_classes g_classes;
// The set of design D.
template <class D>
class_set<D> &classes_of();
#define SLABKIT_DESIGN_SET_OF(name)                                                                \
    template <>                                                                                    \
    SLABKIT_ALWAYS_INLINE class_set<name::ops> &classes_of<name::ops>() {                          \
        return g_classes.name;                                                                     \
    }
SLABKIT_DESIGN_LIST(SLABKIT_DESIGN_SET_OF)
#undef SLABKIT_DESIGN_SET_OF
// Everything the inline paths below do not serve: size 0, sizes above the caches, an explicit
// node, a class not opened yet; and frees the fast check did not accept.
void *alloc_slow(design d, size_t size, bool zero, int node);
// `caller` names the entry point in a bad-free report ("kfree", "free", ...).
void free_slow(void *p, const char *caller);
} // namespace detail

// The class index serving `size` (1..kMaxCacheSize).
SLABKIT_ALWAYS_INLINE unsigned class_of(size_t size) {
    if (size <= 192) return detail::kSmallIndex[(size - 1) / 8];
    // 193..8192: powers of two from 256 (index 7).
    return 64 - static_cast<unsigned>(__builtin_clzll(size - 1)) - 1;
}
// The bytes of class i.
size_t class_size(unsigned i);

// The design's kmalloc cache of class i (opened on first call); nullptr if it could not be.
cache *cache_for(design d, unsigned i);

SLABKIT_ALWAYS_INLINE void *alloc(design d, size_t size, bool zero, int node) {
    // size - 1 wraps for 0, so one compare sends 0 and large sizes to the slow path.
    if (SLABKIT_LIKELY(size - 1 < kMaxCacheSize && node == kAnyNode)) {
        unsigned i = class_of(size);
        void *p;
        bool open = designs::visit(d, [&](auto ops) {
            auto &set = detail::classes_of<decltype(ops)>();
            if (SLABKIT_UNLIKELY(!set.open[i].load(std::memory_order_acquire))) return false;
            p = ops.alloc(&set.caches[i], zero);
            return true;
        });
        if (SLABKIT_LIKELY(open)) return p;
    }
    return detail::alloc_slow(d, size, zero, node);
}

// The fast path alone: an object of size's class from the calling slot's own store (SLQB's
// queue, SLUB's per-slot freelist), or nullptr (size 0 or above the caches, the class not open
// yet, nothing there) - alloc() then does the rest. For callers with their own slow path
// (malloc), whose fast path then needs no frame.
SLABKIT_ALWAYS_INLINE void *alloc_fast(design d, size_t size) {
    if (SLABKIT_LIKELY(size - 1 < kMaxCacheSize)) {
        unsigned i = class_of(size);
        return designs::visit(d, [&](auto ops) -> void * {
            auto &set = detail::classes_of<decltype(ops)>();
            if (SLABKIT_LIKELY(set.open[i].load(std::memory_order_acquire)))
                return ops.alloc_fast(&set.caches[i]);
            return nullptr;
        });
    }
    return nullptr;
}

// A block of `size` (>= 1) bytes aligned to `align` (a power of two): the smallest class whose
// natural alignment is enough, else a page block of the right order, else an OS block.
void *alloc_aligned(design d, size_t size, size_t align, bool zero);

SLABKIT_ALWAYS_INLINE void free(void *p, const char *caller = "kfree") {
    cache *owner;
    page *pg = slab_page_check<true>(nullptr, p, &owner);
    if (SLABKIT_UNLIKELY(!pg)) return detail::free_slow(p, caller);
    // The block's design is its slab's cache's: objects of several designs may meet here.
    return designs::visit(owner, [&](auto ops, auto *s) { ops.free_to_slab(s, pg, p); });
}

// The bytes usable at p: its class's size, page block or OS block size; 0 for NULL, the
// zero-size pointer, and anything kmalloc did not hand out.
size_t usable_size(const void *p);
// Resizes in place when the block can hold `size` (shrinking included, as the kernel's krealloc);
// otherwise allocates, copies and frees. nullptr (p untouched) on failure.
void *realloc(design d, void *p, size_t size, bool zero);

} // namespace slabkit::kmalloc
