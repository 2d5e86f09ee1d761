// slot.hpp - slots: what a CPU is to the kernel's per-CPU structures.
//
// Every per-CPU structure of the kernel (pcp page lists, slab per-CPU queues) is an array indexed
// by slot here. Only one thread at a time works on a slot's per-slot state, so per-slot fast
// paths need no lock and no atomic read-modify-write. Two kinds of slot:
//
//  * a thread's own slot: a thread takes the lowest free one on its first allocation and gives
//    it back when it exits; the next thread inherits whatever was left in it, as a task
//    inherits an idle CPU. Its fast paths are plain loads and stores.
//  * a CPU's slot (slots 0 .. CPUs-1): fast paths are rseq critical sections on the structures
//    of the CPU the thread runs on (platform/rseq.hpp) that check the CPU's lock word; slow
//    paths take that word with an rseq section on the CPU (`hold`), never waiting for it.
//
// Three modes, chosen once, at first use (SLABKIT_SLOTS, or set_mode before):
//  * thread: every thread owns a slot, up to kThreadSlots; threads beyond those share one of
//    kSharedSlots further slots, taken with a compare-and-swap for each slow path.
//  * cpu: no thread owns a slot; every thread uses the CPUs' slots. Memory follows CPUs.
//  * auto (the default where rseq works; else thread): while the process has no more live
//    threads (of those that allocated) than own slots (as many as there are CPUs;
//    SLABKIT_THREAD_SLOTS), each owns a slot, after the CPUs' slots. When they outnumber the own
//    slots ("crowded"), every thread uses the CPUs' slots: an owner gives its slot back at its
//    next slow path, as if it had exited, and takes one again once threads are few. Few threads
//    get the fastest paths; many threads memory that follows CPUs, not threads (a thread that
//    owns a slot parks objects in it that no other thread can use).
//
// Either way, code that works on per-slot state outside an rseq section does so inside a `hold`,
// which gives the slot it may use (or kNoSlot: callers then take their locked slow path, which
// is always correct). Holds nest: an inner hold gets the outer one's slot.
//
// Lock order: taking a slot never waits. The registry lock (held by visitors of idle slots)
// is taken before any cache or page allocator lock, and never waited for under one: the
// visits that slow paths make under other locks only try it. See platform::fork_rank.
#pragma once

#include "base/compiler.hpp"

#include <atomic>
#include <cstdint>

