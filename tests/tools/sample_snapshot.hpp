// sample_snapshot.hpp - a hand-made snapshot (docs/slabinfo.md, version 1) for the slabinfo tests:
// one cache of each design, one of them empty, two NUMA nodes. The views' tests compute what
// they expect from these figures by hand.
#pragma once

#include <string_view>

namespace slabinfo_test {

inline constexpr std::string_view kSampleJson = R"json({
  "format": "slabkit-stats",
  "version": 1,
  "pid": 4242,
  "program": "sample-prog",
  "time_ns": 1764800000000000000,
  "design": "slqb",
  "designs": "slqb slub slab slob",
  "page_size": 4096,
  "caches": [
    {
      "name": "kmalloc-64", "design": "slqb", "object_size": 64, "slot_size": 64, "align": 8,
      "order": 0, "objects_per_slab": 64, "flags": "", "slabs": 3, "active_slabs": 3,
      "objects": 192, "active_objects": 120, "queued_objects": 20, "shared_avail": 0,
      "slabinfo_tunables": [1024, 256, 0],
      "tunables": {"order": 0, "hiwater": 1024, "freebatch": 256},
      "counters": {"ALLOC": 5000, "ALLOC_SLAB_FILL": 10, "ALLOC_SLAB_NEW": 3, "FREE": 4880,
                   "FREE_REMOTE": 400, "FLUSH_FREE_LIST": 100},
      "activity": {"allocs": 5000, "alloc_slow": 13, "frees": 4880, "free_slow": 500}
    },
    {
      "name": "kmalloc-4096", "design": "slub", "object_size": 4096, "slot_size": 4096,
      "align": 8, "order": 3, "objects_per_slab": 8, "flags": "", "slabs": 40,
      "active_slabs": 40, "objects": 320, "active_objects": 300, "queued_objects": 0,
      "shared_avail": 0, "slabinfo_tunables": [0, 0, 0],
      "tunables": {"order": 3, "min_partial": 5, "cpu_partial": 6},
      "counters": {"ALLOC_FASTPATH": 900000, "ALLOC_SLOWPATH": 100000, "FREE_FASTPATH": 999000,
                   "FREE_SLOWPATH": 700, "FREE_FROZEN": 12},
      "activity": {"allocs": 1000000, "alloc_slow": 100000, "frees": 999700, "free_slow": 700}
    },
    {
      "name": "dentry", "design": "slab", "object_size": 192, "slot_size": 256, "align": 64,
      "order": 1, "objects_per_slab": 32, "flags": "FZP", "slabs": 10, "active_slabs": 8,
      "objects": 320, "active_objects": 250, "queued_objects": 30, "shared_avail": 12,
      "slabinfo_tunables": [120, 60, 8],
      "tunables": {"order": 1, "limit": 120, "batchcount": 60, "shared": 8},
      "counters": {"ALLOCHIT": 7000, "ALLOCMISS": 300, "FREEHIT": 6900, "FREEMISS": 150,
                   "GROWN": 12, "REAPED": 2},
      "activity": {"allocs": 7300, "alloc_slow": 300, "frees": 7050, "free_slow": 150}
    },
    {
      "name": "empty-cache", "design": "slub", "object_size": 32, "slot_size": 32, "align": 8,
      "order": 0, "objects_per_slab": 128, "flags": "", "slabs": 0, "active_slabs": 0,
      "objects": 0, "active_objects": 0, "queued_objects": 0, "shared_avail": 0,
      "slabinfo_tunables": [0, 0, 0],
      "tunables": {"order": 0, "min_partial": 5, "cpu_partial": 30},
      "counters": {"ALLOC_FASTPATH": 9, "ALLOC_SLOWPATH": 1, "FREE_FASTPATH": 9,
                   "FREE_SLOWPATH": 1},
      "activity": {"allocs": 10, "alloc_slow": 1, "frees": 10, "free_slow": 1}
    },
    {
      "name": "slob-objects", "design": "slob", "object_size": 100, "slot_size": 102,
      "align": 4, "order": 0, "objects_per_slab": 40, "flags": "U", "slabs": 2,
      "active_slabs": 2, "objects": 80, "active_objects": 50, "queued_objects": 0,
      "shared_avail": 0, "slabinfo_tunables": [0, 0, 0],
      "tunables": {},
      "counters": {},
      "activity": {"allocs": 2000, "alloc_slow": 2000, "frees": 1950, "free_slow": 1950}
    }
  ],
  "heap": {
    "caches": 5, "slab_pages": 392, "objects_in_use": 720, "object_bytes": 1308480,
    "free_objects": 192, "free_object_bytes": 135616, "block_pages": 7, "free_pages": 500,
    "free_resident_pages": 100, "returned_pages": 3, "reserved_bytes": 1073741824,
    "large_blocks": 2, "large_bytes": 16777216, "kept_blocks": 1, "kept_bytes": 8388608,
    "errors": 1, "refusals": 4
  },
  "pages": {
    "in_use": 399, "in_pcp": 30, "free_pages": 500, "free_resident": 100, "returned": 3,
    "resident": 529, "reserved_bytes": 1073741824, "chunks": 2, "errors": 1,
    "nodes": [
      {"node": 0, "free_blocks": [1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1], "free_pages": 400,
       "free_resident": 60, "in_use": 300, "in_pcp": 20, "usable_pages": 258048,
       "chunks": 1, "returned": 2, "decommits": 5},
      {"node": 1, "free_blocks": [3, 1, 0, 0, 4, 0, 0, 0, 0, 0, 0], "free_pages": 100,
       "free_resident": 40, "in_use": 99, "in_pcp": 10, "usable_pages": 129024,
       "chunks": 1, "returned": 1, "decommits": 7}
    ]
  },
  "slots": {
    "mode": "thread", "why": "SLABKIT_SLOTS=thread", "rseq": "glibc", "cpu_slots": 0,
    "thread_slots": 1024, "threads_owning": 3, "restarts": 4, "busy": 5, "shared_holds": 6,
    "cpu_drains": 7
  },
  "failslab": {
    "armed": true, "probability": 12.5, "interval": 3, "times": -1, "space": 4096,
    "caches": "kmalloc-*", "failures": 9, "block_failures": 2, "caches_untracked": 0
  },
  "live": {"period_ms": 1000, "publish_count": 12}
})json";

} // namespace slabinfo_test
