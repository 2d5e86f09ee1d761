// c_api.cpp - the C API of include/slabkit/slabkit.h over the designs and kmalloc.
//
// The process's design is read from SLABKIT_ALLOCATOR when the library loads (and, should a
// call come before that, at the first call); an unknown name ends the process with a message.
// Calls on a cache dispatch on the cache's own design, so caches of several designs can live in
// one process (slabkit_cache_create_in).
#include "api/cache_handle.hpp"
#include "api/leak_report.hpp"
#include "core/cache.hpp"
#include "core/debug.hpp"
#include "core/failslab.hpp"
#include "core/hardening.hpp"
#include "core/report.hpp"
#include "designs/designs.hpp"
#include "kmalloc/kmalloc.hpp"
#include "kmalloc/large.hpp"
#include "page/page_allocator.hpp"
#include "platform/platform.hpp"
#include "slabkit/slabkit.h"

#include <cstdio>
#include <cstring>

using namespace slabkit;

namespace {

using api::to_cache;
using api::zeroing;

// A cache of design d, or nullptr with the reason reported (SLAB_PANIC: the process ends).
slabkit_cache *create_in(design d, const cache_args &a) {
    const char *why = nullptr;
    cache *c = designs::create(d, a, &why);
    if (!c) {
        char capacity[40] = "";
        if (a.sheaf_capacity)
            snprintf(capacity, sizeof capacity, ", sheaf_capacity %u", a.sheaf_capacity);
        report("kmem_cache_create(%s, size %zu, align %zu, flags %#x%s): %s",
               a.name ? a.name : "(null)", a.size, a.align, a.flags, capacity,
               why ? why : "failed");
        if (a.flags & kPanic) platform::fatal("slabkit: SLAB_PANIC cache could not be created\n");
        return nullptr;
    }
    return reinterpret_cast<slabkit_cache *>(c);
}

// The design a name names; false, reported naming the cache, for a name no design has.
bool named_design(const char *design_name_, const char *name, design *d) {
    if (parse_design(design_name_, d)) return true;
    report("kmem_cache_create(%s): unknown design '%s' (designs: %s)", name ? name : "(null)",
           design_name_ ? design_name_ : "(null)", design_names());
    return false;
}

// Init on free (core/hardening.hpp): the object checked as one of s's (a bad free is reported
// before anything is written), zeroed, then freed. SLOB zeroes in its own free, which knows its
// blocks.
template <class Ops, class S>
SLABKIT_NOINLINE void free_zeroed(Ops ops, S *s, void *obj) {
    if constexpr (own_kmalloc_v<Ops>) {
        ops.free(s, obj);
    } else if (page *pg = checked_slab_page(s, obj)) {
        memset(obj, 0, s->object_size);
        ops.free_to_slab(s, pg, obj);
    }
}

// An allocation that is zeroing (asked for, or init on alloc) or from a cache with fault
// injection armed: out of line, so that the plain path stays the design's pop.
template <class Ops, class S>
SLABKIT_NOINLINE void *alloc_special(Ops ops, S *s, unsigned gfp) {
    if (failslab::fails(s, init_bits(s), s->object_size)) return nullptr;
    return ops.alloc(s, zeroing(s, gfp));
}

SLABKIT_ALWAYS_INLINE bool zeroing_free(const cache *c) {
    return (init_bits(c) & hardening::kInitOnFree) != 0;
}

// f(ops, s) on the cache's own design (designs::visit).
template <class F>
SLABKIT_ALWAYS_INLINE decltype(auto) on(slabkit_cache *c, F &&f) {
    return designs::visit(to_cache(c), static_cast<F &&>(f));
}

} // namespace