namespace slabkit {

inline constexpr unsigned kThreadSlots = 1024; // slots threads may own, at most
inline constexpr unsigned kSharedSlots = 64;   // slots the threads beyond those share
inline constexpr unsigned kMaxSlots = kThreadSlots + kSharedSlots;
inline constexpr unsigned kNoSlot = ~0u;
inline constexpr unsigned kNrShortcuts = 78; // per thread (shortcut() below)

namespace slots {

enum class mode : uint8_t { thread, cpu, automatic };

// A slot's state word: free, owned (by its thread, or held for a slow path), or being visited.
// In CPU mode it is the lock word the rseq sections check (any value but kFree keeps them out).
// A visit writes kVisited in the low two bits and a number of its own above them
// (begin_visit), so that a visitor can tell its mark from another's. One cache line each, so
// that one CPU's slow paths do not disturb another's fast paths.
enum : uint32_t { kFree = 0, kOwned = 1, kVisited = 2, kStateKindMask = 3 };
struct alignas(64) slot_entry {
    std::atomic<uint32_t> state{kFree};
    std::atomic<uint32_t> node{0};
    std::atomic<uint64_t> idle_since_ms{0}; // when the slot was last given back
};

namespace detail {
// constinit: no dynamic initialisation, so no TLS wrapper call on every access.
extern SLABKIT_HIDDEN constinit thread_local unsigned tls_slot SLABKIT_TLS;
extern SLABKIT_HIDDEN constinit thread_local unsigned tls_index
    SLABKIT_TLS; // the slot fast paths may use now, or kMaxSlots
extern SLABKIT_HIDDEN constinit thread_local unsigned tls_held SLABKIT_TLS; // or kNoSlot
extern SLABKIT_HIDDEN slot_entry g_slots[kMaxSlots];
// Holds of the thread's own slot now open (holds nest): it gives its slot back only outside them.
extern SLABKIT_HIDDEN constinit thread_local unsigned tls_own_depth SLABKIT_TLS;
extern SLABKIT_HIDDEN constinit thread_local void
    *tls_shortcuts[kNrShortcuts] SLABKIT_TLS; // see shortcut()
extern SLABKIT_HIDDEN bool g_cpu_mode;        // CPUs have slots (cpu or auto); set before first use
extern SLABKIT_HIDDEN unsigned g_cpu_slots;   // slots 0 .. g_cpu_slots-1 are the CPUs'
// Auto mode: live threads that allocated, and how many may own slots (UINT32_MAX otherwise).
extern SLABKIT_HIDDEN std::atomic<unsigned> g_live_threads;
extern SLABKIT_HIDDEN unsigned g_crowd_limit;
unsigned acquire();
unsigned hold_slow(bool *taken);
unsigned give_back_own_and_hold(bool *taken);
void unhold(unsigned slot);
// True when threads outnumber the slots they may own (auto mode): owners give theirs back.
SLABKIT_ALWAYS_INLINE bool crowded() {
    return g_live_threads.load(std::memory_order_relaxed) > g_crowd_limit;
}
} // namespace detail

// True for a CPU's slot (its structures are the rseq sections' to lay out).
SLABKIT_ALWAYS_INLINE bool is_cpu_slot(unsigned slot) {
    return slot < detail::g_cpu_slots;
}
// True when the CPUs have slots (cpu and auto modes): fast paths that find no slot of the
// thread's own use the CPU's, with their rseq sections. False until the mode is chosen, which
// happens on the first hold or slot taken: until then fast paths find no slot and take their
// slow path, which chooses.
SLABKIT_ALWAYS_INLINE bool cpu_mode() {
    return detail::g_cpu_mode;
}
// True when the calling thread's fast paths use the slot of the CPU it runs on: the CPUs have
// slots, and the thread has no slot of its own (nor holds a shared one). A thread that owns a
// slot but has no structure in a cache yet takes its slow path, which makes one.
SLABKIT_ALWAYS_INLINE bool on_cpu_slot() {
    return detail::g_cpu_mode && detail::tls_index == kMaxSlots;
}
// The lock word of slot `slot` (CPU mode: the CPU's), for rseq sections.
SLABKIT_ALWAYS_INLINE std::atomic<uint32_t> *lock_word(unsigned slot) {
    return &detail::g_slots[slot].state;
}

// The slot the calling thread's fast paths may use now: its own, the shared one it holds (see
// hold), or kMaxSlots: never a slot another thread works on, nor a CPU's. Per-slot arrays that fast
// paths index with it have kMaxSlots + 1 entries, the last always empty, so the fast path needs
// no range check - an empty entry sends it to its slow path. One load.
SLABKIT_ALWAYS_INLINE unsigned index() {
    return detail::tls_index;
}

// ---- shortcuts ----------------------------------------------------------------------------
//
// What a layer above remembers of the calling thread's own slot, for its fastest paths: entry k
// (1 .. kNrShortcuts - 1) is a pointer that layer stored while the thread owned its slot -
// kmalloc keeps SLQB's per-slot structure of each of its classes there (64 of the malloc table,
// 13 of the kernel's), so that malloc and free reach it with one thread-local load where they
// read the class's descriptor, its gate and its per-slot array. Entry 0 is always null, for a
// lookup that has nothing to find.
//
// Every entry is null while the thread owns no slot: the thread clears them itself when it gives
// its slot back (at exit, or in a crowded process), and set_shortcut stores only while the
// thread works on its own slot. So an entry never points into a slot that another thread may
// own or a visitor may drain and free (visitors take idle slots only).
SLABKIT_ALWAYS_INLINE void *shortcut(size_t k) {
    return detail::tls_shortcuts[k];
}
// Stores entry k (1 .. kNrShortcuts - 1) if `slot` is the calling thread's own slot and its fast
// paths work on it now (not on a shared slot it holds, nor a CPU's).
SLABKIT_ALWAYS_INLINE void set_shortcut(unsigned slot, unsigned k, void *p) {
    if (slot < kMaxSlots && slot == detail::tls_slot && slot == detail::tls_index)
        detail::tls_shortcuts[k] = p;
}
// Called by a thread that has just taken a slot of its own (inside its slow path), so that the
// layer above can set the shortcuts to what the slot's last owner left in it. One hook at most
// (setting the same one again changes nothing).
void set_acquire_hook(void (*hook)(unsigned slot));
// The calling thread's own slot if its fast paths work on it now, else kNoSlot.
SLABKIT_ALWAYS_INLINE unsigned own_index() {
    const unsigned own = detail::tls_slot;
    return own < kMaxSlots && detail::tls_index == own ? own : kNoSlot;
}

// The right to work on one slot's per-slot state, for a slow path: the calling thread's own slot
// (taken on first use, if the mode gives it one); otherwise a shared slot or the CPU's, taken if
// free and given back by the destructor. slot() is kNoSlot when none could be had without
// waiting.
class hold {
  public:
    SLABKIT_ALWAYS_INLINE hold() {
        unsigned slot = detail::tls_slot;
        if (SLABKIT_LIKELY(slot < kMaxSlots)) {
            // An owner in a crowded process gives its slot back here, outside any hold of it
            // (nothing is half-done on it), and holds the CPU's instead.
            if (SLABKIT_UNLIKELY(detail::crowded()) && detail::tls_own_depth == 0) {
                slot_ = detail::give_back_own_and_hold(&taken_);
                own_ = false;
                return;
            }
            ++detail::tls_own_depth;
            slot_ = slot;
            taken_ = false;
            own_ = true;
            return;
        }
        slot_ = detail::hold_slow(&taken_);
        own_ = false;
    }
    SLABKIT_ALWAYS_INLINE ~hold() {
        if (own_) --detail::tls_own_depth;
        if (taken_) detail::unhold(slot_);
    }
    hold(const hold &) = delete;
    hold &operator=(const hold &) = delete;
    unsigned slot() const { return slot_; }

