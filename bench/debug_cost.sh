#!/bin/bash
# What debugging costs: pattern_bench's store and xthread-mixed patterns under the preloaded
# malloc replacement, per design, with SLABKIT_DEBUG unset, F, FZP and 1 (FZPU) (MODES sets
# others: Z is red zones alone), three runs each;
# one line per run: pattern, design, mode, run, wall seconds, peak RSS in KiB. The README's
# debugging table gives the medians as ratios to the runs without debugging.
# Usage: [DESIGNS="slqb slob"] [MODES="off Z"] bench/debug_cost.sh   (from a release build in build/release)
set -u
cd "$(dirname "$0")/.."
B=build/release/bench/pattern_bench
L=build/release/libslabkit-malloc.so
for pat in store xthread-mixed; do
 for d in ${DESIGNS:-slqb slub slab slob}; do
  for mode in ${MODES:-off F FZP 1}; do
   for r in 1 2 3; do
    if [ $mode = off ]; then env_dbg=""; else env_dbg="SLABKIT_DEBUG=$mode"; fi
    out=$(env $env_dbg SLABKIT_ALLOCATOR=$d LD_PRELOAD=$L $B --pattern $pat --scale 0.25 --json 2>/dev/null | tail -1)
    /usr/bin/python3 -c "import json,sys; j=json.loads(sys.argv[1]); print('$pat $d $mode $r', round(j['wall_s'],3), j['peak_rss_kib'])" "$out"
   done
  done
 done
done
