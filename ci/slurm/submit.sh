#!/usr/bin/env bash
# Submits a sharded crucible run to Slurm: a job array of N shards, each writing its own
# database, and a merge job that runs after all of them (afterany: a lost shard is reported).
#
#   ci/slurm/submit.sh --shards N --out DIR [--bin PATH] [--wait] [SBATCH OPTIONS] -- RUN_ARGS...
#
# RUN_ARGS are `crucible run` arguments (--suite, --backends, --mode, ...). DIR must be visible
# at the same path on every node. Prints the two job ids; with --wait, waits for the merge and
# exits with its status (non-zero when a shard was lost: see crucible_merge.sbatch).
#
# SBATCH OPTIONS, passed to sbatch:
#   --partition P, --account A, --qos Q      both jobs
#   --time T, --mem M, --cpus-per-task C, --exclusive, --constraint F
#                                            each shard task (a shard's --threads follows C)
#   --sbatch-opt OPT                         any other sbatch option for the shards, repeatable
#                                            (one word: --sbatch-opt=--gres=gpu:1)
#   --merge-sbatch-opt OPT                   the same for the merge job
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
shards="" out="" bin="$here/../../build/bin/crucible" wait=0 both=() shard_opts=() merge_opts=()
usage() {
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
# An option's value: the next word, which must be there and not be another option.
value() {
  [ $# -ge 2 ] && [ -n "$2" ] && [[ "$2" != --* ]] || { echo "submit.sh: $1 wants a value" >&2; exit 2; }
  printf '%s' "$2"
}
while (($#)); do
  case "$1" in
    --shards) shards=$(value "$@"); shift 2 ;;
    --out) out=$(value "$@"); shift 2 ;;
    --bin) bin=$(value "$@"); shift 2 ;;
    --wait) wait=1; shift ;;
    --partition | --account | --qos) both+=("$1=$(value "$@")"); shift 2 ;;
    --time | --mem | --cpus-per-task | --constraint) shard_opts+=("$1=$(value "$@")"); shift 2 ;;
    --exclusive) shard_opts+=(--exclusive); shift ;;
    --sbatch-opt) [ $# -ge 2 ] || usage; shard_opts+=("$2"); shift 2 ;;
    --sbatch-opt=*) shard_opts+=("${1#--sbatch-opt=}"); shift ;;
    --merge-sbatch-opt) [ $# -ge 2 ] || usage; merge_opts+=("$2"); shift 2 ;;
    --merge-sbatch-opt=*) merge_opts+=("${1#--merge-sbatch-opt=}"); shift ;;
    -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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

array=$(sbatch --parsable ${both[@]+"${both[@]}"} ${shard_opts[@]+"${shard_opts[@]}"} \
  --array="0-$((shards - 1))" --chdir="$out" --export=ALL "$here/crucible_shard.sbatch" "$@")
array=${array%%;*}
merge_args=(--parsable ${both[@]+"${both[@]}"} ${merge_opts[@]+"${merge_opts[@]}"}
  --dependency="afterany:$array" --chdir="$out" --export=ALL)
((wait)) && merge_args+=(--wait)
echo "submitted shard array $array ($shards tasks) into $out"
status=0
merge=$(sbatch "${merge_args[@]}" "$here/crucible_merge.sbatch") || status=$?
merge=${merge%%;*}
echo "merge job ${merge}: ${out}/merged.db"
if ((wait)) && ((status != 0)); then
  echo "submit.sh: the merge failed (exit $status); its log:" >&2
  cat "$out/crucible-merge-$merge.log" >&2 2>/dev/null || true
fi
exit "$status"
