// slot.cpp - the slot registry: slot states, the mode (threads or CPUs), holds, idle-slot
// visits, and the thread-exit and fork hooks that keep it true.
#include "slot/slot.hpp"

#include "platform/lock.hpp"
#include "platform/platform.hpp"
#include "platform/rseq.hpp"

#include <atomic>
#include <cstdint>
#include <cstring>

namespace slabkit::slots {

namespace detail {
// The thread's own slot; kMaxSlots + 1: none assigned yet; kNoSlot: none to be had (all taken,
// the mode gives threads none, or exiting).
constinit thread_local unsigned tls_slot SLABKIT_TLS = kMaxSlots + 1;
// See index(): the owned slot, the held one, or kMaxSlots.
constinit thread_local unsigned tls_index SLABKIT_TLS = kMaxSlots;
} // namespace detail
} // namespace slabkit::slots

// The same variable under the name the inline fast paths of the public header read
// (include/slabkit/inline.h, api/inline_abi.cpp): exported, while the library's own accesses
// stay bound to the hidden name (a second copy of the library in the process - the preloaded
// malloc beside libslabkit.so - never shares it).
extern "C" {
extern __attribute__((alias("_ZN7slabkit5slots6detail9tls_indexE"), visibility("default")))
SLABKIT_TLS thread_local unsigned slabkit_inline_v1_slot;
}

