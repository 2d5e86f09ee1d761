// large.cpp - large blocks: the region they are carved from, what is kept of freed ones, and
// the address table.
#include "kmalloc/large.hpp"

#include "kmalloc/large_extents.hpp"

#include "base/bits.hpp"

#include "core/debug.hpp"
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

// The region large blocks are carved from (under g_lock): reserved at the first large
// allocation, [g_base, g_top) committed (readable and writable), [g_top, g_end) reserved only.
// Its free ranges are in g_free (large_extents.hpp); every other byte of [g_base, g_top) is a
// block in use. Blocks that do not fit in it (or every block, when it could not be reserved)
// are mappings of their own, unmapped when freed.
constexpr size_t kRegionSize = size_t{64} << 30;
constexpr size_t kRegionAlign = size_t{1} << 30;
uintptr_t g_base = 0, g_top = 0, g_end = 0;
bool g_region_tried = false;
// Whether the region asked for transparent huge pages (SLABKIT_LARGE_HUGE_PAGES, default 1).
// With THP in "madvise" mode, Debian's default, nothing else gets them. Large blocks are
// written whole more often than not, and every 2 MiB of one is then one fault and one TLB entry
// instead of 512: 150 rounds of an 8 MiB block went from 2050 faults and 0.027-0.035 s to 6
// faults and 0.006-0.018 s, four blocks of 1..32 MiB replaced 50 times from 24,560 faults and
// 0.26-0.35 s to 2,590 and 0.036-0.186 s, peaks unchanged (bench/pattern_bench, --scale 0.25).
// The cost: a 2 MiB range of the region that a block covers only in part is backed whole when
// it is first touched there (at most 2 MiB more per block end), and the kernel may collapse a
// range with few resident pages into a huge page later (khugepaged). Giving back part of one
// splits it, so the kept-bytes bounds below still hold for what is resident.
std::atomic<bool> g_huge{false};
extent_map g_free;
// g_free.dirty_bytes(), readable without the lock.
std::atomic<uint64_t> g_kept_bytes{0};
// Budget and age limit, read from the environment once (0 until then; the budget then holds
// kBudgetUnset + value so that 0 can mean "keep nothing").
constexpr uint64_t kBudgetUnset = 0;
std::atomic<uint64_t> g_budget{kBudgetUnset};
std::atomic<uint64_t> g_decay_ms{0}; // written by racing first callers, the same value
// The page allocator's over_retain_events() at the last free (under g_lock).
uint64_t g_shrink_seen = 0;
// The most bytes of large blocks in use and of the page allocator's resident pages at once, as
// large allocations and frees saw it (under g_lock), since kept memory last went back: what is
// kept never exceeds this less what is resident besides now, so that resident memory stays
// within the program's own peak, as it would with every large block unmapped at its free.
uint64_t g_peak = 0;
// ... plus this share of it: the kept ranges are where the program freed its blocks, and a new
// block that spans kept and clean space faults in the clean part while the bound would give back
// as much elsewhere. A sixteenth took a program cycling four blocks of 1 to 32 MiB from 27,400
// faults to 24,600 (tcmalloc's 24,600, which keeps everything) and 0.43 s to 0.30 s, its peak
// RSS from 89.7 to 95.0 MiB (glibc's 100.0; bench/pattern_bench --pattern large-random).
constexpr unsigned kSlackShift = 4;
uint64_t peak_with_slack() {
    return g_peak + (g_peak >> kSlackShift);
}

// The page allocator's resident bytes (read before g_lock: taking its zone locks under g_lock,
// a leaf, would break the lock order).
uint64_t page_resident() {
    return page_allocator::global().resident_pages() * kPageSize;
}

uint64_t budget() {
    uint64_t b = g_budget.load(std::memory_order_acquire);
    if (SLABKIT_LIKELY(b != kBudgetUnset)) return b - 1;
    // Racing first callers compute the same values.
    const uint64_t mb = platform::env_uint("SLABKIT_LARGE_RETAIN_MB", 256, 0, uint64_t{1} << 20);
    g_decay_ms.store(page_allocator::global().settings().decay_ms, std::memory_order_relaxed);
    g_budget.store((mb << 20) + 1, std::memory_order_release);
    return mb << 20;
}

