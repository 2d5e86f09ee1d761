#!/bin/bash
# What hardening costs a real program: g++ compiling four of this project's translation units
# one after the other (the kbuild-like load: many small objects, a heap of a few hundred MiB)
# under the preloaded malloc replacement, per design, with each hardening option alone against
# the defaults. Rounds interleave the variants. One line per run: design, variant, round, wall
# seconds of the four compiles, the largest peak RSS in KiB.
# Usage: bench/hardening_cost.sh [HARDENED_LIB] [ROUNDS]
#   HARDENED_LIB: libslabkit-malloc.so of a build configured with -DSLABKIT_FREELIST_HARDENED=ON
#   (the obfuscated free pointers are a build option); without it that variant is left out.
set -u
cd "$(dirname "$0")/.."
L=build/release/libslabkit-malloc.so
H=${1:-}
ROUNDS=${2:-3}
TUS="tests/api/model_test.cpp tests/api/debug_test.cpp src/slab/slab_cache.cpp src/kmalloc/kmalloc.cpp"
out=$(mktemp -d)
compile_all() { # env... : prints "seconds max_rss_kib"
  local start end max=0 rss
  start=$(date +%s.%N)
  for tu in $TUS; do
    rss=$(env "$@" /usr/bin/time -f %M g++ -std=c++20 -O2 -Isrc -Iinclude -Itests -c "$tu" \
          -o "$out/o.o" 2>&1 >/dev/null | tail -1)
    ((rss > max)) && max=$rss
  done
  end=$(date +%s.%N)
  echo "$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }') $max"
}
for d in ${DESIGNS:-slqb slub slab}; do
  for r in $(seq "$ROUNDS"); do
    echo "$d defaults $r $(compile_all SLABKIT_ALLOCATOR=$d LD_PRELOAD=$PWD/$L)"
    echo "$d random-order $r $(compile_all SLABKIT_ALLOCATOR=$d SLABKIT_FREELIST_RANDOM=1 LD_PRELOAD=$PWD/$L)"
    echo "$d init-alloc $r $(compile_all SLABKIT_ALLOCATOR=$d SLABKIT_INIT=alloc LD_PRELOAD=$PWD/$L)"
    echo "$d init-alloc-free $r $(compile_all SLABKIT_ALLOCATOR=$d SLABKIT_INIT=alloc,free LD_PRELOAD=$PWD/$L)"
    [ -n "$H" ] && echo "$d obfuscated $r $(compile_all SLABKIT_ALLOCATOR=$d LD_PRELOAD=$H)"
  done
done
rm -rf "$out"
