// large.hpp - blocks above the page allocator's largest order (and the malloc family's above
// kmalloc::kMallocRegionFrom, 1 MiB), from address space of their own.
//
// Blocks are carved from one region of address space reserved at the first large allocation
// (64 GiB, no memory behind it until used; less, down to 1 GiB, where the address space is
// limited); a fixed open-addressing table (static, zero until
// used) maps each block's address to its size so that kfree and ksize can find it. The table
// holds kLargeMax blocks at once (each over 1 MiB: 16 GiB and more in all); past that an
// allocation fails like any other out-of-memory (a malloc block of 4 MiB or less is then a page
// block). A block the region has no room for is a
// mapping of its own, unmapped when freed.
//
// Reuse without calls to the OS: a freed block's range stays mapped and resident, and joins the
// region's free ranges (large_extents.hpp), merging with free neighbours; an allocation takes
// the smallest kept range that holds it, else grows the kept range at the region's top, else
// takes address space whose pages went back (faults, as a fresh mapping), else raises the top.
// So a program cycling blocks of several MiB makes no system call and no page fault once its
// ranges are in place (an earlier version stitched kept blocks together by moving their pages,
// one mremap each, and every such call cost the process its TLB entries).
//
// What stays resident is bounded: kept bytes never exceed what the program had in use at its
// recent peak less what it has in use now, plus a sixteenth of that peak for the fragmentation of
// kept ranges (the peak as frees see it, restarted whenever nothing is kept), so that resident
// memory stays within 1/16 of what the program itself had in use, as if every block were
// unmapped at once; nor SLABKIT_LARGE_RETAIN_MB (256 MiB by default, 0:
// keep nothing). The oldest kept memory goes back first (madvise: the range stays, clean), ranges
// kept longer than SLABKIT_DECAY_MS go back at the next large allocation or free or by the
// trimmer (core/trimmer.hpp), trim (slabkit_trim, malloc_trim) gives back all; and a free that
// finds the page allocator has passed its retain bound since the last free (its
// over_retain_events moved: the program is freeing more than it reuses) gives back its block and
// every kept range, so that resident memory falls when a program shrinks.
#pragma once

#include <cstddef>
#include <cstdint>

namespace slabkit::large {

inline constexpr size_t kLargeMax = 16384;

// A block of at least `size` bytes, aligned to `align` (a power of two) or, when align is 0, to
// `size` if that is a power of two, else to a page; nullptr when the OS refuses or the table is
// full. Zeroed when `zero` (a fresh mapping already is; a kept block is cleared).
void *alloc(size_t size, size_t align = 0, bool zero = false);
// Moves or resizes a block to hold `size` bytes (mremap: no copy through user space); the
// result is page-aligned. nullptr, the block untouched, when p is not a large block or the OS
// refuses.
void *resize(void *p, size_t size);
// Frees a block; false (nothing done) if p is not the start of a large block.
bool free(void *p);
// Debugging: each new block gets a page with no access after it, nothing is kept for reuse, and
// a freed block loses all access (and stays reserved among the last 64 freed, so that a second
// free of it is recognised). Set while no large block is in use (at start).
void set_guarded(bool on);
bool guarded();
// For a bad free's report: why p, not a large block now, was one (a double free of a block
// kept for reuse or, guarded, of a recently freed one); nullptr when it cannot tell.
const char *why_not_a_block(const void *p);
// The block's usable size, or 0 if p is not the start of a large block.
size_t size_of(const void *p);
// Bytes mapped for large blocks in use now, and how many blocks (kept ones not included).
uint64_t mapped_bytes();
uint64_t mapped_blocks();
// Blocks alloc could not map (the OS refused the memory: an address-space limit, overcommit).
uint64_t refusals();
// Bytes and ranges kept for reuse now (resident, or may be: freed and not given back).
uint64_t retained_bytes();
uint64_t retained_blocks();
// Gives back to the OS every kept range (force) or those kept since before before_ms
// (platform::now_coarse_ms time). Returns the bytes given back.
uint64_t release_retained(uint64_t before_ms, bool force);
// Address space reserved for the region (0 before the first large block, or if none could be).
uint64_t region_bytes();
// Whether the region asked for transparent huge pages (SLABKIT_LARGE_HUGE_PAGES, default on).
bool region_huge_pages();
// The retain budget in bytes (SLABKIT_LARGE_RETAIN_MB).
uint64_t retain_budget();
// Write-protected free ranges (SLABKIT_PROTECT_FREED): how many, and the size a freed block must
// be above to be protected now (raised by reuse under the default mode; ~0 when off).
unsigned protected_ranges();
size_t protected_above();

} // namespace slabkit::large
