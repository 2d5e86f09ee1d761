// c_api.cpp - the C API of include/slabkit/slabkit.h over the designs and kmalloc.
//
// The process's design is read from SLABKIT_ALLOCATOR when the library loads (and, should a
// call come before that, at the first call); an unknown name ends the process with a message.
// Calls on a cache dispatch on the cache's own design, so caches of several designs can live in
// one process (slabkit_cache_create_in).
#include "core/cache.hpp"
#include "core/report.hpp"
#include "core/slabinfo.hpp"
#include "kmalloc/kmalloc.hpp"
#include "kmalloc/large.hpp"
#include "page/page_allocator.hpp"
#include "platform/platform.hpp"
#include "slabkit/slabkit.h"
#include "slqb/slqb.hpp"

#include <cstdio>
#include <cstring>

using namespace slabkit;

namespace {

// The process's design: the default until the load-time constructor below has read the
// environment. Calls made before it (from other libraries' constructors) get the default; kfree
// and the cache calls dispatch on each object's own cache, so such early objects stay valid.
std::atomic<int> g_design{static_cast<int>(design::slqb)};

__attribute__((constructor(101))) void read_design_at_load() {
    const char *name = platform::env("SLABKIT_ALLOCATOR");
    design d = design::slqb;
    if (name && *name && !parse_design(name, &d)) {
        platform::exit_with_error(1,
                                  "slabkit: SLABKIT_ALLOCATOR=%s is not a design of this build "
                                  "(designs: %s)\n",
                                  name, slabkit_designs());
    }
    g_design.store(static_cast<int>(d), std::memory_order_relaxed);
}

SLABKIT_ALWAYS_INLINE design process_design() {
    return static_cast<design>(g_design.load(std::memory_order_relaxed));
}

SLABKIT_ALWAYS_INLINE cache *to_cache(slabkit_cache *c) {
    return reinterpret_cast<cache *>(c);
}
SLABKIT_ALWAYS_INLINE const cache *to_cache(const slabkit_cache *c) {
    return reinterpret_cast<const cache *>(c);
}
SLABKIT_ALWAYS_INLINE slqb::slqb_cache *as_slqb(slabkit_cache *c) {
    return static_cast<slqb::slqb_cache *>(to_cache(c));
}

slabkit_cache *create_in(design d, const char *name, size_t size, size_t align, unsigned flags,
                         void (*ctor)(void *)) {
    const char *why = nullptr;
    cache *c = nullptr;
    switch (d) {
    case design::slqb:
        c = slqb::create(cache_args{name, size, align, flags, ctor}, &why);
        break;
    }
    if (!c) {
        report("kmem_cache_create(%s, size %zu, align %zu, flags %#x): %s", name ? name : "(null)",
               size, align, flags, why ? why : "failed");
        if (flags & kPanic) platform::fatal("slabkit: SLAB_PANIC cache could not be created\n");
        return nullptr;
    }
    return reinterpret_cast<slabkit_cache *>(c);
}

void fill_stats(const cache *c, slabkit_cache_stats *out) {
    memset(out, 0, sizeof *out);
    memcpy(out->name, c->name, sizeof out->name); // both kNameMax, NUL-terminated
    static_assert(sizeof out->name == kNameMax);
    snprintf(out->design, sizeof out->design, "%s", design_name(c->kind));
    out->object_size = c->object_size;
    out->slot_size = c->size;
    out->align = c->align;
    out->order = c->order;
    out->objects_per_slab = c->objects;
    switch (c->kind) {
    case design::slqb: {
        auto *s = static_cast<slqb::slqb_cache *>(const_cast<cache *>(c));
        slqb::stats_totals t;
        slqb::gather_stats(s, &t);
        out->slabs = t.slabs;
        out->objects = t.slabs * c->objects;
        out->active_objects = t.active_objects;
        out->queued_objects = t.queued;
        out->hiwater = s->hiwater;
        out->freebatch = s->freebatch;
        out->nr_counters = slqb::NR_STATS;
        for (unsigned i = 0; i < slqb::NR_STATS; ++i) {
            out->counter_names[i] = slqb::kStatNames[i];
            out->counters[i] = t.counters[i];
        }
        break;
    }
    }
}

struct stats_walk {
    slabkit_cache_stats *out;
    size_t max;
    size_t n;
};

} // namespace

