// debug.hpp - debugging for every design: red zones, poisoning, owner tracking, tracing, the
// quarantine and the checks and reports behind them (SLABKIT_DEBUG, slub_debug's grammar).
//
// A cache is a debug cache when its flags hold any of kDebugFlags: F (kConsistencyChecks),
// Z (kRedZone), P (kPoison), U (kStoreUser), T (kTrace). They come from the creator (the API
// flags) and from SLABKIT_DEBUG or slabkit_set_debug() (spec_flags, matched by cache name when
// the cache is made). A debug cache keeps no per-slot structures: the designs' fast paths find
// none and take their slow paths, whose first step hands the object to this layer; it calls the
// design back through cache::debug_alloc / debug_free (the design's slot-less paths). So a cache
// without debugging pays nothing: no flag is tested on any fast path.
//
// A debug cache's slot (cache::size bytes):
//
//   | design word | left red zone | object (object_size) | right red zone | state | tracks | pad |
//   0             8               debug_offset           |                debug_meta
//
//   design word   the design's free pointer or SLOB's free-block header: the only bytes of a free
//                 slot the design writes; never checked.
//   red zones     (Z) 0xbb while the object is free, 0xcc while it is allocated (the kernel's
//                 SLUB_RED_INACTIVE and SLUB_RED_ACTIVE): at least 8 bytes on the left (up to
//                 the object's alignment) and from the object's end to the next word plus 8.
//   state         kStateAllocated or kStateFree, a word: a second free finds kStateFree.
//   tracks        (U) who allocated and who freed the object: return addresses, thread, time.
//
// Poison (P): a free object holds 0x6b with 0xa5 in its last byte (the kernel's POISON_FREE and
// POISON_END); a new one, unless zeroed or constructed, 0x5a (POISON_INUSE), so that reads of
// uninitialised memory stand out. A cache with a constructor is not poisoned (its objects keep
// their constructed state while free), as in the kernel.
//
// Freed objects wait in a quarantine (first in, first out, SLABKIT_QUARANTINE_MB, 16 by
// default, 0 for none) before the design gets them back: a write soon after free is found when
// the object leaves it, and a late second free while it waits finds kStateFree.
#pragma once

#include "base/compiler.hpp"
#include "core/cache.hpp"

#include <cstddef>
#include <cstdint>

