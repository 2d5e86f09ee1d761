#!/usr/bin/env bash
# Checks that every C++ file follows .clang-format (clang-format 14).
set -uo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files -co --exclude-standard -- '*.cpp' '*.hpp' '*.h')
[ -z "$files" ] && exit 0
if clang-format --dry-run -Werror $files 2>/tmp/slabkit-format.log; then
  echo "format: ok"
else
  grep -E '^[^ ].*: (error|warning):' /tmp/slabkit-format.log | head -20
  echo "format: run clang-format -i on the files above"; exit 1
fi
