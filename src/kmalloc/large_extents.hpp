// large_extents.hpp - the free ranges of the large blocks' region, in address order.
//
// Large blocks are carved from one reserved region (large.hpp). A freed block becomes a free
// range here and merges with a free neighbour of its kind, so blocks freed side by side make one
// range that serves a bigger block later without any call to the OS - no mapping, no move of
// pages, no unmapping. Every call that changes a mapping costs its process a flush of the TLB,
// and on some virtual machines (shadow page tables) every page it touches afterwards pays to be
// mapped again: a program cycling blocks of several MiB ran 6x tcmalloc's time when each reuse
// moved pages (2026-12-03, bench/pattern_bench large-random).
//
// Two kinds of range, never merged with each other:
//   dirty  freed blocks whose pages may still be resident (kept for reuse: they count against
//          the retain bounds, and a reuse saves their page faults);
//   clean  ranges whose pages went back to the OS (decommitted) or were never touched: address
//          space only, reused at the cost of faults, as a fresh mapping would be.
// Each range has the time of its newest free (a merged range takes the newer), by which the
// oldest dirty memory goes back first.
//
// A plain data structure with no lock and no OS call: large.cpp holds its lock around it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace slabkit::large {

struct extent {
    uintptr_t addr;
    size_t size;
    uint64_t freed_ms;
    bool dirty;
    uintptr_t end() const { return addr + size; }
};

class extent_map {
  public:
    // Ranges at most: a free that would need more is released to the OS instead (large.cpp).
    static constexpr unsigned kCapacity = 1024;

    unsigned count() const { return n_; }
    const extent &operator[](unsigned i) const { return e_[i]; }

    // Adds the free range [addr, addr+size), which overlaps no range here, merging it with a
    // neighbour of the same kind that touches it. False (nothing changed) when there is no room.
    bool add(uintptr_t addr, size_t size, bool dirty, uint64_t freed_ms);
    // Where to put a block of `size` bytes at a multiple of `align` (a power of two) in free
    // space: a span of touching ranges of either kind, which may run past `top` (the end of the
    // region's used part) up to `limit` when its last range ends at `top`. The place covering
    // the most dirty bytes wins (each reuses resident pages instead of faulting), then the one
    // in the shortest run of free space (the others stay whole for bigger blocks). 0 when no
    // span holds it; *dirty_out is the dirty bytes it covers.
    uintptr_t place(size_t size, size_t align, uintptr_t top, uintptr_t limit,
                    size_t *dirty_out) const;
    // Takes [at, at+size) out of the ranges that cover it (touching, of either kind; the part
    // of it past the last range must have been added first). What is left of the first and the
    // last stays. False (nothing changed) when the split needs a range more than there is room
    // for.
    bool take_span(uintptr_t at, size_t size);
    // The range that starts at `addr`, of either kind, or -1.
    int starting_at(uintptr_t addr) const;
    // The range that holds `addr`, or -1.
    int holding(uintptr_t addr) const;
    // Grows range i (nothing free may follow it) by `size` bytes, of its kind.
    void grow(unsigned i, size_t size) {
        e_[i].size += size;
        if (e_[i].dirty) dirty_bytes_ += size;
    }
    // Turns [at, at+size) inside dirty range i clean (its pages went back), merging it with
    // clean neighbours. False (nothing changed) when there is no room for the split.
    bool make_clean(unsigned i, uintptr_t at, size_t size);
    // Index of the dirty range freed longest ago, or -1.
    int oldest_dirty() const;
    // Bytes in dirty ranges.
    uint64_t dirty_bytes() const { return dirty_bytes_; }
    unsigned dirty_count() const;

  private:
    void insert_at(unsigned i, const extent &x);
    void erase(unsigned i);
    // Merges range i with its neighbours of the same kind where they touch.
    void merge_around(unsigned i);

    extent e_[kCapacity];
    unsigned n_ = 0;
    uint64_t dirty_bytes_ = 0;
};

} // namespace slabkit::large
