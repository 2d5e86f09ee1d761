#!/usr/bin/env bash
# Installs what slabkit needs on Debian 12 (apt packages by name), skipping what is there.
set -euo pipefail
packages=(cmake ninja-build g++ clang libclang-rt-14-dev clang-format
          googletest libgtest-dev libgmock-dev libbenchmark-dev python3
          # options and formatting of the benchmark tools (bench/design_counters.cpp)
          libcli11-dev libfmt-dev
          # JSON of the slabinfo tool (tools/slabinfo) and of the statistics tests
          nlohmann-json3-dev
          # slabbench (tools/slabbench): Student's t for its noise test (Boost.Math, headers),
          # plots of its report, and the MariaDB server and sysbench of its oltp workload
          libboost-dev python3-matplotlib mariadb-server sysbench
          # pkg-config, for the installed-package test (tests/package)
          pkgconf
          # the peers of the benchmark comparison, LD_PRELOADed by bench/slab_ratios.py
          libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0
          # real programs run under the preloaded malloc (tests/preload, bench/kbuild.py)
          sqlite3
          # callgrind counts the fast paths' instructions against their budget (tests/budget)
          valgrind
          # lld lays out libslabkit-malloc.so with its hot functions first (SLABKIT_HOT_TEXT)
          lld)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "slabkit: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
