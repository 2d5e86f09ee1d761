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
std::atomic<uint64_t> g_blocks{0};

size_t slot_of(uintptr_t addr) {
    return static_cast<size_t>(((addr >> kPageShift) * 0x9e3779b97f4a7c15ull) >> 50) % kLargeMax;
}

// Fork: a leaf lock (no other slabkit lock is taken under it), taken last.
__attribute__((constructor)) void install_fork_hooks() {
    if (!platform::add_fork_hooks({platform::kForkRankLarge, [] { g_lock.lock(); },
                                   [] { g_lock.unlock(); }, [] { g_lock.reset_after_fork(); }}))
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

// Under g_lock: records a block; false when the table is full.
bool insert(void *p, size_t whole) {
    if (g_used >= kLargeMax * 3 / 4) compact();
    if (g_used >= kLargeMax * 3 / 4) return false;
    size_t i = slot_of(reinterpret_cast<uintptr_t>(p));
    while (g_table[i].addr > kTombstone) i = (i + 1) % kLargeMax;
    if (g_table[i].addr == 0) ++g_used;
    g_table[i] = entry{reinterpret_cast<uintptr_t>(p), whole};
    return true;
}

size_t whole_pages(size_t size) {
    size_t whole = (size + kPageSize - 1) & ~(kPageSize - 1);
    // Past 2^46 bytes (64 TiB) no machine of ours can map it: fail rather than ask.
    if (whole < size || whole > (size_t{1} << 46)) return 0;
    return whole;
}
} // namespace

void *alloc(size_t size, size_t align) {
    size_t whole = whole_pages(size);
    if (!whole) return nullptr;
    if (align == 0) align = (size & (size - 1)) == 0 ? whole : kPageSize;
    if (align < kPageSize) align = kPageSize;
    platform::os_status st;
    void *p = platform::reserve(whole, align, &st);
    if (!p) return nullptr;
    if (!platform::commit(p, whole).ok()) {
        platform::release(p, whole);
        return nullptr;
    }
    bool recorded;
    {
        platform::lock_guard guard(g_lock);
        recorded = insert(p, whole);
    }
    if (!recorded) {
        platform::release(p, whole);
        return nullptr;
    }
    g_mapped.fetch_add(whole, std::memory_order_relaxed);
    g_blocks.fetch_add(1, std::memory_order_relaxed);
    return p;
}

void *resize(void *p, size_t size) {
    size_t whole = whole_pages(size);
    if (!whole) return nullptr;
    // The entry stays claimed (tombstoned) while the mapping moves, so that no racing free of the
    // same pointer can release it twice; a racing free then reports a bad free, as it should.
    size_t old;
    {
        platform::lock_guard guard(g_lock);
        entry *e = find(reinterpret_cast<uintptr_t>(p));
        if (!e) return nullptr;
        old = e->size;
        if (old == whole) return p;
        e->addr = kTombstone;
        e->size = 0;
    }
    platform::os_status st;
    void *q = platform::remap(p, old, whole, &st);
    platform::lock_guard guard(g_lock);
    // The entry given up above leaves room: insert cannot fail here.
    if (!insert(q ? q : p, q ? whole : old))
        platform::fatal("slabkit: the large-block table lost a block\n");
    if (!q) return nullptr; // mremap failed: the old block is intact and recorded again
    g_mapped.fetch_add(whole - old, std::memory_order_relaxed); // wraps correctly when shrinking
    return q;
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
    g_blocks.fetch_sub(1, std::memory_order_relaxed);
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

uint64_t mapped_blocks() {
    return g_blocks.load(std::memory_order_relaxed);
}

} // namespace slabkit::large
