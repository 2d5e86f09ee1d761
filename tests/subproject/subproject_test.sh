#!/usr/bin/env bash
# Builds the consumer project (consumer/), which vendors slabkit the way users do, and runs its
# programs: once with add_subdirectory of the source tree, once with FetchContent of a source
# archive. The build must be free of warnings with the default options (no -Werror: a warning
# would not stop a user, so the log is read instead).
#
# usage: subproject_test.sh HOW SOURCE_DIR WORK_DIR CMAKE CC CXX BUILD_TYPE
#   HOW: subdirectory or fetchcontent; BUILD_TYPE may be "" (none)
set -euo pipefail
how=$1 source=$2 work=$3 cmake=$4 cc=$5 cxx=$6 build_type=${7:-}
here=$(cd "$(dirname "$0")" && pwd)

rm -rf "$work"
mkdir -p "$work"
if [ "$how" = fetchcontent ]; then
    # The tree as a release archive holds it: no build folders, no git metadata.
    tar -C "$source" --exclude=./build --exclude=./.git --transform 's,^\.,slabkit,' \
        -czf "$work/slabkit.tar.gz" .
    source=$work/slabkit.tar.gz
fi

echo "== configure ($how, build type '${build_type:-none}', $cxx)"
"$cmake" -S "$here/consumer" -B "$work/build" -G Ninja -DSLABKIT_HOW="$how" \
    -DSLABKIT_SOURCE="$source" -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_BUILD_TYPE="$build_type" >"$work/configure.log" 2>&1 ||
    { cat "$work/configure.log"; exit 1; }
grep -i 'warning' "$work/configure.log" && { echo "CMake warned while configuring"; exit 1; }

echo "== build"
"$cmake" --build "$work/build" -j2 >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
if grep -E 'warning:' "$work/build.log"; then
    echo "the build warned (above)"; exit 1
fi
# Nothing but the library, the malloc replacement and the consumer's programs was built.
built=$(grep -oE 'Linking (C|CXX) (shared library|executable) [^ ]+' "$work/build.log" |
        awk '{print $NF}' | xargs -n1 basename | sort | tr '\n' ' ')
echo "linked: $built"
[ "$built" = "libslabkit-malloc.so libslabkit.so.0.1.0 uses_api_c uses_api_cxx uses_malloc " ] ||
    { echo "expected only the two libraries and the three consumer programs"; exit 1; }

echo "== run"
"$work/build/uses_api_c"
"$work/build/uses_api_cxx"
"$work/build/uses_malloc"
echo "subproject ($how): ok"
