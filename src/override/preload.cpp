// preload.cpp - libslabkit-malloc.so's C symbols: the malloc family under its standard names,
// for LD_PRELOAD or for linking, plus glibc's malloc_trim, mallinfo2, mallinfo, mallopt and
// malloc_stats. Compiled only into that library (the libslabkit.so and the static library keep
// the prefixed names of slabkit.h, so that they can live beside another malloc).
//
// None of these allocate through anything but kmalloc, and kmalloc's set-up is static: the
// first call may come from the dynamic linker or another library's constructor, before main
// and before our own constructors.
#include "api/stats.hpp"
#include "override/malloc.hpp"
#include "page/page.hpp"
#include "platform/platform.hpp"

#include "platform/lock.hpp"

#include <cerrno>
#include <cstdio>
#include <malloc.h>

#define SLABKIT_EXPORT extern "C" __attribute__((visibility("default")))

using namespace slabkit;

SLABKIT_EXPORT void *malloc(size_t size) {
    return libc::malloc(size);
}
SLABKIT_EXPORT void free(void *p) {
    libc::free(p);
}
SLABKIT_EXPORT void *calloc(size_t n, size_t size) {
    return libc::calloc(n, size);
}
SLABKIT_EXPORT void *realloc(void *p, size_t size) {
    return libc::realloc(p, size);
}
SLABKIT_EXPORT void *reallocarray(void *p, size_t n, size_t size) {
    return libc::reallocarray(p, n, size);
}
SLABKIT_EXPORT void *memalign(size_t align, size_t size) {
    return libc::memalign(align, size);
}
SLABKIT_EXPORT int posix_memalign(void **out, size_t align, size_t size) {
    return libc::posix_memalign(out, align, size);
}
SLABKIT_EXPORT void *aligned_alloc(size_t align, size_t size) {
    return libc::aligned_alloc(align, size);
}
SLABKIT_EXPORT void *valloc(size_t size) {
    return libc::valloc(size);
}
SLABKIT_EXPORT void *pvalloc(size_t size) {
    return libc::pvalloc(size);
}
SLABKIT_EXPORT size_t malloc_usable_size(void *p) {
    return libc::usable_size(p);
}
// C23: the size (and alignment) the caller states are not needed to find the block; while
// debugging they are checked against it.
SLABKIT_EXPORT void free_sized(void *p, size_t size) {
    libc::free_sized(p, size, 0, "free_sized");
}
SLABKIT_EXPORT void free_aligned_sized(void *p, size_t align, size_t size) {
    libc::free_sized(p, size, align, "free_aligned_sized");
}

// ---- glibc's extensions ---------------------------------------------------------------------

// Gives back what slabkit can (every thread's idle queues, free pages): 1 if memory went back
// to the OS. The padding glibc keeps at the top of its heap has no counterpart.
SLABKIT_EXPORT int malloc_trim(size_t) {
    return libc::trim() ? 1 : 0;
}

// glibc's fields, filled with slabkit's figures (docs/override.md has the mapping):
//   arena     bytes the page allocator holds for slabs and blocks, free resident pages, and
//             freed OS blocks kept for reuse
//   ordblks   free objects in slabs and queues     smblks, usmblks, fsmblks, keepcost   0
//   hblks     blocks mapped from the OS directly   hblkhd  their bytes
//   uordblks  bytes handed out (objects and page blocks)  fordblks  arena - uordblks
SLABKIT_EXPORT struct mallinfo2 mallinfo2(void) {
    api::heap_totals t;
    api::gather_heap_totals(&t);
    struct mallinfo2 mi = {};
    const size_t page = kPageSize;
    mi.arena = arena_bytes(t);
    mi.ordblks = t.free_objects;
    mi.hblks = t.large_blocks;
    mi.hblkhd = t.large_bytes;
    mi.uordblks = t.object_bytes + t.block_pages * page;
    mi.fordblks = mi.arena > mi.uordblks ? mi.arena - mi.uordblks : 0;
    return mi;
}

// The old interface with int fields: the same figures, saturated at INT_MAX.
SLABKIT_EXPORT struct mallinfo mallinfo(void) {
    struct mallinfo2 m = mallinfo2();
    auto clamp = [](size_t v) { return v > INT32_MAX ? INT32_MAX : static_cast<int>(v); };
    struct mallinfo mi = {};
    mi.arena = clamp(m.arena);
    mi.ordblks = clamp(m.ordblks);
    mi.hblks = clamp(m.hblks);
    mi.hblkhd = clamp(m.hblkhd);
    mi.uordblks = clamp(m.uordblks);
    mi.fordblks = clamp(m.fordblks);
    return mi;
}

// glibc's parameters shape its arenas, bins and mmap threshold, none of which slabkit has:
// every documented one is accepted (1) and ignored; an unknown one is refused (0), as glibc does.
SLABKIT_EXPORT int mallopt(int param, int) {
    switch (param) {
    case M_MXFAST:
    case M_TRIM_THRESHOLD:
    case M_TOP_PAD:
    case M_MMAP_THRESHOLD:
    case M_MMAP_MAX:
    case M_CHECK_ACTION:
    case M_PERTURB:
    case M_ARENA_TEST:
    case M_ARENA_MAX:
        return 1;
    default:
        return 0;
    }
}

// glibc's XML statistics (api::malloc_info_xml: the same figures as mallinfo2). options must be
// 0 (EINVAL otherwise, as glibc).
SLABKIT_EXPORT int malloc_info(int options, FILE *fp) {
    if (options != 0 || !fp) {
        errno = EINVAL;
        return -1;
    }
    static char text[128 * 1024];
    static platform::mutex lock;
    platform::lock_guard guard(lock);
    size_t n = api::malloc_info_xml(text, sizeof text);
    if (n >= sizeof text) n = sizeof text - 1;
    // fwrite may allocate the stream's buffer: through slabkit's malloc, with no slabkit lock
    // held but this one, which malloc never takes.
    return fwrite(text, 1, n, fp) == n ? 0 : -1;
}

// The statistics report (slabinfo table and heap totals) on stderr, like glibc's per-arena one.
SLABKIT_EXPORT void malloc_stats(void) {
    api::print_stats(platform::kStderrFd);
}
