#!/usr/bin/env bash
# The main job: builds slabkit (release) and runs the benchmark comparison, in two parts:
#   1. slabkit's SLQB object allocator (kmem_cache API and kmalloc) side by side with glibc
#      malloc, jemalloc, tcmalloc and mimalloc (bench/slab_ratios.py; docs/benchmarks.md);
#   2. the page allocator against mmap/munmap and glibc malloc (bench/page_ratios.py).
# Quick by default (about a minute on 2 CPUs); --full: longer runs, 3 rounds, medians (4 to 6
# minutes). --no-pages skips part 2. Usage: scripts/run.sh [--full] [--no-pages]
set -euo pipefail
cd "$(dirname "$0")/.."
mode=--quick
pages=1
for arg in "$@"; do
  case "$arg" in
    --full) mode= ;;
    --no-pages) pages=0 ;;
    *) echo "usage: scripts/run.sh [--full] [--no-pages]" >&2; exit 2 ;;
  esac
done
scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target slab_bench page_bench
status=0
echo "== 1. Object allocator: slabkit SLQB vs glibc, jemalloc, tcmalloc, mimalloc =="
echo
/usr/bin/python3 bench/slab_ratios.py --binary build/release/bench/slab_bench $mode || status=$?
if [ "$pages" = 1 ]; then
  echo
  echo "== 2. Page allocator: slabkit vs mmap/munmap and glibc malloc =="
  echo
  /usr/bin/python3 bench/page_ratios.py --binary build/release/bench/page_bench $mode || status=$?
fi
exit "$status"
