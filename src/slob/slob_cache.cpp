// slob_cache.cpp - SLOB's caches and kmalloc over its blocks: the arena, create, destroy (leaks
// counted, and listed where SLOB can find them), object allocation with constructors run on
// each, kmalloc with its size header, ksize, statistics, the invariant checker and fork.
#include "core/debug.hpp"
#include "core/hardening.hpp"
#include "core/leak_scan.hpp"
#include "core/report.hpp"
#include "core/slabinfo.hpp"
#include "page/page_allocator.hpp"
#include "slob/slob_internal.hpp"

#include <cstring>
#include <new>

namespace slabkit::slob {

const char *const kStatNames[NR_STATS] = {
    "PAGES_SMALL", "PAGES_MEDIUM", "PAGES_LARGE",  "PAGES_FULL",    "FREE_UNITS",
    "ALLOCS",      "FREES",        "SEARCH_PAGES", "SEARCH_BLOCKS", "SEARCH_FAILS",
    "MERGES",      "NEW_PAGES",    "PAGES_FREED",  "BIG_ALLOCS",
};
static_assert(NR_STATS <= design_stats::kMaxCounters);

namespace {

slob_cache g_arena;
std::atomic<bool> g_booted{false};
platform::mutex g_boot_lock;

// The kmalloc header, in the kMinalign bytes before the block (the kernel's: the size in the
// first 4): the size the block was asked for (a malloc block's: rounded, see kmalloc) and a
// check word.
struct kmalloc_header {
    uint32_t size;
    uint32_t check;
};
constexpr size_t kHeader = sizeof(kmalloc_header);
static_assert(kHeader == kMinalign, "the header fills the minimum alignment, as the kernel's");
uint32_t check_of(const void *p, uint32_t size) {
    return size ^ static_cast<uint32_t>(reinterpret_cast<uintptr_t>(p) >> 3) ^ 0x5105b10cu;
}

// A kmalloc block under debugging (debug::block_*): | header | object (the size asked for) |
// red zone (up to the next 16 bytes, 32 at least) | with owner tracking (U) two tracks |, its
// check word xor-ed with one of the marks below: debugged, with or without tracks, made by
// malloc or kmalloc, operator new or operator new[] (note_origin), and quarantined (waiting in
// the debug layer's quarantine after its free). Its bytes follow from the size and the mark, so
// a free needs nothing else.
enum block_mark : uint32_t {
    kDebugBlock = 0xdeb6b10cu,
    kTrackedBlock = 0x7ac4b10cu,
    kDebugNewBlock = 0xdeb6e1e0u,
    kTrackedNewBlock = 0x7ac4e1e0u,
    kDebugNewArrayBlock = 0xdeb6a77au,
    kTrackedNewArrayBlock = 0x7ac4a77au,
    kQuarantinedBlock = 0x9a4a7e1du,
    kQuarantinedTrackedBlock = 0x9a4a7ac4u,
};
uint32_t debug_mark(bool tracked, debug::origin o) {
    switch (o) {
    case debug::origin::new_object:
        return tracked ? kTrackedNewBlock : kDebugNewBlock;
    case debug::origin::new_array:
        return tracked ? kTrackedNewArrayBlock : kDebugNewArrayBlock;
    default:
        return tracked ? kTrackedBlock : kDebugBlock;
    }
}
// Before the header, a left red zone: an underflow past the header (which catches the first 8
// bytes: its check word breaks) lands there, up to 32 bytes before the object. It keeps the
// object 16-aligned.
constexpr size_t kLeftRedZone = debug::kBlockLeftRedZone;
static_assert((kLeftRedZone + kHeader) % 16 == 0, "the object stays 16-aligned");
// From the header on: | header | object | right red zone, to the next 16 and 32 bytes at least |.
size_t debug_block_bytes(size_t size) {
    return (kHeader + size + debug::kBlockRedZone + 15) & ~size_t{15};
}
char *left_red_zone(void *header) {
    return static_cast<char *>(header) - kLeftRedZone;
}
enum class header_kind { none, plain, debug, quarantined };
struct header_info {
    header_kind kind = header_kind::none;
    bool tracked = false;
    debug::origin origin = debug::origin::plain; // a debugged block's maker
};
header_info header_of(const void *p) {
    if ((reinterpret_cast<uintptr_t>(p) & (kPageSize - 1)) < kHeader) return {};
    const auto *h =
        reinterpret_cast<const kmalloc_header *>(static_cast<const char *>(p) - kHeader);
    if (h->size == 0 || h->size + kHeader > kPageSize) return {};
    const uint32_t want = check_of(p, h->size);
    if (h->check == want) return {header_kind::plain, false};
    switch (h->check ^ want) {
    case kDebugBlock:
        return {header_kind::debug, false};
    case kTrackedBlock:
        return {header_kind::debug, true};
    case kDebugNewBlock:
        return {header_kind::debug, false, debug::origin::new_object};
    case kTrackedNewBlock:
        return {header_kind::debug, true, debug::origin::new_object};
    case kDebugNewArrayBlock:
        return {header_kind::debug, false, debug::origin::new_array};
    case kTrackedNewArrayBlock:
        return {header_kind::debug, true, debug::origin::new_array};
    case kQuarantinedBlock:
        return {header_kind::quarantined, false};
    case kQuarantinedTrackedBlock:
        return {header_kind::quarantined, true};
    default:
        return {};
    }
}
// A debugged block's tracks, after its red zone.
debug::track *tracks_of_block(kmalloc_header *h) {
    return reinterpret_cast<debug::track *>(reinterpret_cast<char *>(h) +
                                            debug_block_bytes(h->size));
}
// A debugged block's bytes from its left red zone on.
size_t block_bytes(const kmalloc_header *h, bool tracked) {
    return kLeftRedZone + debug_block_bytes(h->size) + (tracked ? debug::kBlockTracks : 0);
}

unsigned order_for(size_t size) {
    unsigned order = 0;
    while ((kPageSize << order) < size) ++order;
    return order;
}

// The kernel's c->size: what an object asks of slob_alloc - its size (a debug cache's: its slot,
// object and debug metadata together).
size_t request_bytes(const slob_cache *s) {
    return s->debug ? s->size : s->object_size;
}

// Objects of a page or more take whole pages (the kernel's c->size < PAGE_SIZE test).
bool big(const slob_cache *s) {
    return request_bytes(s) >= kPageSize;
}

// A block from the lists, adding a page when none has room (the page allocator is called with
// the lock dropped, as the kernel's slob_alloc does).
void *block(size_t bytes, size_t align, size_t align_offset, int node) {
    {
        platform::lock_guard guard(lock());
        if (void *b = block_alloc(bytes, align, align_offset, node)) return b;
        count(SEARCH_FAILS);
    }
    void *mem = page_allocator::global().alloc(0, node, 0);
    if (!mem) return nullptr;
    platform::lock_guard guard(lock());
    add_page(mem, bytes);
    void *b = block_alloc(bytes, align, align_offset, node == kAnyNode ? kAnyNode : node);
    return b;
}

void give_back(void *b, size_t bytes, const char *op, const cache *c, const void *obj) {
    void *page_out = nullptr;
    free_error err;
    {
        platform::lock_guard guard(lock());
        err = block_free(b, bytes, &page_out);
    }
    if (page_out) release_page(page_out);
    if (err == free_error::overlaps_free_block)
        report_bad_free(op, c, obj, "it overlaps a free block of its page (a double free?)");
    else if (err == free_error::past_the_page)
        report_bad_free(op, c, obj, "a block of that size would run past its page");
}

// A debug cache's allocated slots (cache::debug_walk): those that carry its tag
// (debug::is_live_slot), on its own pages (objects of a page or more) or on the shared ones.
// Under the lock, so that no block changes meanwhile.
void walk_debug_slots(cache *c, void (*fn)(cache *c, char *slot, void *arg), void *arg) {
    auto *s = static_cast<slob_cache *>(c);
    struct walk {
        slob_cache *s;
        void (*fn)(cache *, char *, void *);
        void *arg;
    } w{s, fn, arg};
    platform::lock_guard guard(lock());
    for_each_slab_in_arena(
        big(s) ? static_cast<cache *>(s) : static_cast<cache *>(&g_arena),
        [](page *pg, void *wa) {
            auto *wk = static_cast<walk *>(wa);
            char *base = static_cast<char *>(page_to_virt(pg));
            const size_t span = kPageSize << (pg->flags() & PG_order_mask);
            for (size_t off = 0; off + wk->s->size <= span; off += wk->s->align)
                if (debug::is_live_slot(wk->s, base + off)) wk->fn(wk->s, base + off, wk->arg);
        },
        &w);
}

// A debugged block leaving the quarantine: its poison checked, then given back.
void release_debug_block(cache *, void *block) {
    auto *h = static_cast<kmalloc_header *>(block);
    char *obj = reinterpret_cast<char *>(h) + kHeader;
    const bool tracked = header_of(obj).tracked;
    debug::block_released(&g_arena, obj, h->size, tracked ? tracks_of_block(h) : nullptr);
    const size_t bytes = block_bytes(h, tracked);
    h->check = 0;
    give_back(left_red_zone(h), bytes, "kfree", nullptr, obj);
}

// Every debugged block still allocated, found by its header on SLOB's pages (a header's check
// word depends on its address and size: nothing else reads as one): fn(obj, size, tracks or
// nullptr, arg). The caller holds SLOB's lock, or runs in a copy of the process (the leak
// scan's candidates, core/leak_scan.hpp), where nothing else runs.
void walk_debug_blocks(void (*fn)(void *obj, size_t size, const debug::track *tracks, void *arg),
                       void *arg) {
    struct walk {
        void (*fn)(void *, size_t, const debug::track *, void *);
        void *arg;
    } w{fn, arg};
    for_each_slab_in_arena(
        &g_arena,
        [](page *pg, void *wa) {
            auto *wk = static_cast<walk *>(wa);
            char *base = static_cast<char *>(page_to_virt(pg));
            for (size_t off = kHeader; off < kPageSize; off += kHeader) {
                const header_info hi = header_of(base + off);
                if (hi.kind != header_kind::debug) continue;
                auto *h = reinterpret_cast<kmalloc_header *>(base + off - kHeader);
                wk->fn(base + off, h->size, hi.tracked ? tracks_of_block(h) : nullptr, wk->arg);
            }
        },
        &w);
}
// SLABKIT_LEAKS=exit: the debugged blocks still allocated.
uint64_t list_block_leaks(cache *, const char *op) {
    struct walk {
        const char *op;
        uint64_t found;
    } w{op, 0};
    platform::lock_guard guard(lock());
    walk_debug_blocks(
        [](void *obj, size_t size, const debug::track *tracks, void *a) {
            auto *wk = static_cast<walk *>(a);
            debug::block_leak(&g_arena, static_cast<char *>(obj), size, wk->op, tracks);
            ++wk->found;
        },
        &w);
    return w.found;
}

const leak_scan::block_source g_block_source{&g_arena, walk_debug_blocks};

void setup(slob_cache *s, const cache_args &args) {
    describe_cache(s, args, design::slob);
    compute_object_layout(s, freeptr_place::none);
    if (s->debug) {
        // A free block's bytes are SLOB's (its lists' headers, other caches' blocks): the debug
        // layer checks only what it still holds (the quarantine).
        s->debug_fresh = true;
        s->debug_alloc = debug_slot_alloc;
        s->debug_free = debug_slot_free;
        s->debug_walk = walk_debug_slots;
    }
    // No slabs. For the statistics, a cache's "slab" is the pages one object of a page or more
    // takes, or one page's worth of smaller objects (their pages are shared: the figures are the
    // pages their bytes fill).
    if (!s->debug) {
        // An object takes the SLOB units of its size, at the cache's alignment: the kernel's
        // slob_alloc of c->size with c->align (not the size rounded up to the alignment).
        set_slot_size(s, units_of(s->object_size) * kUnit);
        s->inuse = s->size;
    }
    s->order = static_cast<uint8_t>(big(s) ? order_for(request_bytes(s)) : 0);
    s->objects = big(s) ? 1 : static_cast<uint32_t>(kPageSize / s->size);
}

} // namespace

slob_cache &arena() {
    return g_arena;
}

void bootstrap() {
    if (SLABKIT_LIKELY(g_booted.load(std::memory_order_acquire))) return;
    platform::lock_guard guard(g_boot_lock);
    if (g_booted.load(std::memory_order_relaxed)) return;
    // The arena names itself as every SLOB page's owner: kfree's check of a block (an address
    // of a slab page, a multiple of 8 from its start) passes for any 8-aligned block, which is
    // then SLOB's to check against its header.
    char name[kNameMax];
    internal_cache_name(design::slob, "slob-pages", name, sizeof name);
    setup(&g_arena, cache_args{name, kMinAlign, kMinAlign, 0, nullptr});
    apply_order(&g_arena, 0);
    g_arena.arena = true;
    g_arena.debug_free = release_debug_block; // kmalloc blocks under debugging
    g_arena.debug_block_leaks = list_block_leaks;
    leak_scan::set_block_source(&g_block_source);
    registry::add_internal(&g_arena);
    g_booted.store(true, std::memory_order_release);
}

// ---- caches -----------------------------------------------------------------------------------

bool open_static(slob_cache *s, slot_storage *, const cache_args &args, const char **) {
    bootstrap();
    setup(s, args);
    registry::add_internal(s);
    return true;
}

slob_cache *create(const cache_args &args, const char **why) {
    bootstrap();
    void *mem = block(sizeof(slob_cache), alignof(slob_cache), 0, kAnyNode);
    if (!mem) {
        if (why) *why = "out of memory for the cache descriptor";
        return nullptr;
    }
    auto *s = new (mem) slob_cache();
    setup(s, args);
    if (!registry::add(s, why)) {
        s->~slob_cache();
        give_back(s, sizeof(slob_cache), "kmem_cache_create", nullptr, s);
        return nullptr;
    }
    return s;
}

void destroy(slob_cache *s) {
    if (!s || s->dead || s->arena) return;
    registry::remove(s);
    uint64_t live;
    {
        platform::lock_guard guard(lock());
        live = s->live;
    }
    if (live == 0) {
        s->~slob_cache();
        give_back(s, sizeof(slob_cache), "kmem_cache_destroy", nullptr, s);
        return;
    }
    // SLOB's small objects share pages with every other cache and kmalloc, and a block records
    // nothing of its owner: the cache counts its live objects, so the leak is reported by count.
    // Objects of a page or more have pages of their own, owned by the cache: those are listed.
    uint64_t listed = 0;
    if (s->debug) {
        // A debug cache's live objects carry its tag: they can be found and listed.
        listed = debug::report_leaks(s, "kmem_cache_destroy");
    } else if (big(s)) {
        struct walk {
            slob_cache *s;
            uint64_t *listed;
        } w{s, &listed};
        for_each_slab_in_arena(
            s,
            [](page *pg, void *arg) {
                auto *wk = static_cast<walk *>(arg);
                report_leaked_object(wk->s, page_to_virt(pg));
                ++*wk->listed;
            },
            &w);
    }
    report("kmem_cache_destroy(%s): %llu object(s) still allocated%s; the cache's memory is kept",
           s->name, static_cast<unsigned long long>(live),
           listed ? ""
                  : " (SLOB shares its pages between caches and records no owner per block, so "
                    "it counts them but cannot list them)");
    s->dead = true;
}

size_t reclaim(slob_cache *s) {
    // Nothing to give back: a SLOB page goes back the moment its last block is freed. What the
    // cache holds is its own pages (objects of a page or more: one "slab" each), or its live
    // objects' share of shared pages, counted here as the pages their bytes fill.
    if (!s || s->arena) return 0;
    platform::lock_guard guard(lock());
    if (big(s)) return s->live;
    return (s->live * s->size + kPageSize - 1) / kPageSize;
}

bool tune(slob_cache *, const char *name, unsigned long, const char **why) {
    (void)name;
    *why = "SLOB has no tunables (no slabs, no per-slot queues)";
    return false;
}

bool set_order(slob_cache *, unsigned, const char **why) {
    *why = "SLOB has no slabs: objects under a page share pages, larger ones take whole pages";
    return false;
}

// ---- objects ---------------------------------------------------------------------------------

namespace {
// One block of s's size (no constructor, not zeroed), counted.
void *alloc_block(slob_cache *s, int node) {
    void *obj;
    if (big(s)) {
        obj = page_allocator::global().alloc(order_for(request_bytes(s)), node, 0);
        if (!obj) return nullptr;
        page *pg = virt_to_page(obj);
        pg->priv[0] = pg->priv[1] = 0;
        mark_slab(s, pg, 0);
        platform::lock_guard guard(lock());
        count(BIG_ALLOCS);
    } else {
        obj = block(request_bytes(s), s->align, 0, node);
        if (!obj) return nullptr;
    }
    {
        platform::lock_guard guard(lock());
        ++s->live;
        s->stats[ALLOCS].add();
    }
    return obj;
}
} // namespace

void *debug_slot_alloc(cache *c, int node) {
    return alloc_block(static_cast<slob_cache *>(c), node);
}

void *alloc(slob_cache *s, int node, bool zero) {
    if (node != kAnyNode &&
        (node < 0 || static_cast<unsigned>(node) >= page_allocator::global().nodes()))
        return nullptr;
    // A debug cache's blocks carry red zones, state and tracks (core/debug.hpp).
    if (SLABKIT_UNLIKELY(s->debug)) return debug::alloc(s, node, zero);
    void *obj = alloc_block(s, node);
    if (!obj) return nullptr;
    if (zero)
        memset(obj, 0, s->object_size);
    else if (s->ctor)
        s->ctor(obj); // SLOB constructs on every allocation
    return obj;
}

namespace {

void free_big(slob_cache *s, page *pg, void *obj) {
    clear_slab(pg);
    page_allocator::global().free(obj, pg->order());
    platform::lock_guard guard(lock());
    --s->live;
    s->stats[FREES].add();
}

void free_small(slob_cache *s, void *obj, bool zero = false) {
    void *page_out = nullptr;
    free_error err;
    {
        platform::lock_guard guard(lock());
        err = block_free(obj, request_bytes(s), &page_out, zero);
        if (err == free_error::none) {
            --s->live;
            s->stats[FREES].add();
        }
    }
    if (page_out) release_page(page_out);
    if (err == free_error::overlaps_free_block)
        report_bad_free("kmem_cache_free", s, obj,
                        "it overlaps a free block of its page (a double free?)");
    else if (err == free_error::past_the_page)
        report_bad_free("kmem_cache_free", s, obj, "an object there would run past its page");
}

} // namespace

void debug_slot_free(cache *c, void *slot) {
    auto *s = static_cast<slob_cache *>(c);
    if (big(s)) return free_big(s, virt_to_head_page(slot), slot);
    free_small(s, slot);
}

void free(slob_cache *s, void *obj) {
    if (!obj) return;
    if (SLABKIT_UNLIKELY(s->debug)) return debug::free(s, obj, "kmem_cache_free");
    page *pg = slab_page_of(obj);
    char what[256];
    // Init on free (core/hardening.hpp) once the object is known to be one of s's.
    const bool zero = init_bits(s) & hardening::kInitOnFree;
    if (big(s)) {
        if (pg && slab_cache(pg) == static_cast<cache *>(s) && page_to_virt(pg) == obj) {
            if (zero) memset(obj, 0, s->object_size);
            return free_big(s, pg, obj);
        }
    } else if (pg && slab_cache(pg) == static_cast<cache *>(&g_arena) &&
               reinterpret_cast<uintptr_t>(obj) % s->align == 0) {
        return free_small(s, obj, zero);
    }
    report_bad_free("kmem_cache_free", s, obj, diagnose_free(s, obj, what, sizeof what));
}

void free_to_slab(slob_cache *s, page *pg, void *obj) {
    kfree(s, pg, obj, "kfree");
}

void kfree(slob_cache *s, page *pg, void *obj, const char *op) {
    if (s->debug) return debug::free(s, obj, op);
    const bool zero = hardening::init_mode() & hardening::kInitOnFree; // init on free
    if (!s->arena) {
        // kfree of an object of a page or more
        if (zero && !s->ctor) memset(obj, 0, s->object_size);
        return free_big(s, pg, obj);
    }
    // A kmalloc block: its header says how big.
    auto *h = reinterpret_cast<kmalloc_header *>(static_cast<char *>(obj) - kHeader);
    const header_info hi = header_of(obj);
    debug::track *tracks = hi.tracked ? tracks_of_block(h) : nullptr;
    switch (hi.kind) {
    case header_kind::none:
        // (A freed block's header check is cleared: a second free of it lands here.)
        report_bad_free(op, nullptr, obj,
                        "not a kmalloc block of a SLOB page (no valid size header before it: "
                        "already freed, or never handed out)");
        return;
    case header_kind::quarantined:
        return debug::block_double_free(&g_arena, static_cast<char *>(obj), h->size, op, tracks);
    case header_kind::debug: {
        // The plain delete of a new[] block, or the reverse: reported, the block left alone.
        if (const char *why = debug::mismatched_delete(op, hi.origin))
            return debug::block_mismatched_delete(&g_arena, static_cast<char *>(obj), h->size, why,
                                                  op, tracks);
        const size_t size = h->size, rz = debug_block_bytes(size) - kHeader - size;
        const size_t bytes = block_bytes(h, hi.tracked);
        h->check =
            check_of(obj, h->size) ^ (hi.tracked ? kQuarantinedTrackedBlock : kQuarantinedBlock);
        return debug::block_free(&g_arena, h, static_cast<char *>(obj), size, rz, left_red_zone(h),
                                 kLeftRedZone, bytes, op, tracks);
    }
    case header_kind::plain:
        break;
    }
    size_t size = h->size;
    if (zero) memset(obj, 0, size);
    h->check = 0; // a second kfree of it fails the header check
    give_back(h, size + kHeader, op, nullptr, obj);
}

// ---- kmalloc ---------------------------------------------------------------------------------

void *kmalloc(size_t size, size_t align, bool zero, int node, unsigned debug_flags) {
    bootstrap();
    if (node != kAnyNode &&
        (node < 0 || static_cast<unsigned>(node) >= page_allocator::global().nodes()))
        return nullptr;
    // The kernel's __do_kmalloc_node: the block is the size after a header of the minimum
    // alignment, aligned to that minimum (align_offset: the block after the header is what is
    // aligned), a power-of-two size to itself.
    const size_t asked = align;
    if ((size & (size - 1)) == 0 && size > align) align = size;
    size_t bytes = size + kHeader;
    // A 16-byte alignment asked for (the malloc family's; the kernel's kmalloc asks kMinalign):
    // the block is rounded up so that the next one can start where it ends, still aligned.
    // Without it, every block of an odd size leaves an unusable hole in front of the next one,
    // and the pages fill with holes that every search walks. Its header holds the rounded size.
    if (asked > kMinalign && align == 16) bytes = (bytes + 15) & ~size_t{15};
    const bool debug = debug_flags != 0, tracked = (debug_flags & kStoreUser) != 0;
    if (debug) bytes = kLeftRedZone + debug_block_bytes(size) + (tracked ? debug::kBlockTracks : 0);
    const size_t before = debug ? kLeftRedZone + kHeader : kHeader; // before the object
    void *b = block(bytes, align, before, node);
    if (!b) return nullptr;
    char *p = static_cast<char *>(b) + before;
    auto *h = reinterpret_cast<kmalloc_header *>(p - kHeader);
    if (debug) {
        // The size asked for: everything after it is red zone.
        h->size = static_cast<uint32_t>(size);
        h->check = check_of(p, h->size) ^ debug_mark(tracked, debug::origin::plain);
        debug::block_alloc(&g_arena, p, size, debug_block_bytes(size) - kHeader - size,
                           left_red_zone(h), kLeftRedZone, zero,
                           tracked ? tracks_of_block(h) : nullptr);
        return p;
    }
    // The size asked for (the kernel's *m = size), or a malloc block's rounded size.
    h->size = static_cast<uint32_t>(bytes - kHeader);
    h->check = check_of(p, h->size);
    if (zero) memset(p, 0, size);
    return p;
}

void note_origin(const slob_cache *s, void *p, debug::origin o) {
    if (!s->arena) return;
    const header_info hi = header_of(p);
    if (hi.kind != header_kind::debug) return; // plain blocks keep no origin
    auto *h = reinterpret_cast<kmalloc_header *>(static_cast<char *>(p) - kHeader);
    h->check = check_of(p, h->size) ^ debug_mark(hi.tracked, o);
}

bool report_if_freed(const slob_cache *s, const void *p, const char *op) {
    if (!s->arena) return false;
    const header_info hi = header_of(p);
    if (hi.kind != header_kind::quarantined) return false;
    auto *h = reinterpret_cast<kmalloc_header *>(const_cast<char *>(static_cast<const char *>(p)) -
                                                 kHeader);
    debug::block_use_after_free(&g_arena, const_cast<char *>(static_cast<const char *>(p)), h->size,
                                op, hi.tracked ? tracks_of_block(h) : nullptr);
    return true;
}

size_t usable_size(const slob_cache *s, const void *p) {
    if (!s->arena) return s->size;
    const header_kind k = header_of(p).kind;
    if (k != header_kind::plain && k != header_kind::debug) return 0;
    const size_t size =
        reinterpret_cast<const kmalloc_header *>(static_cast<const char *>(p) - kHeader)->size;
    // The kernel's __ksize: the header's size in whole SLOB units. A debugged block: the size
    // asked for (its red zone follows).
    return k == header_kind::plain ? units_of(size) * kUnit : size;
}

// ---- statistics -----------------------------------------------------------------------------

void statistics(slob_cache *s, design_stats *out) {
    out->nr_counters = NR_STATS;
    out->counter_names = kStatNames;
    platform::lock_guard guard(lock());
    for (unsigned i = 0; i < NR_STATS; ++i) out->counters[i] = s->stats[i].get();
    // Every SLOB allocation and free takes the one lock and searches or merges: all slow.
    out->allocs = out->alloc_slow = out->counters[ALLOCS];
    out->frees = out->free_slow = out->counters[FREES];
    if (s->arena) {
        page_walk w;
        walk_lists(&w);
        uint64_t pages = s->stats[NEW_PAGES].get() - s->stats[PAGES_FREED].get();
        out->counters[PAGES_SMALL] = w.per_list[0];
        out->counters[PAGES_MEDIUM] = w.per_list[1];
        out->counters[PAGES_LARGE] = w.per_list[2];
        out->counters[PAGES_FULL] = pages > w.listed ? pages - w.listed : 0;
        out->counters[FREE_UNITS] = w.free_units;
        (void)pages; // in the counters: the caches' lines count the pages their objects fill
        return;
    }
    // A cache's "slabs": the pages its live objects fill (whole pages each for objects of a
    // page or more), so that slabs x objects per slab bounds its live objects.
    out->slabs = big(s) ? s->live : (s->live + s->objects - 1) / s->objects;
    out->objects = out->slabs * s->objects;
    out->active_objects = s->live;
}

// ---- the invariant checker ------------------------------------------------------------------

namespace {

struct checker {
    text_out out;
    unsigned problems = 0;
    uint64_t pages = 0, free_units = 0;
    void fail(const char *what, const void *where) {
        if (problems++ < 8) out.printf("slob: %s (%p)\n", what, where);
    }
    void check_page(page *pg) {
        ++pages;
        auto *base = static_cast<slobidx *>(page_to_virt(pg));
        auto units = static_cast<unsigned>(pg->priv[1]);
        auto *s = reinterpret_cast<slobidx *>(pg->priv[0]);
        if (units == 0) {
            if (s) fail("a full page keeps a free list", base);
            if (pg->aux & 0xff) fail("a full page is on a list", base);
            return;
        }
        if (!(pg->aux & 0xff)) fail("a page with free units is on no list", base);
        if (units >= kPageUnits) fail("a page all free was kept", base);
        unsigned seen = 0, blocks = 0, largest = 0;
        slobidx *prev_end = nullptr;
        while (s && blocks++ <= kPageUnits) {
            if (s < base || s >= base + kPageUnits) {
                fail("a free block outside its page", s);
                return;
            }
            int u = s[0] > 0 ? s[0] : 1;
            slobidx *next = base + (s[0] < 0 ? -s[0] : s[1]);
            if (prev_end && s < prev_end)
                fail("free blocks out of address order or overlapping", s);
            if (prev_end && s == prev_end) fail("two free blocks side by side (not merged)", s);
            seen += static_cast<unsigned>(u);
            if (static_cast<unsigned>(u) > largest) largest = static_cast<unsigned>(u);
            prev_end = s + u;
            if (next <= s || next > base + kPageUnits) {
                fail("a free block's next offset goes backwards or past the page", s);
                return;
            }
            if (next == base + kPageUnits) break;
            s = next;
        }
        if (seen != units) fail("a page's free units differ from its free blocks", base);
        if ((pg->aux >> 8) < largest)
            fail("a page's largest-block bound is below its largest free block", base);
        free_units += seen;
    }
};

} // namespace

unsigned validate(slob_cache *, char *report, size_t size) {
    checker ck{text_out{report, size}};
    if (report && size) report[0] = '\0';
    platform::lock_guard guard(lock());
    for_each_slab_in_arena(
        &g_arena, [](page *pg, void *arg) { static_cast<checker *>(arg)->check_page(pg); }, &ck);
    page_walk w;
    walk_lists(&w);
    if (w.free_units != ck.free_units)
        ck.fail("the lists' free units differ from the pages'", &g_arena);
    uint64_t pages = g_arena.stats[NEW_PAGES].get() - g_arena.stats[PAGES_FREED].get();
    if (pages != ck.pages) ck.fail("the page count differs from the pages in the arena", &g_arena);
    return ck.problems;
}

// ---- fork: the one lock, under the cache registry (the arena is registered) ----------------

void fork_cache(slob_cache *s, fork_op op) {
    if (s->arena) apply_fork_op(lock(), op);
}

} // namespace slabkit::slob