namespace slabkit::debug {

inline constexpr uint8_t kRedInactive = 0xbb;
inline constexpr size_t kRedZoneMin = 32; // bytes of red zone at least, on each side
inline constexpr uint8_t kRedActive = 0xcc;
inline constexpr uint8_t kPoisonFree = 0x6b;
inline constexpr uint8_t kPoisonEnd = 0xa5;
inline constexpr uint8_t kPoisonInUse = 0x5a;
inline constexpr uint64_t kStateAllocated = 0xa110ca7edull << 8;
inline constexpr uint64_t kStateFree = 0xf4eed0b1ecull << 8;
inline constexpr unsigned kTrackDepth = 8;

// Who allocated or freed an object (U).
struct track {
    uintptr_t addrs[kTrackDepth]; // return addresses, innermost first; 0 past the last
    uint32_t tid;
    uint32_t cpu;
    uint64_t when_ms;
};

// One call site's objects in a cache with owner tracking, as a line of the kernel's
// alloc_traces and free_traces: how many objects, their ages, threads and CPUs.
struct trace_site {
    uintptr_t addr; // the first return address outside slabkit: its caller's
    uint64_t count;
    uint64_t age_min_ms, age_max_ms, age_sum_ms;
    uint32_t tid_min, tid_max;
    uint64_t cpus; // bit n: CPU n (CPUs from 63 on share bit 63)
};
// A track's site: its first return address outside slabkit (the caller of malloc, kmalloc or
// the cache call), else its outermost one; 0 when nothing was recorded.
uintptr_t site_of(const track &tr);
inline constexpr unsigned kMaxTraceSites = 512;
struct trace_table {
    trace_site sites[kMaxTraceSites]; // by count, most first, once gathered
    unsigned n;
    uint64_t objects; // every object counted, in the sites or not
    uint64_t dropped; // objects of sites past kMaxTraceSites
};
// Groups the tracks of debug cache c's objects by site: its allocated objects' allocation
// tracks into `alloc`, its free objects' free tracks (objects freed at least once) into
// `freed` (nothing for SLOB's slots, whose free bytes are SLOB's). false when c keeps no tracks
// (no U). The cache must not be in use meanwhile: the live request runs it in a copy of the
// process.
bool gather_traces(cache *c, trace_table *alloc, trace_table *freed);
// The same for a design's own debugged blocks (leak_scan::block_source: SLOB's), when `owner` is
// their cache: allocation sites only (a free block's bytes are the design's). false when it is
// not, or none of its blocks has tracks.
bool gather_block_traces(const cache *owner, trace_table *alloc, trace_table *freed);

// The debug flags (kDebugFlags bits) SLABKIT_DEBUG or slabkit_set_debug() give the cache of
// this name; 0 when none. Reads SLABKIT_DEBUG at the first call: a value that is not in the
// grammar ends the process with a message naming what was wrong.
unsigned spec_flags(const char *cache_name);
// True when the specification (as read at start, or set since) asks for any debugging: kmalloc
// then guards its blocks above the caches' sizes (large.hpp).
bool spec_any();
// Sets the specification for caches made from now on (and kmalloc classes opened from now on):
// false, with *why set (naming the bad letter or group), when it is not in the grammar.
bool set_spec(const char *spec, const char **why);
// The names the specification gave that no cache made so far has had, comma-separated into buf
// (empty when none); for the warning at exit.
void unmatched_names(char *buf, size_t size);

// Lays out a debug cache's slot (called by compute_object_layout): offset, inuse, size,
// debug_offset, debug_meta; align is the object alignment already settled.
void compute_layout(cache *c, size_t align);

// Every slot of a debug cache's new slab: state free, red zones inactive, object poisoned (or
// constructed). Called by init_slab and mark_slab.
void init_slab_objects(cache *c, char *first_slot, uint32_t nr);
// A debug slot's state word (kStateAllocated, kStateFree; the leak scan marks it in a copy of
// the process), and its two owner tracks (allocation, free), or nullptr without U.
uint64_t *state_word(const cache *c, void *slot);
const track *owner_tracks(const cache *c, void *slot);
// A slot's object, and an object's slot.
SLABKIT_ALWAYS_INLINE void *object_of(const cache *c, void *slot) {
    return static_cast<char *>(slot) + c->debug_offset;
}
SLABKIT_ALWAYS_INLINE void *slot_of(const cache *c, const void *obj) {
    return const_cast<char *>(static_cast<const char *>(obj)) - c->debug_offset;
}

// The designs' slow paths hand a debug cache's allocations and frees here. alloc: one object
// (zeroed when `zero`), or nullptr when memory is short. free: obj as the caller passed it
// (checked here: a bad pointer is reported naming `op` and c), then poisoned and quarantined.
void *alloc(cache *c, int node, bool zero);
void free(cache *c, void *obj, const char *op);
// True when obj is an object start of debug cache c on its slab page pg (its slot start plus
// debug_offset): the free checks of slab designs accept it.
bool is_object(const cache *c, const page *pg, const void *obj);
// kmalloc and the malloc family: the caller of the allocation of obj (an allocated object of
// debug cache c) asked for `size` bytes. With red zones, the rest of the object becomes red zone
// too, checked with the others (an overflow into the class's slack is caught), and the object's
// usable size is `size`; also when a block is resized in place.
void set_request(cache *c, void *obj, size_t size);
// Which call made an object (kept with the size asked for, so with red zones): the malloc
// family, kmalloc or a cache (the default), operator new, or operator new[]. Freeing a new[]
// block with the plain delete, or the reverse, is reported (set_origin, free).
enum class origin : uint8_t { plain = 0, new_object = 1, new_array = 2 };
void set_origin(cache *c, void *obj, origin o);
// The report's words when a free by `op` ("operator delete", "operator delete[]": the C++
// runtime names its form) does not match the form that made the block; nullptr when it matches,
// and for every other call.
const char *mismatched_delete(const char *op, origin o);
// The usable bytes of an allocated object of debug cache c: the size asked for (set_request),
// or object_size.
size_t usable(const cache *c, void *obj);
// True when obj is an object of debug cache c (is_object) that is allocated now.
bool is_live(const cache *c, const page *pg, const void *obj);
// When obj is an object of a debug cache that is free now (freed, and waiting in the quarantine
// or back with its design), reports a use after free by `op` (malloc_usable_size, realloc,
// ksize: calls that read the block's size) with the object's sites, and returns true; false for
// anything else, which the caller reports as it would.
bool report_if_freed(const void *obj, const char *op);

// Gives back to their designs the quarantined objects of cache c (nullptr: every cache), each
// checked for writes after free. Before a cache is destroyed or shrunk, and by trims.
void drain_quarantine(const cache *c);
uint64_t quarantine_bytes();

// Checks every slot of debug cache c (quiescent): state, red zones, poison of free objects.
// Returns the number of problems, each reported as a bad object is; the first few described in
// buf too.
unsigned validate(cache *c, char *buf, size_t size);
// Reports every allocated object of debug cache c with its allocation site (U), naming op;
// returns how many.
uint64_t report_leaks(cache *c, const char *op = "leak check");
// For designs whose shared pages the debug layer cannot walk (SLOB, cache::debug_walk): true
// when `slot` (any address where one of c's slots could start, its c->size bytes readable) is
// one of c's allocated slots. An allocated slot carries c's tag in its design word.
bool is_live_slot(const cache *c, const void *slot);
// One leaked object of debug cache c (its slot), found by `op`, with its allocation site.
void report_leak(const cache *c, void *slot, const char *op);

// ---- blocks of a design's own kmalloc (SLOB's size-headed blocks) ----------------------------
//
// The design lays a debugged block out as | left red zone | its header | object (size) | right
// red zone | (the left red zone `left_len` bytes at `left`, before the header: an underflow past
// the header lands there) and
// marks it so in its header (a freed one differently, while it waits in the quarantine); this
// layer fills, checks, reports and quarantines. `c` is the design's cache owning the pages
// (SLOB's arena): reports name it, and its debug_free gives a block back as it leaves the
// quarantine, after block_released. With owner tracking (U) the design keeps two tracks
// (kBlockTracks bytes) in the block, passed as `tracks` (nullptr: none); no tracing (T).
inline constexpr size_t kBlockRedZone = kRedZoneMin; // at least; the rounding after it too
inline constexpr size_t kBlockLeftRedZone = 24;      // before the header: with it, 32 bytes
inline constexpr size_t kBlockTracks = 2 * sizeof(track);
// A new block: its red zones (rz bytes after the object, left_len at left) active; the object 0x5a
// unless zeroed; its allocation recorded.
void block_alloc(const cache *c, char *obj, size_t size, size_t rz, char *left, size_t left_len,
                 bool zero, track *tracks);
// Its free: the red zones checked (an overflow or underflow reported, naming op, and repaired), the
// free recorded, the object poisoned (or zeroed with SLABKIT_INIT=free), the block (`bytes` in all,
// from `block`) quarantined. The design marks the block freed before.
void block_free(cache *c, void *block, char *obj, size_t size, size_t rz, char *left,
                size_t left_len, size_t bytes, const char *op, track *tracks);
// As it leaves the quarantine: the poison checked (a write after free reported).
void block_released(const cache *c, char *obj, size_t size, const track *tracks);
// The plain delete of a new[] block, or the reverse (why: mismatched_delete's words); the block
// is left alone.
void block_mismatched_delete(const cache *c, char *obj, size_t size, const char *why,
                             const char *op, const track *tracks);
// A free of a block that waits in the quarantine.
void block_double_free(const cache *c, char *obj, size_t size, const char *op, const track *tracks);
// A call that reads the size of a block that waits in the quarantine (malloc_usable_size,
// realloc): a use after free.
void block_use_after_free(const cache *c, char *obj, size_t size, const char *op,
                          const track *tracks);
// A block still allocated (SLABKIT_LEAKS=exit), with its allocation site.
void block_leak(const cache *c, char *obj, size_t size, const char *op, const track *tracks);

// A guarded large block (kmalloc/large.hpp) whose first page's bytes before it - its left red
// zone, `off` bytes from obj (negative), bad_len of them wrong - were overwritten: an underflow,
// found by op at its free. Reported as the red zones of objects are.
void report_guarded_underflow(char *obj, size_t size, ptrdiff_t off, size_t bad_len,
                              const char *op);

// Errors the debug layer found (also counted in slab_errors()).
uint64_t errors();

} // namespace slabkit::debug
