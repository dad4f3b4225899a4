#!/usr/bin/env bash
# Checks that every source file includes only headers of its own layer or of the layers below it
# (docs/architecture.md): core < ir < ops < codegen for the compiler, and reports on core only.
set -euo pipefail
root=${1:?usage: check_layers.sh SOURCE_DIR}
declare -A allowed=(
  [core]="core"
  [ir]="core ir"
  [ops]="core ir ops"
  [codegen]="core ir ops codegen"
)
status=0
check() {  # check DIR LAYER_NAME "ALLOWED..."
  local dir=$1 name=$2 ok=$3
  while IFS= read -r hit; do
    local file=${hit%%:*} rest=${hit#*:}
    local line=${rest%%:*} used
    used=$(sed -E 's/.*#include "crucible\/([a-z_]+)\/.*/\1/' <<<"$rest")
    if [[ " $ok " != *" $used "* ]]; then
      echo "${file#"$root"/}:$line: layer '$name' includes crucible/$used (allowed: $ok)"
      status=1
    fi
  done < <(grep -rnE '#include "crucible/[a-z_]+/' "$dir" || true)
}
for layer in "${!allowed[@]}"; do
  check "$root/compiler/src/$layer" "$layer" "${allowed[$layer]}"
  check "$root/compiler/include/crucible/$layer" "$layer" "${allowed[$layer]}"
done
check "$root/reports" reports "core reports"
exit $status