uint64_t decay_cutoff(uint64_t now) {
    const uint64_t decay = g_decay_ms.load(std::memory_order_relaxed);
    return now > decay ? now - decay : 0;
}

bool in_region(uintptr_t a) {
    return a >= g_base && a < g_end;
}

// Freed blocks of the region are write-protected while they are free, as the page allocator's
// large blocks are (page_allocator_config::protect_freed, SLABKIT_PROTECT_FREED): a write after
// free faults instead of reaching the block that reuses the range; kept ranges stay readable.
// Under kProtectUntilReuse a block is protected while its size is above g_protect_above, which
// each reuse of a protected range raises to that block's size, up to kProtectAlwaysAbove: a
// program that cycles blocks of a size stops paying two protection changes (6 us) a cycle,
// as glibc's mmap threshold rises to a size it saw freed, to at most 32 MiB. Blocks above that
// are always protected: touching their pages costs far more. Under g_lock.
constexpr size_t kProtectAlwaysAbove = size_t{32} << 20;
size_t g_protect_above = 0;
// The protected parts of the free ranges (the extent map does not split by protection). At most
// kProtectedMax: a free that finds no room leaves its block writable.
struct protected_range {
    uintptr_t addr;
    size_t size;
};
constexpr unsigned kProtectedMax = 64;
protected_range g_protected[kProtectedMax];
unsigned g_protected_count = 0;

uint8_t protect_mode() {
    return page_allocator::global().settings().protect_freed;
}
// [at, at+size) becomes part of the free ranges. Best effort: when the OS refuses (its limit on
// mappings) or the list is full the range stays writable, as without the option.
void protect_freed(uintptr_t at, size_t size) {
    const uint8_t mode = protect_mode();
    if (mode == kProtectOff || g_protected_count == kProtectedMax) return;
    if (mode == kProtectUntilReuse && size <= g_protect_above) return;
    if (!platform::protect_read(reinterpret_cast<void *>(at), size).ok()) return;
    g_protected[g_protected_count++] = {at, size};
}
// [at, at+size), taken from the free ranges, made writable where any part of it was protected:
// one call for the whole span. The protected ranges it covers in part keep their other parts.
// False when the OS refuses (nothing changed).
bool unprotect_taken(uintptr_t at, size_t size) {
    if (g_protected_count == 0) return true; // the common case once blocks are reused
    const uintptr_t end = at + size;
    bool overlaps = false;
    for (unsigned i = 0; i < g_protected_count && !overlaps; ++i)
        overlaps = g_protected[i].addr < end && at < g_protected[i].addr + g_protected[i].size;
    if (!overlaps) return true;
    if (!platform::commit(reinterpret_cast<void *>(at), size).ok()) return false;
    if (protect_mode() == kProtectUntilReuse && size > g_protect_above)
        g_protect_above = size < kProtectAlwaysAbove ? size : kProtectAlwaysAbove;
    for (unsigned i = 0; i < g_protected_count;) {
        const protected_range r = g_protected[i];
        const uintptr_t r_end = r.addr + r.size;
        if (!(r.addr < end && at < r_end)) {
            ++i;
            continue;
        }
        // What is left of it before and after the span stays protected.
        g_protected[i] = g_protected[--g_protected_count];
        if (r.addr < at) g_protected[g_protected_count++] = {r.addr, at - r.addr};
        if (r_end > end) {
            if (g_protected_count < kProtectedMax)
                g_protected[g_protected_count++] = {end, r_end - end};
            else
                platform::commit(reinterpret_cast<void *>(end), r_end - end); // no room: writable
        }
    }
    return true;
}

void sync_kept() {
    g_kept_bytes.store(g_free.dirty_bytes(), std::memory_order_relaxed);
}

