// slab.hpp - SLAB, the array-cache slab allocator Linux ran as its default for years (Bonwick's
// design as Mark Hemment and Manfred Spraul built it; mm/slab.c of v6.7), for slots instead of
// CPUs.
//
// Structures (one slab_kmem_cache per cache):
//   array_cache  a LIFO stack of object pointers: `avail` in use of `limit`, moved `batchcount`
//                at a time, `touched` when used since the reaper last looked. Its entries follow
//                the structure that holds it.
//   slab_cpu     per slot and cache, made on the slot's first use (the kernel's per-CPU
//                cpu_cache): one array_cache and the slot's counters.
//   slab_node    per NUMA node and cache (kmem_cache_node): three slab lists (full, partial,
//                free) with counts, a bound on the free objects its slabs keep (`free_limit`),
//                the colour of its last new slab, when the reaper next looks at it
//                (`next_reap`), a shared array (`shared` x `batchcount` entries)
//                and one alien cache per other node, under `list_lock` (alien caches have their
//                own locks).
//   slab page    priv[0] the slab's index array (one-byte indices of its free objects at
//                [active, objects)), priv[1] `active` (objects handed out of the slab),
//                priv[2] the colour offset, aux the list it is on.
//
// Where a slab's index array lives (chosen when the cache is made, as the kernel chose):
//   objfreelist  inside one of the slab's free objects (no constructor, no init on free, and
//                the array fits in an object): the object allocated last, at position
//                objects - 1; a full slab has no array until an object is freed into it, which
//                becomes its home.
//   off-slab     from one of SLAB's array caches (objects large enough that this saves room).
//   on-slab      at the end of the slab, after the objects.
//
// Paths:
//   alloc  pop the slot's array (no lock, no atomic). Empty: refill up to batchcount (16 if the
//          array was not touched) from the node's shared array, else from its partial then free
//          slabs under the node's list_lock, else grow a slab.
//   free   push on the slot's array. Full: move batchcount from its cold end (the bottom) to the
//          shared array if it has room, else back to their slabs, first. An object of another
//          node's slab goes to the slot's node's alien cache for that node, which drains into
//          that node's shared array and slabs under its lock when full.
//   Slabs with no object out go on the free list; beyond free_limit free objects they go back
//   to the page allocator at once.
//
// The reaper runs on slow paths, on the kernel's clock (see "the reaper's clock" below): every
// 2 s a slot's refill or flush drains, in every SLAB cache, one alien cache of its node (round
// robin over the nodes) and a fifth of the limit of its array unless it was touched since; and
// every 4 s per node (next_reap) a fifth of the node's shared array, and a fifth of the free
// slabs that free_limit allows unless the node used one since. The trimmer's pass over a cache
// does that node part too, for nodes whose time has come.
//
// Where objects can be (each in exactly one): a user, a slot's array, a shared array, an alien
// cache, its slab's free part of the index array. A slab's `active` counts the first four.
//
// Lock order: slot registry -> cache registry -> an alien cache's lock -> a node's list_lock ->
// the bootstrap caches' list_locks. Never two node list_locks or two alien locks at once.
#pragma once

