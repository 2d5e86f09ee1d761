#!/usr/bin/env bash
# Installs a slabkit build into a temporary prefix, then builds and runs the consumer project
# (consumer/) against it twice: with CMake's find_package(slabkit) and with pkg-config.
# Under SLABKIT_SANITIZE the consumer is built with the same -fsanitize flags (EXTRA_FLAGS), so
# it can load the sanitized library.
#
# usage: package_test.sh BUILD_DIR WORK_DIR LIBDIR CMAKE CC CXX "EXTRA_FLAGS"
set -euo pipefail
build_dir=$1 work=$2 libdir=$3 cmake=$4 cc=$5 cxx=$6 flags=${7:-}
here=$(cd "$(dirname "$0")" && pwd)
prefix=$work/prefix

rm -rf "$work"
mkdir -p "$work"

echo "== install into $prefix"
"$cmake" --install "$build_dir" --prefix "$prefix"
so=$prefix/$libdir/libslabkit.so
test -e "$so" || { echo "missing $so"; exit 1; }
test -f "$prefix/include/slabkit/slabkit.h" -a -f "$prefix/include/slabkit/kernel.h" \
    -a -f "$prefix/include/slabkit/slabkit.hpp" || { echo "headers not installed"; exit 1; }

echo "== exported symbols"
exported=$(nm -D --defined-only "$so" | awk '{print $NF}')
bad=$(echo "$exported" | grep -v '^slabkit_' || true)
if [ -n "$bad" ]; then
    echo "libslabkit.so exports symbols outside slabkit_*:"; echo "$bad"; exit 1
fi
echo "$exported" | grep -qx slabkit_kmalloc || { echo "slabkit_kmalloc not exported"; exit 1; }
echo "ok: $(echo "$exported" | wc -l) symbols, all slabkit_*"

export LD_LIBRARY_PATH=$prefix/$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

echo "== CMake consumer (find_package)"
"$cmake" -S "$here/consumer" -B "$work/consumer-cmake" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$work/consumer-cmake.log" 2>&1 ||
    { cat "$work/consumer-cmake.log"; exit 1; }
"$cmake" --build "$work/consumer-cmake" -j2
"$work/consumer-cmake/consumer_c"
"$work/consumer-cmake/consumer_cxx"

echo "== pkg-config consumer"
pkgconfig=$(command -v pkg-config || command -v pkgconf || true)
if [ -z "$pkgconfig" ]; then
    echo "pkg-config is not installed (Debian package pkgconf; scripts/deps.sh)"; exit 1
fi
export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
pc_flags=$("$pkgconfig" --cflags --libs slabkit)
echo "pkg-config --cflags --libs slabkit: $pc_flags"
"$pkgconfig" --exact-version="$("$pkgconfig" --modversion slabkit)" slabkit
# shellcheck disable=SC2086 # the flags are words
"$cc" -std=c11 -Wall -Wextra -Werror $flags "$here/consumer/main.c" -o "$work/consumer_pc" $pc_flags
"$work/consumer_pc"
echo "package: ok"
