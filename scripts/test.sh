#!/usr/bin/env bash
# Builds and runs every test under every preset: release (g++), clang (warnings check),
# debug (ASan + UBSan), tsan (ThreadSanitizer). Also checks the layering rule and formatting.
# Then builds the whole tree once more as users build it: plain CMake, CMAKE_BUILD_TYPE=Release
# (-O3), g++, no preset ("plain": a build with -Werror, no tests run; the library as a
# subproject is tested by the release and clang presets' subproject_* tests).
# Usage: scripts/test.sh [preset ...]   (default: release clang debug tsan plain)
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh || exit 1
presets=("$@")
((${#presets[@]})) || presets=(release clang debug tsan plain)
jobs=$(nproc)
failed_steps=()
failure_notes=$(mktemp)
passed=0
failed=0

echo "== layering rule"; tools/check_layers.sh || failed_steps+=("layering")
echo "== formatting"; tools/check_format.sh || failed_steps+=("format")

for preset in "${presets[@]}"; do
  if [ "$preset" = plain ]; then
    echo "== plain Release build (g++, no preset)"
    cmake -S . -B build/plain-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DSLABKIT_WERROR=ON \
      -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ >/dev/null &&
      cmake --build build/plain-release -j "$jobs" || failed_steps+=("plain Release build")
    continue
  fi
  echo "== preset $preset: configure and build"
  if ! cmake --preset "$preset" >/dev/null || ! cmake --build --preset "$preset" -j "$jobs"; then
    failed_steps+=("$preset build"); continue
  fi
  echo "== preset $preset: test"
  log=$(mktemp)
  # TSan needs a fixed address-space layout on kernels with high mmap randomisation.
  run=(); [ "$preset" = tsan ] && run=(setarch "$(uname -m)" -R)
  "${run[@]}" ctest --preset "$preset" -j "$jobs" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  summary=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | tail -1)
  if [[ $summary =~ ([0-9]+)\ tests\ failed\ out\ of\ ([0-9]+) ]]; then
    failed=$((failed + BASH_REMATCH[1])); passed=$((passed + BASH_REMATCH[2] - BASH_REMATCH[1]))
  fi
  if [ "$status" -ne 0 ]; then
    failed_steps+=("$preset tests")
    # What each failing test said, repeated at the end where a log's tail shows it.
    # The assertions, sanitizer reports and timeouts first: a failing test's output may also
    # hold many reports it expected (the debug tests' BUG reports), which come after.
    { echo "-- $preset"
      grep -E '^[[:space:]]*[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess aborted|Exception|Child aborted)' "$log"
      # (FAIL: is what the Python tests print for a failed check.)
      grep -E -A6 ': Failure$|^FAIL: |ERROR: (Address|Undefined|Leak)Sanitizer|runtime error:|WARNING: ThreadSanitizer|Child aborted|\*\*\*Timeout|\*\*\*Exception' "$log" |
        head -100
      grep -E '^\[  FAILED  \]' "$log" | sort -u | head -40
      # A test that died (abort, signal, timeout) or failed says why in its last lines: often a
      # slabkit report or a script's own message, which the patterns above leave out.
      awk '/^ *[0-9]+\/[0-9]+ Test +#[0-9]+:/ { if (keep) dump(); keep = /\*\*\*(Exception|Timeout|Failed)|Subprocess aborted|SEGFAULT|Child aborted/; n = 0; head = $0; next }
           /^ *Start +[0-9]+:/ { if (keep) dump(); keep = 0; next }
           keep { buf[n++ % 15] = $0 }
           function dump(  i) { print "last lines of: " head; for (i = (n > 15 ? n - 15 : 0); i < n; i++) print "  " buf[i % 15]; keep = 0 }
           END { if (keep) dump() }' "$log" | head -120; } >>"$failure_notes"
  fi
  # The clang preset builds and runs the libFuzzer target (tests/fuzz, ctest entry api_fuzz, a
  # bounded run over the seed corpus): it must not drop out silently.
  if [ "$preset" = clang ] && ! grep -q 'Test *#[0-9]*: api_fuzz ' "$log"; then
    failed_steps+=("clang: the fuzz target api_fuzz was not built")
  fi
  rm -f "$log"
done

if [ -s "$failure_notes" ]; then echo "== what the failing tests said"; cat "$failure_notes"; fi
rm -f "$failure_notes"
if ((${#failed_steps[@]})); then echo "FAILED: ${failed_steps[*]}"; fi
echo "presets run: ${presets[*]}"
echo "tests: $passed passed, $failed failed"
((${#failed_steps[@]} == 0))