  private:
    unsigned slot_;
    bool taken_;
    bool own_;
};

// The calling thread's own slot, taking one if it has none and the mode gives it one; else the
// slot it holds, if any, else kNoSlot. For tests and tools; the library uses hold.
unsigned current();

// The slot the calling thread owns or holds, else kNoSlot; never takes one (safe in fork hooks,
// where the registry lock is held).
SLABKIT_ALWAYS_INLINE unsigned current_if_any() {
    unsigned slot = detail::tls_slot;
    return slot < kMaxSlots ? slot : detail::tls_held;
}

// Chooses the mode before first use (SLABKIT_SLOTS does it otherwise: thread, cpu or auto).
// False, with *why set, when slots are in use already or the CPUs' slots are not available here
// (cpu; auto then means thread).
bool set_mode(mode m, const char **why);
// True once the mode is chosen (it never changes after). A fork chooses it if nothing has yet.
bool mode_chosen();
// The mode in force (choosing it now if nothing has yet), and a sentence on how it was chosen.
mode current_mode(const char **why = nullptr);

// How slots are laid out in the mode in force (choosing it now if nothing has yet).
struct layout_info {
    mode m = mode::thread;
    const char *why = "";
    unsigned cpu_slots = 0;    // slots 0 .. cpu_slots-1 are the CPUs'
    unsigned own_slots = 0;    // slots threads may own
    unsigned owned = 0;        // owned by a thread now
    unsigned live_threads = 0; // auto mode: live threads that allocated
    bool crowded = false;      // auto mode: they outnumber own_slots, so all use the CPUs'
};
layout_info layout();
const char *mode_name(mode m);

// Counters of the slot layer since the process started: rseq sections restarted (the kernel
// aborted them: preemption, migration, a signal), holds refused because the slot was busy (a
// holder preempted or migrated mid-slow-path), holds of shared slots (thread mode, beyond
// kThreadSlots live threads), CPUs drained by the trimmer because no thread may run on them, and
// own slots given back in a crowded process.
struct counters {
    uint64_t restarts = 0;
    uint64_t busy = 0;
    uint64_t shared_holds = 0;
    uint64_t cpu_drains = 0;
    uint64_t given_back = 0; // auto mode: own slots given back because threads were crowded
};
counters stats();

// The NUMA node of the slot (thread mode: the node its thread ran on when it took the slot).
unsigned node_of(unsigned slot);
// Slots owned by a thread now, plus the CPUs' slots.
unsigned in_use();
// One past the highest slot ever taken: per-slot scans stop here.
unsigned high_water();
// True when a thread owns or holds the slot.
bool owned(unsigned slot);

// Calls fn(slot, arg) for every slot up to high_water() that no thread owns or holds, marking
// each as visited while fn runs so that no thread takes it meanwhile (a thread that finds only
// visited slots free goes without one until its next try). The caller may touch those slots'
// per-slot state inside fn. Visitors take turns under the registry lock. Every CPU's slot is
// visited, each after an rseq fence on it.
void for_each_idle(void (*fn)(unsigned slot, void *arg), void *arg);
// The same, for the slots that have been idle since `before_ms` (platform::now_coarse_ms time)
// or earlier: those no thread has inherited for a while; and the slots of the CPUs the process
// may not run on now (offline, or out of its affinity mask).
void for_each_idle_since(uint64_t before_ms, void (*fn)(unsigned slot, void *arg), void *arg);
// The same if no other visitor (or fork) holds the registry lock; false, doing nothing, if one
// does. For opportunistic drains on slow paths, which may run under other slabkit locks and so
// must never wait for the registry lock (fork takes it before those: see platform::fork_rank).
bool try_for_each_idle_since(uint64_t before_ms, void (*fn)(unsigned slot, void *arg), void *arg);

// Hooks called at thread exit with the departing thread's own slot, before it becomes idle (while
// the thread still owns it). At most 8. Returns false when full.
bool add_release_hook(void (*hook)(unsigned slot));

} // namespace slots
} // namespace slabkit
