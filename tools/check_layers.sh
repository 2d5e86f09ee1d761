#!/usr/bin/env bash
# Checks the layering rule of src/README.md: a layer includes only itself and the layers below,
# and only the platform layer includes OS headers. "slabkit/..." is the public include/ folder,
# which the API and override layers implement.
set -uo pipefail
cd "$(dirname "$0")/../src"
# layer: allowed include prefixes (besides itself)
declare -A allowed=(
  [base]=""
  [platform]="base"
  [slot]="base platform"
  [page]="base platform slot"
  [core]="base platform slot page"
  [slqb]="base platform slot page core"
  [slub]="base platform slot page core"
  [slab]="base platform slot page core"
  [slob]="base platform slot page core"
  # The sheaves sit on SLUB's slab layer, as the kernel's do (src/sheaves/sheaves.hpp).
  [sheaves]="base platform slot page core slub"
  [designs]="base platform slot page core slqb slub slab slob sheaves"
  [kmalloc]="base platform slot page core slqb slub slab slob sheaves designs"
  [api]="base platform slot page core slqb slub slab slob sheaves designs kmalloc slabkit"
  [override]="base platform slot page core slqb slub slab slob sheaves designs kmalloc api slabkit"
)
os_headers='sys/|unistd\.h|pthread\.h|sched\.h|fcntl\.h|linux/|dlfcn\.h|signal\.h'
bad=0
for layer in "${!allowed[@]}"; do
  [ -d "$layer" ] || continue
  while IFS= read -r line; do
    file=${line%%:*}; inc=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"${line#*:}")
    top=${inc%%/*}
    [ "$top" = "$layer" ] && continue
    ok=0; for a in ${allowed[$layer]}; do [ "$top" = "$a" ] && ok=1; done
    if [ $ok -eq 0 ]; then echo "layering: src/$file includes \"$inc\" (layer $layer may not)"; bad=1; fi
  done < <(grep -rn --include='*.hpp' --include='*.cpp' -E '^#include "' "$layer" | sed -E 's/^([^:]+):[0-9]+:/\1:/')
  if [ "$layer" != platform ]; then
    if grep -rn --include='*.hpp' --include='*.cpp' -E "^#include <($os_headers)" "$layer"; then
      echo "layering: only src/platform may include OS headers (above)"; bad=1
    fi
  fi
done
[ $bad -eq 0 ] && echo "layering: ok"
exit $bad
