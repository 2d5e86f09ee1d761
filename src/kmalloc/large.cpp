// large.cpp - OS-direct large blocks and their address table.
#include "kmalloc/large.hpp"

#include "core/hardening.hpp"
#include "core/trimmer.hpp"
#include "page/page.hpp"
#include "page/page_allocator.hpp"
#include "platform/lock.hpp"
#include "platform/platform.hpp"

#include <atomic>
#include <cstring>

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

// Freed blocks kept for reuse (under g_lock), oldest first.
struct kept_block {
    void *addr;
    size_t size;
    uint64_t freed_ms;
};
kept_block g_kept[kRetainMax];
unsigned g_nr_kept = 0;
std::atomic<uint64_t> g_kept_bytes{0};
// Budget and age limit, read from the environment once (0 until then; the budget then holds
// kBudgetUnset + value so that 0 can mean "keep nothing").
constexpr uint64_t kBudgetUnset = 0;
std::atomic<uint64_t> g_budget{kBudgetUnset};
std::atomic<uint64_t> g_decay_ms{0}; // written by racing first callers, the same value
// The page allocator's over_retain_events() at the last free (under g_lock).
uint64_t g_shrink_seen = 0;
// The most bytes of large blocks in use at once, as frees saw it (under g_lock), since kept
// blocks last went back: what is kept never exceeds this less what is in use now, so resident
// memory stays within the program's own peak use, as it would with every block unmapped.
uint64_t g_peak_in_use = 0;

// Blocks chosen under g_lock to be unmapped after it is released.
struct unmap_list {
    kept_block blocks[kRetainMax + 1];
    unsigned count = 0;
    uint64_t bytes = 0;
    void add(const kept_block &b) {
        blocks[count++] = b;
        bytes += b.size;
    }
    uint64_t run() {
        for (unsigned i = 0; i < count; ++i) platform::release(blocks[i].addr, blocks[i].size);
        return bytes;
    }
};

uint64_t budget() {
    uint64_t b = g_budget.load(std::memory_order_acquire);
    if (SLABKIT_LIKELY(b != kBudgetUnset)) return b - 1;
    // Racing first callers compute the same values.
    const uint64_t mb = platform::env_uint("SLABKIT_LARGE_RETAIN_MB", 256, 0, uint64_t{1} << 20);
    g_decay_ms.store(page_allocator::global().settings().decay_ms, std::memory_order_relaxed);
    g_budget.store((mb << 20) + 1, std::memory_order_release);
    return mb << 20;
}

// Under g_lock: removes kept block i, keeping the rest in age order.
kept_block take_kept(unsigned i) {
    kept_block b = g_kept[i];
    for (unsigned k = i + 1; k < g_nr_kept; ++k) g_kept[k - 1] = g_kept[k];
    --g_nr_kept;
    g_kept_bytes.fetch_sub(b.size, std::memory_order_relaxed);
    return b;
}

// Under g_lock: moves the blocks kept since before before_ms (all when force) to `out`.
void select_old(uint64_t before_ms, bool force, unmap_list &out) {
    while (g_nr_kept > 0 && (force || g_kept[0].freed_ms <= before_ms)) out.add(take_kept(0));
}

// The rest of a kept block that served a smaller request stays kept from this size up: too
// small to serve a block alone, it still saves the faults of part of one stitched together
// (large-random: 1 MiB kept the faults near tcmalloc's but peaked 2% above glibc; 4 MiB, the
// page allocator's largest block and so the smallest that could serve alone, faulted 60% more;
// 2 MiB between, and below glibc's peak).
constexpr size_t kMinKeptRest = size_t{2} << 20;

uint64_t decay_cutoff(uint64_t now) {
    const uint64_t decay = g_decay_ms.load(std::memory_order_relaxed);
    return now > decay ? now - decay : 0;
}

size_t slot_of(uintptr_t addr) {
    return static_cast<size_t>(((addr >> kPageShift) * 0x9e3779b97f4a7c15ull) >> 50) % kLargeMax;
}

