// slob.hpp - SLOB, the simple list of blocks (Matt Mackall, 2006; mm/slob.c of v6.3), the
// compact design for small machines: no per-slot anything, one lock.
//
// Structures:
//   a SLOB page  an order-0 page holding blocks of any size, of every cache and of kmalloc
//                alike. Its free blocks are kept in address order, each recording its size and
//                the offset of the next free block, in 2-byte units (the kernel's slob_t): a
//                block of more than one unit stores {units, next}, a one-unit block stores
//                -next. page::priv[0] the first free block, priv[1] the free units, aux the list
//                the page is on (1..3, 0 for none: a page with no free unit), owner the arena.
//   the arena    one slob_cache that owns every SLOB page (what kfree and the bad-free checks
//                find from a page), and the three lists of pages with free units, by request
//                size: small (under 256 bytes), medium (under 1024), large (the rest).
//   slob_cache   a cache: the common descriptor and a count of its live objects; no slabs.
//
// Paths (all under the one lock):
//   alloc  search the request's list for a page with enough free units, first fit within the
//          page, honouring alignment (an aligned block splits the free block before it); the
//          list is rotated so that the page where a search succeeds is its head and the pages
//          passed over its tail (Knuth's next fit). None: a new page. A cache's object takes
//          the units of its size at the cache's alignment; objects of a page or more take
//          whole pages from the page allocator.
//   free   put the block back in address order, merging with the free block before and the one
//          after it - including a block freed just before the page's first free block (seed
//          002's fix) - and give the page back when all of it is free.
//   kmalloc  an 8-byte header (the kernel's minalign) before the block holds the size asked for
//          (and a check word); the block 8-aligned, a power-of-two size aligned to itself; sizes
//          from a page less 8 bytes go to the page allocator; ksize: the header's size in whole
//          units (the kernel's __ksize).
//   constructors run on every allocation, as the kernel's SLOB ran them.
//
// Lock order: cache registry -> the SLOB lock (statistics walk the pages under it); the page
// allocator is called with it dropped.
#pragma once

#include "core/cache.hpp"
#include "core/counter.hpp"
#include "core/debug.hpp"
#include "core/design.hpp"
#include "page/page_list.hpp"
#include "platform/lock.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace slabkit::slob {

// The arena's statistics (SLOB-wide). The first ones are gauges read when asked.
enum stat_item : unsigned {
    PAGES_SMALL,   // pages on the small list now
    PAGES_MEDIUM,  // on the medium list
    PAGES_LARGE,   // on the large list
    PAGES_FULL,    // SLOB pages with no free unit (on no list)
    FREE_UNITS,    // free 2-byte units over every SLOB page
    ALLOCS,        // blocks handed out (objects and kmalloc blocks under a page)
    FREES,         // blocks given back
    SEARCH_PAGES,  // pages an allocation looked into (a search step)
    SEARCH_BLOCKS, // free blocks it looked at
    SEARCH_FAILS,  // allocations that found no page and took a new one
    MERGES,        // frees that merged with a neighbouring free block (each neighbour counts)
    NEW_PAGES,     // pages taken from the page allocator
    PAGES_FREED,   // pages given back once all their blocks were free
    BIG_ALLOCS,    // objects and kmalloc blocks of a page or more, straight from the page allocator
    NR_STATS
};
extern const char *const kStatNames[NR_STATS];

using slobidx = int16_t;
inline constexpr size_t kUnit = sizeof(slobidx);
inline constexpr unsigned kPageUnits = static_cast<unsigned>(kPageSize / kUnit);
inline constexpr size_t kBreak1 = 256;  // the kernel's SLOB_BREAK1: small below it
inline constexpr size_t kBreak2 = 1024; // SLOB_BREAK2: medium below it, large from it
// kmalloc's minimum alignment, and its header's bytes: the kernel's minalign, the larger of
// ARCH_KMALLOC_MINALIGN and ARCH_SLAB_MINALIGN (both 8 on x86-64).
inline constexpr size_t kMinalign = 8;
static_assert(kMinalign == kMinAlign);
// The units a request of `bytes` takes.
constexpr unsigned units_of(size_t bytes) {
    return static_cast<unsigned>((bytes + kUnit - 1) / kUnit);
}

struct slob_cache : cache {
    bool arena = false;
    uint64_t live = 0;       // objects out (under the SLOB lock)
    counter stats[NR_STATS]; // the arena's; a cache counts its own ALLOCS and FREES
};

// SLOB keeps nothing per slot: an empty slot storage for kmalloc's class sets.
struct slot_storage {};

void bootstrap();
slob_cache *create(const cache_args &args, const char **why);
bool open_static(slob_cache *s, slot_storage *slots, const cache_args &args, const char **why);
void destroy(slob_cache *s);
size_t reclaim(slob_cache *s);
bool tune(slob_cache *s, const char *name, unsigned long value, const char **why);
bool set_order(slob_cache *s, unsigned order, const char **why);
void statistics(slob_cache *s, design_stats *out);
// Checks every SLOB page (the arena) or, for a cache, the arena too: free blocks in address
// order inside their page, no two free blocks adjacent, every block's size at least one unit,
// the page's free units matching its blocks, a page on the list its state says.
unsigned validate(slob_cache *s, char *report, size_t size);
void fork_cache(slob_cache *s, fork_op op);

