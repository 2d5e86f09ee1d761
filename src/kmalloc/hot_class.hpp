// hot_class.hpp - the malloc table's hot classes: exact sizes made while the process runs.
//
// The malloc table's own classes are spaced four per doubling above 128 bytes, so a size just
// above a class boundary wastes up to a fifth of its block: a store of 1040-byte values (1 KiB
// and a 16-byte header) takes 1280-byte blocks, 23% more memory than it asked for. No fixed
// table suits every program, but a program that wastes much this way nearly always does it with
// a few sizes allocated over and over. So the malloc family's slow path (an empty slot: the
// moment a class is refilled) notes the size that reached it; when kHotStreak slow paths of a
// class in a row came from the same 16-byte step, and the class wastes a sixteenth or more of
// its block on that step, the step gets a class of its own, of exactly the step's size, whose
// slabs are of the order that wastes least up to kHotMaxOrder (a 1040-byte class takes order
// 4: 63 objects in 64 KiB, 16 bytes left). The table's byte for the step then names the new
// class (kmalloc.hpp, g_malloc_class), so the next allocations of that step go there; blocks
// already handed out stay in the class they came from.
//
// Bounded: at most kNrHotClasses per process, none while debugging (SLABKIT_DEBUG names classes
// and expects blocks to stay in them), none for a design with its own kmalloc (SLOB), and
// SLABKIT_HOT_CLASSES=0 turns them off. Random sizes do not make them: a run of kHotStreak slow
// paths from one step needs that step to dominate its class.
#pragma once

#include "core/cache.hpp"

#include <cstddef>
#include <cstdint>

namespace slabkit::kmalloc {

inline constexpr unsigned kHotStreak = 64;
inline constexpr unsigned kHotMaxOrder = 4;

// The malloc table's slow path for `size` (1..kMaxCacheSize) under design d.
void note_malloc_refill(design d, size_t size);
// The bytes of hot class j (0 .. kNrHotClasses - 1), 0 while it is not made.
size_t hot_class_size(unsigned j);
// Hot classes made so far.
unsigned nr_hot_classes();
// The slab order a hot class of slot size `size` gets: the smallest up to kHotMaxOrder that
// wastes at most 1/64 of its slab, else the one of them that wastes least.
unsigned hot_class_order(size_t size);

} // namespace slabkit::kmalloc