// Fork: a leaf lock (no other slabkit lock is taken under it), taken last. The trimmer unmaps
// kept blocks that aged past the decay time, as it does the designs' idle queues.
__attribute__((constructor)) void install_hooks() {
    if (!platform::add_fork_hooks({platform::kForkRankLarge, [] { g_lock.lock(); },
                                   [] { g_lock.unlock(); }, [] { g_lock.reset_after_fork(); }}))
        platform::fatal("slabkit: cannot register the large-block table's fork hooks\n");
    if (!trimmer::add_handler([](uint64_t before_ms, bool force) {
            if (retained_bytes() != 0) release_retained(before_ms, force);
        }))
        platform::fatal("slabkit: cannot install the large blocks' trimmer\n");
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

namespace {
// Keeps [addr, addr+size), the rest of a kept block that served a smaller request, from
// kMinKeptRest up (its pages are resident: reusing them saves their faults); a smaller one, or
// one there is no room for, goes back now. False if that failed.
bool keep_rest(void *addr, size_t size, uint64_t freed_ms) {
    if (size >= kMinKeptRest) {
        platform::lock_guard guard(g_lock);
        if (g_nr_kept < kRetainMax) {
            // Younger blocks come after it; it keeps its age, so insert it in order.
            unsigned i = g_nr_kept;
            while (i > 0 && g_kept[i - 1].freed_ms > freed_ms) {
                g_kept[i] = g_kept[i - 1];
                --i;
            }
            g_kept[i] = kept_block{addr, size, freed_ms};
            ++g_nr_kept;
            g_kept_bytes.fetch_add(size, std::memory_order_relaxed);
            return true;
        }
    }
    return platform::release(addr, size).ok();
}

// Kept blocks that can serve `whole` bytes at alignment `align`, made into one block exactly
// `whole` bytes long; nullptr when none can.
//   - The smallest kept block that holds it (aligned), its rest kept or given back.
//   - Else, for page alignment: kept blocks, largest first, until they hold it or none is left,
//     stitched together in a new reservation by moving their pages there (mremap: no copy, no
//     fault, the pages stay resident), and fresh pages for what they do not cover. So a program
//     whose large blocks change size reuses what it freed instead of faulting in new memory.
void *reuse_kept(size_t whole, size_t align) {
    kept_block picked[kRetainMax];
    unsigned n = 0;
    size_t have = 0;
    unmap_list old;
    {
        platform::lock_guard guard(g_lock);
        if (g_nr_kept == 0) return nullptr;
        select_old(decay_cutoff(platform::now_coarse_ms()), false, old);
        int fit = -1;
        for (unsigned i = 0; i < g_nr_kept; ++i) {
            const kept_block &k = g_kept[i];
            if (reinterpret_cast<uintptr_t>(k.addr) % align == 0 && k.size >= whole &&
                (fit < 0 || k.size < g_kept[fit].size))
                fit = static_cast<int>(i);
        }
        if (fit >= 0) {
            picked[n++] = take_kept(static_cast<unsigned>(fit));
            have = picked[0].size;
        } else if (align == kPageSize) {
            while (have < whole && g_nr_kept > 0) {
                unsigned largest = 0;
                for (unsigned i = 1; i < g_nr_kept; ++i)
                    if (g_kept[i].size > g_kept[largest].size) largest = i;
                picked[n] = take_kept(largest);
                have += picked[n++].size;
            }
        }
    }
    old.run();
    if (n == 0) return nullptr;
    if (n == 1 && have >= whole) {
        const kept_block &b = picked[0];
        if (have > whole &&
            !keep_rest(static_cast<char *>(b.addr) + whole, have - whole, b.freed_ms)) {
            platform::release(b.addr, b.size);
            return nullptr;
        }
        return b.addr;
    }
    // Stitch: each picked block's pages (the last one's only as far as needed) move into a new
    // reservation, one after the other.
    platform::os_status st;
    auto *target = static_cast<char *>(platform::reserve(whole, kPageSize, &st));
    size_t at = 0;
    bool ok = target != nullptr;
    for (unsigned i = 0; i < n; ++i) {
        const kept_block &b = picked[i];
        const size_t take = ok ? (b.size < whole - at ? b.size : whole - at) : 0;
        if (take && !platform::move_pages(b.addr, take, target + at).ok()) ok = false;
        if (!ok) {
            platform::release(b.addr, b.size); // moved or not, it goes back
            continue;
        }
        at += take;
        if (take < b.size) keep_rest(static_cast<char *>(b.addr) + take, b.size - take, b.freed_ms);
    }
    if (ok && at < whole) ok = platform::commit(target + at, whole - at).ok();
    if (!ok) {
        if (target) platform::release(target, whole);
        return nullptr;
    }
    return target;
}
} // namespace

// ---- guarded blocks (debugging) -----------------------------------------------------------------
//
// With guards on, each block is followed by a page with no access (an overflow past the block's
// pages faults at the bad access), nothing is kept for reuse, and a freed block loses its memory
// and all access (a use after free faults) and stays reserved among the last kGuardedFreed freed
// ones, so that a second free of it is named as one.

namespace {
std::atomic<bool> g_guarded{false};
constexpr unsigned kGuardedFreed = 64;
kept_block g_freed[kGuardedFreed]; // under g_lock; a ring, oldest at g_freed_head
unsigned g_freed_head = 0, g_nr_freed = 0;

void *alloc_guarded(size_t whole, size_t align) {
    platform::os_status st;
    void *p = platform::reserve(whole + kPageSize, align, &st);
    if (!p) return nullptr;
    if (!platform::commit(p, whole).ok()) {
        platform::release(p, whole + kPageSize);
        return nullptr;
    }
    return p;
}

// After the table gave up the block: no access from now on; the oldest freed one unmapped.
void free_guarded(void *p, size_t size) {
    platform::protect_none(p, size);
    kept_block old{nullptr, 0, 0};
    {
        platform::lock_guard guard(g_lock);
        if (g_nr_freed == kGuardedFreed) {
            old = g_freed[g_freed_head];
            g_freed_head = (g_freed_head + 1) % kGuardedFreed;
            --g_nr_freed;
        }
        g_freed[(g_freed_head + g_nr_freed) % kGuardedFreed] = kept_block{p, size, 0};
        ++g_nr_freed;
    }
    if (old.addr) platform::release(old.addr, old.size + kPageSize);
}
} // namespace

void set_guarded(bool on) {
    g_guarded.store(on, std::memory_order_relaxed);
}
bool guarded() {
    return g_guarded.load(std::memory_order_relaxed);
}

const char *why_not_a_block(const void *p) {
    platform::lock_guard guard(g_lock);
    for (unsigned i = 0; i < g_nr_freed; ++i)
        if (g_freed[(g_freed_head + i) % kGuardedFreed].addr == p)
            return "a large block freed already (double free)";
    for (unsigned i = 0; i < g_nr_kept; ++i)
        if (g_kept[i].addr == p)
            return "a large block freed already and kept for reuse (double free)";
    return nullptr;
}

void *alloc(size_t size, size_t align, bool zero) {
    size_t whole = whole_pages(size);
    if (!whole) return nullptr;
    if (align == 0) align = (size & (size - 1)) == 0 ? whole : kPageSize;
    if (align < kPageSize) align = kPageSize;
    if (guarded()) {
        void *g = alloc_guarded(whole, align);
        if (!g) return nullptr;
        bool ok;
        {
            platform::lock_guard guard(g_lock);
            ok = insert(g, whole);
        }
        if (!ok) {
            platform::release(g, whole + kPageSize);
            return nullptr;
        }
        g_mapped.fetch_add(whole, std::memory_order_relaxed);
        g_blocks.fetch_add(1, std::memory_order_relaxed);
        return g;
    }
    void *p = budget() ? reuse_kept(whole, align) : nullptr;
    if (p) {
        // A kept block holds its last user's bytes (a grown one reads as zeros past them, but
        // clearing it all is simpler than tracking which part is fresh).
        if (zero) memset(p, 0, whole);
    } else {
        platform::os_status st;
        p = platform::reserve(whole, align, &st);
        if (!p) return nullptr;
        if (!platform::commit(p, whole).ok()) {
            platform::release(p, whole);
            return nullptr;
        }
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
    if (guarded()) return nullptr; // a remapped block would lose its guard: the caller copies
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
    const uint64_t limit = budget();
    size_t size;
    bool kept = false;
    const bool guard_it = guarded();
    unmap_list out;
    {
        platform::lock_guard guard(g_lock);
        entry *e = find(reinterpret_cast<uintptr_t>(p));
        if (!e) return false;
        size = e->size;
        e->addr = kTombstone;
        e->size = 0;
        g_mapped.fetch_sub(size, std::memory_order_relaxed);
        g_blocks.fetch_sub(1, std::memory_order_relaxed);
        const uint64_t now = platform::now_coarse_ms();
        // The page allocator gave memory back since the last free: the program is shrinking,
        // not cycling blocks, so this block and the kept ones go back too.
        const uint64_t shrink = page_allocator::global().over_retain_events();
        const bool shrinking = shrink != g_shrink_seen;
        g_shrink_seen = shrink;
        select_old(decay_cutoff(now), shrinking, out);
        const uint64_t in_use = g_mapped.load(std::memory_order_relaxed);
        if (in_use + size > g_peak_in_use) g_peak_in_use = in_use + size;
        // Everything kept went back (aged, or the heap shrinks): a new phase, a new peak.
        if (g_nr_kept == 0) g_peak_in_use = in_use + size;
        const uint64_t room = g_peak_in_use - in_use < limit ? g_peak_in_use - in_use : limit;
        // Init on free: a kept block would keep its bytes; an unmapped one is zero when mapped
        // again.
        const bool init_free = hardening::init_mode() & hardening::kInitOnFree;
        if (!guard_it && !init_free && size <= room && !shrinking) {
            // Keep the newest: the oldest kept blocks make room.
            while (g_nr_kept == kRetainMax ||
                   g_kept_bytes.load(std::memory_order_relaxed) + size > room)
                out.add(take_kept(0));
            g_kept[g_nr_kept++] = kept_block{p, size, now};
            g_kept_bytes.fetch_add(size, std::memory_order_relaxed);
            kept = true;
        }
    }
    out.run();
    if (guard_it) {
        free_guarded(p, size); // no access from now on: a use after free faults
    } else if (!kept) {
        platform::release(p, size);
    }
    return true;
}

uint64_t release_retained(uint64_t before_ms, bool force) {
    unmap_list out;
    {
        platform::lock_guard guard(g_lock);
        select_old(before_ms, force, out);
    }
    return out.run();
}

uint64_t retained_bytes() {
    return g_kept_bytes.load(std::memory_order_relaxed);
}

uint64_t retained_blocks() {
    platform::lock_guard guard(g_lock);
    return g_nr_kept;
}

uint64_t retain_budget() {
    return budget();
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
