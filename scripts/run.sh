#!/usr/bin/env bash
# The main job: builds slabkit (release) and runs the benchmark comparison.
# Today: the page allocator against mmap/munmap and glibc malloc. Usage: scripts/run.sh [--full]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target page_bench
mode=--quick; [ "${1:-}" = --full ] && mode=
/usr/bin/python3 bench/page_ratios.py --binary build/release/bench/page_bench $mode
