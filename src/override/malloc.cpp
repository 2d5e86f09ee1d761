// malloc.cpp - the slow paths of the malloc family, and the prefixed C API (slabkit_malloc, ...)
// that libslabkit.so exports.
#include "override/malloc.hpp"

#include "core/report.hpp"
#include "kmalloc/hot_class.hpp"
#include "kmalloc/large.hpp"
#include "kmalloc/zero_blocks.hpp"
#include "page/page_allocator.hpp"
#include "slabkit/slabkit.h"

#include <cstdio>
#include <cstring>

namespace slabkit::libc {

namespace {

SLABKIT_NOINLINE SLABKIT_COLD void *fail_nomem() {
    errno = ENOMEM;
    return nullptr;
}

constexpr bool is_pow2(size_t v) {
    return v && !(v & (v - 1));
}

// A pointer kmalloc does not know. report_bad_free aborts unless continue-on-error is set.
SLABKIT_NOINLINE SLABKIT_COLD void report_foreign(const char *caller, const void *p) {
    // A debug cache's freed object: a use after free, named so, with its sites.
    if (kmalloc::report_if_freed(p, caller)) return;
    char what[256];
    report_bad_free(caller, nullptr, p, diagnose_free(nullptr, p, what, sizeof what));
}

// A block up to 16-aligned: malloc's own alignment holds once the size is at least `align`.
SLABKIT_ALWAYS_INLINE void *malloc_aligned_small(size_t align, size_t size) {
    return malloc(size < align ? align : size);
}

} // namespace

void detail::checked_sized_free(void *p, size_t size, size_t align, const char *caller) {
    if (p == nullptr) return;
    const size_t have = kmalloc::usable_size(p);
    if (have == 0) return kmalloc::free(p, caller); // not a block: reported there
    if (size == 0) size = 1;                        // malloc(0) and new of 0 bytes take 1
    // The block must be the one an allocation of `size` bytes (aligned) gets: of a class that
    // size maps to (the malloc table's, or the kernel table's for aligned and memalign'd
    // blocks), or, above the caches, at least that size and less than twice it plus a page.
    const bool own = kmalloc::has_own_kmalloc(process_design());
    bool fits = size <= have;
    if (!fits || size == have) {
        // Too large; or exactly the size asked for (a debug object's usable size), which fits.
    } else if (have > kmalloc::kMaxCacheSize && align <= kPageSize) {
        // While debugging (the only time sizes are checked) every block above the caches is a
        // guarded OS block that ends at its guard page, as near as its alignment (16 bytes at
        // least) lets it (kmalloc/large.cpp): it holds the size asked for and less than that
        // alignment more. (If the OS refused the guard's mapping, a page block of the size's
        // order: at least the size and under twice it plus a page.)
        const size_t end_align = align > 16 ? align : 16;
        fits = have - size < end_align || (in_arena(p) && have < 2 * size + kPageSize);
    } else if (have > kmalloc::kMaxCacheSize) {
        // Aligned beyond a page: a page block or region block of at least the alignment.
        const size_t n = size < align ? align : size;
        fits = have < 2 * n + kPageSize;
    } else if (own && have >= kPageSize) {
        // A page or OS block: at least the size, less than twice it and a page.
        fits = have < 2 * size + kPageSize;
    } else if (own) {
        // SLOB's own blocks hold what was asked, rounded up for its units and alignment.
        fits = have < size + 2 * kMallocAlign + align;
    } else {
        // A class of one of the two tables.
        // A malloc class of the size: the fixed one, or the hot class of its step (blocks
        // allocated before the step got it are in the fixed one).
        fits = have == kmalloc::class_size(kmalloc::malloc_fixed_class_of(size), kMallocTable) ||
               have == kmalloc::class_size(kmalloc::malloc_class_of(size), kMallocTable) ||
               have == kmalloc::class_size(kmalloc::class_of(size < align ? align : size)) ||
               (align && have == kmalloc::aligned_class_size(size, align));
    }
    const bool aligned = align == 0 || (reinterpret_cast<uintptr_t>(p) & (align - 1)) == 0;
    if (fits && aligned) return kmalloc::free(p, caller);
    char what[200];
    if (align) {
        snprintf(what, sizeof what,
                 "%s of %zu bytes aligned to %zu, but the block holds %zu bytes%s: not how it "
                 "was allocated",
                 caller, size, align, have, aligned ? "" : " at an address not so aligned");
    } else {
        snprintf(what, sizeof what,
                 "%s of %zu bytes, but the block holds %zu bytes: not the size it was allocated "
                 "with",
                 caller, size, have);
    }
    report_bad_free(caller, nullptr, p, what);
}

void *detail::malloc_slow(size_t size) {
    if (size == 0) {
        // While debugging, a pointer whose every use faults (kmalloc/zero_blocks.hpp).
        if (kmalloc::debugging())
            if (void *z = zero_blocks::alloc()) return z;
        size = 1; // a unique pointer, not kmalloc's shared zero-size one
    } else if (size > kMaxRequest) {
        return fail_nomem();
    }
    // The slot (or the CPU's) is empty: the class is being refilled (hot_class.hpp).
    kmalloc::note_malloc_refill(process_design(), size);
    void *p = kmalloc::alloc<kMallocTable>(process_design(), size, false, kAnyNode);
    if (!p) return fail_nomem();
    // While debugging, every malloc comes here (debug classes have no fast path): the class's
    // slack after the size asked for becomes red zone.
    if (kmalloc::debugging_decided()) kmalloc::note_request(p, size);
    return p;
}

void *detail::new_object_slow(size_t size) {
    void *p = malloc_slow(size);
    if (p && kmalloc::debugging_decided()) kmalloc::note_origin(p, false);
    return p;
}

void *detail::new_array_slow(size_t size) {
    void *p = malloc_slow(size);
    if (p && kmalloc::debugging_decided()) kmalloc::note_origin(p, true);
    return p;
}

void *detail::calloc_failed() {
    return fail_nomem();
}

void *detail::calloc_slow(size_t n, size_t size) {
    size_t total;
    if (__builtin_mul_overflow(n, size, &total) || total > kMaxRequest) return fail_nomem();
    if (total == 0) total = 1;
    void *p = kmalloc::alloc<kMallocTable>(process_design(), total, true, kAnyNode);
    return p ? p : fail_nomem();
}

void *detail::aligned_slow(size_t align, size_t size) {
    if (size > kMaxRequest) return fail_nomem();
    if (size == 0) size = 1;
    void *p = kmalloc::alloc_aligned(process_design(), size, align, false, kMallocTable);
    return p ? p : fail_nomem();
}

void *memalign(size_t align, size_t size) {
    if (align <= kMallocAlign) return malloc_aligned_small(align, size);
    if (align > SIZE_MAX / 2 + 1) {
        errno = EINVAL;
        return nullptr;
    }
    if (!is_pow2(align)) align = size_t{1} << (64 - __builtin_clzll(align));
    return detail::aligned_slow(align, size);
}

int posix_memalign(void **out, size_t align, size_t size) {
    if (!is_pow2(align) || align % sizeof(void *) != 0) return EINVAL;
    const int saved = errno;
    void *p = align <= kMallocAlign ? malloc_aligned_small(align, size)
                                    : detail::aligned_slow(align, size);
    errno = saved;
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}

void *aligned_alloc(size_t align, size_t size) {
    if (!is_pow2(align)) {
        errno = EINVAL;
        return nullptr;
    }
    if (align <= kMallocAlign) return malloc_aligned_small(align, size);
    return detail::aligned_slow(align, size);
}

void *valloc(size_t size) {
    return detail::aligned_slow(kPageSize, size);
}

void *pvalloc(size_t size) {
    size_t whole = (size + kPageSize - 1) & ~(kPageSize - 1);
    if (whole < size) return fail_nomem();
    return detail::aligned_slow(kPageSize, whole ? whole : kPageSize);
}

void *realloc(void *p, size_t size) {
    if (p == nullptr) return malloc(size);
    if (size == 0) {
        kmalloc::free(p, "realloc");
        return nullptr;
    }
    if (size > kMaxRequest) return fail_nomem();
    const size_t have = kmalloc::usable_size(p);
    if (SLABKIT_UNLIKELY(have == 0)) {
        if (zero_blocks::owns(p)) { // malloc(0)'s block while debugging: holds nothing to copy
            void *q = malloc(size);
            if (q) zero_blocks::free(p, "realloc");
            return q;
        }
        report_foreign("realloc", p);
        errno = EINVAL; // continue-on-error: nothing done
        return nullptr;
    }
    if (size <= have) {
        // In place unless the block would be mostly empty: then a smaller block, if one can be
        // had (shrinking never fails).
        const bool debugging = kmalloc::debugging_decided();
        if (size >= have / 2 || have <= kMallocAlign) {
            if (debugging) kmalloc::note_request(p, size);
            return p;
        }
        const int saved = errno;
        void *q = kmalloc::alloc<kMallocTable>(process_design(), size, false, kAnyNode);
        errno = saved;
        if (!q) {
            if (debugging) kmalloc::note_request(p, size);
            return p;
        }
        if (debugging) kmalloc::note_request(q, size);
        memcpy(q, p, size);
        kmalloc::free(p, "realloc");
        return q;
    }
    // Blocks of the region grow in place, or move by remapping their pages rather than copying
    // them (nullptr for any other block).
    if (have > kmalloc::kMallocRegionFrom) {
        if (void *q = large::resize(p, size)) return q;
    }
    void *q = kmalloc::alloc<kMallocTable>(process_design(), size, false, kAnyNode);
    if (!q) return fail_nomem();
    if (kmalloc::debugging_decided()) kmalloc::note_request(q, size);
    memcpy(q, p, have);
    kmalloc::free(p, "realloc");
    return q;
}

void *reallocarray(void *p, size_t n, size_t size) {
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) return fail_nomem();
    return realloc(p, total);
}