void *alloc(slob_cache *s, int node, bool zero);
void free(slob_cache *s, void *obj);
// kfree's path: a block of a SLOB page (or of a cache's whole pages) whose page kfree found;
// kfree names the caller (`op`) in its reports.
void free_to_slab(slob_cache *s, page *pg, void *obj);
void kfree(slob_cache *s, page *pg, void *obj, const char *op);

// kmalloc: `size` (>= 1) bytes aligned to `align` (a power of two, kMinalign at least), zeroed if
// asked; nullptr when memory is short. With align kMinalign, the kernel's kmalloc: size +
// kMinalign bytes, the header holding size, a power-of-two size aligned to itself; the caller
// (kmalloc's own_kmalloc) sends sizes below a page less kMinalign, as the kernel's. A larger
// align (the malloc family's 16, an aligned request): the block aligned so; at 16, rounded up
// so that the next block can start aligned right after it, its header holding the rounded size;
// the caller keeps size + 2 x align below a page. With debug flags (the spec's for the size's
// class), its red zones more (56 bytes), and the tracks with U: a block the debug layer checks
// (red zones,
// poison, quarantine, owner tracking with U; slob_cache.cpp).
void *kmalloc(size_t size, size_t align, bool zero, int node, unsigned debug_flags);
// ksize of p, an object start (kfree's check) of a slab page of s: for the arena, a kmalloc
// block's (the kernel's __ksize: its header's size in whole units, the size asked for rounded
// up to 2 bytes - a malloc block's rounded size; a debugged block's size asked for; 0 if p has
// no valid header); for a cache, the bytes its objects take (their units).
size_t usable_size(const slob_cache *s, const void *p);
// A debugged kmalloc block of the arena (p) made by operator new or new[]: its header says so, so
// that the other form's delete is reported (debug::mismatched_delete). Plain blocks: nothing.
void note_origin(const slob_cache *s, void *p, debug::origin o);
// A debugged kmalloc block of the arena that waits in the quarantine: reported as a use after
// free by `op`, true; false for anything else.
bool report_if_freed(const slob_cache *s, const void *p, const char *op);

// The arena: the owner of every SLOB page.
slob_cache &arena();

// The design interface (core/design.hpp), checked in designs/designs.hpp.
struct ops {
    using cache_type = slob_cache;
    using slot_storage = slob::slot_storage;
    static constexpr design kind = design::slob;
    // SLOB serves kmalloc itself (a size header per block), not through kmalloc's class caches.
    static constexpr bool own_kmalloc = true;
    static void bootstrap() { slob::bootstrap(); }
    static slob_cache *create(const cache_args &a, const char **why) {
        return slob::create(a, why);
    }
    static bool open_static(slob_cache *s, slot_storage *slots, const cache_args &a,
                            const char **why) {
        return slob::open_static(s, slots, a, why);
    }
    static void destroy(slob_cache *s) { slob::destroy(s); }
    static void flush_slot(slob_cache *, unsigned, bool) {}
    static size_t reclaim(slob_cache *s) { return slob::reclaim(s); }
    static void trim(slob_cache *) {}
    static bool tune(slob_cache *s, const char *name, unsigned long value, const char **why) {
        return slob::tune(s, name, value, why);
    }
    static bool set_order(slob_cache *s, unsigned order, const char **why) {
        return slob::set_order(s, order, why);
    }
    static void statistics(slob_cache *s, design_stats *out) { slob::statistics(s, out); }
    static unsigned validate(slob_cache *s, char *buf, size_t size) {
        return slob::validate(s, buf, size);
    }
    static void fork_boot(fork_op) {}
    static void fork_cache(slob_cache *s, fork_op op) { slob::fork_cache(s, op); }
    static void *alloc(slob_cache *s, bool zero) { return slob::alloc(s, kAnyNode, zero); }
    static void *alloc_fast(slob_cache *, const slot_storage *) { return nullptr; }
    template <class OnCpu, class OnEmpty, class OnPop>
    static void *alloc_fast(slob_cache *, const slot_storage *, OnCpu &&, OnEmpty &&on_empty,
                            OnPop &&) {
        return on_empty();
    }
    static void *alloc_cpu(slob_cache *, const slot_storage *) { return nullptr; }
    static void *alloc_node(slob_cache *s, int node, bool zero) {
        return slob::alloc(s, node, zero);
    }
    static void free(slob_cache *s, void *obj) { slob::free(s, obj); }
    static void free_to_slab(slob_cache *s, page *pg, void *obj) { slob::free_to_slab(s, pg, obj); }
    static void *kmalloc(size_t size, size_t align, bool zero, int node, unsigned debug_flags) {
        return slob::kmalloc(size, align, zero, node, debug_flags);
    }
    static void kfree(slob_cache *s, page *pg, void *p, const char *op) {
        slob::kfree(s, pg, p, op);
    }
    static size_t usable_size(const slob_cache *s, const void *p) {
        return slob::usable_size(s, p);
    }
    static void note_origin(const slob_cache *s, void *p, debug::origin o) {
        slob::note_origin(s, p, o);
    }
    static bool report_if_freed(const slob_cache *s, const void *p, const char *op) {
        return slob::report_if_freed(s, p, op);
    }
};

} // namespace slabkit::slob
