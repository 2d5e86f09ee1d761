// design_list.hpp - the designs this build has, named once.
//
// SLABKIT_DESIGN_LIST(X) expands X(name) for every design, in the order of the `design` enum
// (whose values index per-design tables: kmalloc's caches, names). Adding a design takes its
// folder under src/, one entry here, one #include in designs/designs.hpp, and its name in
// CMake's SLABKIT_DESIGNS (which the per-design tests loop over; a test checks that list against
// slabkit_designs()). Everything else - the C API, kmalloc, the malloc replacement, statistics,
// trims and fork - reaches a design through designs/designs.hpp.
#pragma once

#include <cstdint>

#define SLABKIT_DESIGN_LIST(X) X(slqb) X(slub) X(slab) X(slob) X(sheaves)
// designs::visit's order of compares: every design but the last, which is what is left (see
// there why this order); and that last one. designs/designs.hpp checks both against the list.
#define SLABKIT_DESIGN_DISPATCH_ORDER(X) X(slqb) X(slab) X(slub) X(slob)
#define SLABKIT_DESIGN_LAST sheaves

namespace slabkit {

enum class design : uint8_t {
#define SLABKIT_DESIGN_ENUM(name) name,
    SLABKIT_DESIGN_LIST(SLABKIT_DESIGN_ENUM)
#undef SLABKIT_DESIGN_ENUM
};

inline constexpr unsigned kNrDesigns = 0
#define SLABKIT_DESIGN_COUNT(name) +1
    SLABKIT_DESIGN_LIST(SLABKIT_DESIGN_COUNT)
#undef SLABKIT_DESIGN_COUNT
    ;

} // namespace slabkit
