// leak_scan.cpp - the scan for allocated objects nothing points to (leak_scan.hpp): mark the
// candidates, scan the roots, then the referenced objects, report what is left.
#include "core/leak_scan.hpp"

#include "page/page_allocator.hpp"
#include "platform/platform.hpp"

#include <atomic>

namespace slabkit::leak_scan {

namespace {

// The marks, in the state word of a candidate (in the copy only): waiting for its words to be
// scanned, then scanned. An allocated object left with kStateAllocated was never referenced.
constexpr uint64_t kStateReferenced = 0x5eea11ull << 8;
constexpr uint64_t kStateScanned = 0x5ca44edull << 8;

// The referenced objects whose words are still to be scanned (their slots). When it is full,
// objects are marked and left for passes over the debug slabs (overflowed).
constexpr unsigned kStackMax = 1 << 16;
void *g_stack[kStackMax];
unsigned g_depth;
bool g_overflowed;

struct scan_state {
    uint64_t min_age_ms, now_ms;
    result r;
};

// A design's own debugged blocks (block_source), sorted by address, with their marks.
std::atomic<const block_source *> g_source{nullptr};
struct block {
    uintptr_t obj;
    size_t size;
    const debug::track *tracks;
    uint8_t state; // 0 allocated, 1 referenced, 2 scanned
};
constexpr unsigned kMaxBlocks = 1 << 18;
block g_blocks[kMaxBlocks]; // in the copy
unsigned g_nr_blocks;
uint64_t g_blocks_left_out; // past kMaxBlocks: not candidates (nor skipped as roots)
cache *g_block_owner;

void collect_blocks() {
    g_nr_blocks = 0;
    g_blocks_left_out = 0;
    const block_source *src = g_source.load(std::memory_order_acquire);
    g_block_owner = src ? src->owner : nullptr;
    if (!src) return;
    src->walk(
        [](void *obj, size_t size, const debug::track *tracks, void *) {
            if (g_nr_blocks == kMaxBlocks) {
                ++g_blocks_left_out;
                return;
            }
            g_blocks[g_nr_blocks++] = block{reinterpret_cast<uintptr_t>(obj), size, tracks, 0};
        },
        nullptr);
    // Insertion sort would be quadratic: a heap sort, in place, allocation-free.
    auto sift = [](unsigned i, unsigned n) {
        for (;;) {
            unsigned big = i, l = 2 * i + 1, r = l + 1;
            if (l < n && g_blocks[l].obj > g_blocks[big].obj) big = l;
            if (r < n && g_blocks[r].obj > g_blocks[big].obj) big = r;
            if (big == i) return;
            block t = g_blocks[i];
            g_blocks[i] = g_blocks[big];
            g_blocks[big] = t;
            i = big;
        }
    };
    for (unsigned i = g_nr_blocks / 2; i-- > 0;) sift(i, g_nr_blocks);
    for (unsigned n = g_nr_blocks; n > 1; --n) {
        block t = g_blocks[0];
        g_blocks[0] = g_blocks[n - 1];
        g_blocks[n - 1] = t;
        sift(0, n - 1);
    }
}

// The first block that ends after addr.
unsigned first_block_after(uintptr_t addr) {
    unsigned lo = 0, hi = g_nr_blocks;
    while (lo < hi) {
        const unsigned mid = (lo + hi) / 2;
        if (g_blocks[mid].obj + g_blocks[mid].size <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

// Stack entries: a slot of a debug cache, or (low bit set) the index of a block, shifted.
constexpr uintptr_t kBlockTag = 1;

// The slot of a debug cache's candidate that addr points into, or nullptr.
void *candidate_at(uintptr_t addr) {
    page *pg = virt_to_head_page(reinterpret_cast<void *>(addr));
    if (!pg || !(pg->flags() & PG_slab)) return nullptr;
    cache *c = slab_cache(pg);
    if (!c || !c->debug || c->debug_fresh) return nullptr;
    const uintptr_t base = slab_base(pg);
    if (addr < base) return nullptr;
    const uintptr_t index = (addr - base) / c->size;
    if (index >= c->objects) return nullptr;
    char *slot = reinterpret_cast<char *>(base + index * c->size);
    // Anywhere inside the object counts, as kmemleak counts interior pointers; not its metadata.
    const uintptr_t obj = reinterpret_cast<uintptr_t>(debug::object_of(c, slot));
    if (addr < obj || addr >= obj + c->object_size) return nullptr;
    return slot;
}

void push(void *entry) {
    if (g_depth < kStackMax)
        g_stack[g_depth++] = entry;
    else
        g_overflowed = true;
}

// One word that may be a pointer: a candidate it points into becomes referenced.
void consider(uintptr_t word) {
    if (!in_arena(reinterpret_cast<void *>(word))) return;
    if (g_nr_blocks) {
        page *pg = virt_to_head_page(reinterpret_cast<void *>(word));
        if (pg && (pg->flags() & PG_slab) && slab_cache(pg) == g_block_owner) {
            const unsigned i = first_block_after(word);
            if (i < g_nr_blocks && g_blocks[i].obj <= word && g_blocks[i].state == 0) {
                g_blocks[i].state = 1;
                push(reinterpret_cast<void *>((uintptr_t{i} << 1) | kBlockTag));
            }
            return;
        }
    }
    void *slot = candidate_at(word);
    if (!slot) return;
    cache *c = slab_cache(virt_to_head_page(slot));
    uint64_t *state = debug::state_word(c, slot);
    if (*state != debug::kStateAllocated) return; // free, or referenced already
    *state = kStateReferenced;
    push(slot);
}

void scan_range(uintptr_t from, uintptr_t to, scan_state *st) {
    from = (from + 7) & ~uintptr_t{7};
    for (uintptr_t p = from; p + 8 <= to; p += 8) consider(*reinterpret_cast<const uintptr_t *>(p));
    st->r.root_bytes += to > from ? to - from : 0;
}

// A referenced object's own words.
void scan_object(void *slot) {
    cache *c = slab_cache(virt_to_head_page(slot));
    *debug::state_word(c, slot) = kStateScanned;
    const uintptr_t obj = reinterpret_cast<uintptr_t>(debug::object_of(c, slot));
    for (uintptr_t p = obj; p + 8 <= obj + c->object_size; p += 8)
        consider(*reinterpret_cast<const uintptr_t *>(p));
}

void scan_block(unsigned i) {
    g_blocks[i].state = 2;
    const uintptr_t obj = g_blocks[i].obj;
    for (uintptr_t p = obj; p + 8 <= obj + g_blocks[i].size; p += 8)
        consider(*reinterpret_cast<const uintptr_t *>(p));
}

void drain() {
    while (g_depth) {
        void *e = g_stack[--g_depth];
        const auto v = reinterpret_cast<uintptr_t>(e);
        if (v & kBlockTag)
            scan_block(static_cast<unsigned>(v >> 1));
        else
            scan_object(e);
    }
}

// The owner's page (of the block source) as roots: everything but the debugged blocks.
void scan_block_page(uintptr_t start, uintptr_t end, scan_state *st) {
    uintptr_t p = start;
    for (unsigned i = first_block_after(start); i < g_nr_blocks && g_blocks[i].obj < end; ++i) {
        if (g_blocks[i].obj > p) scan_range(p, g_blocks[i].obj, st);
        p = g_blocks[i].obj + g_blocks[i].size;
    }
    if (p < end) scan_range(p, end, st);
}

// Every slab of a debug cache: fn(c, slot, arg) for each slot.
template <class F>
void for_each_debug_slot(F &fn) {
    struct walk {
        F *fn;
    } w{&fn};
    page_allocator::global().for_each_allocated(
        [](page *pg, void *arg) {
            if (!(pg->flags() & PG_slab)) return;
            cache *c = slab_cache(pg);
            if (!c || !c->debug || c->debug_fresh) return;
            char *first = reinterpret_cast<char *>(slab_base(pg));
            for (uint32_t i = 0; i < c->objects; ++i)
                (*static_cast<walk *>(arg)->fn)(c, first + size_t{i} * c->size);
        },
        &w);
}

} // namespace

void set_block_source(const block_source *s) {
    g_source.store(s, std::memory_order_release);
}
const block_source *current_block_source() {
    return g_source.load(std::memory_order_acquire);
}

result scan(uint64_t min_age_ms,
            void (*leak)(cache *c, void *obj, size_t size, const debug::track *track, void *arg),
            void *arg) {
    scan_state st{min_age_ms, platform::now_coarse_ms(), {}};
    g_depth = 0;
    g_overflowed = false;
    collect_blocks();
    if (g_block_owner) ++st.r.caches;
    registry::for_each(
        [](cache *c, void *a) {
            if (c->debug && !c->debug_fresh) ++static_cast<scan_state *>(a)->r.caches;
        },
        &st);
    // The roots: the writable mappings outside the arena, page by page (a mapping may run next
    // to an arena chunk)...
    st.r.roots_ok = platform::for_each_writable_mapping(
        [](uintptr_t start, uintptr_t end, void *a) {
            auto *s = static_cast<scan_state *>(a);
            // The scan's own tables hold every block's address and the referenced slots': not
            // roots.
            const auto own_from = reinterpret_cast<uintptr_t>(&g_blocks[0]);
            const auto own_to = reinterpret_cast<uintptr_t>(&g_blocks[kMaxBlocks]);
            const auto stack_from = reinterpret_cast<uintptr_t>(&g_stack[0]);
            const auto stack_to = reinterpret_cast<uintptr_t>(&g_stack[kStackMax]);
            for (uintptr_t p = start; p < end; p += kPageSize) {
                if (in_arena(reinterpret_cast<void *>(p))) continue;
                const uintptr_t e = p + kPageSize < end ? p + kPageSize : end;
                if ((p < own_to && e > own_from) || (p < stack_to && e > stack_from)) {
                    for (uintptr_t w = p; w + 8 <= e; w += 8) {
                        if ((w >= own_from && w < own_to) || (w >= stack_from && w < stack_to))
                            continue;
                        scan_range(w, w + 8, s);
                    }
                    continue;
                }
                scan_range(p, e, s);
            }
            drain();
        },
        &st);
    // ... and the arena's blocks that are not a debug cache's slabs.
    page_allocator::global().for_each_allocated(
        [](page *pg, void *a) {
            cache *c = (pg->flags() & PG_slab) ? slab_cache(pg) : nullptr;
            if (c && c->debug && !c->debug_fresh) return;
            const auto start = reinterpret_cast<uintptr_t>(page_to_virt(pg));
            const uintptr_t end = start + (kPageSize << pg->order());
            if (c && c == g_block_owner)
                scan_block_page(start, end, static_cast<scan_state *>(a));
            else
                scan_range(start, end, static_cast<scan_state *>(a));
            drain();
        },
        &st);
    // Objects marked while the stack was full: passes until none is left.
    auto rescan = [](cache *c, char *slot) {
        if (*debug::state_word(c, slot) == kStateReferenced) {
            scan_object(slot);
            drain();
        }
    };
    while (g_overflowed) {
        g_overflowed = false;
        for_each_debug_slot(rescan);
        for (unsigned i = 0; i < g_nr_blocks; ++i) {
            if (g_blocks[i].state == 1) {
                scan_block(i);
                drain();
            }
        }
    }
    // What is still only allocated was never referenced.
    struct report_walk {
        scan_state *st;
        void (*leak)(cache *, void *, size_t, const debug::track *, void *);
        void *arg;
    } rw{&st, leak, arg};
    auto report = [&rw](cache *c, char *slot) {
        const uint64_t state = *debug::state_word(c, slot);
        if (state != debug::kStateAllocated && state != kStateReferenced && state != kStateScanned)
            return;
        const debug::track *tr = debug::owner_tracks(c, slot);
        if (tr && tr[0].tid && rw.st->now_ms - tr[0].when_ms < rw.st->min_age_ms) return;
        ++rw.st->r.candidates;
        if (state != debug::kStateAllocated) return;
        ++rw.st->r.leaked;
        rw.st->r.leaked_bytes += c->object_size;
        if (rw.leak) rw.leak(c, debug::object_of(c, slot), c->object_size, tr, rw.arg);
    };
    for_each_debug_slot(report);
    for (unsigned i = 0; i < g_nr_blocks; ++i) {
        const block &b = g_blocks[i];
        const debug::track *tr = b.tracks;
        if (tr && tr[0].tid && st.now_ms - tr[0].when_ms < min_age_ms) continue;
        ++st.r.candidates;
        if (b.state != 0) continue;
        ++st.r.leaked;
        st.r.leaked_bytes += b.size;
        if (leak) leak(g_block_owner, reinterpret_cast<void *>(b.obj), b.size, tr, arg);
    }
    return st.r;
}

} // namespace slabkit::leak_scan
