#!/usr/bin/env bash
# Submits a sharded crucible run to Slurm: a job array of N shards, each writing its own
# database, and a merge job that runs after all of them (afterany: a failed shard is reported).
#
#   ci/slurm/submit.sh --shards N --out DIR [--bin PATH] [--partition P] [--wait] -- RUN_ARGS...
#
# RUN_ARGS are `crucible run` arguments (--suite, --backends, --mode, ...). DIR must be visible
# at the same path on every node. Prints the two job ids; with --wait, waits for the merge and
# exits with its status.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
shards="" out="" bin="$here/../../build/bin/crucible" wait=0 partition=()
usage() { echo "usage: $0 --shards N --out DIR [--bin PATH] [--partition P] [--wait] -- RUN_ARGS..." >&2; exit 2; }
while (($#)); do
  case "$1" in
    --shards) shards=${2:-}; shift 2 ;;
    --out) out=${2:-}; shift 2 ;;
    --bin) bin=${2:-}; shift 2 ;;
    --partition) partition=(--partition "${2:-}"); shift 2 ;;
    --wait) wait=1; shift ;;
    --) shift; break ;;
    *) echo "submit.sh: unknown option '$1'" >&2; usage ;;
  esac
done
[[ "$shards" =~ ^[1-9][0-9]*$ ]] || { echo "submit.sh: --shards wants a positive number, got '$shards'" >&2; exit 2; }
[ -n "$out" ] || { echo "submit.sh: --out DIR is required" >&2; exit 2; }
[ -x "$bin" ] || { echo "submit.sh: no crucible binary at $bin (build first, or --bin)" >&2; exit 2; }
(($#)) || { echo "submit.sh: give the crucible run arguments after --" >&2; exit 2; }
mkdir -p "$out"
out="$(cd "$out" && pwd)" bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
export CRUCIBLE_BIN="$bin" CRUCIBLE_OUT="$out" CRUCIBLE_SHARDS="$shards"

array=$(sbatch --parsable "${partition[@]}" --array="0-$((shards - 1))" --chdir="$out" \
  --export=ALL "$here/crucible_shard.sbatch" "$@")
array=${array%%;*}
merge_args=(--parsable "${partition[@]}" --dependency="afterany:$array" --chdir="$out" --export=ALL)
((wait)) && merge_args+=(--wait)
echo "submitted shard array $array ($shards tasks) into $out"
status=0
merge=$(sbatch "${merge_args[@]}" "$here/crucible_merge.sbatch") || status=$?
echo "merge job ${merge%%;*}: ${out}/merged.db"
exit "$status"