size_t usable_size(const void *p) {
    if (p == nullptr) return 0;
    const size_t have = kmalloc::usable_size(p);
    if (SLABKIT_UNLIKELY(have == 0) && !zero_blocks::owns(p))
        report_foreign("malloc_usable_size", p);
    return have;
}

bool trim() {
    slabkit_page_stats before, after;
    slabkit_get_page_stats(&before);
    const uint64_t kept = large::retained_bytes();
    slabkit_trim();
    slabkit_get_page_stats(&after);
    return after.pages_returned > before.pages_returned || large::retained_bytes() < kept;
}

} // namespace slabkit::libc

using namespace slabkit;

extern "C" {

void *slabkit_malloc(size_t size) {
    return libc::malloc(size);
}
void *slabkit_calloc(size_t n, size_t size) {
    return libc::calloc(n, size);
}
void *slabkit_realloc(void *p, size_t size) {
    return libc::realloc(p, size);
}
void *slabkit_reallocarray(void *p, size_t n, size_t size) {
    return libc::reallocarray(p, n, size);
}
void slabkit_free(void *p) {
    libc::free(p);
}
void slabkit_free_sized(void *p, size_t size) {
    libc::free_sized(p, size, 0, "free_sized");
}
void slabkit_free_aligned_sized(void *p, size_t align, size_t size) {
    libc::free_sized(p, size, align, "free_aligned_sized");
}
void *slabkit_memalign(size_t align, size_t size) {
    return libc::memalign(align, size);
}
int slabkit_posix_memalign(void **out, size_t align, size_t size) {
    return libc::posix_memalign(out, align, size);
}
void *slabkit_aligned_alloc(size_t align, size_t size) {
    return libc::aligned_alloc(align, size);
}
void *slabkit_valloc(size_t size) {
    return libc::valloc(size);
}
void *slabkit_pvalloc(size_t size) {
    return libc::pvalloc(size);
}
size_t slabkit_malloc_usable_size(const void *p) {
    return libc::usable_size(p);
}
int slabkit_malloc_trim(size_t) {
    return libc::trim() ? 1 : 0;
}

} // extern "C"