// Under g_lock: gives the pages of [at, at+size), inside dirty range i, back to the OS (the
// range stays mapped and reads as zeros) and marks it clean. Under the lock, so that no other
// thread can take the range while its pages go. False if the OS or the map refused.
bool clean_part(unsigned i, uintptr_t at, size_t size) {
    if (!platform::decommit(reinterpret_cast<void *>(at), size).ok()) return false;
    if (!g_free.make_clean(i, at, size)) {
        // No room to split the range: all of it goes clean (its pages back too).
        const extent x = g_free[i];
        if (!platform::decommit(reinterpret_cast<void *>(x.addr), x.size).ok()) return false;
        if (!g_free.make_clean(i, x.addr, x.size)) return false;
    }
    return true;
}

// Under g_lock: dirty ranges freed at or before before_ms (all when force) go back to the OS.
uint64_t clean_old(uint64_t before_ms, bool force) {
    uint64_t bytes = 0;
    for (;;) {
        const int i = g_free.oldest_dirty();
        if (i < 0 || (!force && g_free[static_cast<unsigned>(i)].freed_ms > before_ms)) break;
        const extent x = g_free[static_cast<unsigned>(i)];
        if (!clean_part(static_cast<unsigned>(i), x.addr, x.size)) break;
        bytes += x.size;
    }
    sync_kept();
    return bytes;
}

// Under g_lock: gives back the oldest dirty memory until at most `limit` bytes are kept.
void clean_to(uint64_t limit) {
    while (g_free.dirty_bytes() > limit) {
        const int i = g_free.oldest_dirty();
        if (i < 0) break;
        const extent x = g_free[static_cast<unsigned>(i)];
        const uint64_t excess = g_free.dirty_bytes() - limit;
        // The whole range, or as many pages at its end as make up the excess.
        const size_t part =
            excess >= x.size ? x.size : static_cast<size_t>(align_up(excess, kPageSize));
        if (!clean_part(static_cast<unsigned>(i), x.end() - part, part)) break;
    }
    sync_kept();
}

// Under g_lock: reserves the region at the first call; a smaller one where the address space
// is limited (RLIMIT_AS), down to 1 GiB, and at most a quarter of the limit (with the alignment
// reserved beside it while it is placed): the rest is the page allocator's and the program's.
// Under a limit below 4 GiB there is no region, and each block is a mapping of its own.
bool have_region() {
    if (g_base) return true;
    if (g_region_tried) return false;
    g_region_tried = true;
    const uint64_t limit = platform::address_space_limit();
    for (size_t size = kRegionSize; size >= kRegionAlign; size /= 4) {
        if (limit && size + kRegionAlign > limit / 4) continue;
        platform::os_status st;
        if (void *r = platform::reserve(size, kRegionAlign, &st)) {
            g_base = g_top = reinterpret_cast<uintptr_t>(r);
            g_end = g_base + size;
            // Huge pages for the whole region (one VMA flag, set before anything is committed):
            // see g_huge. A refusal (a kernel without THP) costs nothing but the speed.
            if (platform::env_uint("SLABKIT_LARGE_HUGE_PAGES", 1, 0, 1) != 0)
                g_huge.store(platform::huge_pages(r, size).ok(), std::memory_order_relaxed);
            return true;
        }
    }
    return false;
}

// Under g_lock: makes [g_top, new_top) readable and writable.
bool raise_top(uintptr_t new_top) {
    if (new_top > g_end) return false;
    if (new_top > g_top && !platform::commit(reinterpret_cast<void *>(g_top), new_top - g_top).ok())
        return false;
    g_top = new_top;
    return true;
}

