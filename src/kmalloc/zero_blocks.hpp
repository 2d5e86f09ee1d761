// zero_blocks.hpp - zero-size blocks that trap, for the malloc family under debugging.
//
// C lets malloc(0) return a unique pointer that the program must not read or write through.
// Without debugging the malloc family gives the smallest class's block (a 1-byte request), so
// such a read or write goes unnoticed. While debugging (SLABKIT_DEBUG), malloc(0), new of 0 bytes
// and realloc to 0 from malloc's side return instead a pointer into a region with no access at
// all, as hardened allocators do: any use faults at once (SIGSEGV at the bad access).
//
// The region is 16 MiB of address space reserved with no access at the first such call (no memory
// behind it), cut into 16-byte cells; a bitmap (static, touched only in debug runs) says which
// cells are handed out. Cells are handed out in turn around the region, so that a freed one is
// not handed out again soon (a use after free of it faults like any use). A free of a cell not
// handed out is a double free, reported. Lock-free: a cell is taken and given back with one
// atomic operation on its bitmap word.
#pragma once

#include <cstddef>

namespace slabkit::zero_blocks {

// A fresh zero-size block, or nullptr when the region cannot be reserved or every cell is out
// (the caller then falls back to a 1-byte block).
void *alloc();
// True when p lies in the region (a zero-size block, handed out or not).
bool owns(const void *p);
// Gives back the zero-size block p (owns(p) is true); a cell that is not handed out, or a
// pointer inside one, is reported naming `caller` (double free / not a block start).
void free(void *p, const char *caller);

} // namespace slabkit::zero_blocks
