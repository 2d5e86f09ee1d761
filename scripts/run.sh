#!/usr/bin/env bash
# The main job: builds slabkit (release) and runs the benchmark comparison, in three parts:
#   1. slabkit's object allocators, every design the build has (SLQB, ...: each one's kmem_cache
#      API, kmalloc and preloaded malloc replacement) side by side with glibc malloc, jemalloc,
#      tcmalloc and mimalloc (bench/slab_ratios.py; docs/benchmarks.md);
#      and the kmem_cache pair as a program linking libslabkit.so gets it, with the header's
#      inline fast paths, against each malloc's pair (bench/linked_ratios.py);
#   2. the page allocator against mmap/munmap and glibc malloc (bench/page_ratios.py);
#   3. kbuild-like: g++ compiling a set of this project's sources under slabkit's malloc
#      replacement (each design) and under each of those mallocs, wall time and peak RSS
#      (bench/kbuild.py);
#   4. allocation patterns of real programs (threads trading mixed sizes, bursts with pauses,
#      large blocks of 2 to 32 MiB, a store of 1 KiB values) under the malloc replacement and
#      each of those mallocs, time and peak RSS (bench/pattern_ratios.py);
#   5. many live threads (2 to 3000 threads allocating and freeing, and the same live data held by
#      2 and by 256 threads) under the malloc replacement in each slot mode (threads' own slots,
#      the CPUs' slots with rseq, and auto, the default) and under each of those mallocs, time and
#      peak RSS (bench/thread_scaling.py; SLQB only in the quick run).
# Each script measures every design of the build by default, so nothing here names a design.
# Quick by default (3 min 31 s on the project's 2-CPU machine with four designs, five parts,
# 2026-12-02);
# --full: longer runs, 3 rounds, medians, and the full kbuild set over 5 rounds. --no-pages
# skips part 2, --no-kbuild part 3, --no-patterns part 4, --no-threads part 5.
# Usage: scripts/run.sh [--full] [--no-pages] [--no-kbuild] [--no-patterns] [--no-threads]
set -euo pipefail
cd "$(dirname "$0")/.."
mode=--quick
pages=1
kbuild=1
patterns=1
threads=1
for arg in "$@"; do
  case "$arg" in
    --full) mode= ;;
    --no-pages) pages=0 ;;
    --no-kbuild) kbuild=0 ;;
    --no-patterns) patterns=0 ;;
    --no-threads) threads=0 ;;
    *) echo "usage: scripts/run.sh [--full] [--no-pages] [--no-kbuild] [--no-patterns] [--no-threads]" >&2; exit 2 ;;
  esac
done
scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target slab_bench page_bench pattern_bench slabkit_malloc \
  linked_pair
status=0
echo "== 1. Object allocators: slabkit, every design (cache, kmalloc, malloc) vs glibc, jemalloc, tcmalloc, mimalloc =="
echo
/usr/bin/python3 bench/slab_ratios.py --binary build/release/bench/slab_bench $mode || status=$?
echo
echo "== 1b. The kmem_cache pair as a program linking libslabkit.so gets it (public header) =="
echo
if [ -n "$mode" ]; then
  /usr/bin/python3 bench/linked_ratios.py --rounds 1 --min-time 0.1 || status=$?
else
  /usr/bin/python3 bench/linked_ratios.py --rounds 3 --min-time 0.3 || status=$?
fi
if [ "$pages" = 1 ]; then
  echo
  echo "== 2. Page allocator: slabkit vs mmap/munmap and glibc malloc =="
  echo
  /usr/bin/python3 bench/page_ratios.py --binary build/release/bench/page_bench $mode || status=$?
fi
if [ "$kbuild" = 1 ]; then
  echo
  echo "== 3. kbuild-like: g++ under slabkit's malloc (every design) vs glibc, jemalloc, tcmalloc, mimalloc =="
  echo
  /usr/bin/python3 bench/kbuild.py --library build/release/libslabkit-malloc.so $mode \
    || status=$?
fi
if [ "$patterns" = 1 ]; then
  echo
  echo "== 4. Allocation patterns: slabkit's malloc (every design) vs glibc, jemalloc, tcmalloc, mimalloc =="
  echo
  /usr/bin/python3 bench/pattern_ratios.py --library build/release/libslabkit-malloc.so $mode \
    || status=$?
fi
if [ "$threads" = 1 ]; then
  echo
  echo "== 5. Many live threads: slabkit's malloc in each slot mode vs glibc, tcmalloc, mimalloc, jemalloc =="
  echo
  if [ -n "$mode" ]; then
    /usr/bin/python3 bench/thread_scaling.py --quick --designs slqb --slot-modes thread,cpu,auto \
      --library build/release/libslabkit-malloc.so || status=$?
  else
    /usr/bin/python3 bench/thread_scaling.py --rounds 3 --designs slqb,slub,slab \
      --slot-modes thread,cpu,auto --library build/release/libslabkit-malloc.so || status=$?
  fi
fi
exit "$status"
