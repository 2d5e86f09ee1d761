// leak_scan.hpp - kmemleak's idea for debug caches: the allocated objects nothing points to.
//
// Conservative, as kmemleak is: every aligned word of the roots - the process's writable
// private mappings outside the arena (data and bss of every loaded object, thread stacks, TLS,
// anonymous memory, blocks above the caches) and the arena's blocks that are not a debug cache's
// slabs (page blocks, slabs of caches without debugging) - that points into an allocated object
// of a debug cache, anywhere inside it, makes the object referenced; a referenced object's words
// are scanned in turn. What no chain of references reaches is reported, grouped by allocation
// site when the cache keeps owner tracks (U). A word that only looks like a pointer keeps an
// object (a leak missed, never a false report of one that is referenced from memory); a pointer
// kept only in a register of a thread other than the scanning one is not seen (a false report
// is possible then: min_age_ms leaves out objects too young to be judged, as kmemleak waits 5 s).
//
// The scan marks objects in their state word, so it runs in a copy of the process
// (platform::run_in_copy), where nothing else runs and the marks are thrown away with the copy.
// SLOB's own debugged blocks are candidates through a block source (below); its debug caches'
// slots are not yet (they are scanned as roots).
#pragma once

#include "core/cache.hpp"
#include "core/debug.hpp"

#include <cstdint>

namespace slabkit::leak_scan {

struct result {
    uint64_t candidates; // allocated objects of debug caches (those old enough)
    uint64_t leaked;     // of them, not referenced
    uint64_t leaked_bytes;
    uint64_t root_bytes; // scanned as roots
    uint64_t caches;     // debug caches looked at
    bool roots_ok;       // the process's mappings could be listed
};

// Scans (in a copy of the process: see above) and calls leak(c, obj, size, track, arg) for each
// leaked object (obj: the object, not its slot; track: its allocation's, or nullptr), objects at
// least min_age_ms old (those without a track count as old).
result scan(uint64_t min_age_ms,
            void (*leak)(cache *c, void *obj, size_t size, const debug::track *track, void *arg),
            void *arg);

// A design's own kmalloc blocks under debugging (SLOB's): candidates too. `owner` is the cache
// whose slab pages hold them (their leaks are reported under its name); walk(fn, arg) calls
// fn(obj, size, tracks or nullptr, arg) for every allocated debugged block, in any order.
// Everything else on the owner's pages (plain blocks, other caches' slots) is scanned as roots.
struct block_source {
    cache *owner;
    void (*walk)(void (*fn)(void *obj, size_t size, const debug::track *tracks, void *arg),
                 void *arg);
};
// Set once, by the design at its bootstrap.
void set_block_source(const block_source *s);
const block_source *current_block_source();

} // namespace slabkit::leak_scan
