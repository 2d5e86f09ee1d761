// slob_block.cpp - SLOB's blocks: the free-block encoding inside a page, first fit with
// alignment within a page, the three page lists and their next-fit search, and freeing with
// merges on both sides.
#include "page/page_allocator.hpp"
#include "slob/slob_internal.hpp"

#include <cstring>

namespace slabkit::slob {

namespace {

platform::mutex g_lock;
page_list g_lists[3]; // small, medium, large: pages with free units

// ---- the encoding (the kernel's slob_t): offsets and sizes in 2-byte units -----------------

slobidx *page_base_of(const slobidx *s) {
    return reinterpret_cast<slobidx *>(reinterpret_cast<uintptr_t>(s) & ~(kPageSize - 1));
}

// A free block of `units` at s whose next free block is `next` (the page's end: none).
void set_slob(slobidx *s, int units, slobidx *next) {
    int offset = static_cast<int>(next - page_base_of(s));
    if (units > 1) {
        s[0] = static_cast<slobidx>(units);
        s[1] = static_cast<slobidx>(offset);
    } else {
        s[0] = static_cast<slobidx>(-offset); // one unit: no room for two fields
    }
}

int slob_units(const slobidx *s) {
    return s[0] > 0 ? s[0] : 1;
}

slobidx *slob_next(slobidx *s) {
    int next = s[0] < 0 ? -s[0] : s[1];
    return page_base_of(s) + next;
}

bool slob_last(slobidx *s) {
    return (reinterpret_cast<uintptr_t>(slob_next(s)) & (kPageSize - 1)) == 0;
}

slobidx *freelist_of(const page *pg) {
    return reinterpret_cast<slobidx *>(pg->priv[0]);
}
void set_freelist(page *pg, slobidx *s) {
    pg->priv[0] = reinterpret_cast<uintptr_t>(s);
}
unsigned free_units(const page *pg) {
    return static_cast<unsigned>(pg->priv[1]);
}
void set_free_units(page *pg, unsigned u) {
    pg->priv[1] = u;
}

// page::aux of a SLOB page: the list it is on (bits 0..1: 1..3, 0 for none) and, from bit 8,
// an upper bound on its largest free block in units. A search skips a page whose bound is below
// the request without walking its blocks; a walk that fails sets the bound to the largest block
// it saw, a free raises it to the block it made. (The kernel walked every page whose free units
// sufficed, fragmented or not: with many fragmented pages a program's allocations each walked
// thousands of blocks.)
constexpr uint32_t kListBits = 0xff;
unsigned list_of(const page *pg) {
    return pg->aux & kListBits;
}
unsigned largest_hint(const page *pg) {
    return pg->aux >> 8;
}
void set_largest_hint(page *pg, unsigned units) {
    pg->aux = (pg->aux & kListBits) | (units << 8);
}
void raise_largest_hint(page *pg, unsigned units) {
    if (units > largest_hint(pg)) set_largest_hint(pg, units);
}

void list_add(page *pg, unsigned list) {
    g_lists[list].push_front(pg);
    pg->aux = (pg->aux & ~kListBits) | (list + 1);
}
void list_del(page *pg) {
    if (!list_of(pg)) return;
    g_lists[list_of(pg) - 1].remove(pg);
    pg->aux &= ~kListBits;
}

// First fit within one page (slob_page_alloc): the first free block that holds `units` once
// its start is moved up so that start + align_offset is aligned (the part skipped stays a free
// block of its own). Sets *emptied when the page has no free unit left.
slobidx *page_alloc(page *pg, unsigned units, size_t align, size_t align_offset, bool *emptied) {
    *emptied = false;
    slobidx *prev = nullptr;
    int largest = 0;
    for (slobidx *cur = freelist_of(pg);; prev = cur, cur = slob_next(cur)) {
        count(SEARCH_BLOCKS);
        int avail = slob_units(cur);
        if (avail > largest) largest = avail;
        int delta = 0;
        slobidx *aligned = cur;
        if (align) {
            uintptr_t a = reinterpret_cast<uintptr_t>(cur) + align_offset;
            a = (a + align - 1) & ~(align - 1);
            aligned = reinterpret_cast<slobidx *>(a - align_offset);
            delta = static_cast<int>(aligned - cur);
        }
        if (avail >= static_cast<int>(units) + delta) {
            if (delta) {
                // Split off the head that alignment skips: it stays free, before the block.
                slobidx *next = slob_next(cur);
                set_slob(aligned, avail - delta, next);
                set_slob(cur, delta, aligned);
                prev = cur;
                cur = aligned;
                avail = slob_units(cur);
            }
            slobidx *next = slob_next(cur);
            if (avail == static_cast<int>(units)) { // exact fit: unlink
                if (prev)
                    set_slob(prev, slob_units(prev), next);
                else
                    set_freelist(pg, next);
            } else { // split: the tail stays free
                if (prev)
                    set_slob(prev, slob_units(prev), cur + units);
                else
                    set_freelist(pg, cur + units);
                set_slob(cur + units, avail - static_cast<int>(units), next);
            }
            set_free_units(pg, free_units(pg) - units);
            if (free_units(pg) == 0) {
                list_del(pg);
                set_freelist(pg, nullptr);
                *emptied = true;
            }
            return cur;
        }
        if (slob_last(cur)) {
            set_largest_hint(pg, static_cast<unsigned>(largest));
            return nullptr;
        }
    }
}

} // namespace

platform::mutex &lock() {
    return g_lock;
}

unsigned list_for(size_t bytes) {
    return bytes < kBreak1 ? 0 : bytes < kBreak2 ? 1 : 2;
}

unsigned list_of_page(const page *pg) {
    return list_of(pg);
}

page *first_on_list(unsigned list) {
    return g_lists[list].first;
}

unsigned free_units_of(const page *pg) {
    return free_units(pg);
}

void *block_alloc(size_t bytes, size_t align, size_t align_offset, int node) {
    unsigned units = units_of(bytes);
    page_list &l = g_lists[list_for(bytes)];
    for (page *pg = l.first; pg; pg = pg->next) {
        if (free_units(pg) < units || largest_hint(pg) < units) continue;
        if (node != kAnyNode && page_to_nid(pg) != static_cast<unsigned>(node)) continue;
        count(SEARCH_PAGES);
        bool emptied;
        void *b = page_alloc(pg, units, align, align_offset, &emptied);
        if (!b) continue;
        // Next fit: the list is rotated so that the next search starts where this one
        // succeeded, and the pages it passed over come last (Knuth vol. 1, 2.5).
        if (!emptied) {
            while (l.first != pg) l.push_back(l.pop_front());
        }
        count(ALLOCS);
        return b;
    }
    return nullptr;
}

void *alloc_in_page(page *pg, size_t bytes, size_t align, size_t align_offset) {
    if (free_units(pg) < units_of(bytes)) return nullptr;
    bool emptied;
    return page_alloc(pg, units_of(bytes), align, align_offset, &emptied);
}

void for_each_free_block(page *pg, void (*fn)(unsigned offset, unsigned units, void *arg),
                         void *arg) {
    if (free_units(pg) == 0) return;
    for (slobidx *s = freelist_of(pg);; s = slob_next(s)) {
        fn(static_cast<unsigned>(s - page_base_of(s)), static_cast<unsigned>(slob_units(s)), arg);
        if (slob_last(s)) return;
    }
}

void add_page(void *mem, size_t bytes) {
    page *pg = virt_to_page(mem);
    auto *b = static_cast<slobidx *>(mem);
    set_slob(b, static_cast<int>(kPageUnits), b + kPageUnits);
    set_freelist(pg, b);
    set_free_units(pg, kPageUnits);
    mark_slab(&arena(), pg, 0);
    set_largest_hint(pg, kPageUnits);
    list_add(pg, list_for(bytes));
    count(NEW_PAGES);
}

free_error block_free(void *block, size_t bytes, void **page_out, bool zero) {
    *page_out = nullptr;
    auto *b = static_cast<slobidx *>(block);
    page *pg = virt_to_page(block);
    int units = static_cast<int>(units_of(bytes));
    uintptr_t off = reinterpret_cast<uintptr_t>(block) & (kPageSize - 1);
    if (off + static_cast<uintptr_t>(units) * kUnit > kPageSize) return free_error::past_the_page;
    if (free_units(pg) + static_cast<unsigned>(units) > kPageUnits)
        return free_error::overlaps_free_block;

    if (free_units(pg) == 0) {
        if (zero) memset(block, 0, bytes);
        // The page was full: the block becomes its only free block.
        if (free_units(pg) + static_cast<unsigned>(units) == kPageUnits) {
            *page_out = page_to_virt(pg);
        } else {
            set_free_units(pg, static_cast<unsigned>(units));
            set_freelist(pg, b);
            set_slob(b, units, page_base_of(b) + kPageUnits);
            set_largest_hint(pg, static_cast<unsigned>(units));
            list_add(pg, list_for(bytes));
        }
        count(FREES);
        return free_error::none;
    }
    // Place the block among the page's free blocks: prev, the last starting before it (none:
    // it comes before the first), and next, the first starting after it (or the page's end).
    // It must overlap neither: a double free overlaps the free block it made.
    slobidx *first = freelist_of(pg);
    slobidx *end = page_base_of(b) + kPageUnits;
    slobidx *prev = nullptr, *next = first;
    while (next != end && next <= b) {
        count(SEARCH_BLOCKS);
        prev = next;
        next = slob_next(prev);
    }
    if (prev && prev + slob_units(prev) > b) return free_error::overlaps_free_block;
    if (b + units > next) return free_error::overlaps_free_block;
    if (zero) memset(block, 0, bytes); // init on free, now that the block is known to be in use

    if (free_units(pg) + static_cast<unsigned>(units) == kPageUnits) {
        // Every block of the page is free: it goes straight back to the page allocator.
        list_del(pg);
        *page_out = page_to_virt(pg);
        count(FREES);
        return free_error::none;
    }
    set_free_units(pg, free_units(pg) + static_cast<unsigned>(units));
    // Merge with the free block after it, when they touch. Before the page's first free block
    // too (seed 002's fix: without it the two stayed apart, and the page fragmented for good).
    if (next != end && b + units == next) {
        units += slob_units(next);
        next = slob_next(next);
        count(MERGES);
    }
    set_slob(b, units, next);
    if (!prev) {
        set_freelist(pg, b);
    } else if (prev + slob_units(prev) == b) {
        // And with the free block before it.
        units += slob_units(prev);
        set_slob(prev, units, next);
        count(MERGES);
    } else {
        set_slob(prev, slob_units(prev), b);
    }
    raise_largest_hint(pg, static_cast<unsigned>(units));
    count(FREES);
    return free_error::none;
}

void release_page(void *mem) {
    page *pg = virt_to_page(mem);
    {
        platform::lock_guard guard(g_lock);
        count(PAGES_FREED);
    }
    clear_slab(pg);
    page_allocator::global().free(mem, 0);
}

void walk_lists(page_walk *w) {
    for (unsigned i = 0; i < 3; ++i) {
        w->per_list[i] = g_lists[i].count;
        w->listed += g_lists[i].count;
        for (page *pg = g_lists[i].first; pg; pg = pg->next) w->free_units += free_units(pg);
    }
}

} // namespace slabkit::slob
