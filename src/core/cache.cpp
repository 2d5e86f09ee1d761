// cache.cpp - argument checks, object layout, slab set-up and the cache registry.
#include "core/cache.hpp"

#include "base/bits.hpp"

#include "base/intrusive_list.hpp"
#include "base/name_text.hpp"
#include "core/debug.hpp"
#include "core/free_key.hpp"
#include "core/report.hpp"
#include "page/page_allocator.hpp"
#include "platform/platform.hpp"

#include <cstdio>
#include <cstring>

namespace slabkit {

namespace {
const char *const kDesignNames[kNrDesigns] = {
#define SLABKIT_DESIGN_NAME(name) #name,
    SLABKIT_DESIGN_LIST(SLABKIT_DESIGN_NAME)
#undef SLABKIT_DESIGN_NAME
};
// "slqb slub": the names joined by spaces.
constexpr char kDesignNamesJoined[] =
#define SLABKIT_DESIGN_JOINED(name) " " #name
    SLABKIT_DESIGN_LIST(SLABKIT_DESIGN_JOINED)
#undef SLABKIT_DESIGN_JOINED
    ;

constexpr bool is_pow2(size_t v) {
    return v && !(v & (v - 1));
}
unsigned fls_size(size_t v) { // bits needed to hold v: fls(0) = 0, fls(1) = 1, fls(4096) = 13
    return v ? 64 - static_cast<unsigned>(__builtin_clzll(v)) : 0;
}
} // namespace

const char *design_name(design d) {
    unsigned i = static_cast<unsigned>(d);
    return i < kNrDesigns ? kDesignNames[i] : "?";
}

const char *design_names() {
    return kDesignNamesJoined + 1; // past the leading space
}

void internal_cache_name(design d, const char *base, char *buf, size_t size) {
    name_text name(buf, size);
    if (d != process_design()) name.add(design_name(d)).add("-");
    name.add(base);
}

bool parse_design(const char *name, design *out) {
    if (!name) return false;
    for (unsigned i = 0; i < kNrDesigns; ++i) {
        if (strcmp(name, kDesignNames[i]) == 0) {
            *out = static_cast<design>(i);
            return true;
        }
    }
    return false;
}

namespace detail {
std::atomic<int> g_process_design{-1};
std::atomic<uint8_t> g_design_hint{static_cast<uint8_t>(design::slqb)};

design resolve_process_design() {
    const char *name = platform::env("SLABKIT_ALLOCATOR");
    design d = design::slqb;
    if (name && *name && !parse_design(name, &d)) {
        platform::exit_with_error(1,
                                  "slabkit: SLABKIT_ALLOCATOR=%s is not a design of this build "
                                  "(designs: %s)\n",
                                  name, design_names());
    }
    // Every caller computes the same answer, so racing first calls need no lock.
    g_design_hint.store(static_cast<uint8_t>(d), std::memory_order_relaxed);
    g_process_design.store(static_cast<int>(d), std::memory_order_relaxed);
    return d;
}

// At load, so that a bad SLABKIT_ALLOCATOR ends the process before main rather than at some
// first allocation.
__attribute__((constructor(101))) void read_process_design_at_load() {
    (void)process_design();
}
} // namespace detail

const char *cache_args_invalid(const cache_args &a) {
    if (!a.name) return "the name is NULL";
    size_t len = strlen(a.name);
    if (len == 0) return "the name is empty";
    if (len >= kNameMax) return "the name is longer than 31 characters";
    for (size_t i = 0; i < len; ++i) {
        unsigned char ch = static_cast<unsigned char>(a.name[i]);
        if (ch <= ' ' || ch >= 0x7f) return "the name has a space or a non-printable character";
    }
    if (a.size == 0) return "the object size is 0";
    if (a.size > kMaxObjectSize) return "the object size is larger than 4 MiB";
    if (a.align != 0 && !is_pow2(a.align)) return "the alignment is not a power of two";
    if (a.align > kPageSize) return "the alignment is larger than the page size (4096)";
    if (a.flags & ~static_cast<unsigned>(kKnownFlags)) return "unknown flags";
    if (a.sheaf_capacity > kMaxSheafCapacity) return "the sheaf capacity is larger than 32768";
    return nullptr;
}

void describe_cache(cache *c, const cache_args &args, design d) {
    c->object_size = static_cast<uint32_t>(args.size);
    c->align = static_cast<uint32_t>(args.align);
    c->flags = args.flags;
    c->ctor = args.ctor;
    c->kind = d;
    c->debug = (args.flags & kDebugFlags) != 0;
    strncpy(c->name, args.name, kNameMax - 1);
    c->freelist_secret = hardening::cache_secret(c);
    const unsigned mode = hardening::init_mode();
    if (!c->debug && !c->ctor)
        c->init.store(
            static_cast<uint8_t>((hardening::zero_on_alloc(mode) ? hardening::kInitOnAlloc : 0) |
                                 (mode & hardening::kInitOnFree)));
}

void compute_object_layout(cache *c, freeptr_place place) {
    size_t align = c->align < kMinAlign ? kMinAlign : c->align;
    if (c->flags & kHwcacheAlign) {
        // A fraction of a cache line: small objects share lines without straddling them.
        size_t line = kCacheLine;
        while (c->object_size <= line / 2 && line > kMinAlign) line /= 2;
        if (line > align) align = line;
    }
    size_t size =
        align_up(c->object_size < sizeof(void *) ? sizeof(void *) : c->object_size, sizeof(void *));
    if (c->flags & kDebugFlags) {
        // Red zones, state and tracks around the object (core/debug.hpp), for every design.
        debug::compute_layout(c, align);
        size = c->size;
    } else if (place == freeptr_place::none) {
        c->offset = 0;
    } else if (c->ctor || (c->flags & kPoison)) {
        // Constructed state must survive while the object is free (and a poisoned free object
        // is all poison): the link goes after it.
        c->offset = static_cast<uint32_t>(size);
        size += sizeof(void *);
    } else if (place == freeptr_place::middle) {
        c->offset = static_cast<uint32_t>((c->object_size / 2) & ~(sizeof(void *) - 1));
    } else {
        c->offset = 0;
    }
    if (!c->debug) c->inuse = static_cast<uint32_t>(size);
    c->align = static_cast<uint32_t>(align);
    set_slot_size(c, align_up(size, align));
}

void set_slot_size(cache *c, size_t size) {
    c->size = static_cast<uint32_t>(size);
    // size = odd << shift; object_index divides by multiplying with odd's inverse mod 2^64.
    unsigned shift = static_cast<unsigned>(__builtin_ctzll(size));
    uint64_t odd = size >> shift;
    uint64_t inv = odd; // Newton's iteration doubles the correct low bits each step
    for (int i = 0; i < 6; ++i) inv *= 2 - odd * inv;
    c->size_shift = static_cast<uint8_t>(shift);
    c->size_odd_inverse = inv;
    c->size_limit = UINT64_MAX / size;
}

unsigned order_by_waste(size_t size, const order_policy &policy) {
    // The first order (from the smallest that holds one object) whose waste is within policy;
    // failing that up to max_order, the smallest order that holds min_objects.
    unsigned start = size <= kPageSize ? 0 : fls_size(size - 1) - kPageShift;
    if (start < policy.min_order) start = policy.min_order;
    for (unsigned o = start; o <= policy.max_order && o <= kMaxOrder; ++o) {
        size_t slab = kPageSize << o;
        size_t objects = slab / size;
        if (objects < policy.min_objects || objects == 0) continue;
        if ((slab - objects * size) * policy.waste_den <= slab) return o;
    }
    for (unsigned o = start; o <= kMaxOrder; ++o) {
        size_t objects = (kPageSize << o) / size;
        if (objects >= policy.min_objects && objects > 0) return o;
    }
    return kMaxOrder; // min_objects unreachable: one per max slab
}

void apply_order(cache *c, unsigned order) {
    c->order = static_cast<uint8_t>(order);
    size_t slab = kPageSize << order;
    c->objects = static_cast<uint32_t>(slab / c->size);
    c->colour_off = static_cast<uint32_t>(c->align > kCacheLine ? c->align : kCacheLine);
    c->colour_range = static_cast<uint32_t>(slab - uint64_t{c->objects} * c->size);
}

void compute_layout(cache *c, const order_policy &policy) {
    compute_object_layout(c, freeptr_place::start);
    apply_order(c, order_by_waste(c->size, policy));
}

bool set_slab_order(cache *c, unsigned order, uint64_t slabs_held, const char **why) {
    if (slabs_held) {
        *why = "the cache holds slabs: its order can change only while it is empty (shrink it "
               "first)";
        return false;
    }
    if (order > kMaxOrder) {
        *why = "the order is above the page allocator's largest (10)";
        return false;
    }
    size_t slab = kPageSize << order;
    if (slab / c->size == 0) {
        *why = "a slab of that order cannot hold one object";
        return false;
    }
    apply_order(c, order);
    return true;
}

page *checked_slab_page(cache *c, const void *obj) {
    if (!obj) return nullptr;
    page *pg = slab_page_of(obj);
    if (pg && slab_cache(pg) == c &&
        (c->debug ? debug::is_object(c, pg, obj) : is_object_start(c, pg, obj)))
        return pg;
    char what[256];
    report_bad_free("kmem_cache_free", c, obj, diagnose_free(c, obj, what, sizeof what));
    return nullptr;
}

void mark_slab(cache *c, page *pg, unsigned colour) {
    pg->owner.store(c, std::memory_order_relaxed);
    pg->priv[2] = colour;
    pg->aux = 0;
    if (c->debug)
        debug::init_slab_objects(c, static_cast<char *>(page_to_virt(pg)) + colour, c->objects);
    pg->set_state(pg->flags() | PG_slab);
}

void init_slab(cache *c, page *pg, unsigned colour, uintptr_t priv1) {
    pg->owner.store(c, std::memory_order_relaxed);
    pg->priv[1] = priv1;
    pg->priv[2] = colour;
    pg->aux = 0;
    char *base = static_cast<char *>(page_to_virt(pg)) + colour;
    if (c->ctor) {
        char *obj = base;
        for (uint32_t i = 0; i < c->objects; ++i, obj += c->size) c->ctor(obj + c->debug_offset);
    }
    // Address order, or a random one (hardening.hpp): then the next allocations are not each
    // other's neighbours.
    char *first = nullptr;
    char *last = nullptr;
    // A checked class's free blocks all carry their key (free_key.hpp), a new slab's too.
    const bool keyed = free_key::keys_new_slabs(c);
    hardening::object_order(c->objects, hardening::new_slab_seed()).for_each([&](uint32_t i) {
        char *obj = base + uint64_t{i} * c->size;
        if (keyed) free_key::set(c, obj);
        if (last)
            set_freepointer(c, last, obj);
        else
            first = obj;
        last = obj;
    });
    set_freepointer(c, last, nullptr);
    if (c->debug) debug::init_slab_objects(c, base, c->objects);
    set_slab_freelist(pg, first);
    pg->set_state(pg->flags() | PG_slab);
}

void clear_slab(page *pg) {
    pg->set_state(pg->flags() & ~static_cast<uint32_t>(PG_slab));
    pg->owner.store(nullptr, std::memory_order_relaxed);
    pg->priv[0] = pg->priv[1] = pg->priv[2] = 0;
    pg->aux = 0;
    pg->next = pg->prev = nullptr;
}

uint32_t count_slab_free(const cache *c, const page *pg) {
    uint32_t n = 0;
    for (void *o = slab_freelist(pg); o && n <= c->objects; o = get_freepointer(c, o)) ++n;
    return n;
}

void report_leaked_object(const cache *c, void *slot) {
    if (!c->debug) {
        report("kmem_cache_destroy(%s): object %p is still allocated", c->name, slot);
        return;
    }
    debug::report_leak(c, slot, "kmem_cache_destroy");
}

uint64_t report_slab_leaks(const cache *c, const page *pg) {
    // A bitmap of the free objects, a window of 8192 objects at a time (a slab of the largest
    // order holds up to 512 Ki objects of 8 bytes: one walk of its freelist per window), then
    // every object of the window not in it is reported.
    constexpr uint32_t kWindow = 8192;
    uint64_t free_map[kWindow / 64];
    const uint32_t objects = c->objects;
    uint64_t leaked = 0;
    for (uint32_t first = 0; first < objects; first += kWindow) {
        for (uint64_t &w : free_map) w = 0;
        uint32_t seen = 0;
        for (void *o = slab_freelist(pg); o && seen <= objects; o = get_freepointer(c, o), ++seen) {
            long idx = c->object_index(reinterpret_cast<uintptr_t>(o) - slab_base(pg));
            if (idx < 0 || static_cast<uint32_t>(idx) < first ||
                static_cast<uint32_t>(idx) - first >= kWindow)
                continue;
            uint32_t bit = static_cast<uint32_t>(idx) - first;
            free_map[bit / 64] |= uint64_t{1} << (bit % 64);
        }
        for (uint32_t i = first; i < objects && i - first < kWindow; ++i) {
            uint32_t bit = i - first;
            if (free_map[bit / 64] >> (bit % 64) & 1) continue;
            report_leaked_object(c,
                                 reinterpret_cast<void *>(slab_base(pg) + uint64_t{i} * c->size));
            ++leaked;
        }
    }
    return leaked;
}

namespace {
struct arena_walk {
    const cache *c;
    void (*fn)(page *, void *);
    void *arg;
};
} // namespace

void for_each_slab_in_arena(const cache *c, void (*fn)(page *pg, void *arg), void *arg) {
    arena_walk w{c, fn, arg};
    page_allocator::global().for_each_allocated(
        [](page *pg, void *wa) {
            const arena_walk &walk = *static_cast<arena_walk *>(wa);
            if ((pg->flags() & PG_slab) && slab_cache(pg) == walk.c) walk.fn(pg, walk.arg);
        },
        &w);
}

// ---- registry -----------------------------------------------------------------------------

namespace {
platform::mutex g_registry_lock;
intrusive_list<cache, &cache::reg_next, &cache::reg_prev> g_caches; // under g_registry_lock
} // namespace

namespace registry {

platform::mutex &lock() {
    return g_registry_lock;
}

bool add(cache *c, const char **why) {
    platform::lock_guard guard(g_registry_lock);
    for (cache *it = g_caches.first; it; it = it->reg_next) {
        if (strcmp(it->name, c->name) == 0) {
            if (why) *why = "a live cache already has this name";
            return false;
        }
    }
    g_caches.push_back(c);
    c->registered = true;
    return true;
}

void add_internal(cache *c) {
    platform::lock_guard guard(g_registry_lock);
    g_caches.push_back(c);
    c->registered = true;
}

void remove(cache *c) {
    platform::lock_guard guard(g_registry_lock);
    if (!c->registered) return;
    g_caches.remove(c);
    c->registered = false;
}

void for_each(void (*fn)(cache *c, void *arg), void *arg) {
    platform::lock_guard guard(g_registry_lock);
    for_each_locked(fn, arg);
}

void for_each_locked(void (*fn)(cache *c, void *arg), void *arg) {
    for (cache *it = g_caches.first; it; it = it->reg_next) fn(it, arg);
}

size_t count() {
    platform::lock_guard guard(g_registry_lock);
    return g_caches.count;
}

} // namespace registry
} // namespace slabkit
