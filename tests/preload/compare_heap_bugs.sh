#!/usr/bin/env bash
# compare_heap_bugs.sh - each heap bug of programs/heap_bugs.c run under the C library's own
# malloc, under libslabkit-malloc.so's default (no SLABKIT_ setting) and with red zones alone
# (SLABKIT_DEBUG=Z), a markdown row each:
# what the run ended in (report: the allocator printed an error and aborted; fault: SIGSEGV or
# SIGBUS at the bad access; - : the program went on and exited). docs/debug.md's comparison with
# glibc is its output.
#
#   tests/preload/compare_heap_bugs.sh [BUILD_DIR] [DESIGN]   (build/release, slqb)
set -u
build=${1:-build/release}
design=${2:-slqb}
prog=$build/tests/preload/preload_heap_bugs
lib=$(realpath "$build/libslabkit-malloc.so")
[ -x "$prog" ] && [ -f "$lib" ] || { echo "compare_heap_bugs: build $build first (no $prog or $lib)" >&2; exit 2; }

kinds=(double_free double_free_interleaved double_free_interleaved_4096 double_free_delayed
       double_free_page double_free_large free_stack free_interior free_far free_unaligned)
for size in 8 4096 262144; do
    for dir in over under; do
        for bytes in 1 32; do
            kinds+=("bounds_${dir}_${bytes}_${size}" "bounds_${dir}_${bytes}_${size}_memcpy")
        done
    done
done
kinds+=(overflow_1m overflow_into_free write_after_free_key write_after_free_reused
        write_after_free_256k write_after_free_2m read_after_free_256k use_after_free_large
        usable_size_after_free realloc_after_free zero_size_write zero_size_double_free
        sized_delete_wrong_large)

# What one run of the program on bug $1, with the environment after it, ended in.
run() {
    local k=$1
    shift
    env "$@" timeout 20 "$prog" "$k" > /dev/null 2>&1 < /dev/null &
    wait $!
    local rc=$?
    case $rc in
        0) echo "-" ;;
        134) echo "report" ;;
        139 | 135) echo "fault" ;;
        3 | 4) echo "n/a" ;; # the program's own: no such call here, or no neighbour to write into
        *) echo "exit $rc" ;;
    esac
}

echo "| bug | glibc | slabkit ($design) | \`SLABKIT_DEBUG=Z\` |"
echo "| --- | --- | --- | --- |"
caught_glibc=0 caught_ours=0 caught_z=0 n=0
for k in "${kinds[@]}"; do
    a=$(run "$k")
    b=$(run "$k" SLABKIT_ALLOCATOR="$design" LD_PRELOAD="$lib")
    z=$(run "$k" SLABKIT_ALLOCATOR="$design" SLABKIT_DEBUG=Z LD_PRELOAD="$lib")
    n=$((n + 1))
    [ "$a" = report ] || [ "$a" = fault ] && caught_glibc=$((caught_glibc + 1))
    [ "$b" = report ] || [ "$b" = fault ] && caught_ours=$((caught_ours + 1))
    [ "$z" = report ] || [ "$z" = fault ] && caught_z=$((caught_z + 1))
    echo "| \`$k\` | $a | $b | $z |"
done
echo
echo "stopped (report or fault): glibc $caught_glibc of $n, slabkit $caught_ours of $n, with Z $caught_z of $n"
