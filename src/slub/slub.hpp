// slub.hpp - SLUB, the unqueued slab allocator (Christoph Lameter, 2007), in the form Linux ran
// from 2011 until the sheaves of 6.18 (mm/slub.c of v6.7), for slots instead of CPUs.
//
// Structures (one slub_cache per cache):
//   slub_cpu    per slot and cache, made on the slot's first use of the cache (the kernel's
//               kmem_cache_cpu): the slot's current slab (`slab`, "frozen": only this slot takes
//               objects from it), the lockless freelist of that slab's objects the slot pops
//               and pushes (`freelist`), and a chain of frozen partial slabs (`partial`, bounded
//               by cpu_partial_slabs).
//   slub_node   per NUMA node and cache (kmem_cache_node): the partial list of unfrozen slabs
//               with free objects, under `list_lock`, and the node's slab and object totals.
//   slab page   its own freelist and a counters word {inuse, objects, frozen} in priv[0..1],
//               changed together by one double-word compare-and-swap (base/dwcas.hpp); aux bit
//               0 marks a slab on its node's partial list.
//
// Slab states: frozen (a slot's current slab or on a slot's partial chain: only that slot takes
// objects from it), node partial (unfrozen, free objects, on n->partial), full (unfrozen, no
// free object, on no list).
//
// Paths:
//   alloc  pop the slot's freelist (no lock, no atomic); empty: take the current slab's whole
//          freelist (what other slots freed into it) at once, else the next slab of the slot's
//          partial chain, else node partial slabs (the first becomes the current slab, more go
//          to the chain), else a new slab.
//   free   into the slot's current slab: a push on the slot's freelist (no lock, no atomic).
//          Into any other slab: straight onto that slab's freelist with one double-word
//          compare-and-swap of {freelist, counters}; no per-slot queue of remote objects. A
//          full slab gaining an object is frozen onto the freeing slot's partial chain; an
//          unfrozen slab becoming empty is freed unless its node keeps fewer than min_partial
//          partial slabs.
//
// Where objects can be (each in exactly one): a user, a slot's freelist (objects of its current
// slab), its slab's freelist. A slab's inuse counts the objects not on its own freelist.
//
// Lock order: slot registry -> cache registry -> a node's list_lock. Slab freelists take no
// lock: the double-word compare-and-swap serialises them (a node's list_lock is taken first
// when the change needs list work).
#pragma once

#include "base/dwcas.hpp"
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
#include <cstring>

namespace slabkit::slub {

// Statistics, as CONFIG_SLUB_STATS named them, counted by the slot doing the work (threads
// without a slot count in the cache's shared counters). CMPXCHG_DOUBLE_CPU_FAIL (no per-CPU
// compare-and-swap: a slot's structures have one owner) and ORDER_FALLBACK (every slab of a cache
// has the cache's order) have no counterpart here.
enum stat_item : unsigned {
    ALLOC_FASTPATH,          // from the slot's freelist
    FREE_FASTPATH,           // to the slot's current slab
    ALLOC_SLOWPATH,          // the slot's freelist was empty
    FREE_SLOWPATH,           // to another slab, with a compare-and-swap
    FREE_FROZEN,             // to a slab some slot has frozen
    FREE_ADD_PARTIAL,        // a free (or an unfreeze) put a slab on its node's partial list
    FREE_REMOVE_PARTIAL,     // a free emptied a node partial slab, which was freed
    ALLOC_FROM_PARTIAL,      // a node partial slab became the slot's current slab
    ALLOC_SLAB,              // a new slab from the page allocator
    ALLOC_REFILL,            // the current slab's freelist refilled the slot's (remote frees)
    ALLOC_NODE_MISMATCH,     // the current slab was on another node than asked for
    FREE_SLAB,               // a slab went back to the page allocator
    CPUSLAB_FLUSH,           // a slot's current slab was flushed (shrink, trims, destroy)
    DEACTIVATE_FULL,         // a deactivated slab was full
    DEACTIVATE_EMPTY,        // a deactivated slab was empty and freed
    DEACTIVATE_TO_HEAD,      // a deactivated slab went to the head of the partial list
    DEACTIVATE_TO_TAIL,      // ... to its tail (it had remote frees)
    DEACTIVATE_REMOTE_FREES, // a deactivated slab had objects freed by other slots
    DEACTIVATE_BYPASS,       // the current slab was full: dropped, no list
    CMPXCHG_DOUBLE_FAIL,     // a slab {freelist, counters} compare-and-swap was retried
    CPU_PARTIAL_ALLOC,       // the current slab came from the slot's partial chain
    CPU_PARTIAL_FREE,        // a free froze a full slab onto the slot's partial chain
    CPU_PARTIAL_NODE,        // a node partial slab went to the slot's partial chain
    CPU_PARTIAL_DRAIN,       // the slot's partial chain was full: moved to the node lists
    NR_STATS
};
extern const char *const kStatNames[NR_STATS];

// The counters word of a slab (priv[1]): inuse (objects not on the slab's freelist) in bits
// 0..30, frozen in bit 31, objects in bits 32..63. The kernel packs the same three into 32 bits
// (16 + 15 + 1); ours has room for the 512 Ki objects of a largest-order slab of 8-byte objects.
struct counters {
    uint64_t word = 0;

