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

platform::mutex g_lock;
std::atomic<bool> g_owned[kMaxSlots];
uint64_t g_idle_since_ms[kMaxSlots]; // under g_lock: when the slot was last given back
uint8_t g_node[kMaxSlots];
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
    const uint64_t now = platform::now_coarse_ms();
    platform::lock_guard guard(g_lock);
    g_owned[slot].store(false, std::memory_order_relaxed);
    g_idle_since_ms[slot] = now;
    g_in_use.fetch_sub(1, std::memory_order_relaxed);
}

void fork_prepare() {
    g_lock.lock();
}
void fork_parent() {
    g_lock.unlock();
}
void fork_child() {
    // Only the forking thread lives on in the child: every other slot is idle now, and its
    // per-slot state is inherited by whichever thread takes it next.
    unsigned mine = detail::tls_slot;
    unsigned count = 0;
    const uint64_t now = platform::now_coarse_ms();
    for (unsigned s = 0; s < kMaxSlots; ++s) {
        bool keep = s == mine;
        if (!keep && g_owned[s].load(std::memory_order_relaxed)) g_idle_since_ms[s] = now;
        g_owned[s].store(keep, std::memory_order_relaxed);
        count += keep;
    }
    g_in_use.store(count, std::memory_order_relaxed);
    g_lock.reset_after_fork();
}

// Registered when the library is loaded, before any thread can hold a slabkit lock. (Registering
// lazily from a thread's first acquire, under g_lock, deadlocked against fork: add_fork_hooks
// takes the hook-table lock, which fork's prepare holds while it waits for g_lock.)
__attribute__((constructor)) void install_hooks() {
    if (!platform::add_thread_exit_hook(on_thread_exit) ||
        !platform::add_fork_hooks(
            {platform::kForkRankSlots, fork_prepare, fork_parent, fork_child}))
        platform::fatal("slabkit: cannot register the slot registry's thread-exit and fork "
                        "hooks\n");
}

} // namespace

namespace detail {
unsigned acquire() {
    if (tls_slot == kNoSlot || platform::thread_exiting()) return kNoSlot;
    const unsigned node = platform::numa().cpu_node[platform::current_cpu()];
    unsigned slot = kNoSlot;
    {
        platform::lock_guard guard(g_lock);
        for (unsigned s = 0; s < kMaxSlots; ++s)
            if (!g_owned[s].load(std::memory_order_relaxed)) {
                slot = s;
                break;
            }
        if (slot != kNoSlot) {
            g_owned[slot].store(true, std::memory_order_relaxed);
            g_node[slot] = node;
            g_in_use.fetch_add(1, std::memory_order_relaxed);
            if (slot + 1 > g_high_water.load(std::memory_order_relaxed))
                g_high_water.store(slot + 1, std::memory_order_release);
        }
    }
    tls_slot = slot; // kNoSlot when exhausted: this thread stays on the locked paths
    tls_index = slot == kNoSlot ? kMaxSlots : slot;
    if (slot != kNoSlot) platform::arm_thread_exit();
    return slot;
}
} // namespace detail

unsigned node_of(unsigned slot) {
    return slot < kMaxSlots ? g_node[slot] : 0;
}
unsigned in_use() {
    return g_in_use.load(std::memory_order_relaxed);
}
unsigned high_water() {
    return g_high_water.load(std::memory_order_acquire);
}
bool owned(unsigned slot) {
    return slot < kMaxSlots && g_owned[slot].load(std::memory_order_relaxed);
}

void for_each_idle(void (*fn)(unsigned, void *), void *arg) {
    for_each_idle_since(UINT64_MAX, fn, arg);
}

void for_each_idle_since(uint64_t before_ms, void (*fn)(unsigned, void *), void *arg) {
    platform::lock_guard guard(g_lock);
    unsigned limit = g_high_water.load(std::memory_order_relaxed);
    for (unsigned s = 0; s < limit; ++s)
        if (!g_owned[s].load(std::memory_order_relaxed) && g_idle_since_ms[s] <= before_ms)
            fn(s, arg);
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
