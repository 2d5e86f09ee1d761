#!/usr/bin/env bash
# libslabkit-malloc.so is loaded into every process that preloads it, C programs and shells
# included: it must need libc alone (no libstdc++, libm or libgcc_s to load and relocate at each
# start), and every symbol it takes from elsewhere must be libc's, or weak (operator new's
# new-handler and bad_alloc, found in libstdc++ only when the program has it).
#
# usage: needs_libc_only.sh LIBRARY
set -euo pipefail
lib=$1
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
echo "NEEDED: $needed"
if [ "$needed" != "libc.so.6 " ]; then
    echo "$lib needs more than libc.so.6: $needed"; exit 1
fi
# Strong undefined symbols not versioned by glibc (a C++ runtime function, a libm one...).
foreign=$(nm -D --undefined-only "$lib" | awk '$1 == "U" && $2 !~ /@GLIBC_/ {print $2}')
if [ -n "$foreign" ]; then
    echo "$lib takes symbols from outside libc:"; echo "$foreign"; exit 1
fi
echo "ok: libc.so.6 alone, $(nm -D --undefined-only "$lib" | awk '$1 == "w"' | wc -l) weak references"
