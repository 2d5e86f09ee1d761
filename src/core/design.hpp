// design.hpp - the design interface: what every design (SLQB, SLUB, ...) offers, stated once and
// checked at compile time.
//
// A design is a folder under src/ with an interface type `<design>::ops` of static functions
// (no objects, no virtual calls). designs/designs.hpp checks every design of the list
// (core/design_list.hpp) against the concept below - a design that misses a part does not build -
// and dispatches to them: a call on a cache switches on cache::kind and runs that design's inline
// fast path, so there is no indirect call per object. Everything above the designs (the C API,
// kmalloc, the malloc replacement, statistics, trims, fork hooks) is written once over it.
//
// What each part promises:
//   bootstrap()          sets up the design's own bootstrap caches, once; every entry point that
//                        needs them calls it (it may run before any constructor).
//   create(args, why)    a new cache, or nullptr with *why set (a duplicate name, no memory).
//                        The caller has checked args (cache_args_invalid): designs::create does,
//                        for every design.
//   open_static(s, slots, args, why)
//                        makes a static descriptor usable (kmalloc's caches, whose args are
//                        valid by construction): `slots` is the design's per-slot storage
//                        (ops::slot_storage), static too; nothing is allocated that could
//                        recurse into kmalloc. It runs bootstrap() itself.
//   destroy(s)           the caller no longer uses s: flushes every slot, frees everything; leaked
//                        objects are reported one by one and the cache's memory kept.
//   flush_slot(s, slot, release)
//                        gives back everything slot parks for s (the caller owns the slot, or it
//                        is idle and visited); release: free the slot's structure if it is empty.
//   reclaim(s)           shrink's share beyond the idle slots: the caller's slot and the cache's
//                        shared lists; other live slots give theirs back at their next slow path.
//                        Returns the slabs the cache still holds.
//   trim(s)              the periodic trimmer's share of the cache's shared lists.
//   tune(s, name, value, why), set_order(s, order, why)
//                        the design's tunables by name ("order" included); false, *why set.
//   statistics(s, out)   the figures of design_stats below.
//   validate(s, buf, n)  checks the cache's invariants (quiescent cache); returns the number of
//                        problems, the first ones described in buf.
//   fork_boot(op), fork_cache(s, op)
//                        take (lock), release (unlock) or reset (in the child) the design's
//                        global locks (at platform::kForkRankSlabBoot) and one cache's locks (at
//                        kForkRankCaches, under the cache registry lock), in the lock order.
//   alloc(s, zero), alloc_fast(s, slots), alloc_node(s, node, zero)
//                        inline: one object (nullptr when memory is short or, for alloc_node, the
//                        node does not exist); alloc_fast is the fast path alone of a static
//                        cache (open_static), through the per-slot storage it was opened with
//                        (nullptr when it cannot serve, the cache not opened yet included: the
//                        caller then takes its slow path), for kmalloc's classes under malloc;
//                        alloc_fast(s, slots, on_cpu, on_empty, on_pop) returns on_cpu() for a
//                        thread without a slot of its own while the CPUs have slots, on_empty()
//                        where the two-argument form returns nullptr, and on_pop(obj) for the
//                        object it popped, so that a caller (the malloc family) can make the
//                        first two its own tail calls (its fast path then makes no call and
//                        needs no stack frame) and finish its own objects (free_key::fresh).
//   alloc_cpu(s, slots)  out of line: the CPU's pop (an rseq critical section) for a thread
//                        without a slot of its own while the CPUs have slots, or nullptr; what
//                        alloc_fast calls then, for a caller that has already found the thread
//                        on the CPUs' slots (alloc_fast's on_cpu continuation).
//   alloc_cpu_or(s, slots, size, fallback)
//                        optional, out of line: alloc_cpu's pop, else fallback(size), as one
//                        tail call each way (the malloc family's on_cpu continuation goes
//                        straight there; without it, through a switch on the design and a
//                        second call).
//   free(s, obj)         inline: kmem_cache_free, with the check that obj is an object of s (a bad
//                        free is reported, see core/report.hpp); free(s, nullptr) does nothing.
//   free_to_slab(s, pg, obj)
//                        inline: frees obj, already checked to be an object start of slab page
//                        pg of cache s (kfree's path).
//   free_gated(s, pg, obj)
//                        optional: free_to_slab for a cache whose gate word is open
//                        (core/cache.hpp: one node, no init on free, not debugged), so without
//                        those tests; kfree and free call it with no design switch
//                        (designs::visit_gated). A design that offers it sets its caches' gate
//                        tag (gate_tag_for) when it makes them; one without it (SLOB) leaves the
//                        tag 0. The malloc family's fast path compares the same gate before the
//                        design's alloc_fast.
//   can_shortcut(s), shortcut_of(s, slots, slot), pop_shortcut<kPrefetch = true>(entry),
//   push_shortcut(s, entry, obj)
//                        optional, one design at most (shortcut_v below): whether static cache
//                        s (its gate open) may have shortcuts (slot/slot.hpp); the entry of a
//                        thread that owns `slot` (nullptr: none yet); and alloc_fast's pop
//                        (nullptr when empty) and free_gated's push on an entry alone. kmalloc
//                        numbers the entry of each of its classes that may (cache::shortcut) and
//                        sets a thread's entries when it takes a slot; the design's slow paths
//                        set the entry when they make the slot's structure, or find it unset.
//                        kmalloc and the malloc family then find a class's structure with one
//                        thread-local load, where alloc_fast and free_gated read the class's
//                        descriptor, its gate and its per-slot array. pop_shortcut<false> may
//                        skip work done for the next pop (SLQB's prefetch of the next object):
//                        kmalloc's general path asks for that, since the prefetch made its
//                        shared entry keep one more register for every design (kmalloc pair
//                        +2 to +4 instructions under callgrind).
#pragma once

