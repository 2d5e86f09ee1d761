#!/usr/bin/env bash
# The main job: installs what is missing, builds slabkit (release) and runs slabbench, the
# seeds' benchmarks side by side (docs/slabbench.md): hackbench, netperf (the 13-size sweep and
# 64 threads), volanoMark-like chat rooms, sysbench OLTP against a MariaDB server, kbuild (g++
# under each malloc), the boot footprint, the micro-benchmarks (pairs, batches, remote frees,
# cost against live objects) and the page allocator, each for slabkit's four designs (and their
# order-0, slot and debug variants where the seed compares them) and for glibc, jemalloc,
# tcmalloc and mimalloc, and snmalloc and mimalloc 3 where ../shared/peers is there (built from
# its source archives into build/peers, once: about 2 minutes). Quick by default (under 5 minutes on the project's 2-CPU machine);
# the tables go to stdout, and the report (plots, HTML, JSON, CSV) to build/slabbench-report.
# Usage: scripts/run.sh [--full] [WORKLOAD ...] [any slabbench option: --help lists them]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target slabbench slabkit_malloc
# The strongest peers of today, which Debian does not package (slabbench finds them in
# build/peers); a machine without ../shared/peers runs without them.
if [ -x ../shared/peers/build.sh ]; then
  ../shared/peers/build.sh build/peers >/dev/null || echo "run.sh: the peers of ../shared/peers did not build; running without them" >&2
fi
exec build/release/tools/slabbench/slabbench --report build/slabbench-report "$@"