extern "C" {

slabkit_cache *slabkit_cache_create(const char *name, size_t size, size_t align, unsigned flags,
                                    void (*ctor)(void *)) {
    return create_in(process_design(), name, size, align, flags, ctor);
}

slabkit_cache *slabkit_cache_create_in(const char *design_name_, const char *name, size_t size,
                                       size_t align, unsigned flags, void (*ctor)(void *)) {
    design d;
    if (!parse_design(design_name_, &d)) {
        report("kmem_cache_create(%s): unknown design '%s' (designs: slqb)", name ? name : "(null)",
               design_name_ ? design_name_ : "(null)");
        return nullptr;
    }
    return create_in(d, name, size, align, flags, ctor);
}

void *slabkit_cache_alloc(slabkit_cache *c, unsigned gfp) {
    return slqb::alloc(as_slqb(c), gfp & SLABKIT_GFP_ZERO);
}

void *slabkit_cache_alloc_node(slabkit_cache *c, unsigned gfp, int node) {
    if (node == SLABKIT_ANY_NODE) return slqb::alloc(as_slqb(c), gfp & SLABKIT_GFP_ZERO);
    return slqb::alloc_slow(as_slqb(c), slots::current(), node, gfp & SLABKIT_GFP_ZERO);
}

void slabkit_cache_free(slabkit_cache *c, void *obj) {
    slqb::free(as_slqb(c), obj);
}

size_t slabkit_cache_alloc_bulk(slabkit_cache *c, unsigned gfp, size_t n, void **p) {
    slqb::slqb_cache *s = as_slqb(c);
    for (size_t i = 0; i < n; ++i) {
        p[i] = slqb::alloc(s, gfp & SLABKIT_GFP_ZERO);
        if (SLABKIT_UNLIKELY(!p[i])) {
            // All or nothing, as the kernel's bulk allocation.
            for (size_t k = 0; k < i; ++k) slqb::free(s, p[k]);
            return 0;
        }
    }
    return n;
}

void slabkit_cache_free_bulk(slabkit_cache *c, size_t n, void **p) {
    slqb::slqb_cache *s = as_slqb(c);
    for (size_t i = 0; i < n; ++i) slqb::free(s, p[i]);
}

size_t slabkit_cache_shrink(slabkit_cache *c) {
    return slqb::shrink(as_slqb(c));
}

void slabkit_cache_destroy(slabkit_cache *c) {
    if (c) slqb::destroy(as_slqb(c));
}

const char *slabkit_cache_name(const slabkit_cache *c) {
    return to_cache(c)->name;
}

int slabkit_cache_tune(slabkit_cache *c, const char *tunable, unsigned long value) {
    slqb::slqb_cache *s = as_slqb(c);
    const char *why = nullptr;
    bool ok = false;
    if (!tunable) {
        why = "no tunable named";
    } else if (strcmp(tunable, "order") == 0) {
        ok = slqb::set_order(s, value > UINT32_MAX ? UINT32_MAX : static_cast<unsigned>(value),
                             &why);
    } else if (strcmp(tunable, "hiwater") == 0 || strcmp(tunable, "freebatch") == 0) {
        bool hi = tunable[0] == 'h';
        if (value > UINT32_MAX) {
            why = "the value is too large";
        } else {
            uint32_t v = static_cast<uint32_t>(value);
            ok = hi ? slqb::tune(s, v, s->freebatch) : slqb::tune(s, s->hiwater, v);
            if (!ok) why = "freebatch must be at least 1 and at most hiwater + 1";
        }
    } else {
        why = "unknown tunable (SLQB has order, hiwater, freebatch)";
    }
    if (ok) return 0;
    report("slabkit_cache_tune(%s, %s, %lu): %s", s->name, tunable ? tunable : "(null)", value,
           why);
    return -1;
}

size_t slabkit_cache_object_size(const slabkit_cache *c) {
    return to_cache(c)->object_size;
}

void *slabkit_kmalloc(size_t size, unsigned gfp) {
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

void slabkit_kfree(void *p) {
    kmalloc::free(p);
}

size_t slabkit_ksize(const void *p) {
    return kmalloc::usable_size(p);
}

size_t slabkit_cache_count(void) {
    slqb::bootstrap();
    return registry::count();
}

size_t slabkit_stats(struct slabkit_cache_stats *out, size_t max) {
    slqb::bootstrap();
    stats_walk walk{out, max, 0};
    registry::for_each(
        [](cache *c, void *arg) {
            auto *w = static_cast<stats_walk *>(arg);
            if (w->n < w->max) fill_stats(c, &w->out[w->n]);
            ++w->n;
        },
        &walk);
    return walk.n;
}

void slabkit_get_cache_stats(const slabkit_cache *c, struct slabkit_cache_stats *out) {
    // Under the registry lock: trims free idle slots' structures under it.
    platform::lock_guard guard(registry::lock());
    fill_stats(to_cache(c), out);
}

size_t slabkit_slabinfo(char *buf, size_t size) {
    slqb::bootstrap();
    text_out out{buf, size};
    if (size) buf[0] = '\0';
    slabinfo_header(out);
    registry::for_each(
        [](cache *c, void *arg) {
            slabkit_cache_stats st;
            fill_stats(c, &st);
            slabinfo_row row{c->name,    st.active_objects, st.objects,
                             c->size,    c->objects,        uint64_t{1} << c->order,
                             st.hiwater, st.freebatch,      0,
                             st.slabs,   st.slabs,          0};
            slabinfo_line(*static_cast<text_out *>(arg), row);
        },
        &out);
    return out.len;
}

void slabkit_get_page_stats(struct slabkit_page_stats *out) {
    page_stats st;
    page_allocator::global().snapshot(&st);
    out->pages_in_use = st.in_use;
    out->pages_parked = st.in_pcp;
    out->pages_free = st.free_pages;
    out->pages_resident = st.resident;
    out->pages_returned = st.returned;
    out->reserved_bytes = st.reserved_bytes;
    out->large_os_bytes = large::mapped_bytes();
    out->errors = st.errors + slab_errors();
}

const char *slabkit_allocator(void) {
    return design_name(process_design());
}

const char *slabkit_designs(void) {
    return "slqb";
}

void slabkit_trim(void) {
    slqb::trim_all();
    page_allocator::global().purge();
}

} // extern "C"