extern "C" {

slabkit_cache *slabkit_cache_create(const char *name, size_t size, size_t align, unsigned flags,
                                    void (*ctor)(void *)) {
    return create_in(process_design(), cache_args{name, size, align, flags, ctor});
}

slabkit_cache *slabkit_cache_create_in(const char *design_name_, const char *name, size_t size,
                                       size_t align, unsigned flags, void (*ctor)(void *)) {
    design d;
    if (!named_design(design_name_, name, &d)) return nullptr;
    return create_in(d, cache_args{name, size, align, flags, ctor});
}

slabkit_cache *slabkit_cache_create_args(const char *design_name_, const char *name, size_t size,
                                         const struct slabkit_cache_args *args, unsigned flags) {
    design d = process_design();
    if (design_name_ && !named_design(design_name_, name, &d)) return nullptr;
    cache_args a{name, size, args ? args->align : 0, flags, args ? args->ctor : nullptr};
    a.sheaf_capacity = args ? args->sheaf_capacity : 0;
    return create_in(d, a);
}

// The two hottest entry points start on a cache line: their designs' branches then sit where
// they sit in every build. Unaligned, a 32-byte shift of the code before them (any change
// elsewhere in the library) moved SLUB's pair from 3.2 to 4.1 ns (slab_bench, 256 B).
SLABKIT_HOT_ENTRY void *slabkit_cache_alloc(slabkit_cache *c, unsigned gfp) {
    return on(c, [&](auto ops, auto *s) {
        // Two tests and a constant for the design: its inline pop stays the whole fast path.
        // (Any init bit - init on alloc or free, fault injection - goes to the first call.)
        if (SLABKIT_UNLIKELY((gfp & SLABKIT_GFP_ZERO) | init_bits(s)))
            return alloc_special(ops, s, gfp);
        return ops.alloc(s, false);
    });
}

// The calls include/slabkit/inline.h makes when its inline paths do not serve: the same
// functions under the interface's names (aliases cost no jump).
void *slabkit_inline_v1_alloc(slabkit_cache *c, unsigned gfp)
    __attribute__((alias("slabkit_cache_alloc")));

void *slabkit_cache_alloc_node(slabkit_cache *c, unsigned gfp, int node) {
    return on(c, [&](auto ops, auto *s) -> void * {
        if (failslab::fails(s, init_bits(s), s->object_size)) return nullptr;
        return ops.alloc_node(s, node, zeroing(s, gfp));
    });
}

SLABKIT_HOT_ENTRY void slabkit_cache_free(slabkit_cache *c, void *obj) {
    on(c, [&](auto ops, auto *s) {
        if (SLABKIT_UNLIKELY(zeroing_free(s))) return free_zeroed(ops, s, obj);
        ops.free(s, obj);
    });
}

void slabkit_inline_v1_free(slabkit_cache *c, void *obj)
    __attribute__((alias("slabkit_cache_free")));

size_t slabkit_cache_alloc_bulk(slabkit_cache *c, unsigned gfp, size_t n, void **p) {
    return on(c, [&](auto ops, auto *s) -> size_t {
        for (size_t i = 0; i < n; ++i) {
            p[i] = failslab::fails(s, init_bits(s), s->object_size) ? nullptr
                                                                    : ops.alloc(s, zeroing(s, gfp));
            if (SLABKIT_UNLIKELY(!p[i])) {
                // All or nothing, as the kernel's bulk allocation.
                for (size_t k = 0; k < i; ++k) ops.free(s, p[k]);
                return 0;
            }
        }
        return n;
    });
}

void slabkit_cache_free_bulk(slabkit_cache *c, size_t n, void **p) {
    on(c, [&](auto ops, auto *s) {
        for (size_t i = 0; i < n; ++i) {
            if (SLABKIT_UNLIKELY(zeroing_free(s)))
                free_zeroed(ops, s, p[i]);
            else
                ops.free(s, p[i]);
        }
    });
}

size_t slabkit_cache_shrink(slabkit_cache *c) {
    return designs::shrink(to_cache(c));
}

void slabkit_cache_destroy(slabkit_cache *c) {
    designs::destroy(to_cache(c));
}

const char *slabkit_cache_name(const slabkit_cache *c) {
    return to_cache(c)->name;
}

int slabkit_cache_tune(slabkit_cache *c, const char *tunable, unsigned long value) {
    const char *why = nullptr;
    bool ok = false;
    if (!tunable)
        why = "no tunable named";
    else
        ok = on(c, [&](auto ops, auto *s) { return ops.tune(s, tunable, value, &why); });
    if (ok) return 0;
    report("slabkit_cache_tune(%s, %s, %lu): %s", to_cache(c)->name, tunable ? tunable : "(null)",
           value, why ? why : "refused");
    return -1;
}

size_t slabkit_cache_object_size(const slabkit_cache *c) {
    return to_cache(c)->object_size;
}

SLABKIT_HOT_ENTRY void *slabkit_kmalloc(size_t size, unsigned gfp) {
    return kmalloc::alloc(process_design(), size, gfp & SLABKIT_GFP_ZERO, kAnyNode);
}

void *slabkit_kmalloc_node(size_t size, unsigned gfp, int node) {
    return kmalloc::alloc(process_design(), size, gfp & SLABKIT_GFP_ZERO, node);
}

void *slabkit_kzalloc(size_t size, unsigned gfp) {
    return kmalloc::alloc(process_design(), size, true, kAnyNode);
    (void)gfp;
}

void *slabkit_kcalloc(size_t n, size_t size, unsigned gfp) {
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) return nullptr;
    (void)gfp;
    return kmalloc::alloc(process_design(), total, true, kAnyNode);
}