namespace slabkit::slots {
namespace detail {
// The held slot of a thread that holds a shared or CPU slot, else kNoSlot (holds nest).
constinit thread_local unsigned tls_held SLABKIT_TLS = kNoSlot;
constinit thread_local unsigned tls_own_depth SLABKIT_TLS = 0;
constinit thread_local void *tls_shortcuts[kNrShortcuts] SLABKIT_TLS = {};
slot_entry g_slots[kMaxSlots];
bool g_cpu_mode = false;
unsigned g_cpu_slots = 0;
std::atomic<unsigned> g_live_threads{0};
unsigned g_crowd_limit = UINT32_MAX;
} // namespace detail

namespace {

using detail::g_cpu_slots;
using detail::g_crowd_limit;
using detail::g_live_threads;
using detail::g_slots;

// Auto mode: the thread is counted in g_live_threads (from its first slow path to its exit).
constinit thread_local bool tls_counted SLABKIT_TLS = false;

constexpr unsigned kReleaseHooks = 8;
std::atomic<void (*)(unsigned)> g_acquire_hook{nullptr};

platform::mutex g_lock; // visitors of idle slots, release-hook registration, fork
std::atomic<unsigned> g_in_use{0};
std::atomic<unsigned> g_high_water{0};
void (*g_release_hooks[kReleaseHooks])(unsigned);
std::atomic<unsigned> g_release_hook_count{0};

bool begin_visit(unsigned s);

// Counters (slow paths only: atomic adds).
std::atomic<uint64_t> g_busy{0}, g_shared_holds{0}, g_cpu_drains{0}, g_given_back{0};

// ---- the mode ------------------------------------------------------------------------------

// 0: not chosen; 1: being chosen; 2: chosen.
std::atomic<uint8_t> g_mode_state{0};
// This thread is choosing (state 1): a fork from a signal handler must not wait for it.
constinit thread_local bool tls_choosing SLABKIT_TLS = false;
mode g_mode = mode::thread;
const char *g_mode_why = "";
unsigned g_own_base = 0; // threads own slots g_own_base .. g_own_base + g_own_slots - 1
unsigned g_own_slots = kThreadSlots;

// Why CPU mode cannot be had here, or nullptr when it can.
const char *cpu_mode_unavailable() {
    const platform::rseq_status &st = platform::rseq_state();
    if (st.source == platform::rseq_source::none) return st.why;
    if (!st.fence)
        return "the kernel has no membarrier rseq fence (Linux 5.10 and later), which the "
               "trimmer needs to drain a CPU's structures";
    if (platform::cpu_count() > kMaxSlots)
        return "the machine has more CPUs than slabkit has slots";
    return nullptr;
}

void enter_mode(mode m, const char *why) {
    g_mode = m;
    g_mode_why = why;
    if (m == mode::thread) return; // own slots 0 .. kThreadSlots-1, then the shared ones
    const platform::topology &t = platform::numa();
    g_cpu_slots = t.cpus;
    for (unsigned cpu = 0; cpu < g_cpu_slots; ++cpu)
        g_slots[cpu].node.store(t.cpu_node[cpu], std::memory_order_relaxed);
    g_own_base = g_cpu_slots;
    g_own_slots = 0;
    if (m == mode::automatic) {
        // As many owners as CPUs: then every owner can run at once, and no CPU's slot is
        // needed. (Twice as many, the first rule, parked in both kinds of slot: 4 threads
        // passing blocks on 2 CPUs peaked at 75 to 93 MiB, against 45 to 47 on the CPUs' slots.)
        unsigned room = kMaxSlots - g_cpu_slots;
        if (room > kThreadSlots) room = kThreadSlots;
        unsigned fallback = g_cpu_slots < room ? g_cpu_slots : room;
        g_own_slots =
            static_cast<unsigned>(platform::env_uint("SLABKIT_THREAD_SLOTS", fallback, 0, room));
        g_crowd_limit = g_own_slots;
    }
    g_in_use.store(g_cpu_slots, std::memory_order_relaxed);
    g_high_water.store(g_cpu_slots, std::memory_order_release);
    detail::g_cpu_mode = true;
}

// Takes the choice (0 -> 1) for the caller: true when the mode is the caller's to choose, false
// once it is chosen. Waits while another thread is choosing.
bool take_choice() {
    for (;;) {
        uint8_t st = g_mode_state.load(std::memory_order_acquire);
        if (st == 2) return false;
        if (st == 0 && g_mode_state.compare_exchange_weak(st, 1, std::memory_order_acquire)) {
            tls_choosing = true;
            return true;
        }
        platform::yield_cpu();
    }
}
void end_choice() {
    tls_choosing = false;
    g_mode_state.store(2, std::memory_order_release); // with everything enter_mode set
}

// Chooses the mode from SLABKIT_SLOTS (once; every thread waits for the one choosing).
void choose_mode() {
    if (SLABKIT_LIKELY(g_mode_state.load(std::memory_order_acquire) == 2)) return;
    if (take_choice()) {
        const char *env = platform::env("SLABKIT_SLOTS");
        const char *unavailable = cpu_mode_unavailable();
        if (env && strcmp(env, "thread") == 0) {
            enter_mode(mode::thread, "SLABKIT_SLOTS=thread");
        } else if (env && strcmp(env, "cpu") == 0) {
            if (unavailable) {
                platform::print_error("slabkit: SLABKIT_SLOTS=cpu: the CPUs' slots are not "
                                      "available here (%s); using thread mode\n",
                                      unavailable);
                enter_mode(mode::thread, unavailable);
            } else {
                enter_mode(mode::cpu, "SLABKIT_SLOTS=cpu");
            }
        } else {
            if (env && strcmp(env, "auto") != 0)
                platform::print_error("slabkit: SLABKIT_SLOTS=%s is not a slot mode (thread, cpu "
                                      "or auto); using auto\n",
                                      env);
            if (unavailable)
                enter_mode(mode::thread, unavailable);
            else
                enter_mode(mode::automatic, "auto: rseq works here");
        }
        end_choice();
    }
}

// ---- thread exit and fork -----------------------------------------------------------------

// The calling thread's own slot becomes idle, with whatever it parks, for the next thread to
// inherit or the trimmer to drain: at exit, or given back in a crowded process.
void release_own(unsigned slot) {
    // Before the slot is free: from here on another thread may take it, or a visitor free its
    // structures.
    memset(detail::tls_shortcuts, 0, sizeof detail::tls_shortcuts);
    unsigned n = g_release_hook_count.load(std::memory_order_acquire);
    for (unsigned i = 0; i < n; ++i) g_release_hooks[i](slot);
    g_slots[slot].idle_since_ms.store(platform::now_coarse_ms(), std::memory_order_relaxed);
    g_in_use.fetch_sub(1, std::memory_order_relaxed);
    // Release: the next owner or visitor sees everything this thread left in the slot.
    g_slots[slot].state.store(kFree, std::memory_order_release);
}

void on_thread_exit() {
    unsigned slot = detail::tls_slot;
    detail::tls_slot = kNoSlot;
    detail::tls_index = kMaxSlots;
    if (tls_counted) {
        tls_counted = false;
        g_live_threads.fetch_sub(1, std::memory_order_relaxed);
    }
    if (slot >= kMaxSlots) return;
    release_own(slot);
}

void fork_prepare() {
    g_lock.lock(); // no visitor is half-way through an idle slot
}
void fork_parent() {
    g_lock.unlock();
}
void fork_child() {
    // Only the forking thread lives on in the child: every other slot is free now (also one a
    // thread had just taken and not yet recorded, or held for a slow path), and its per-slot
    // state is inherited by whichever thread takes it next.
    unsigned mine = detail::tls_slot < kMaxSlots ? detail::tls_slot : detail::tls_held;
    unsigned count = g_cpu_slots;
    const uint64_t now = platform::now_coarse_ms();
    for (unsigned s = 0; s < kMaxSlots; ++s) {
        bool keep = s == mine;
        if (!keep && g_slots[s].state.load(std::memory_order_relaxed) != kFree)
            g_slots[s].idle_since_ms.store(now, std::memory_order_relaxed);
        g_slots[s].state.store(keep ? kOwned : kFree, std::memory_order_relaxed);
        count += keep && s == detail::tls_slot;
    }
    g_in_use.store(count, std::memory_order_relaxed);
    g_live_threads.store(tls_counted ? 1 : 0, std::memory_order_relaxed);
    platform::rseq_after_fork_child();
    g_lock.reset_after_fork();
}

// The CPUs' slots, taken whole for the fork: a thread that holds one for a slow path changes
// the CPU's structures with plain stores, and a child forked half-way through would inherit
// them half-changed (its threads all use the CPUs' slots). Holders never wait while holding, so
// waiting for each to let go ends; the fast paths' sections see the slots taken and go the
// slot-less way until fork returns. (Own slots need none of this: the child's only thread keeps
// its own, and a slot another thread owned is reset by fork_child before anyone takes it.)
//
// The mode is chosen first if no thread has yet (a thread choosing it finishes), so the slots
// given back after are exactly those taken here, and no thread starts on a CPU's slot during
// the fork. (Reading the CPU count alone, a fork just after a program's first threads started
// took no slot while one of them was choosing CPU mode; the parent's handler then freed both
// CPUs' slots under their holders, two threads flushed one CPU's queue at once, and malloc
// handed out addresses inside other objects. Holding the choice through the fork instead
// deadlocked: threads choose under kmalloc's class-opening lock, which fork takes later.)
unsigned g_fork_cpu_slots = 0; // the CPUs' slots this fork took
void fork_prepare_cpus() {
    // A fork from a signal handler inside this thread's own choice: every other thread waits
    // for the choice, so none holds a CPU's slot, and there is nothing to take.
    const bool inside_choice = tls_choosing;
    if (!inside_choice) choose_mode();
    g_fork_cpu_slots = !inside_choice && detail::g_cpu_mode ? g_cpu_slots : 0;
    for (unsigned s = 0; s < g_fork_cpu_slots; ++s) {
        if (s == detail::tls_held) continue; // fork from a signal handler inside a hold
        while (!begin_visit(s)) platform::yield_cpu();
    }
}
void fork_parent_cpus() {
    for (unsigned s = 0; s < g_fork_cpu_slots; ++s) {
        if (s == detail::tls_held) continue;
        g_slots[s].state.store(kFree, std::memory_order_release);
    }
}
void fork_child_cpus() {
    // fork_child (a later rank, so it runs first here) has already freed every slot.
}

// Registered when the library is loaded, before any thread can hold a slabkit lock. (Registering
// lazily from a thread's first acquire deadlocked against fork: add_fork_hooks takes the
// hook-table lock, which fork's prepare holds while it runs the hooks.)
__attribute__((constructor)) void install_hooks() {
    if (!platform::add_thread_exit_hook(on_thread_exit) ||
        !platform::add_fork_hooks(
            {platform::kForkRankSlots, fork_prepare, fork_parent, fork_child}) ||
        !platform::add_fork_hooks(
            {platform::kForkRankCpuSlots, fork_prepare_cpus, fork_parent_cpus, fork_child_cpus}))
        platform::fatal("slabkit: cannot register the slot registry's thread-exit and fork "
                        "hooks\n");
}

// ---- visits --------------------------------------------------------------------------------

// Marks a free slot visited. In CPU mode the slot's CPU may be running an rseq section that
// read the word as free before the mark; the fence restarts it (after which it sees the mark).
// A thread of that CPU may also have taken the slot in between with its rseq section's plain
// store, overwriting the mark: then the slot is its, and the visit skips it. That thread may
// even have let the slot go again and another visitor marked it meanwhile: so each visit's mark
// is its own (a serial number above the kind bits), and the visit is this one's only if the
// word still holds this mark. (With one kVisited value for all, two visitors - fork's prepare
// and a drain - both took CPU 0's slot; the drain's end freed it while fork still counted it
// as taken, a slow path took it, and fork's parent handler freed it under that holder: two
// threads flushed one CPU's queue at once, a double free reported later.)
std::atomic<uint32_t> g_visit_serial{0};

bool begin_visit(unsigned s) {
    const uint32_t mark = kVisited | (g_visit_serial.fetch_add(1, std::memory_order_relaxed) << 2);
    uint32_t expected = kFree;
    // Acquire: fn sees everything the slot's last owner (or visitor) left in it.
    if (!g_slots[s].state.compare_exchange_strong(expected, mark, std::memory_order_acquire,
                                                  std::memory_order_relaxed))
        return false;
    if (s >= g_cpu_slots) return true;
    if (!platform::rseq_fence_cpu(s)) {
        // The fence was there when CPU mode was chosen; without it now, leave the CPU alone.
        uint32_t mine = mark;
        g_slots[s].state.compare_exchange_strong(mine, kFree, std::memory_order_release);
        return false;
    }
    return g_slots[s].state.load(std::memory_order_acquire) == mark;
}

// Under g_lock: visits the idle slots below the high-water mark given back at `before_ms` or
// earlier, and the CPUs' slots (all of them; with a time, those of the CPUs the process may not
// run on), each marked kVisited while fn runs.
void visit_idle(uint64_t before_ms, void (*fn)(unsigned, void *), void *arg) {
    unsigned limit = g_high_water.load(std::memory_order_acquire);
    uint64_t allowed[platform::kMaxCpus / 64];
    bool only_unallowed = before_ms != UINT64_MAX;
    if (only_unallowed && g_cpu_slots && !platform::allowed_cpus(allowed, platform::kMaxCpus / 64))
        memset(allowed, 0xff, sizeof allowed); // cannot tell: drain no CPU
    for (unsigned s = 0; s < limit; ++s) {
        if (g_slots[s].state.load(std::memory_order_relaxed) != kFree) continue;
        const bool cpu = s < g_cpu_slots;
        if (cpu) {
            if (only_unallowed && ((allowed[s / 64] >> (s % 64)) & 1)) continue;
        } else if (g_slots[s].idle_since_ms.load(std::memory_order_relaxed) > before_ms) {
            continue;
        }
        if (!begin_visit(s)) continue;
        // The time is read again: the slot may have been taken and given back in between.
        if (cpu || g_slots[s].idle_since_ms.load(std::memory_order_relaxed) <= before_ms) {
            fn(s, arg);
            if (cpu && only_unallowed) g_cpu_drains.fetch_add(1, std::memory_order_relaxed);
        }
        g_slots[s].state.store(kFree, std::memory_order_release);
    }
}

void raise_high_water(unsigned slot) {
    unsigned top = g_high_water.load(std::memory_order_relaxed);
    while (top < slot + 1 &&
           !g_high_water.compare_exchange_weak(top, slot + 1, std::memory_order_release,
                                               std::memory_order_relaxed)) {
    }
}

// Thread mode, a thread beyond kThreadSlots: one of the shared slots, picked from the thread's
// address so that threads spread over them, taken with a compare-and-swap if free.
unsigned hold_shared() {
    uintptr_t self = reinterpret_cast<uintptr_t>(&detail::tls_held);
    unsigned first = static_cast<unsigned>((self >> 12) * 0x9e3779b1u >> 8) % kSharedSlots;
    for (unsigned i = 0; i < 4; ++i) {
        unsigned slot = kThreadSlots + (first + i) % kSharedSlots;
        uint32_t expected = kFree;
        if (g_slots[slot].state.compare_exchange_strong(expected, kOwned, std::memory_order_acquire,
                                                        std::memory_order_relaxed)) {
            raise_high_water(slot);
            g_shared_holds.fetch_add(1, std::memory_order_relaxed);
            return slot;
        }
    }
    g_busy.fetch_add(1, std::memory_order_relaxed);
    return kNoSlot;
}

// CPU mode: the slot of the CPU the thread runs on, taken with an rseq section on that CPU.
// *busy: it was held already (by a slow path of another thread, or a visitor).
unsigned hold_cpu(bool *busy) {
#if SLABKIT_HAVE_RSEQ
    // A hold that keeps being restarted (a signal storm) gives up after this many tries.
    constexpr unsigned kHoldTries = 64;
    if (!platform::rseq_register_thread()) return kNoSlot;
    for (unsigned tries = 0; tries < kHoldTries; ++tries) {
        unsigned cpu = platform::rseq_cpu();
        if (cpu >= g_cpu_slots) return kNoSlot;
        if (platform::rseq_lock(&g_slots[cpu].state, cpu)) return cpu;
        if (g_slots[cpu].state.load(std::memory_order_relaxed) != kFree) {
            *busy = true;
            return kNoSlot;
        }
        // Restarted, or moved to another CPU: read the CPU again.
    }
#else
    (void)busy; // no CPU mode without rseq
#endif
    return kNoSlot;
}

} // namespace

namespace detail {

unsigned acquire() {
    choose_mode();
    if (g_own_slots == 0) tls_slot = kNoSlot; // the mode gives threads no slot of their own
    if (tls_slot == kNoSlot || platform::thread_exiting()) return kNoSlot;
    const bool counting = g_crowd_limit != UINT32_MAX; // auto mode
    if (counting) {
        if (!tls_counted) {
            tls_counted = true;
            g_live_threads.fetch_add(1, std::memory_order_relaxed);
            platform::arm_thread_exit(); // to be counted out
        }
        if (crowded()) return kNoSlot; // the CPUs' slots; asks again at a later slow path
    }
    const unsigned node = platform::numa().cpu_node[platform::current_cpu()];
    unsigned slot = kNoSlot;
    bool visited = false; // a free slot was being visited: try again next time
    for (unsigned s = g_own_base; s < g_own_base + g_own_slots; ++s) {
        uint32_t state = g_slots[s].state.load(std::memory_order_relaxed);
        if (state == kFree &&
            g_slots[s].state.compare_exchange_strong(state, kOwned, std::memory_order_acquire,
                                                     std::memory_order_relaxed)) {
            slot = s;
            break;
        }
        visited |= (state & kStateKindMask) == kVisited;
    }
    if (slot == kNoSlot) {
        // None free: this thread uses the CPUs' slots, or shares slots (for good when all are
        // owned, except in auto mode, where owners give theirs back and come and go).
        if (!visited && !counting) tls_slot = kNoSlot;
        return kNoSlot;
    }
    g_slots[slot].node.store(node, std::memory_order_relaxed);
    g_in_use.fetch_add(1, std::memory_order_relaxed);
    raise_high_water(slot);
    tls_slot = slot;
    tls_index = slot;
    platform::arm_thread_exit();
    if (auto *hook = g_acquire_hook.load(std::memory_order_acquire)) hook(slot);
    return slot;
}

unsigned hold_slow(bool *taken) {
    *taken = false;
    if (tls_held != kNoSlot) return tls_held; // nested: the outer hold's slot
    choose_mode();
    unsigned slot = tls_slot < kMaxSlots ? tls_slot : acquire();
    if (slot != kNoSlot) return slot;
    if (g_cpu_mode) {
        bool busy = false;
        slot = hold_cpu(&busy);
        if (slot == kNoSlot && busy) {
            // Most often the holder was preempted inside its slow path on this CPU, and the
            // slot stays held until it runs again: every allocation and free here would go
            // slot-less meanwhile (about 400,000 of them in an xthread-mixed run, 4 threads on
            // 2 CPUs). Giving the CPU away once lets it finish; if the slot is still held
            // (a holder elsewhere, or a visit), the slot-less path follows. Never a wait.
            platform::yield_cpu();
            busy = false;
            slot = hold_cpu(&busy);
            if (busy) g_busy.fetch_add(1, std::memory_order_relaxed);
        }
    } else {
        if (platform::thread_exiting()) return kNoSlot;
        slot = hold_shared();
    }
    if (slot == kNoSlot) return kNoSlot;
    *taken = true;
    tls_held = slot;
    // A shared slot's structures are laid out as a thread's own: the own-slot fast paths may
    // work on them while held. A CPU's are not (SLQB packs its queue word for the rseq sections):
    // fast paths inside a hold of a CPU's slot take the CPU's path, find the slot held and go
    // to their slow path, which gets this hold's slot.
    if (!g_cpu_mode) tls_index = slot;
    return slot;
}

unsigned give_back_own_and_hold(bool *taken) {
    release_own(tls_slot);
    tls_slot = kMaxSlots + 1; // none now: acquire asks again once threads are few
    tls_index = kMaxSlots;
    g_given_back.fetch_add(1, std::memory_order_relaxed);
    return hold_slow(taken);
}

void unhold(unsigned slot) {
    tls_held = kNoSlot;
    tls_index = kMaxSlots;
    if (!g_cpu_mode)
        g_slots[slot].idle_since_ms.store(platform::now_coarse_ms(), std::memory_order_relaxed);
    // Release: the next holder, or a visitor, sees everything done under this hold.
    g_slots[slot].state.store(kFree, std::memory_order_release);
}

} // namespace detail

unsigned current() {
    if (detail::tls_slot < kMaxSlots) return detail::tls_slot;
    unsigned slot = detail::acquire();
    return slot != kNoSlot ? slot : current_if_any();
}

bool set_mode(mode m, const char **why) {
    const char *unavailable = cpu_mode_unavailable();
    if (m == mode::cpu && unavailable) {
        *why = unavailable;
        return false;
    }
    if (m == mode::automatic && unavailable) m = mode::thread;
    if (!take_choice()) {
        if (g_mode == m) return true;
        *why = "the slot mode was chosen already (at the first allocation): choose it before";
        return false;
    }
    enter_mode(m, m == mode::cpu      ? "chosen by the program (cpu)"
                  : m == mode::thread ? "chosen by the program (thread)"
                                      : "chosen by the program (auto)");
    end_choice();
    return true;
}

bool mode_chosen() {
    return g_mode_state.load(std::memory_order_acquire) == 2;
}

mode current_mode(const char **why) {
    choose_mode();
    if (why) *why = g_mode_why;
    return g_mode;
}

layout_info layout() {
    choose_mode();
    layout_info l;
    l.m = g_mode;
    l.why = g_mode_why;
    l.cpu_slots = g_cpu_slots;
    l.own_slots = g_own_slots;
    unsigned used = g_in_use.load(std::memory_order_relaxed);
    l.owned = used > g_cpu_slots ? used - g_cpu_slots : 0;
    l.live_threads = g_live_threads.load(std::memory_order_relaxed);
    l.crowded = detail::crowded();
    return l;
}

const char *mode_name(mode m) {
    return m == mode::thread ? "thread" : m == mode::cpu ? "cpu" : "auto";
}

counters stats() {
    counters c;
    c.restarts = platform::g_rseq_restarts.load(std::memory_order_relaxed);
    c.busy = g_busy.load(std::memory_order_relaxed);
    c.shared_holds = g_shared_holds.load(std::memory_order_relaxed);
    c.cpu_drains = g_cpu_drains.load(std::memory_order_relaxed);
    c.given_back = g_given_back.load(std::memory_order_relaxed);
    return c;
}

unsigned node_of(unsigned slot) {
    return slot < kMaxSlots ? g_slots[slot].node.load(std::memory_order_relaxed) : 0;
}
unsigned in_use() {
    return g_in_use.load(std::memory_order_relaxed);
}
unsigned high_water() {
    return g_high_water.load(std::memory_order_acquire);
}
bool owned(unsigned slot) {
    return slot < kMaxSlots && g_slots[slot].state.load(std::memory_order_relaxed) == kOwned;
}

void for_each_idle(void (*fn)(unsigned, void *), void *arg) {
    for_each_idle_since(UINT64_MAX, fn, arg);
}

void for_each_idle_since(uint64_t before_ms, void (*fn)(unsigned, void *), void *arg) {
    platform::lock_guard guard(g_lock);
    visit_idle(before_ms, fn, arg);
}

bool try_for_each_idle_since(uint64_t before_ms, void (*fn)(unsigned, void *), void *arg) {
    if (!g_lock.try_lock()) return false;
    visit_idle(before_ms, fn, arg);
    g_lock.unlock();
    return true;
}

bool add_release_hook(void (*hook)(unsigned)) {
    platform::lock_guard guard(g_lock);
    unsigned n = g_release_hook_count.load(std::memory_order_relaxed);
    if (n == kReleaseHooks) return false;
    g_release_hooks[n] = hook;
    g_release_hook_count.store(n + 1, std::memory_order_release);
    return true;
}

void set_acquire_hook(void (*hook)(unsigned)) {
    g_acquire_hook.store(hook, std::memory_order_release);
}

} // namespace slabkit::slots
