// report.hpp - how the slab layer reports misuse: one clear line on stderr naming the cache and
// the address, then abort, or (SLABKIT_CONTINUE_ON_ERROR=1) count it and carry on without
// touching the heap.
#pragma once

#include "base/compiler.hpp"

#include <cstdint>

namespace slabkit {

struct cache;

// Reports a bad free of `addr` through cache c (nullptr: kfree): "slabkit: <op>(<cache>, <addr>):
// <what>". Aborts unless continue-on-error is set; returns when it is.
SLABKIT_COLD void report_bad_free(const char *op, const cache *c, const void *addr,
                                  const char *what);
// The hardening check of every free (the kernel's with SLAB_FREELIST_HARDENED): obj is already
// the first free object of the list it is freed onto, so this is its second free. Reported
// like a bad free; the caller then leaves the object alone.
SLABKIT_COLD SLABKIT_NOINLINE void report_double_free(const cache *c, const void *obj);
// Whether the designs make that check (the CMake option SLABKIT_FREELIST_CHECK, on by default).
#ifndef SLABKIT_FREELIST_CHECK
#define SLABKIT_FREELIST_CHECK 1
#endif
inline constexpr bool kFreelistCheck = SLABKIT_FREELIST_CHECK != 0;
// SLAB's array caches: the same check against the array's last entry (SLABKIT_SLAB_ARRAY_CHECK,
// off by default: its cost on the malloc pair is in the README).
#ifndef SLABKIT_SLAB_ARRAY_CHECK
#define SLABKIT_SLAB_ARRAY_CHECK 0
#endif
inline constexpr bool kSlabArrayCheck = SLABKIT_SLAB_ARRAY_CHECK != 0;
// Describes why addr is not an object that cache c (nullptr: any cache) could free, into buf.
SLABKIT_COLD const char *diagnose_free(const cache *c, const void *addr, char *buf, unsigned size);
// A printf-style line on stderr prefixed with "slabkit: ".
SLABKIT_COLD void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// True when a report must not abort: SLABKIT_CONTINUE_ON_ERROR=1, or an error hook is set (which
// has then been called with the report).
bool continue_on_error();
uint64_t slab_errors();
// Counts one error of any kind (slab_errors()).
void note_slab_error();
// In-process tests: instead of aborting, every report is passed to hook (its first line: what
// was found) and slabkit goes on as with SLABKIT_CONTINUE_ON_ERROR. nullptr: abort again.
void set_error_hook(void (*hook)(const char *report));
// Calls the hook, if any, with report; true when one was set.
bool call_error_hook(const char *report);

} // namespace slabkit
