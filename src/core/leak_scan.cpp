// leak_scan.cpp - the scan for allocated objects nothing points to (leak_scan.hpp): mark the
// candidates, scan the roots, then the referenced objects, report what is left.
#include "core/leak_scan.hpp"

#include "page/page_allocator.hpp"
#include "platform/platform.hpp"

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

// One word that may be a pointer: a candidate it points into becomes referenced.
void consider(uintptr_t word) {
    if (!in_arena(reinterpret_cast<void *>(word))) return;
    void *slot = candidate_at(word);
    if (!slot) return;
    cache *c = slab_cache(virt_to_head_page(slot));
    uint64_t *state = debug::state_word(c, slot);
    if (*state != debug::kStateAllocated) return; // free, or referenced already
    *state = kStateReferenced;
    if (g_depth < kStackMax)
        g_stack[g_depth++] = slot;
    else
        g_overflowed = true;
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

void drain() {
    while (g_depth) scan_object(g_stack[--g_depth]);
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

result scan(uint64_t min_age_ms, void (*leak)(cache *c, void *obj, void *arg), void *arg) {
    scan_state st{min_age_ms, platform::now_coarse_ms(), {}};
    g_depth = 0;
    g_overflowed = false;
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
            for (uintptr_t p = start; p < end; p += kPageSize) {
                if (in_arena(reinterpret_cast<void *>(p))) continue;
                scan_range(p, p + kPageSize < end ? p + kPageSize : end, s);
            }
            drain();
        },
        &st);
    // ... and the arena's blocks that are not a debug cache's slabs.
    page_allocator::global().for_each_allocated(
        [](page *pg, void *a) {
            if (pg->flags() & PG_slab) {
                cache *c = slab_cache(pg);
                if (c && c->debug && !c->debug_fresh) return;
            }
            const auto start = reinterpret_cast<uintptr_t>(page_to_virt(pg));
            scan_range(start, start + (kPageSize << pg->order()), static_cast<scan_state *>(a));
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
    }
    // What is still only allocated was never referenced.
    struct report_walk {
        scan_state *st;
        void (*leak)(cache *, void *, void *);
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
        if (rw.leak) rw.leak(c, debug::object_of(c, slot), rw.arg);
    };
    for_each_debug_slot(report);
    return st.r;
}

} // namespace slabkit::leak_scan
