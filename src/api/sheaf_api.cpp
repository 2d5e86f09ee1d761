// sheaf_api.cpp - the prefilled sheaves of include/slabkit/slabkit.h (the kernel's
// kmem_cache_prefill_sheaf family).
//
// Under the sheaves design the design does the work (sheaves::prefill_sheaf and its family: the
// slot's spare, the barn). Every other design's prefilled sheaf is what the kernel makes for a
// cache without sheaves: a one-off ("oversize") sheaf of exactly the size asked for, filled with
// the design's own allocations and freed back one by one when it is returned.
#include "api/cache_handle.hpp"
#include "core/report.hpp"
#include "designs/designs.hpp"
#include "slabkit/slabkit.h"

#include <cstring>

using namespace slabkit;

struct slab_sheaf {}; // the public name of sheaves::sheaf (never instantiated)

namespace {

using api::to_cache;
using api::zeroing;

SLABKIT_ALWAYS_INLINE sheaves::sheaf *to_sheaf(slabkit_sheaf *sh) {
    return reinterpret_cast<sheaves::sheaf *>(sh);
}
SLABKIT_ALWAYS_INLINE slabkit_sheaf *to_public(sheaves::sheaf *sh) {
    return reinterpret_cast<slabkit_sheaf *>(sh);
}

// A sheaf the caller hands back must be one of this cache's: anything else is reported, named,
// and left alone.
bool sheaf_is_of(const char *op, cache *c, sheaves::sheaf *sh) {
    if (sh->owner == c && sh != &sheaves::g_bootstrap_sheaf) return true;
    report("%s(%s): sheaf %p is not one of this cache's (it belongs to %s); nothing done", op,
           c->name, static_cast<void *>(sh), sh->owner ? sh->owner->name : "no cache");
    return false;
}

// A one-off sheaf of a design without sheaves: objects[size .. capacity) filled with the
// design's allocations; false (and nothing taken) when memory is short.
template <class Ops, class S>
bool fill_oversize(Ops ops, S *s, sheaves::sheaf *sh) {
    uint32_t from = sh->size;
    while (sh->size < sh->capacity) {
        void *obj = ops.alloc(s, false);
        if (!obj) {
            while (sh->size > from) ops.free(s, sh->objects()[--sh->size]);
            return false;
        }
        sh->objects()[sh->size++] = obj;
    }
    return true;
}

template <class Ops, class S>
void give_back_oversize(Ops ops, S *s, sheaves::sheaf *sh) {
    while (sh->size) ops.free(s, sh->objects()[--sh->size]);
    sheaves::free_sheaf_block(sh);
}

template <class Ops, class S>
sheaves::sheaf *prefill(Ops ops, S *s, unsigned size) {
    if constexpr (std::is_same_v<Ops, sheaves::ops>) {
        return sheaves::prefill_sheaf(s, size);
    } else {
        if (size == 0) return nullptr;
        sheaves::sheaf *sh = sheaves::alloc_sheaf_block(size);
        if (!sh) return nullptr;
        sh->owner = s;
        sh->flags = sheaves::kOversize;
        if (!fill_oversize(ops, s, sh)) {
            sheaves::free_sheaf_block(sh);
            return nullptr;
        }
        return sh;
    }
}

template <class Ops, class S>
void give_back(Ops ops, S *s, sheaves::sheaf *sh) {
    if constexpr (std::is_same_v<Ops, sheaves::ops>)
        sheaves::return_sheaf(s, sh);
    else
        give_back_oversize(ops, s, sh);
}

} // namespace

extern "C" {

slabkit_sheaf *slabkit_cache_prefill_sheaf(slabkit_cache *c, unsigned gfp, unsigned size) {
    (void)gfp;
    if (size > kMaxSheafCapacity) {
        report("kmem_cache_prefill_sheaf(%s, %u): more objects than a sheaf may hold (32768)",
               to_cache(c)->name, size);
        return nullptr;
    }
    return to_public(
        designs::visit(to_cache(c), [&](auto ops, auto *s) { return prefill(ops, s, size); }));
}

void *slabkit_cache_alloc_from_sheaf(slabkit_cache *c, unsigned gfp, slabkit_sheaf *sheaf) {
    sheaves::sheaf *sh = to_sheaf(sheaf);
    if (!sh || !sheaf_is_of("kmem_cache_alloc_from_sheaf", to_cache(c), sh)) return nullptr;
    if (sh->size == 0) return nullptr;
    void *obj = sh->objects()[--sh->size];
    cache *cc = to_cache(c);
    if (zeroing(cc, gfp)) memset(obj, 0, cc->object_size);
    return obj;
}

int slabkit_cache_refill_sheaf(slabkit_cache *c, unsigned gfp, slabkit_sheaf **sheafp,
                               unsigned size) {
    (void)gfp;
    cache *cc = to_cache(c);
    if (!sheafp || !*sheafp) {
        report("kmem_cache_refill_sheaf(%s): no sheaf given", cc->name);
        return -1;
    }
    sheaves::sheaf *sh = to_sheaf(*sheafp);
    if (!sheaf_is_of("kmem_cache_refill_sheaf", cc, sh)) return -1;
    if (sh->size >= size) return 0;
    if (size > kMaxSheafCapacity) {
        report("kmem_cache_refill_sheaf(%s, %u): more objects than a sheaf may hold (32768)",
               cc->name, size);
        return -1;
    }
    bool ok = designs::visit(cc, [&](auto ops, auto *s) -> bool {
        using Ops = decltype(ops);
        if constexpr (std::is_same_v<Ops, sheaves::ops>) {
            return sheaves::refill_sheaf(s, &sh, size);
        } else {
            if (size <= sh->capacity) return fill_oversize(ops, s, sh);
            sheaves::sheaf *bigger = prefill(ops, s, size);
            if (!bigger) return false;
            give_back(ops, s, sh);
            sh = bigger;
            return true;
        }
    });
    *sheafp = to_public(sh);
    return ok ? 0 : -1;
}

void slabkit_cache_return_sheaf(slabkit_cache *c, unsigned gfp, slabkit_sheaf *sheaf) {
    (void)gfp;
    sheaves::sheaf *sh = to_sheaf(sheaf);
    if (!sh || !sheaf_is_of("kmem_cache_return_sheaf", to_cache(c), sh)) return;
    designs::visit(to_cache(c), [&](auto ops, auto *s) { give_back(ops, s, sh); });
}

unsigned slabkit_sheaf_size(const slabkit_sheaf *sheaf) {
    if (!sheaf) return 0;
    return reinterpret_cast<const sheaves::sheaf *>(sheaf)->size;
}

} // extern "C"
