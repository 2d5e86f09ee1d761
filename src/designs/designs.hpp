// designs.hpp - the designs of this build behind one interface: the dispatch every layer above
// the designs goes through (kmalloc, the C API, the malloc replacement, statistics).
//
// Each design's `ops` is checked against the design interface (core/design.hpp) here, so a
// design that misses a part does not build. visit() calls a function with the interface type of
// a design, or of a cache's design: a switch on the design, whose every case is the design's
// inline code - one predictable branch, never an indirect call per object.
#pragma once

#include "core/design.hpp"
#include "core/design_list.hpp"
#include "sheaves/sheaves.hpp"
#include "slab/slab.hpp"
#include "slob/slob.hpp"
#include "slqb/slqb.hpp"
#include "slub/slub.hpp"

#include <cstddef>
#include <type_traits>

namespace slabkit::designs {

#define SLABKIT_DESIGN_CHECK(name)                                                                 \
    static_assert(slab_design<name::ops>,                                                          \
                  #name "::ops misses a part of the design interface (core/design.hpp)");          \
    static_assert(name::ops::kind == design::name, #name "::ops::kind is not design::" #name);
SLABKIT_DESIGN_LIST(SLABKIT_DESIGN_CHECK)
#undef SLABKIT_DESIGN_CHECK
static_assert(static_cast<unsigned>(SLABKIT_DESIGN_LAST::ops::kind) + 1 == kNrDesigns,
              "SLABKIT_DESIGN_LAST is not the last design of SLABKIT_DESIGN_LIST");
#define SLABKIT_DESIGN_COUNT_ONE(name) +1
static_assert(0 SLABKIT_DESIGN_DISPATCH_ORDER(SLABKIT_DESIGN_COUNT_ONE) + 1 == kNrDesigns,
              "SLABKIT_DESIGN_DISPATCH_ORDER names every design but the last, once each");
#undef SLABKIT_DESIGN_COUNT_ONE

// f(ops) for design d's interface type (e.g. slqb::ops), returning what f returns: a chain of
// compares in SLABKIT_DESIGN_DISPATCH_ORDER (every design but the last, which needs none), the
// first (SLQB, the default) expected. That order is the one the compiler gave the switch over the
// four designs before the sheaves (SLQB, SLAB, then SLUB): as a switch over five, the compiler
// made a jump table or another compare tree and the first designs' malloc, kmalloc and cache
// pairs took 1 to 5 more instructions under callgrind (tests/budget); the chain keeps them as
// they were.
template <class F>
SLABKIT_ALWAYS_INLINE decltype(auto) visit(design d, F &&f) {
#define SLABKIT_DESIGN_IF(name)                                                                    \
    if (__builtin_expect(d == design::name, static_cast<unsigned>(design::name) == 0))             \
        return f(name::ops{});
    SLABKIT_DESIGN_DISPATCH_ORDER(SLABKIT_DESIGN_IF)
#undef SLABKIT_DESIGN_IF
    return f(SLABKIT_DESIGN_LAST::ops{});
}

// f(ops, s) with s the cache as its design's descriptor type (e.g. slqb::slqb_cache *).
template <class F>
SLABKIT_ALWAYS_INLINE decltype(auto) visit(cache *c, F &&f) {
    return visit(c->kind, [&](auto ops) SLABKIT_LAMBDA_INLINE -> decltype(auto) {
        using D = decltype(ops);
        return f(ops, static_cast<typename D::cache_type *>(c));
    });
}

// f(ops, s) for a cache whose gate word is open (core/cache.hpp) for a design with a gated free
// (core/design.hpp); otherwise fallback(). One load and compare of the gate word instead of the
// init test, the design switch and the node test; the first design of the list is compared
// first.
template <class F, class G>
SLABKIT_ALWAYS_INLINE decltype(auto) visit_gated(cache *c, F &&f, G &&fallback) {
    // A chain of compares over the designs that have a gated free, in the list's order, the
    // first expected: as a switch over every design's open word, the compiler's compare tree
    // moved with each design added (SLUB's malloc pair +4 instructions with the fifth).
    const uint16_t gate = gate_word(c);
#define SLABKIT_DESIGN_GATED_IF(name)                                                              \
    if constexpr (gated_v<name::ops>) {                                                            \
        if (__builtin_expect(gate == gate_open_word(design::name),                                 \
                             static_cast<unsigned>(design::name) == 0))                            \
            return f(name::ops{}, static_cast<name::ops::cache_type *>(c));                        \
    }
    SLABKIT_DESIGN_LIST(SLABKIT_DESIGN_GATED_IF)
#undef SLABKIT_DESIGN_GATED_IF
    return fallback();
}

// The design with shortcuts (core/design.hpp, shortcut_v): its `ops`, or void when no design of
// this build has them. At most one may: a shortcut entry holds an untyped pointer whose meaning
// is that design's.
namespace detail {
template <class... Ds>
struct pick_shortcut;
template <>
struct pick_shortcut<void> {
    using type = void;
};
template <class D, class... Ds>
struct pick_shortcut<D, Ds...> {
    using type = std::conditional_t<shortcut_v<D>, D, typename pick_shortcut<Ds...>::type>;
};
} // namespace detail
#define SLABKIT_DESIGN_OPS(name) name::ops,
using shortcut_design = detail::pick_shortcut<SLABKIT_DESIGN_LIST(SLABKIT_DESIGN_OPS) void>::type;
#undef SLABKIT_DESIGN_OPS
#define SLABKIT_DESIGN_SHORTCUTS(name) +(shortcut_v<name::ops> ? 1 : 0)
static_assert(0 SLABKIT_DESIGN_LIST(SLABKIT_DESIGN_SHORTCUTS) <= 1,
              "two designs offer shortcuts (core/design.hpp): an entry could not say whose it is");
#undef SLABKIT_DESIGN_SHORTCUTS

// Sets up the process design's bootstrap caches (once; other designs set up theirs when their
// first cache is made).
void bootstrap_process_design();
// A cache of design d (its bootstrap done, the arguments checked here, once for every design);
// nullptr with *why set when it cannot be made.
cache *create(design d, const cache_args &args, const char **why);
// Destroys a cache (nullptr: nothing); see slab_design's destroy.
void destroy(cache *c);
// The design's invariant checker, and for a debug cache the debug layer's check of every slot
// (core/debug.hpp); the cache must be quiescent. Returns the problems, the first described in
// buf.
unsigned validate(cache *c, char *buf, size_t size);
// Flushes the idle slots' and the caller's parked objects back to their slabs, then the
// design's shared lists (reclaim); other live slots give theirs back at their next slow path.
// Returns the pages the cache's slabs still hold.
size_t shrink(cache *c);
// shrink() for every live cache that match(c, arg) accepts, found under the cache registry lock
// (so that none is destroyed meanwhile), from a thread that need not own a slot: what the live
// statistics' shrink request runs (api/live.cpp).
void shrink_matching(bool (*match)(const cache *c, void *arg), void *arg);
// The figures of one cache.
void statistics(cache *c, design_stats *out);
// slabkit_trim's slab part: every cache of every design gives back what the caller's and the
// idle slots park, and what their shared lists hold; idle slots' emptied structures are freed.
void trim_all();

} // namespace slabkit::designs