void *slabkit_krealloc(void *p, size_t size, unsigned gfp) {
    return kmalloc::realloc(process_design(), p, size, gfp & SLABKIT_GFP_ZERO);
}

SLABKIT_HOT_ENTRY void slabkit_kfree(void *p) {
    kmalloc::free(p);
}

size_t slabkit_ksize(const void *p) {
    return kmalloc::usable_size(p);
}

size_t slabkit_cache_count(void) {
    designs::bootstrap_process_design();
    return registry::count();
}

const char *slabkit_allocator(void) {
    return design_name(process_design());
}

const char *slabkit_designs(void) {
    return design_names();
}

int slabkit_set_debug(const char *spec, const char **why) {
    const char *reason = nullptr;
    if (debug::set_spec(spec, &reason)) return 0;
    if (why) *why = reason;
    return -1;
}

long slabkit_scan_leaks(uint64_t min_age_ms, char *buf, size_t size) {
    if (!buf || size == 0) return -1;
    char why[160];
    uint64_t leaked = 0;
    if (api::run_leak_scan(api::leak_format::text, min_age_ms, buf, size, why, sizeof why,
                           &leaked) < 0) {
        snprintf(buf, size, "the leak scan could not run: %s", why);
        return -1;
    }
    return static_cast<long>(leaked);
}

int slabkit_set_failslab(const char *spec, const char *caches, const char **why) {
    return failslab::set(spec, caches, why) ? 0 : -1;
}

uint64_t slabkit_failslab_failures(const slabkit_cache *c) {
    if (c) return failslab::failures_of(const_cast<cache *>(to_cache(c)));
    failslab::status st;
    failslab::get_status(&st);
    return st.failures;
}

unsigned slabkit_cache_validate(slabkit_cache *c, char *buf, size_t size) {
    if (buf && size) buf[0] = '\0';
    if (!c) return 0;
    return designs::validate(to_cache(c), buf, size);
}

unsigned slabkit_validate(char *buf, size_t size) {
    if (buf && size) buf[0] = '\0';
    designs::bootstrap_process_design();
    struct walk {
        char *buf;
        size_t size;
        unsigned problems;
    } w{buf, size, 0};
    registry::for_each(
        [](cache *c, void *arg) {
            auto *state = static_cast<walk *>(arg);
            char first[256] = "";
            unsigned n = designs::validate(c, first, sizeof first);
            if (n && state->problems == 0 && state->buf && state->size)
                snprintf(state->buf, state->size, "%s: %s", c->name, first);
            state->problems += n;
        },
        &w);
    return w.problems;
}

uint64_t slabkit_errors(void) {
    return slab_errors();
}

void slabkit_set_error_hook(void (*hook)(const char *report)) {
    set_error_hook(hook);
}

void slabkit_trim(void) {
    designs::trim_all();
    page_allocator::global().purge();
    large::release_retained(0, true);
}

} // extern "C"
