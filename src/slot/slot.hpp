// slot.hpp - slots: what a CPU is to the kernel's per-CPU structures, a live thread is to ours.
//
// Every per-CPU structure of the kernel (pcp page lists, slab per-CPU queues) is an array indexed
// by slot here. A thread takes the lowest free slot on its first allocation and gives it back
// when it exits; the next thread inherits whatever the slot's owners left in their per-slot
// structures, as a task inherits an idle CPU. Only the owning thread touches a slot's per-slot
// state, so per-slot fast paths need no lock and no atomic read-modify-write.
//
// When all kMaxSlots are taken (or while a thread runs its exit hooks) a thread has no slot:
// callers then take their locked slow path, which is always correct.
//
// Lock order: taking a slot takes no lock. The registry lock (held by visitors of idle slots)
// is taken before any cache or page allocator lock, and never waited for under one: the
// visits that slow paths make under other locks only try it. See platform::fork_rank.
#pragma once

#include "base/compiler.hpp"

#include <cstdint>

namespace slabkit {

inline constexpr unsigned kMaxSlots = 1024;
inline constexpr unsigned kNoSlot = ~0u;

namespace slots {

namespace detail {
// constinit: no dynamic initialisation, so no TLS wrapper call on every access.
extern SLABKIT_HIDDEN constinit thread_local unsigned tls_slot SLABKIT_TLS;
extern SLABKIT_HIDDEN constinit thread_local unsigned tls_index
    SLABKIT_TLS; // tls_slot, or kMaxSlots
unsigned acquire();
} // namespace detail

// The calling thread's slot, or kMaxSlots when it has none (yet): never a slot any thread
// holds. Per-slot arrays that fast paths index with it have kMaxSlots + 1 entries, the last
// always empty, so the fast path needs no range check - an empty entry sends it to its slow
// path, which calls current(). One load.
SLABKIT_ALWAYS_INLINE unsigned index() {
    return detail::tls_index;
}

// The calling thread's slot, or kNoSlot (see above). A load and a compare when already assigned.
SLABKIT_ALWAYS_INLINE unsigned current() {
    unsigned slot = detail::tls_slot;
    if (SLABKIT_LIKELY(slot < kMaxSlots)) return slot;
    return detail::acquire();
}

// The calling thread's slot if it has one, else kNoSlot; never takes one (safe in fork hooks,
// where the registry lock is held).
SLABKIT_ALWAYS_INLINE unsigned current_if_any() {
    unsigned slot = detail::tls_slot;
    return slot < kMaxSlots ? slot : kNoSlot;
}

// The NUMA node the slot's thread ran on when it took the slot.
unsigned node_of(unsigned slot);
// Slots owned by a thread now.
unsigned in_use();
// One past the highest slot ever taken: per-slot scans stop here.
unsigned high_water();
// True when a thread owns the slot.
bool owned(unsigned slot);

// Calls fn(slot, arg) for every slot up to high_water() that no thread owns, marking each as
// visited while fn runs so that no thread takes it meanwhile (a thread that finds only visited
// slots free goes without one until its next try). The caller may touch those slots' per-slot
// state inside fn. Visitors take turns under the registry lock.
void for_each_idle(void (*fn)(unsigned slot, void *arg), void *arg);
// The same, for the slots that have been idle since `before_ms` (platform::now_coarse_ms time)
// or earlier: those no thread has inherited for a while.
void for_each_idle_since(uint64_t before_ms, void (*fn)(unsigned slot, void *arg), void *arg);
// The same if no other visitor (or fork) holds the registry lock; false, doing nothing, if one
// does. For opportunistic drains on slow paths, which may run under other slabkit locks and so
// must never wait for the registry lock (fork takes it before those: see platform::fork_rank).
bool try_for_each_idle_since(uint64_t before_ms, void (*fn)(unsigned slot, void *arg), void *arg);

// Hooks called at thread exit with the departing thread's slot, before it becomes idle (while
// the thread still owns it). At most 8. Returns false when full.
bool add_release_hook(void (*hook)(unsigned slot));

} // namespace slots
} // namespace slabkit
