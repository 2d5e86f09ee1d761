// failslab.hpp - fault injection, the kernel's failslab: allocations failed on purpose, so that
// a program's out-of-memory paths run (docs/failslab.md).
//
// Settings, as the kernel's fault attributes: `probability` (percent of the allocations that
// pass the other tests which fail), `interval` (only every interval-th of those may fail),
// `times` (failures left; -1: no limit), `space` (bytes allocated before any may fail, taken
// off by each allocation's size), and a cache filter (names with '*' wildcards; empty: every
// cache). SLABKIT_FAILSLAB=probability[:interval[:times[:space]]] and SLABKIT_FAILSLAB_CACHES
// set them at start; slabkit_set_failslab and slabinfo's --failslab while the program runs.
//
// Cost when off: nothing on the fast paths. An armed cache (every cache a process makes once
// injection is armed, kmalloc's and malloc's classes included) has kInitBit in its init byte,
// which closes its gated fast paths (core/cache.hpp's gate word) as init on alloc does, so its
// allocations reach the slow paths that ask should_fail; an unarmed cache's init test is the one
// its paths made already.
#pragma once

#include "base/compiler.hpp"
#include "core/cache.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace slabkit::failslab {

// cache::init's bit for an armed cache.
inline constexpr uint8_t kInitBit = 0x10;

// Whether injection is armed (SLABKIT_FAILSLAB was set, read once; or slabkit_set_failslab).
bool armed();

// For a cache being made for users (kFailslabEligible: by the API, or a kmalloc class being
// opened): sets kInitBit when injection is armed. The designs' own internal caches never fail.
void arm_cache(cache *c);

// Whether this allocation of `size` bytes from c (nullptr: a block not of a cache, above the
// caches' sizes or of SLOB's own kmalloc, named "large" and "slob-blocks" by the filter) fails:
// the settings' tests in the kernel's order, the failure counted. Only armed paths call it.
SLABKIT_NOINLINE bool should_fail(cache *c, size_t size, const char *block_name = "large");
// Allocations of c failed on purpose.
uint64_t failures_of(cache *c);
// should_fail for an armed cache only: one test of the init byte the caller has read.
SLABKIT_ALWAYS_INLINE bool fails(cache *c, unsigned init, size_t size) {
    return SLABKIT_UNLIKELY(init & kInitBit) && should_fail(c, size);
}
namespace detail {
// -1: SLABKIT_FAILSLAB not read yet; 0: not armed; 1: armed (failslab.cpp).
extern std::atomic<int> g_armed;
bool block_fails_slow(size_t size, const char *block_name);
} // namespace detail
// For blocks not of a cache: armed, and should_fail. One load and a branch when off (SLOB's
// malloc comes this way every time).
SLABKIT_ALWAYS_INLINE bool block_fails(size_t size, const char *block_name) {
    if (SLABKIT_LIKELY(detail::g_armed.load(std::memory_order_relaxed) == 0)) return false;
    return detail::block_fails_slow(size, block_name);
}

// Sets the settings from a spec (SLABKIT_FAILSLAB's grammar) and a cache filter ("": every
// cache; nullptr: as it is), arming injection: every registered cache made for users gets
// kInitBit, as later ones do (SLQB's malloc classes opened before keep their threads' shortcut
// pops, which do not ask: arm at start to fail those). "0" fails nothing and stays armed; "off"
// disarms, the caches' fast paths open again. false with a sentence in *why naming what was
// wrong, and nothing changes.
bool set(const char *spec, const char *caches, const char **why);

struct status {
    bool armed;
    char probability[24]; // percent, as decimal text ("12.5")
    uint64_t interval;
    int64_t times;             // failures left; -1: no limit
    int64_t space;             // bytes left before any failure
    char caches[128];          // the filter ("": every cache)
    uint64_t failures;         // in all
    uint64_t block_failures;   // of blocks not of a cache
    uint64_t caches_untracked; // made when the table of armed caches was full: never failed
};
void get_status(status *out);

} // namespace slabkit::failslab