    static constexpr uint64_t kInuseMask = (uint64_t{1} << 31) - 1;
    static constexpr uint64_t kFrozen = uint64_t{1} << 31;

    static counters make(uint32_t inuse, uint32_t objects, bool frozen) {
        return counters{(uint64_t{objects} << 32) | (frozen ? kFrozen : 0) | inuse};
    }
    uint32_t inuse() const { return static_cast<uint32_t>(word & kInuseMask); }
    uint32_t objects() const { return static_cast<uint32_t>(word >> 32); }
    bool frozen() const { return (word & kFrozen) != 0; }
    void set_inuse(uint32_t n) { word = (word & ~kInuseMask) | n; }
    void set_frozen(bool f) { word = f ? (word | kFrozen) : (word & ~kFrozen); }
};

struct slub_cache;

struct alignas(kCacheLine) slub_cpu {
    // Owner's hot line: the freelist the fast paths pop and push, the slab it belongs to, and
    // the two fast-path counters.
    void *freelist = nullptr;
    std::atomic<page *> slab{nullptr}; // the frozen current slab (atomic: statistics readers)
    counter stats[NR_STATS];
    // The slot's partial chain: frozen slabs with free objects, linked through page::next.
    page *partial = nullptr;
    std::atomic<uint32_t> partial_slabs{0};
    unsigned node = 0; // the slot's node
    // Changes to the freelist's length made by slow paths (a refill adds, a deactivation
    // removes), so that its length is this + FREE_FASTPATH - ALLOC_FASTPATH without a count on
    // the fast paths. Owner-written.
    std::atomic<int64_t> slow_delta{0};
    uint64_t shrink_seen = 0; // last cache shrink generation this slot honoured
};

// Where the fast paths' words are in a slot's structure, for the rseq sections.
inline constexpr int kFreelistDisp = static_cast<int>(offsetof(slub_cpu, freelist));
inline constexpr int kSlabDisp = static_cast<int>(offsetof(slub_cpu, slab));
inline constexpr int kAllocFastpathDisp =
    static_cast<int>(offsetof(slub_cpu, stats) + ALLOC_FASTPATH * sizeof(counter));
inline constexpr int kFreeFastpathDisp =
    static_cast<int>(offsetof(slub_cpu, stats) + FREE_FASTPATH * sizeof(counter));

struct alignas(kCacheLine) slub_node {
    platform::mutex list_lock;
    page_list partial;                   // unfrozen slabs with free objects (list_lock)
    std::atomic<uint32_t> nr_partial{0}; // partial.count, readable without the lock
    std::atomic<uint64_t> nr_slabs{0};   // slabs of this node
    std::atomic<uint64_t> total_objects{0};
};

struct slub_cache : cache {
    // kMaxSlots + 1 pointers (the last, for slots::index()'s "no slot", always null), each made
    // on its slot's first use; a bootstrap cache's all stay null (its objects come from the node
    // lists under list_lock, as the kernel's debug caches).
    std::atomic<slub_cpu *> *cpu_slab = nullptr;
    slub_node *node_slab[platform::kMaxNodes] = {};
    unsigned nr_nodes = 0;    // set when the cache is made (zero: static descriptors stay in .bss)
    uint32_t min_partial = 0; // empty slabs are kept while fewer are partial
    uint32_t cpu_partial = 0; // objects a slot's partial chain may hold (0: no chain)
    uint32_t cpu_partial_slabs = 0; // DIV_ROUND_UP(2 * cpu_partial, objects)
    bool meta = false; // no per-slot structures: a bootstrap cache, or the sheaves' slab layer
    // Bumped by shrink: live slots flush their slabs at their next slow path when it moves.
    std::atomic<uint64_t> shrink_gen{0};
    // Work done by threads without a slot (and counts of freed slot structures).
    counter shared_stats[NR_STATS];
};

// ---- SLUB's side of the design interface (core/design.hpp; `ops` below) ----------------------

using slot_storage = std::array<std::atomic<slub_cpu *>, kMaxSlots + 1>;

// The boot settings (the kernel's slub_max_order, slub_min_objects, and defaults for the
// per-cache tunables), read once from the environment: see docs/slub.md.
struct settings {
    unsigned max_order = 3;   // SLABKIT_SLUB_MAX_ORDER (slub_max_order)
    unsigned min_objects = 0; // SLABKIT_SLUB_MIN_OBJECTS (0: from the CPU count)
    int min_partial = -1;     // SLABKIT_SLUB_MIN_PARTIAL (-1: by size)
    int cpu_partial = -1;     // SLABKIT_SLUB_CPU_PARTIAL (-1: by size)
    unsigned cpus = 1;        // the CPU count the order's min_objects follows
};
const settings &boot_settings();

// Objects one slab may hold: the kernel keeps the count in 15 bits of struct slab
// (MAX_OBJS_PER_PAGE), and an order that would hold more is not taken.
inline constexpr uint32_t kMaxObjsPerSlab = 32767;
// SLUB's order for objects of `size` bytes (calculate_order): aim for min_objects (from the CPU
// count: 4 * (fls(cpus) + 1), at most what an order-max_order slab holds) per slab, taking the
// smallest order from there up to max_order whose leftover is at most 1/16 of the slab, then
// 1/8, 1/4, 1/2; failing all, the order of one object. When the order min_objects asks for
// would hold more than kMaxObjsPerSlab objects, the largest order below that holds fewer.
unsigned calculate_order(size_t size, unsigned cpus, unsigned min_objects, unsigned max_order);
// The kernel's defaults by object size.
uint32_t default_min_partial(size_t size); // clamp(ilog2(size) / 2, 5, 10)
uint32_t default_cpu_partial(size_t size); // 6, 24, 52 or 120 objects

void bootstrap();
slub_cache *create(const cache_args &args, const char **why);
bool open_static(slub_cache *s, slot_storage *slots, const cache_args &args, const char **why);
void destroy(slub_cache *s);
// Deactivates what `slot` holds in s (its current slab and partial chain); with `release`, frees
// the slot's structure (an idle slot, under the cache registry lock).
void flush_slot(slub_cache *s, unsigned slot, bool release);
// Shrink's share beyond the idle slots: the caller's slot, and the empty slabs of the node
// partial lists (whatever min_partial says); bumps the shrink generation so that other live
// slots flush at their next slow path. Returns the slabs the cache still holds.
size_t reclaim(slub_cache *s);
// SLUB had no trimmer: it parks nothing at cache level beyond its partial-list policy.
void trim(slub_cache *s);
// "order", "min_partial", "cpu_partial".
bool tune(slub_cache *s, const char *name, unsigned long value, const char **why);
bool set_order(slub_cache *s, unsigned order, const char **why);
void fork_boot(fork_op op);
void fork_cache(slub_cache *s, fork_op op);
void statistics(slub_cache *s, design_stats *out);
// Checks the cache's invariants (quiescent cache): every slab of the cache (found in the arena)
// is marked as its, its counters match its freelist, a frozen slab is exactly one slot's current
// slab or on one slot's chain, an unfrozen slab with free objects is on its node's partial list
// and one without is on none, the lists' counts and bounds (chain <= cpu_partial_slabs, empty
// node partial slabs <= min_partial) and the node totals hold, and a slot's freelist holds
// objects of its current slab.
unsigned validate(slub_cache *s, char *report, size_t size);

// Slow paths (out of line). alloc_slow: slot kNoSlot means "the caller's, taking one if the
// thread has none yet"; node kAnyNode or a node to allocate from.
void *alloc_slow(slub_cache *s, unsigned slot, int node, bool zero);
// __slab_free: obj (checked) onto its slab's freelist with a compare-and-swap.
void slab_free(slub_cache *s, page *pg, void *obj);
SLABKIT_NOINLINE void free_checked(slub_cache *s, void *obj);

// ---- fast paths ----------------------------------------------------------------------------
//
// Each is a few loads and stores with no lock and no atomic read-modify-write, and leaves
// through a tail call whenever anything is unusual.

// A thread without a slot of its own, when the CPUs have slots, pops the freelist of the CPU it
// runs on in an rseq critical section (nullptr: empty, or the section failed, or the CPU has no
// structure yet: the slow path holds the CPU's slot and does the rest). Out of line, so that
// the own-slot paths stay small (inlined, it cost them their inlining into kmalloc), and in one
// object file (slub_alloc.cpp, slub_free.cpp): a critical section's descriptor cannot point
// into an inline function's copy that the linker may discard.
void *alloc_from_cpu_freelist(slub_cache *s, const std::atomic<slub_cpu *> *cpu_slab);
// The same, then alloc_slow when it gives up: the whole allocation, in one tail call.
void *alloc_on_cpu(slub_cache *s, bool zero);
// The same push on the CPU's freelist, the slab compared inside the critical section; anything
// else goes back to its slab.
void free_to_cpu_freelist(slub_cache *s, page *pg, void *obj);

// One object from the slot's freelist, or nullptr (empty, or no structure for this cache yet).
// `cpu_slab` is s->cpu_slab, or the static array a static cache was opened with (kmalloc's
// classes), whose address the caller knows without loading it from the descriptor. on_cpu()
// serves a thread without a slot of its own while the CPUs have slots, on_empty() the rest
// (core/design.hpp, alloc_fast).
template <class OnCpu, class OnEmpty, class OnPop>
SLABKIT_ALWAYS_INLINE void *alloc_from_cpu(slub_cache *s, const std::atomic<slub_cpu *> *cpu_slab,
                                           OnCpu &&on_cpu, OnEmpty &&on_empty, OnPop &&on_pop) {
    slub_cpu *c = cpu_slab[slots::index()].load(std::memory_order_relaxed);
    if (SLABKIT_LIKELY(c != nullptr)) {
        void *obj = c->freelist;
        if (SLABKIT_LIKELY(obj != nullptr)) {
            // The pop touches only this slot's structure and the object itself.
            c->freelist = get_freepointer(s, obj);
            c->stats[ALLOC_FASTPATH].add();
            return on_pop(obj);
        }
        return on_empty();
    }
    if (slots::on_cpu_slot()) return on_cpu();
    return on_empty();
}
SLABKIT_ALWAYS_INLINE void *alloc_from_cpu(slub_cache *s, const std::atomic<slub_cpu *> *cpu_slab) {
    return alloc_from_cpu(
        s, cpu_slab, [&]() SLABKIT_LAMBDA_INLINE { return alloc_from_cpu_freelist(s, cpu_slab); },
        []() SLABKIT_LAMBDA_INLINE -> void * { return nullptr; },
        [](void *obj) SLABKIT_LAMBDA_INLINE { return obj; });
}

// Allocates one object (zeroed when `zero`: the slow path pops the slot's freelist and clears
// the object, so that the fast path stays a pop and a tail call).
SLABKIT_ALWAYS_INLINE void *alloc(slub_cache *s, bool zero = false) {
    slub_cpu *c = s->cpu_slab[slots::index()].load(std::memory_order_relaxed);
    if (SLABKIT_LIKELY(c != nullptr)) {
        void *obj = c->freelist;
        if (SLABKIT_LIKELY(obj != nullptr) && SLABKIT_LIKELY(!zero)) {
            c->freelist = get_freepointer(s, obj);
            c->stats[ALLOC_FASTPATH].add();
            return obj;
        }
    } else if (slots::on_cpu_slot()) {
        return alloc_on_cpu(s, zero);
    }
    return alloc_slow(s, kNoSlot, kAnyNode, zero);
}

// An object from node `node` (kAnyNode: wherever the slot's slabs are); nullptr when the node
// does not exist.
SLABKIT_ALWAYS_INLINE void *alloc_node(slub_cache *s, int node, bool zero) {
    if (node == kAnyNode) return alloc(s, zero);
    return alloc_slow(s, kNoSlot, node, zero);
}

// Frees obj, whose slab page pg the caller found to be one of s's (object start checked).
SLABKIT_ALWAYS_INLINE void free_to_slab(slub_cache *s, page *pg, void *obj) {
    slub_cpu *c = s->cpu_slab[slots::index()].load(std::memory_order_relaxed);
    // Only the page is compared (no node test): an object of the slot's current slab joins the
    // slot's freelist; any other goes straight back to its own slab.
    if (SLABKIT_LIKELY(c != nullptr)) {
        if (SLABKIT_LIKELY(c->slab.load(std::memory_order_relaxed) == pg)) {
            // Hardening: the freelist's first object freed again would make it a cycle.
            if (kFreelistCheck && SLABKIT_UNLIKELY(obj == c->freelist))
                return report_double_free(s, obj);
            set_freepointer(s, obj, c->freelist);
            c->freelist = obj;
            c->stats[FREE_FASTPATH].add();
            return;
        }
        return slab_free(s, pg, obj);
    }
    if (slots::on_cpu_slot()) return free_to_cpu_freelist(s, pg, obj);
    return slab_free(s, pg, obj);
}

SLABKIT_ALWAYS_INLINE void free(slub_cache *s, void *obj) {
    page *pg = slab_page_check<false>(s, obj);
    if (SLABKIT_UNLIKELY(!pg)) return free_checked(s, obj);
    return free_to_slab(s, pg, obj);
}

// The design interface (core/design.hpp), checked in designs/designs.hpp.
struct ops {
    using cache_type = slub_cache;
    using slot_storage = slub::slot_storage;
    static constexpr design kind = design::slub;
    static void bootstrap() { slub::bootstrap(); }
    static slub_cache *create(const cache_args &a, const char **why) {
        return slub::create(a, why);
    }
    static bool open_static(slub_cache *s, slot_storage *slots, const cache_args &a,
                            const char **why) {
        return slub::open_static(s, slots, a, why);
    }
    static void destroy(slub_cache *s) { slub::destroy(s); }
    static void flush_slot(slub_cache *s, unsigned slot, bool release) {
        slub::flush_slot(s, slot, release);
    }
    static size_t reclaim(slub_cache *s) { return slub::reclaim(s); }
    static void trim(slub_cache *s) { slub::trim(s); }
    static bool tune(slub_cache *s, const char *name, unsigned long value, const char **why) {
        return slub::tune(s, name, value, why);
    }
    static bool set_order(slub_cache *s, unsigned order, const char **why) {
        return slub::set_order(s, order, why);
    }
    static void statistics(slub_cache *s, design_stats *out) { slub::statistics(s, out); }
    static unsigned validate(slub_cache *s, char *buf, size_t size) {
        return slub::validate(s, buf, size);
    }
    static void fork_boot(fork_op op) { slub::fork_boot(op); }
    static void fork_cache(slub_cache *s, fork_op op) { slub::fork_cache(s, op); }
    SLABKIT_ALWAYS_INLINE static void *alloc(slub_cache *s, bool zero) {
        return slub::alloc(s, zero);
    }
    SLABKIT_ALWAYS_INLINE static void *alloc_fast(slub_cache *s, const slot_storage *slots) {
        return slub::alloc_from_cpu(s, slots->data());
    }
    template <class OnCpu, class OnEmpty, class OnPop>
    SLABKIT_ALWAYS_INLINE static void *alloc_fast(slub_cache *s, const slot_storage *slots,
                                                  OnCpu &&on_cpu, OnEmpty &&on_empty,
                                                  OnPop &&on_pop) {
        return slub::alloc_from_cpu(s, slots->data(), on_cpu, on_empty, on_pop);
    }
    static void *alloc_cpu(slub_cache *s, const slot_storage *slots) {
        return slub::alloc_from_cpu_freelist(s, slots->data());
    }
    SLABKIT_ALWAYS_INLINE static void *alloc_node(slub_cache *s, int node, bool zero) {
        return slub::alloc_node(s, node, zero);
    }
    SLABKIT_ALWAYS_INLINE static void free(slub_cache *s, void *obj) { slub::free(s, obj); }
    SLABKIT_ALWAYS_INLINE static void free_to_slab(slub_cache *s, page *pg, void *obj) {
        slub::free_to_slab(s, pg, obj);
    }
    // The gated free (core/design.hpp): SLUB's free_to_slab has no node test to leave out.
    SLABKIT_ALWAYS_INLINE static void free_gated(slub_cache *s, page *pg, void *obj) {
        slub::free_to_slab(s, pg, obj);
    }
};

} // namespace slabkit::slub
