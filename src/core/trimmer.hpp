// trimmer.hpp - the slab layer's periodic work, without a timer thread.
//
// The kernel ran SLQB's trimmer every few seconds per CPU, and its slot-less equivalent - a
// departed thread's slot - has no CPU to run on. Here the designs' allocation slow paths (the
// ones that build a new slab) call maybe_run(); at most every decay_ms/2 it moves the trim epoch
// and calls the handler the designs layer installed, which drains the slots idle for decay_ms in
// every cache of every design and lets each cache trim its shared lists (designs/designs.cpp).
#pragma once

#include <cstdint>

namespace slabkit::trimmer {

// Gives back what has been idle since before_ms (platform::now_coarse_ms time): the designs
// layer's drains the slots idle that long; kmalloc's releases the large blocks it kept for reuse.
// Unforced, a handler runs on an allocation slow path, maybe under a design's locks: it must not
// wait for the slot registry lock (it only tries it) and takes only locks ranked below them.
using handler = void (*)(uint64_t before_ms, bool force);
// Adds a handler (at most 4; false when full). Handlers run in the order they were added.
bool add_handler(handler h);

// Runs the trimmer if decay_ms/2 has passed since it last ran (force: now). A decay_ms of 0
// (SLABKIT_DECAY_MS=0) still trims, every 500 ms.
void maybe_run(bool force = false);

// Moves each time the trimmer runs: a design's live slots give back part of what they park when
// they see it move (SLQB: one batch of their queue).
uint64_t epoch();

} // namespace slabkit::trimmer