#include "core/cache.hpp"
#include "platform/lock.hpp"

#include <concepts>
#include <cstddef>
#include <cstdint>

namespace slabkit {

enum class fork_op : uint8_t { lock, unlock, reset };

inline void apply_fork_op(platform::mutex &m, fork_op op) {
    switch (op) {
    case fork_op::lock:
        m.lock();
        break;
    case fork_op::unlock:
        m.unlock();
        break;
    case fork_op::reset:
        m.reset_after_fork();
        break;
    }
}

// One cache's figures, as a design reports them.
struct design_stats {
    uint64_t slabs = 0;          // held now
    uint64_t objects = 0;        // their objects, free or not
    uint64_t active_objects = 0; // as the design's /proc/slabinfo counted them (see its docs)
    uint64_t queued_objects = 0; // of those, free objects parked per slot (or per list)
    static constexpr unsigned kMaxCounters = 24;
    unsigned nr_counters = 0;
    const char *const *counter_names = nullptr;
    uint64_t counters[kMaxCounters] = {};
    // The tunables slabkit_cache_tune accepts, with their values now.
    static constexpr unsigned kMaxTunables = 4;
    unsigned nr_tunables = 0;
    const char *tunable_names[kMaxTunables] = {};
    uint64_t tunables[kMaxTunables] = {};
    // The "tunables <limit> <batchcount> <sharedfactor>" columns of /proc/slabinfo.
    uint64_t slabinfo_tunables[3] = {};
    // The slabdata columns: slabs with no object out (SLAB's free list; active_slabs is slabs
    // less these) and objects in shared arrays.
    uint64_t free_slabs = 0;
    uint64_t shared_avail = 0;
    // The same events in one shape for every design (slabinfo's -A and -D): every allocation
    // and free of the cache, and those of them that took the design's slow path.
    uint64_t allocs = 0, alloc_slow = 0, frees = 0, free_slow = 0;
};

// Optional: a design that serves kmalloc itself, not through kmalloc's class caches (SLOB: a
// size header before each block, as the kernel's SLOB kept it), declares
// `static constexpr bool own_kmalloc = true` and offers
//   kmalloc(size, align, zero, node, debug_flags)
//                                      a block of size bytes (below a page less 8 at align 8,
//                                      the kernel's kmalloc; else size + 2 x align below a page,
//                                      the red zones more with debug flags (kBlockRedZone,
//                                      kBlockLeftRedZone), and debug::kBlockTracks with
//                                      U), aligned to align (8 or more), or nullptr; with debug
//                                      flags laid out for the debug layer's checks
//                                      (debug::block_*);
//   kfree(s, pg, p, op)                frees p, an object start of slab page pg of s, checking
//                                      it first: a block it did not hand out is reported naming
//                                      op;
//   usable_size(s, p)                  ksize of p, an object start of a slab page of s.
// Everything else about kmalloc (sizes of a page or more, kfree's dispatch) stays kmalloc's.
template <class D>
inline constexpr bool shortcut_v = requires(typename D::cache_type *s,
                                            const typename D::slot_storage *slots, void *e) {
    { D::can_shortcut(s) } -> std::same_as<bool>;
    { D::shortcut_of(s, slots, 0u) } -> std::same_as<void *>;
    { D::pop_shortcut(e) } -> std::same_as<void *>;
    { D::template pop_shortcut<false>(e) } -> std::same_as<void *>;
    D::push_shortcut(s, e, e);
};

template <class D>
inline constexpr bool own_kmalloc_v = requires {
    requires D::own_kmalloc;
};

// Optional: the gated free (above).
template <class D>
inline constexpr bool gated_v = requires(typename D::cache_type *s, page *pg, void *obj) {
    D::free_gated(s, pg, obj);
};

template <class D>
concept slab_design = std::derived_from<typename D::cache_type, cache> &&
    requires(typename D::cache_type *s, typename D::slot_storage *slots,
             const typename D::slot_storage *const_slots, const cache_args &args, const char **why,
             page *pg, void *obj, unsigned u, int node, bool flag, unsigned long value,
             const char *text, char *buf, size_t len, design_stats *st, fork_op op) {
    { D::kind } -> std::convertible_to<design>;
    { D::bootstrap() } -> std::same_as<void>;
    { D::create(args, why) } -> std::same_as<typename D::cache_type *>;
    { D::open_static(s, slots, args, why) } -> std::same_as<bool>;
    { D::destroy(s) } -> std::same_as<void>;
    { D::flush_slot(s, u, flag) } -> std::same_as<void>;
    { D::reclaim(s) } -> std::same_as<size_t>;
    { D::trim(s) } -> std::same_as<void>;
    { D::tune(s, text, value, why) } -> std::same_as<bool>;
    { D::set_order(s, u, why) } -> std::same_as<bool>;
    { D::statistics(s, st) } -> std::same_as<void>;
    { D::validate(s, buf, len) } -> std::same_as<unsigned>;
    { D::fork_boot(op) } -> std::same_as<void>;
    { D::fork_cache(s, op) } -> std::same_as<void>;
    { D::alloc(s, flag) } -> std::same_as<void *>;
    { D::alloc_fast(s, const_slots) } -> std::same_as<void *>;
    { D::alloc_cpu(s, const_slots) } -> std::same_as<void *>;
    { D::alloc_node(s, node, flag) } -> std::same_as<void *>;
    { D::free(s, obj) } -> std::same_as<void>;
    { D::free_to_slab(s, pg, obj) } -> std::same_as<void>;
};

} // namespace slabkit