#include "core/cache.hpp"
#include "core/counter.hpp"
#include "core/design.hpp"
#include "core/report.hpp"
#include "page/page_list.hpp"
#include "platform/lock.hpp"
#include "platform/platform.hpp"
#include "platform/rseq.hpp"
#include "slot/slot.hpp"

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace slabkit::slab {

// Statistics, as CONFIG_DEBUG_SLAB's slabinfo columns named them (cpustat and globalstat), plus
// the shared-array and alien-cache traffic. Counted by the slot doing the work (threads without
// a slot, and the reaper's passes, count in the cache's shared counters).
enum stat_item : unsigned {
    ALLOCHIT,      // allocations served by the slot's array
    ALLOCMISS,     // the slot's array was empty: a refill
    FREEHIT,       // frees pushed on the slot's array
    FREEMISS,      // the slot's array was full: a flush
    ALLOCS,        // objects taken off slabs (listallocs)
    FREES,         // objects put back on their slabs
    GROWN,         // new slabs
    REAPED,        // free slabs the reaper gave back
    ERRORS,        // a slab could not be made
    NODEALLOCS,    // objects taken straight from a node's slabs (another node asked for, no slot)
    NODEFREES,     // objects freed on a slot of another node than their slab's (remotefrees)
    ALIENOVERFLOW, // an alien cache was full when an object came: drained first
    SHARED_ALLOC,  // objects a refill took from the shared array
    SHARED_FREE,   // objects a flush or an alien drain put in the shared array
    FREE_SLAB,     // slabs given back to the page allocator
    NR_STATS
};
extern const char *const kStatNames[NR_STATS];

// A slab's index of one free object: one byte, the kernel's freelist_idx_t on x86-64 (4 KiB
// pages, and no object under SLAB_OBJ_MIN_SIZE = 16 bytes: KMALLOC_MIN_SIZE is 32 under
// CONFIG_SLAB, so FREELIST_BYTE_INDEX is 1). A slab holds at most 255 objects
// (SLAB_OBJ_MAX_NUM), and smaller objects are given 16-byte slots.
using freelist_idx = uint8_t;
inline constexpr uint32_t kMaxObjectsPerSlab = 255;
inline constexpr size_t kObjMinSize = 16;

// Where a cache keeps its slabs' index arrays (see above).
enum class freelist_place : uint8_t { objfreelist, off_slab, on_slab };

// A LIFO stack of object pointers; the entries follow the structure that holds it. `avail` is
// atomic only so that statistics may read it from other threads; its writers (the owner, or the
// holder of the lock that guards the array) use plain loads and stores.
struct alignas(alignof(void *)) array_cache {
    std::atomic<uint32_t> avail{0};
    uint32_t limit = 0;
    uint32_t batchcount = 0;
    uint32_t touched = 0;

    uint32_t count() const { return avail.load(std::memory_order_relaxed); }
    void set_count(uint32_t n) { avail.store(n, std::memory_order_relaxed); }
};
static_assert(sizeof(array_cache) == 16);

struct alignas(kCacheLine) slab_cpu {
    // Owner's hot line: the array header and the fast paths' counters (ALLOCHIT, FREEHIT).
    array_cache ac;
    counter stats[NR_STATS];
    unsigned node = 0;        // the slot's node
    uint64_t shrink_seen = 0; // last cache shrink generation this slot honoured
    uint64_t tune_seen = 0;   // last tunables generation this array was made for

    void **entry() { return reinterpret_cast<void **>(this + 1); }
    void *const *entry() const { return reinterpret_cast<void *const *>(this + 1); }
};
static_assert(offsetof(slab_cpu, stats) + (FREEHIT + 1) * sizeof(counter) <= kCacheLine,
              "the fast paths' counters share the array header's line");

// Where the fast paths' words are from a slot's structure, for the rseq sections.
inline constexpr int kLimitDisp = static_cast<int>(offsetof(array_cache, limit));
inline constexpr int kTouchedDisp = static_cast<int>(offsetof(array_cache, touched));
inline constexpr int kAllocHitDisp =
    static_cast<int>(offsetof(slab_cpu, stats) + ALLOCHIT * sizeof(counter));
inline constexpr int kFreeHitDisp =
    static_cast<int>(offsetof(slab_cpu, stats) + FREEHIT * sizeof(counter));
inline constexpr int kEntriesDisp = static_cast<int>(sizeof(slab_cpu));
static_assert(offsetof(slab_cpu, ac) == 0 && offsetof(array_cache, avail) == 0);

// A shared array: the array and its entries, under its node's list_lock.
struct shared_array {
    array_cache ac;
    void **entry() { return reinterpret_cast<void **>(this + 1); }
};

// An alien cache: objects of the slabs of one other node, freed by slots of this node.
struct alien_cache {
    platform::mutex lock;
    array_cache ac;
    void **entry() { return reinterpret_cast<void **>(this + 1); }
};
// The entries that follow these structures are pointers: they must start aligned.
static_assert(sizeof(slab_cpu) % alignof(void *) == 0 &&
              sizeof(shared_array) % alignof(void *) == 0 &&
              sizeof(alien_cache) % alignof(void *) == 0);

struct alignas(kCacheLine) slab_node {
    platform::mutex list_lock;
    page_list slabs_full;    // no free object
    page_list slabs_partial; // some
    page_list slabs_free;    // all free
    std::atomic<uint64_t> total_slabs{0};
    std::atomic<uint64_t> free_slabs{0};
    std::atomic<uint64_t> free_objects{0}; // on the free parts of the index arrays
    uint64_t free_limit = 0;               // free objects kept before free slabs go back
    // The colour of the last slab grown: the next one takes the one after it (so a cache's
    // first slab has colour 1, as in the kernel's cache_grow_begin).
    std::atomic<unsigned> colour_next{0};
    bool free_touched = false; // a free slab was used since the reaper last looked
    // When the reaper next drains the shared array and free slabs (reap_clock_ms() time; the
    // kernel's next_reap, REAPTIMEOUT_NODE apart).
    std::atomic<uint64_t> next_reap_ms{0};
    shared_array *shared = nullptr;               // nullptr when shared is 0
    alien_cache *alien[platform::kMaxNodes] = {}; // [other node]; nullptr for this one
};

struct slab_kmem_cache : cache {
    // kMaxSlots + 1 pointers (the last, for slots::index()'s "no slot", always null), each made
    // on its slot's first use; a bootstrap cache's all stay null (its objects come from the node
    // lists under list_lock).
    std::atomic<slab_cpu *> *cpu_cache = nullptr;
    slab_node *node_slab[platform::kMaxNodes] = {};
    unsigned nr_nodes = 0; // set when the cache is made (zero: static descriptors stay in .bss)
    freelist_place place = freelist_place::objfreelist; // zero: static descriptors stay in .bss
    uint32_t freelist_size = 0;                         // bytes of a slab's index array
    // The tunables (the kernel's limit, batchcount, shared), and a generation bumped by every
    // change: a slot remakes its array at its next slow path when it moves.
    uint32_t limit = 0;
    uint32_t batchcount = 0;
    uint32_t shared = 0;
    uint32_t alien_limit = 0; // entries of an alien cache (12, or 1 when limit is 1)
    std::atomic<uint64_t> tune_gen{0};
    bool meta = false; // a bootstrap cache: no per-slot arrays, no shared or alien arrays
    // Bumped by shrink: slots flush their arrays at their next slow path when they see it move.
    std::atomic<uint64_t> shrink_gen{0};
    // Work done by threads without a slot, by the reaper, and counts of freed slot arrays.
    counter shared_stats[NR_STATS];
};

// ---- SLAB's side of the design interface (core/design.hpp; `ops` below) ----------------------

using slot_storage = std::array<std::atomic<slab_cpu *>, kMaxSlots + 1>;

// The boot settings, read once from the environment (see docs/slab.md).
struct settings {
    unsigned max_order = 1; // SLABKIT_SLAB_MAX_ORDER (slab_max_order)
    int limit = -1;         // SLABKIT_SLAB_LIMIT (-1: by size)
    int batchcount = -1;    // SLABKIT_SLAB_BATCHCOUNT (-1: (limit + 1) / 2)
    int shared = -1;        // SLABKIT_SLAB_SHARED (-1: 8, or 0 on one CPU)
    bool use_alien = true;  // SLABKIT_SLAB_NO_ALIEN=1 turns alien caches off (noaliencache)
    unsigned cpus = 1;      // CPUs: free_limit and the shared default follow them
};
const settings &boot_settings();

// The kernel's per-slot array limit by object size: 1, 8, 24, 54 or 120.
uint32_t default_limit(size_t size);
// The largest limit and shared array a cache may be tuned to (entries of one array).
inline constexpr uint32_t kMaxArrayEntries = 2000;

// The cache's order, objects per slab and colour range for its object size and index-array
// place (calculate_slab_order): from order 0 up, the first order that holds an object (at most
// 255; off the slab only while the index array's block is at most half of object_size),
// stopping at max_order or at a leftover of at most 1/8 of the slab. `size` is the slot,
// `object_size` what the cache was asked for. False when no order up to kMaxOrder fits an
// object.
struct slab_geometry {
    unsigned order = 0;
    uint32_t objects = 0;
    size_t left_over = 0; // bytes of the slab that neither objects nor an on-slab array use
};
bool calculate_slab_order(size_t size, size_t object_size, freelist_place place, unsigned max_order,
                          slab_geometry *out);
// The block the kernel's kmalloc gives an off-slab index array of `bytes` (kmalloc_slab's cache
// size under CONFIG_SLAB on x86-64: 32, 64, 128 (kmalloc-96's objects, cache-line aligned),
// 128, 192, 256, then powers of two). It decides whether an array goes off the slab; the array
// itself comes from SLAB's own array caches (meta_size_for).
size_t freelist_block_size(size_t bytes);
// Lays out cache s from what describe_cache filled in (__kmem_cache_create): its object slot
// (compute_object_layout, then at least kObjMinSize bytes), where its index arrays live
// (set_objfreelist_slab_cache, set_off_slab_cache, set_on_slab_cache in that order: inside a
// free object unless the cache has a constructor, debugging or init on free; off the slab
// when allowed and keeping it on the slab would cost an object), its order, objects per slab,
// index array size and colours. False when no order holds an object.
bool lay_out(slab_kmem_cache *s, bool allow_off_slab);

// ---- the reaper's clock ------------------------------------------------------------------------
//
// The kernel's cache_reap ran on every CPU every REAPTIMEOUT_AC (2 s): it drained one alien
// cache and the CPU's array of every cache, and, where the node's next_reap had passed (every
// REAPTIMEOUT_NODE, 4 s, the first staggered by the cache's address), the node's shared array
// and free slabs. Here a slot's refills and flushes run its pass when 2 s have passed since its
// last (the first one second after its first), and the trimmer's pass over a cache does the
// node part of the nodes whose next_reap has passed.
inline constexpr uint64_t kReapFirstMs = 1000; // a slot's first pass (start_cpu_timer: HZ)
inline constexpr uint64_t kReapSlotMs = 2000;  // REAPTIMEOUT_AC
inline constexpr uint64_t kReapNodeMs = 4000;  // REAPTIMEOUT_NODE
// The reaper's time in milliseconds: platform::now_coarse_ms(), or the clock a test put in place.
uint64_t reap_clock_ms();
// For tests: the reaper reads `now_ms` instead of the real clock (nullptr: the real clock again).
void set_reap_clock(uint64_t (*now_ms)());
// When slot `slot`'s next pass is due (reap_clock_ms() time; 0 until its first slow path).
uint64_t slot_next_reap_ms(unsigned slot);

void bootstrap();
slab_kmem_cache *create(const cache_args &args, const char **why);
bool open_static(slab_kmem_cache *s, slot_storage *slots, const cache_args &args, const char **why);
void destroy(slab_kmem_cache *s);
// Gives back what `slot`'s array holds for s; with `release`, frees the array (an idle slot,
// under the cache registry lock).
void flush_slot(slab_kmem_cache *s, unsigned slot, bool release);
// Shrink's share beyond the idle slots: the caller's array, every alien and shared array, and
// every free slab; bumps the shrink generation so that other live slots flush at their next slow
// path. Returns the slabs the cache still holds.
size_t reclaim(slab_kmem_cache *s);
// The trimmer's pass over the cache: the node part of the reaper for each node whose next_reap
// has passed (a fifth of its shared array, and a fifth of what free_limit allows of its free
// slabs unless one was used since), so that nodes whose slots are quiet are reaped too.
void trim(slab_kmem_cache *s);
// "order", "limit", "batchcount", "shared".
bool tune(slab_kmem_cache *s, const char *name, unsigned long value, const char **why);
bool set_order(slab_kmem_cache *s, unsigned order, const char **why);
void fork_boot(fork_op op);
void fork_cache(slab_kmem_cache *s, fork_op op);
void statistics(slab_kmem_cache *s, design_stats *out);
// Checks the cache's invariants (quiescent cache): every slab of the cache (found in the arena)
// is on the list of its node that its `active` says, its index array's free part holds distinct
// indices of free objects, the node counts match the slabs, free objects stay within
// free_limit, and every array (per slot, shared, alien) holds objects of this cache that their
// slabs count as out, each once.
unsigned validate(slab_kmem_cache *s, char *report, size_t size);

// The bytes of metadata the cache holds beyond its slabs, by kind (per-slot arrays, shared
// arrays, alien caches, off-slab index arrays), and the number of alien caches: an alien cache
// per ordered pair of nodes, so they grow with the square of the nodes.
struct metadata_bytes {
    uint64_t slot_arrays = 0;
    uint64_t shared_arrays = 0;
    uint64_t alien_caches = 0;
    uint64_t alien_count = 0;
    uint64_t node_structures = 0;
    uint64_t off_slab_freelists = 0;
};
void metadata(slab_kmem_cache *s, metadata_bytes *out);

// Slow paths (out of line). alloc_slow: slot kNoSlot means "the caller's, taking one if the
// thread has none yet"; node kAnyNode or a node to allocate from.
void *alloc_slow(slab_kmem_cache *s, unsigned slot, int node, bool zero);
// An object whose slot array was full or missing, or of another node: flush, alien, or locked.
void free_slow(slab_kmem_cache *s, page *pg, void *obj);
SLABKIT_NOINLINE void free_checked(slab_kmem_cache *s, void *obj);

// ---- fast paths ----------------------------------------------------------------------------
//
// Each is a few loads and stores with no lock and no atomic read-modify-write, and leaves
// through a tail call whenever anything is unusual.

// A thread without a slot of its own, when the CPUs have slots, pops the array of the CPU it
// runs on in an rseq critical section (nullptr: empty, or the section failed, or the CPU has no
// array yet: the slow path holds the CPU's slot and does the rest). Out of line, so that the
// own-slot paths stay small (inlined, it cost them their inlining into kmalloc), and in one
// object file (slab_alloc.cpp, slab_free.cpp): a critical section's descriptor cannot point into
// an inline function's copy that the linker may discard.
void *alloc_from_cpu_array(const std::atomic<slab_cpu *> *cpu_cache);
// The same, then alloc_slow when it gives up: the whole allocation, in one tail call.
void *alloc_on_cpu(slab_kmem_cache *s, bool zero);
// The same push on the CPU's array, then free_slow when it is full, the section failed, or the
// object belongs to another node.
void free_to_cpu_array(slab_kmem_cache *s, page *pg, void *obj);

// One object from the slot's array, or nullptr (empty, or no array for this cache yet).
// `cpu_cache` is s->cpu_cache, or the static array a static cache was opened with (kmalloc's
// classes), whose address the caller knows without loading it from the descriptor.
// on_cpu() serves a thread without a slot of its own while the CPUs have slots, on_empty() the
// rest (core/design.hpp, alloc_fast).
template <class OnCpu, class OnEmpty, class OnPop>
SLABKIT_ALWAYS_INLINE void *alloc_from_array(const std::atomic<slab_cpu *> *cpu_cache,
                                             OnCpu &&on_cpu, OnEmpty &&on_empty, OnPop &&on_pop) {
    slab_cpu *c = cpu_cache[slots::index()].load(std::memory_order_relaxed);
    if (SLABKIT_UNLIKELY(c == nullptr)) return slots::on_cpu_slot() ? on_cpu() : on_empty();
    uint32_t avail = c->ac.count();
    if (SLABKIT_UNLIKELY(avail == 0)) return on_empty();
    // The hot end is the top: the object freed last, still in this CPU's cache.
    c->ac.set_count(avail - 1);
    c->ac.touched = 1;
    c->stats[ALLOCHIT].add();
    return on_pop(c->entry()[avail - 1]);
}
SLABKIT_ALWAYS_INLINE void *alloc_from_array(const std::atomic<slab_cpu *> *cpu_cache) {
    return alloc_from_array(
        cpu_cache, [&]() SLABKIT_LAMBDA_INLINE { return alloc_from_cpu_array(cpu_cache); },
        []() SLABKIT_LAMBDA_INLINE -> void * { return nullptr; },
        [](void *obj) SLABKIT_LAMBDA_INLINE { return obj; });
}

// Allocates one object (zeroed when `zero`: the slow path pops the array and clears it).
// Written out rather than over alloc_from_array: an entry is never null, and testing the popped
// pointer again would cost the fast path two instructions.
SLABKIT_ALWAYS_INLINE void *alloc(slab_kmem_cache *s, bool zero = false) {
    if (SLABKIT_LIKELY(!zero)) {
        slab_cpu *c = s->cpu_cache[slots::index()].load(std::memory_order_relaxed);
        if (SLABKIT_LIKELY(c != nullptr)) {
            uint32_t avail = c->ac.count();
            if (SLABKIT_LIKELY(avail != 0)) {
                c->ac.set_count(avail - 1);
                c->ac.touched = 1;
                c->stats[ALLOCHIT].add();
                return c->entry()[avail - 1];
            }
        } else if (slots::on_cpu_slot()) {
            return alloc_on_cpu(s, zero);
        }
    }
    return alloc_slow(s, kNoSlot, kAnyNode, zero);
}

SLABKIT_ALWAYS_INLINE void *alloc_node(slab_kmem_cache *s, int node, bool zero) {
    if (node == kAnyNode) return alloc(s, zero);
    return alloc_slow(s, kNoSlot, node, zero);
}

// Frees obj, whose slab page pg the caller found to be one of s's (object start checked).
// kNodeTest false: the caller knows the cache has one node (its gate is open, core/cache.hpp).
template <bool kNodeTest = true>
SLABKIT_ALWAYS_INLINE void free_to_slab(slab_kmem_cache *s, page *pg, void *obj) {
    slab_cpu *c = s->cpu_cache[slots::index()].load(std::memory_order_relaxed);
    if (SLABKIT_LIKELY(c != nullptr)) {
        if (SLABKIT_LIKELY(!kNodeTest || !s->numa || page_to_nid(pg) == c->node)) {
            uint32_t avail = c->ac.count();
            if (SLABKIT_LIKELY(avail < c->ac.limit)) {
                // Hardening: the array's last entry freed again would be handed out twice.
                if (kSlabArrayCheck && SLABKIT_UNLIKELY(avail && c->entry()[avail - 1] == obj))
                    return report_double_free(s, obj);
                c->entry()[avail] = obj;
                c->ac.set_count(avail + 1);
                c->stats[FREEHIT].add();
                return;
            }
        }
    } else if (slots::on_cpu_slot()) {
        return free_to_cpu_array(s, pg, obj);
    }
    return free_slow(s, pg, obj);
}

SLABKIT_ALWAYS_INLINE void free(slab_kmem_cache *s, void *obj) {
    page *pg = slab_page_check<false>(s, obj);
    if (SLABKIT_UNLIKELY(!pg)) return free_checked(s, obj);
    return free_to_slab(s, pg, obj);
}

// The design interface (core/design.hpp), checked in designs/designs.hpp.
struct ops {
    using cache_type = slab_kmem_cache;
    using slot_storage = slab::slot_storage;
    static constexpr design kind = design::slab;
    static void bootstrap() { slab::bootstrap(); }
    static slab_kmem_cache *create(const cache_args &a, const char **why) {
        return slab::create(a, why);
    }
    static bool open_static(slab_kmem_cache *s, slot_storage *slots, const cache_args &a,
                            const char **why) {
        return slab::open_static(s, slots, a, why);
    }
    static void destroy(slab_kmem_cache *s) { slab::destroy(s); }
    static void flush_slot(slab_kmem_cache *s, unsigned slot, bool release) {
        slab::flush_slot(s, slot, release);
    }
    static size_t reclaim(slab_kmem_cache *s) { return slab::reclaim(s); }
    static void trim(slab_kmem_cache *s) { slab::trim(s); }
    static bool tune(slab_kmem_cache *s, const char *name, unsigned long value, const char **why) {
        return slab::tune(s, name, value, why);
    }
    static bool set_order(slab_kmem_cache *s, unsigned order, const char **why) {
        return slab::set_order(s, order, why);
    }
    static void statistics(slab_kmem_cache *s, design_stats *out) { slab::statistics(s, out); }
    static unsigned validate(slab_kmem_cache *s, char *buf, size_t size) {
        return slab::validate(s, buf, size);
    }
    static void fork_boot(fork_op op) { slab::fork_boot(op); }
    static void fork_cache(slab_kmem_cache *s, fork_op op) { slab::fork_cache(s, op); }
    SLABKIT_ALWAYS_INLINE static void *alloc(slab_kmem_cache *s, bool zero) {
        return slab::alloc(s, zero);
    }
    SLABKIT_ALWAYS_INLINE static void *alloc_fast(slab_kmem_cache *, const slot_storage *slots) {
        return slab::alloc_from_array(slots->data());
    }
    template <class OnCpu, class OnEmpty, class OnPop>
    SLABKIT_ALWAYS_INLINE static void *alloc_fast(slab_kmem_cache *, const slot_storage *slots,
                                                  OnCpu &&on_cpu, OnEmpty &&on_empty,
                                                  OnPop &&on_pop) {
        return slab::alloc_from_array(slots->data(), on_cpu, on_empty, on_pop);
    }
    static void *alloc_cpu(slab_kmem_cache *, const slot_storage *slots) {
        return slab::alloc_from_cpu_array(slots->data());
    }
    SLABKIT_ALWAYS_INLINE static void *alloc_node(slab_kmem_cache *s, int node, bool zero) {
        return slab::alloc_node(s, node, zero);
    }
    SLABKIT_ALWAYS_INLINE static void free(slab_kmem_cache *s, void *obj) { slab::free(s, obj); }
    SLABKIT_ALWAYS_INLINE static void free_to_slab(slab_kmem_cache *s, page *pg, void *obj) {
        slab::free_to_slab(s, pg, obj);
    }
    // The gated free (core/design.hpp): free_to_slab without the node test.
    SLABKIT_ALWAYS_INLINE static void free_gated(slab_kmem_cache *s, page *pg, void *obj) {
        slab::free_to_slab<false>(s, pg, obj);
    }
};

} // namespace slabkit::slab
