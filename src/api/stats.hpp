// stats.hpp - figures over every cache and the page allocator, for the C API's statistics calls
// and for the malloc override's mallinfo2 and malloc_stats.
#pragma once

#include "core/cache.hpp"
#include "slabkit/slabkit.h"

#include <cstdint>

namespace slabkit::api {

// One cache's figures (slabkit_get_cache_stats). The caller holds the registry lock.
void fill_stats(const cache *c, slabkit_cache_stats *out);
// A cache's free objects: in its slabs, and parked on per-slot queues and shared lists (which
// the designs' /proc/slabinfo counts as active).
inline uint64_t free_objects_of(const slabkit_cache_stats &st) {
    return st.objects - st.active_objects + st.queued_objects;
}

// A cache's debug flags as SLABKIT_DEBUG's letters ("FZPU..."; "" for none) into buf.
void debug_letters(unsigned flags, char *buf, size_t size);

// Sums over every live cache (internal ones included) and the page allocator.
struct heap_totals {
    uint64_t caches = 0;
    uint64_t slab_pages = 0;          // pages held by slabs
    uint64_t objects_in_use = 0;      // handed out and not freed
    uint64_t object_bytes = 0;        // objects_in_use * their slot sizes
    uint64_t free_objects = 0;        // free slots in slabs, queues, outboxes and inboxes
    uint64_t free_object_bytes = 0;   // their bytes
    uint64_t block_pages = 0;         // page allocator blocks handed out other than slabs
    uint64_t free_pages = 0;          // free in the page allocator (buddy and per-slot lists)
    uint64_t free_resident_pages = 0; // of those, the ones that may still be resident
    uint64_t returned_pages = 0;      // given back to the OS since start
    uint64_t reserved_bytes = 0;      // address space reserved by the page allocator
    uint64_t large_blocks = 0;        // blocks mapped from the OS directly
    uint64_t large_bytes = 0;
    uint64_t kept_blocks = 0; // freed blocks mapped from the OS, kept for reuse (resident)
    uint64_t kept_bytes = 0;
    uint64_t errors = 0; // bad frees reported
    // Requests for memory refused (page allocator blocks and OS blocks): out of memory, or
    // out of address space under a limit. Each failed malloc, kmalloc or cache allocation
    // shows here as at least one.
    uint64_t refusals = 0;
};
void gather_heap_totals(heap_totals *out);
// Its two parts, for a caller that walks the caches itself (the JSON snapshot, malloc_info):
// one cache's share, and what is not the caches' (page allocator, OS blocks, errors), once the
// caches are in.
void add_cache_to_totals(heap_totals *t, const slabkit_cache_stats &st);
void add_pages_to_totals(heap_totals *t);
// mallinfo2's arena: pages held for slabs and page blocks, free pages that may be resident, and
// freed OS blocks kept for reuse, in bytes.
inline uint64_t arena_bytes(const heap_totals &t) {
    return (t.slab_pages + t.block_pages + t.free_resident_pages) * kPageSize + t.kept_bytes;
}

// Writes the statistics report (slabinfo table, then the page allocator and heap totals) to fd.
void print_stats(int fd);

// glibc's malloc_info XML (version 1) from the same figures as mallinfo2 (docs/override.md):
// one heap, whose <sizes> are the caches with free objects (their slot size, the count and
// bytes of free objects), then the totals. Returns the full length, like snprintf.
size_t malloc_info_xml(char *buf, size_t size);

} // namespace slabkit::api