// Under g_lock: `whole` bytes at a multiple of `align` from the region; 0 if it has no room.
// *old_bytes tells whether the block may hold a former block's bytes. The place in free space
// that covers the most kept (resident) bytes, so the fewest faults, running past the top where
// free space ends there (extent_map::place); else fresh address space at the top.
uintptr_t carve(size_t whole, size_t align, bool *old_bytes) {
    if (!have_region()) return 0;
    size_t dirty = 0;
    // (Raising the top may add a range and a take may split one: room for both.)
    const uintptr_t at = g_free.count() + 2 <= extent_map::kCapacity
                             ? g_free.place(whole, align, g_top, g_end, &dirty)
                             : 0;
    if (at) {
        const uintptr_t old_top = g_top;
        if (at + whole <= g_top || raise_top(at + whole)) {
            if (g_top > old_top) g_free.add(old_top, g_top - old_top, false, 0);
            if (g_free.take_span(at, whole)) {
                if (!unprotect_taken(at, whole)) {
                    g_free.add(at, whole, dirty != 0, platform::now_coarse_ms());
                    return 0; // the caller maps a block of its own
                }
                *old_bytes = dirty != 0;
                return at;
            }
        }
    }
    *old_bytes = false;
    const uintptr_t old_top = g_top;
    const uintptr_t start = align_up(g_top, align);
    if (start + whole < start || !raise_top(start + whole)) return 0;
    // The alignment's gap stays free, as a clean range (lost if the map is full).
    if (start > old_top) g_free.add(old_top, start - old_top, false, 0);
    return start;
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

// ---- guarded blocks (debugging) -----------------------------------------------------------------
//
// With guards on, each block is followed by a page with no access (an overflow past the block's
// pages faults at the bad access), nothing is kept for reuse, and a freed block loses its memory
// and all access (a use after free faults) and stays reserved among the last kGuardedFreed freed
// ones, so that a second free of it is named as one.

namespace {
std::atomic<bool> g_guarded{false};
constexpr unsigned kGuardedFreed = 64;
// The alignment a guarded block keeps at least when it is placed at the end of its mapping:
// malloc's (and every kmalloc block's above the caches).
constexpr size_t kMallocEndAlign = 16;
struct freed_block {
    void *addr;  // the block, as handed out (a second free names it)
    char *start; // its mapping: a guard page, `whole` bytes, a guard page
    size_t whole;
};
freed_block g_freed[kGuardedFreed]; // under g_lock; a ring, oldest at g_freed_head
unsigned g_freed_head = 0, g_nr_freed = 0;

// A guarded block's mapping, `whole` bytes aligned to `align`, between two guard pages without
// access: the one after it catches an overflow, the one before it an underflow of a block of
// whole pages (one of another size has the rest of its first page before it, its left red zone,
// checked at its free). Reserved as one span, the guards included; released likewise
// (release_guarded).
void *alloc_guarded(size_t whole, size_t align) {
    platform::os_status st;
    const size_t extra = align > kPageSize ? align : 0; // room to align the block
    auto *r = static_cast<char *>(platform::reserve(whole + 2 * kPageSize + extra, kPageSize, &st));
    if (!r) return nullptr;
    char *p = reinterpret_cast<char *>(align_up(reinterpret_cast<uintptr_t>(r) + kPageSize, align));
    char *const span_end = r + whole + 2 * kPageSize + extra;
    if (p - kPageSize > r) platform::release(r, static_cast<size_t>(p - kPageSize - r));
    if (span_end > p + whole + kPageSize)
        platform::release(p + whole + kPageSize,
                          static_cast<size_t>(span_end - (p + whole + kPageSize)));
    if (!platform::commit(p, whole).ok()) {
        platform::release(p - kPageSize, whole + 2 * kPageSize);
        return nullptr;
    }
    return p;
}
void release_guarded(char *p, size_t whole) {
    platform::release(p - kPageSize, whole + 2 * kPageSize);
}

// A guarded block ends at its guard page (alloc_uncounted): its mapping starts at the page
// that holds it, and holds the bytes before it in that page too.
char *guarded_start(void *p) {
    return reinterpret_cast<char *>(reinterpret_cast<uintptr_t>(p) & ~(uintptr_t{kPageSize} - 1));
}

// After the table gave up the block (`size` bytes from p to its guard page): no access from now
// on; the oldest freed one unmapped.
void free_guarded(void *p, size_t size) {
    char *start = guarded_start(p);
    const size_t whole = size + static_cast<size_t>(static_cast<char *>(p) - start);
    // An underflow into its left red zone (alloc_uncounted), reported before the block goes.
    for (char *b = start; b < static_cast<char *>(p); ++b) {
        if (static_cast<uint8_t>(*b) == debug::kRedActive) continue;
        size_t len = 0;
        while (b + len < static_cast<char *>(p) &&
               static_cast<uint8_t>(b[len]) != debug::kRedActive)
            ++len;
        debug::report_guarded_underflow(static_cast<char *>(p), size, b - static_cast<char *>(p),
                                        len, "free");
        break;
    }
    platform::protect_none(start, whole);
    freed_block old{nullptr, nullptr, 0};
    {
        platform::lock_guard guard(g_lock);
        if (g_nr_freed == kGuardedFreed) {
            old = g_freed[g_freed_head];
            g_freed_head = (g_freed_head + 1) % kGuardedFreed;
            --g_nr_freed;
        }
        g_freed[(g_freed_head + g_nr_freed) % kGuardedFreed] = freed_block{p, start, whole};
        ++g_nr_freed;
    }
    if (old.addr) release_guarded(old.start, old.whole);
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
    const auto a = reinterpret_cast<uintptr_t>(p);
    const int i = g_base && in_region(a) && a < g_top ? g_free.holding(a) : -1;
    if (i >= 0)
        return g_free[static_cast<unsigned>(i)].dirty
                   ? "a large block freed already and kept for reuse (double free)"
                   : "a large block freed already (double free)";
    return nullptr;
}

namespace {
std::atomic<uint64_t> g_refusals{0};
void *alloc_uncounted(size_t size, size_t align, bool zero);
} // namespace

void *alloc(size_t size, size_t align, bool zero) {
    void *p = alloc_uncounted(size, align, zero);
    if (SLABKIT_UNLIKELY(!p)) g_refusals.fetch_add(1, std::memory_order_relaxed);
    return p;
}

uint64_t refusals() {
    return g_refusals.load(std::memory_order_relaxed);
}

namespace {
void *alloc_uncounted(size_t size, size_t align, bool zero) {
    size_t whole = whole_pages(size);
    if (!whole) return nullptr;
    const size_t asked_align = align;
    if (align == 0) align = (size & (size - 1)) == 0 ? whole : kPageSize;
    if (align < kPageSize) align = kPageSize;
    if (guarded()) {
        // The block ends at the guard page, as near as its alignment lets it (16 bytes, or the
        // alignment asked for): an overflow of its last byte faults, where a block at the
        // mapping's start left the rest of its last page unguarded (a 300,000-byte block:
        // 3,104 bytes). Blocks of whole pages start at the mapping, aligned as before.
        const size_t user_align = asked_align > kMallocEndAlign ? asked_align : kMallocEndAlign;
        const size_t off = (whole - size) & ~(user_align - 1);
        char *g = static_cast<char *>(alloc_guarded(whole, align));
        if (!g) return nullptr;
        // The bytes before it in its first page are its left red zone, checked at its free
        // (free_guarded): a block of whole pages has the page before its mapping instead, which
        // is no part of it (another guarded block's guard page, as mappings go down).
        memset(g, debug::kRedActive, off);
        bool ok;
        {
            platform::lock_guard guard(g_lock);
            ok = insert(g + off, whole - off);
        }
        if (!ok) {
            release_guarded(g, whole);
            return nullptr;
        }
        g_mapped.fetch_add(whole - off, std::memory_order_relaxed);
        g_blocks.fetch_add(1, std::memory_order_relaxed);
        return g + off;
    }
    budget(); // reads the environment once
    const uint64_t pages = page_resident();
    void *p = nullptr;
    bool old_bytes = false;
    {
        platform::lock_guard guard(g_lock);
        clean_old(decay_cutoff(platform::now_coarse_ms()), false);
        const uintptr_t at = carve(whole, align, &old_bytes);
        if (at && insert(reinterpret_cast<void *>(at), whole)) {
            p = reinterpret_cast<void *>(at);
            // What stays kept and what is resident besides stay within the peak (free()).
            const uint64_t now_resident = g_mapped.load(std::memory_order_relaxed) + whole + pages;
            if (now_resident > g_peak) g_peak = now_resident;
            clean_to(peak_with_slack() - now_resident);
        } else if (at) {
            g_free.add(at, whole, old_bytes, platform::now_coarse_ms()); // the table is full
            sync_kept();
            return nullptr;
        }
        sync_kept();
    }
    if (p) {
        // A kept range holds its last user's bytes.
        if (zero && old_bytes) memset(p, 0, whole);
    } else {
        // No room in the region (or none reserved): a mapping of its own.
        platform::os_status st;
        p = platform::reserve(whole, align, &st);
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
    }
    g_mapped.fetch_add(whole, std::memory_order_relaxed);
    g_blocks.fetch_add(1, std::memory_order_relaxed);
    return p;
}
} // namespace

void *resize(void *p, size_t size) {
    size_t whole = whole_pages(size);
    if (!whole) return nullptr;
    if (guarded()) return nullptr; // a remapped block would lose its guard: the caller copies
    const auto a = reinterpret_cast<uintptr_t>(p);
    {
        platform::lock_guard guard(g_lock);
        entry *e = find(a);
        if (!e) return nullptr;
        const size_t old = e->size;
        if (old == whole) return p;
        if (in_region(a)) {
            if (whole < old) {
                // The tail joins the free ranges, kept (its pages go when the bounds say so).
                if (!g_free.add(a + whole, old - whole, true, platform::now_coarse_ms()))
                    return nullptr; // no room to record it: the caller copies
                protect_freed(a + whole, old - whole);
                e->size = whole;
                g_mapped.fetch_sub(old - whole, std::memory_order_relaxed);
                clean_to(budget());
                return p;
            }
            // In place when what follows is free, or is the top.
            const uintptr_t end = a + old, want = a + whole;
            const int next = g_free.starting_at(end);
            bool grown = false, fresh = false;
            if (next >= 0 && g_free[static_cast<unsigned>(next)].end() >= want) {
                grown = g_free.take_span(end, whole - old);
            } else if (next >= 0 && g_free[static_cast<unsigned>(next)].end() == g_top) {
                const extent x = g_free[static_cast<unsigned>(next)];
                if (raise_top(want)) {
                    g_free.grow(static_cast<unsigned>(next), want - x.end());
                    grown = g_free.take_span(end, whole - old);
                }
            } else if (next < 0 && end == g_top) {
                grown = raise_top(want);
                fresh = true;
            }
            if (grown && !fresh && !unprotect_taken(end, want - end)) {
                // The OS would not make the free range writable: give it back, and move.
                g_free.add(end, want - end, true, platform::now_coarse_ms());
                grown = false;
            }
            if (grown) {
                // Kept bytes taken over hold old contents; realloc promises nothing past the old
                // size, so they are left as they are.
                e->size = whole;
                g_mapped.fetch_add(whole - old, std::memory_order_relaxed);
                sync_kept();
                return p;
            }
            // Elsewhere in the region: the pages move there (no copy), and the old range,
            // unmapped by the move, is mapped again as fresh address space, free and clean.
            bool old_bytes;
            const uintptr_t to = carve(whole, kPageSize, &old_bytes);
            if (!to) return nullptr;
            if (!platform::move_pages(p, old, reinterpret_cast<void *>(to)).ok()) {
                g_free.add(to, whole, old_bytes, platform::now_coarse_ms());
                sync_kept();
                return nullptr;
            }
            if (!platform::map_fresh(p, old).ok())
                platform::fatal("slabkit: cannot map a moved large block's range again\n");
            // A fresh mapping has none of the region's advice: ask again (and the range merges
            // back into its neighbours' mapping).
            if (g_huge.load(std::memory_order_relaxed)) platform::huge_pages(p, old);
            // Lost to the region if the map is full; else the moved block's old address is
            // protected like a freed block's.
            if (g_free.add(a, old, false, 0)) protect_freed(a, old);
            e->addr = kTombstone;
            e->size = 0;
            if (!insert(reinterpret_cast<void *>(to), whole))
                platform::fatal("slabkit: the large-block table lost a block\n");
            g_mapped.fetch_add(whole - old, std::memory_order_relaxed);
            sync_kept();
            return reinterpret_cast<void *>(to);
        }
    }
    // A mapping of its own: mremap. The entry stays claimed (tombstoned) while the mapping
    // moves, so that no racing free of the same pointer can release it twice; a racing free then
    // reports a bad free, as it should.
    size_t old;
    {
        platform::lock_guard guard(g_lock);
        entry *e = find(a);
        if (!e) return nullptr;
        old = e->size;
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
    const auto a = reinterpret_cast<uintptr_t>(p);
    size_t size;
    bool own_mapping = false;
    const bool guard_it = guarded();
    const uint64_t pages = page_resident();
    {
        platform::lock_guard guard(g_lock);
        entry *e = find(a);
        if (!e) return false;
        size = e->size;
        e->addr = kTombstone;
        e->size = 0;
        g_mapped.fetch_sub(size, std::memory_order_relaxed);
        g_blocks.fetch_sub(1, std::memory_order_relaxed);
        if (!in_region(a)) {
            own_mapping = true;
        } else {
            const uint64_t now = platform::now_coarse_ms();
            // The page allocator gave memory back since the last free: the program is
            // shrinking, not cycling blocks, so this block and the kept ones go back too.
            const uint64_t shrink = page_allocator::global().over_retain_events();
            const bool shrinking = shrink != g_shrink_seen;
            g_shrink_seen = shrink;
            clean_old(decay_cutoff(now), shrinking);
            // Resident besides what is kept: the large blocks in use (this one until it is
            // freed) and the page allocator's pages.
            const uint64_t besides = g_mapped.load(std::memory_order_relaxed) + pages;
            if (besides + size > g_peak) g_peak = besides + size;
            // Nothing kept (it aged, or the heap shrinks): a new phase, a new peak.
            if (g_free.dirty_bytes() == 0) g_peak = besides + size;
            const uint64_t free_room = peak_with_slack() - besides;
            uint64_t room = free_room < limit ? free_room : limit;
            // Init on free: a kept block would keep its bytes; a clean one reads as zeros.
            if (shrinking || (hardening::init_mode() & hardening::kInitOnFree)) room = 0;
            if (!g_free.add(a, size, true, now)) {
                // No room in the map: the pages go back, the address space is lost to the
                // region (it stays reserved, unused).
                platform::decommit(p, size);
            } else {
                protect_freed(a, size); // a write after free faults
            }
            // The newest stays: the oldest kept memory makes room first.
            clean_to(room);
        }
    }
    if (own_mapping && guard_it) {
        free_guarded(p, size); // no access from now on: a use after free faults
    } else if (own_mapping) {
        platform::release(p, size);
    }
    return true;
}

uint64_t release_retained(uint64_t before_ms, bool force) {
    platform::lock_guard guard(g_lock);
    return clean_old(before_ms, force);
}

uint64_t retained_bytes() {
    return g_kept_bytes.load(std::memory_order_relaxed);
}

uint64_t retained_blocks() {
    platform::lock_guard guard(g_lock);
    return g_free.dirty_count();
}

unsigned protected_ranges() {
    platform::lock_guard guard(g_lock);
    return g_protected_count;
}

size_t protected_above() {
    const uint8_t mode = protect_mode();
    if (mode == kProtectOff) return ~size_t{0};
    platform::lock_guard guard(g_lock);
    return mode == kProtectAlways ? 0 : g_protect_above;
}

bool region_huge_pages() {
    return g_huge.load(std::memory_order_relaxed);
}

uint64_t region_bytes() {
    platform::lock_guard guard(g_lock);
    return g_end - g_base;
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
