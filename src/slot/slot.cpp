// slot.cpp - the slot registry: a bitmap of owned slots under one lock, and the thread-exit and
// fork hooks that keep it true.
#include "slot/slot.hpp"

#include "platform/lock.hpp"
#include "platform/platform.hpp"

#include <atomic>
#include <cstdint>

namespace slabkit::slots {

namespace detail {
// kMaxSlots + 1: never assigned yet. kNoSlot: none to be had (exhausted, or exiting).
constinit thread_local unsigned tls_slot SLABKIT_TLS = kMaxSlots + 1;
// The slot as an array index: tls_slot while it is a slot, else kMaxSlots (see index()).
constinit thread_local unsigned tls_index SLABKIT_TLS = kMaxSlots;
} // namespace detail

namespace {

constexpr unsigned kReleaseHooks = 8;

// A slot's state. Taking a free slot is one compare-and-swap, with no lock: a thread may take
// its first slot under any other slabkit lock (a page allocation under a cache's list lock),
// so the registry lock must never be waited for on that path. A visitor of idle slots marks
// the slot it works on `kVisited`, which no thread can take; the registry lock only keeps
// visitors (and fork) apart.
enum : uint8_t { kFree = 0, kOwned = 1, kVisited = 2 };

platform::mutex g_lock; // visitors of idle slots, release-hook registration, fork
std::atomic<uint8_t> g_state[kMaxSlots];
std::atomic<uint64_t> g_idle_since_ms[kMaxSlots]; // when the slot was last given back
std::atomic<uint8_t> g_node[kMaxSlots];
std::atomic<unsigned> g_in_use{0};
std::atomic<unsigned> g_high_water{0};
void (*g_release_hooks[kReleaseHooks])(unsigned);
std::atomic<unsigned> g_release_hook_count{0};

void on_thread_exit() {
    unsigned slot = detail::tls_slot;
    detail::tls_slot = kNoSlot;
    detail::tls_index = kMaxSlots;
    if (slot >= kMaxSlots) return;
    unsigned n = g_release_hook_count.load(std::memory_order_acquire);
    for (unsigned i = 0; i < n; ++i) g_release_hooks[i](slot);
    g_idle_since_ms[slot].store(platform::now_coarse_ms(), std::memory_order_relaxed);
    g_in_use.fetch_sub(1, std::memory_order_relaxed);
    // Release: the next owner or visitor sees everything this thread left in the slot.
    g_state[slot].store(kFree, std::memory_order_release);
}

void fork_prepare() {
    g_lock.lock(); // no visitor is half-way through an idle slot
}
void fork_parent() {
    g_lock.unlock();
}
void fork_child() {
    // Only the forking thread lives on in the child: every other slot is idle now (also one a
    // thread had just taken and not yet recorded), and its per-slot state is inherited by
    // whichever thread takes it next.
    unsigned mine = detail::tls_slot;
    unsigned count = 0;
    const uint64_t now = platform::now_coarse_ms();
    for (unsigned s = 0; s < kMaxSlots; ++s) {
        bool keep = s == mine;
        if (!keep && g_state[s].load(std::memory_order_relaxed) != kFree)
            g_idle_since_ms[s].store(now, std::memory_order_relaxed);
        g_state[s].store(keep ? kOwned : kFree, std::memory_order_relaxed);
        count += keep;
    }
    g_in_use.store(count, std::memory_order_relaxed);
    g_lock.reset_after_fork();
}

// Registered when the library is loaded, before any thread can hold a slabkit lock. (Registering
// lazily from a thread's first acquire deadlocked against fork: add_fork_hooks takes the
// hook-table lock, which fork's prepare holds while it runs the hooks.)
__attribute__((constructor)) void install_hooks() {
    if (!platform::add_thread_exit_hook(on_thread_exit) ||
        !platform::add_fork_hooks(
            {platform::kForkRankSlots, fork_prepare, fork_parent, fork_child}))
        platform::fatal("slabkit: cannot register the slot registry's thread-exit and fork "
                        "hooks\n");
}

// Under g_lock: visits the idle slots below the high-water mark given back at `before_ms` or
// earlier, each marked kVisited while fn runs.
void visit_idle(uint64_t before_ms, void (*fn)(unsigned, void *), void *arg) {
    unsigned limit = g_high_water.load(std::memory_order_acquire);
    for (unsigned s = 0; s < limit; ++s) {
        if (g_state[s].load(std::memory_order_relaxed) != kFree ||
            g_idle_since_ms[s].load(std::memory_order_relaxed) > before_ms)
            continue;
        uint8_t expected = kFree;
        // Acquire: fn sees everything the slot's last owner (or visitor) left in it. The time
        // is read again: the slot may have been taken and given back in between.
        if (!g_state[s].compare_exchange_strong(expected, kVisited, std::memory_order_acquire,
                                                std::memory_order_relaxed))
            continue;
        if (g_idle_since_ms[s].load(std::memory_order_relaxed) <= before_ms) fn(s, arg);
        g_state[s].store(kFree, std::memory_order_release);
    }
}

} // namespace

namespace detail {
unsigned acquire() {
    if (tls_slot == kNoSlot || platform::thread_exiting()) return kNoSlot;
    const unsigned node = platform::numa().cpu_node[platform::current_cpu()];
    unsigned slot = kNoSlot;
    bool visited = false; // a free slot was being visited: try again next time
    for (unsigned s = 0; s < kMaxSlots; ++s) {
        uint8_t state = g_state[s].load(std::memory_order_relaxed);
        if (state == kFree &&
            g_state[s].compare_exchange_strong(state, kOwned, std::memory_order_acquire,
                                               std::memory_order_relaxed)) {
            slot = s;
            break;
        }
        visited |= state == kVisited;
    }
    if (slot == kNoSlot) {
        // None free: this thread stays on the locked paths (for good when all are owned).
        if (!visited) tls_slot = kNoSlot;
        return kNoSlot;
    }
    g_node[slot].store(static_cast<uint8_t>(node), std::memory_order_relaxed);
    g_in_use.fetch_add(1, std::memory_order_relaxed);
    unsigned top = g_high_water.load(std::memory_order_relaxed);
    while (top < slot + 1 &&
           !g_high_water.compare_exchange_weak(top, slot + 1, std::memory_order_release,
                                               std::memory_order_relaxed)) {
    }
    tls_slot = slot;
    tls_index = slot;
    platform::arm_thread_exit();
    return slot;
}
} // namespace detail

unsigned node_of(unsigned slot) {
    return slot < kMaxSlots ? g_node[slot].load(std::memory_order_relaxed) : 0;
}
unsigned in_use() {
    return g_in_use.load(std::memory_order_relaxed);
}
unsigned high_water() {
    return g_high_water.load(std::memory_order_acquire);
}
bool owned(unsigned slot) {
    return slot < kMaxSlots && g_state[slot].load(std::memory_order_relaxed) == kOwned;
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

} // namespace slabkit::slots
