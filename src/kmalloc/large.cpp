// large.cpp - OS-direct large blocks and their address table.
#include "kmalloc/large.hpp"

#include "page/page.hpp"
#include "platform/lock.hpp"
#include "platform/platform.hpp"

#include <atomic>

namespace slabkit::large {

namespace {
struct entry {
    uintptr_t addr; // 0: empty; kTombstone: removed
    size_t size;
};
constexpr uintptr_t kTombstone = 1;
entry g_table[kLargeMax];
size_t g_used = 0; // live entries + tombstones
platform::mutex g_lock;
std::atomic<uint64_t> g_mapped{0};

size_t slot_of(uintptr_t addr) {
    return static_cast<size_t>(((addr >> kPageShift) * 0x9e3779b97f4a7c15ull) >> 50) % kLargeMax;
}

// Fork: a leaf lock (no other slabkit lock is taken under it), taken last.
__attribute__((constructor)) void install_fork_hooks() {
    if (!platform::add_fork_hooks({30, [] { g_lock.lock(); }, [] { g_lock.unlock(); },
                                   [] { g_lock.reset_after_fork(); }}))
        platform::fatal("slabkit: cannot register the large-block table's fork hooks\n");
}

// Under g_lock: the entry holding addr, or nullptr.
entry *find(uintptr_t addr) {
    for (size_t i = slot_of(addr), n = 0; n < kLargeMax; i = (i + 1) % kLargeMax, ++n) {
        if (g_table[i].addr == addr) return &g_table[i];
        if (g_table[i].addr == 0) return nullptr;
    }
    return nullptr;
}

// Under g_lock: rebuilds the table without tombstones when they crowd it.
void compact() {
    static entry live[kLargeMax];
    size_t n = 0;
    for (entry &e : g_table) {
        if (e.addr > kTombstone) live[n++] = e;
        e = entry{0, 0};
    }
    g_used = 0;
    for (size_t k = 0; k < n; ++k) {
        size_t i = slot_of(live[k].addr);
        while (g_table[i].addr) i = (i + 1) % kLargeMax;
        g_table[i] = live[k];
        ++g_used;
    }
}
} // namespace

void *alloc(size_t size, bool) {
    size_t whole = (size + kPageSize - 1) & ~(kPageSize - 1);
    if (whole < size || whole > (size_t{1} << 46)) return nullptr;
    bool pow2 = (size & (size - 1)) == 0;
    platform::os_status st;
    void *p = platform::reserve(whole, pow2 ? whole : kPageSize, &st);
    if (!p) return nullptr;
    if (!platform::commit(p, whole).ok()) {
        platform::release(p, whole);
        return nullptr;
    }
    // Fresh anonymous memory reads as zeros: `zero` needs no work.
    {
        platform::lock_guard guard(g_lock);
        if (g_used >= kLargeMax * 3 / 4) compact();
        if (g_used >= kLargeMax * 3 / 4) {
            platform::release(p, whole);
            return nullptr;
        }
        size_t i = slot_of(reinterpret_cast<uintptr_t>(p));
        while (g_table[i].addr > kTombstone) i = (i + 1) % kLargeMax;
        if (g_table[i].addr == 0) ++g_used;
        g_table[i] = entry{reinterpret_cast<uintptr_t>(p), whole};
    }
    g_mapped.fetch_add(whole, std::memory_order_relaxed);
    return p;
}

bool free(void *p) {
    size_t size;
    {
        platform::lock_guard guard(g_lock);
        entry *e = find(reinterpret_cast<uintptr_t>(p));
        if (!e) return false;
        size = e->size;
        e->addr = kTombstone;
        e->size = 0;
    }
    platform::release(p, size);
    g_mapped.fetch_sub(size, std::memory_order_relaxed);
    return true;
}

size_t size_of(const void *p) {
    platform::lock_guard guard(g_lock);
    entry *e = find(reinterpret_cast<uintptr_t>(p));
    return e ? e->size : 0;
}

uint64_t mapped_bytes() {
    return g_mapped.load(std::memory_order_relaxed);
}

} // namespace slabkit::large
