// slob_internal.hpp - SLOB's blocks, pages and lock, shared by its two files.
#pragma once

#include "slob/slob.hpp"

namespace slabkit::slob {

// The one lock.
platform::mutex &lock();

// The list a request of `bytes` searches, and a new page for it joins: 0 (small) below kBreak1
// (the kernel's SLOB_BREAK1, 256), 1 (medium) below kBreak2 (SLOB_BREAK2, 1024), 2 (large) from
// there. A request is the size slob_alloc is asked for: a cache's object size, a kmalloc block's
// size with its header.
unsigned list_for(size_t bytes);
// Under the lock, for the checker and the tests: the list page pg is on (1 + list_for's value;
// 0 for none: a full page), the first page of a list (0..2; page::next walks it in search
// order), and a page's free units.
unsigned list_of_page(const page *pg);
page *first_on_list(unsigned list);
unsigned free_units_of(const page *pg);

// Why a free was refused (the caller reports it once the lock is dropped).
enum class free_error : uint8_t { none, overlaps_free_block, past_the_page };

// Under the lock: a block of `bytes` from the lists, its address + align_offset aligned to
// `align` (0: no alignment beyond a unit); nullptr when no page has room (the caller then adds
// a page with add_page and tries again). `node` kAnyNode or the node the page must be on.
void *block_alloc(size_t bytes, size_t align, size_t align_offset, int node);
// Under the lock: makes the fresh order-0 page at `mem` one free block on the list for
// requests of `bytes`.
void add_page(void *mem, size_t bytes);
// Under the lock: first fit inside one page (the search's step; tests call it on their own
// page): a block of `bytes` whose address + align_offset is aligned to `align`, or nullptr.
void *alloc_in_page(page *pg, size_t bytes, size_t align, size_t align_offset);
// A debug cache's block paths (cache::debug_alloc, debug_free).
void *debug_slot_alloc(cache *c, int node);
void debug_slot_free(cache *c, void *slot);
// Under the lock: fn(offset, units) for each free block of page pg, offsets in units from its
// start, in list order; a one-unit block is reported as such.
void for_each_free_block(page *pg, void (*fn)(unsigned offset, unsigned units, void *arg),
                         void *arg);
// Under the lock: gives back a block of `bytes` at b; *page_out is the page to return to the
// page allocator once the lock is dropped (all of it free), or nullptr. With `zero`, the block
// is zeroed once it is known to be in use (init on free).
free_error block_free(void *b, size_t bytes, void **page_out, bool zero = false);

// Gives a page back to the page allocator (no lock held).
void release_page(void *mem);

// The arena's counters.
inline void count(stat_item item, uint64_t n = 1) {
    arena().stats[item].add(n);
}

// Walks every SLOB page's free blocks (validate, statistics); under the lock.
struct page_walk {
    uint64_t pages = 0, listed = 0, free_units = 0;
    uint64_t per_list[3] = {};
};
void walk_lists(page_walk *w);

} // namespace slabkit::slob
