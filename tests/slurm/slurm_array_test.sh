#!/usr/bin/env bash
# End to end on a real Slurm: starts a single-node cluster (ci/slurm/local_cluster.sh), submits
# the tutorial and small suites as a 2-shard job array with ci/slurm/submit.sh, waits for the
# merge job, and checks that the merged store holds every (suite, model, backend) exactly once.
#   slurm_array_test.sh SOURCE_DIR CRUCIBLE_BIN
# Exit 77 (ctest: skipped) only when this machine will not let the daemons start.
set -euo pipefail
src=$1 bin=$2
work=$(mktemp -d /tmp/crucible_slurm.XXXXXX)
cleanup() {
  bash "$src/ci/slurm/local_cluster.sh" stop "$work/cluster" || true
  rm -rf "$work"
}
trap cleanup EXIT
start=$(date +%s)

status=0
conf=$(bash "$src/ci/slurm/local_cluster.sh" start "$work/cluster") || status=$?
if ((status == 3)); then
  echo "SKIPPED: this machine does not let a Slurm cluster start (see the line above)"
  exit 77
fi
((status == 0)) || exit "$status"
eval "$conf"
sinfo

suites=tutorial,mlp,transformer,vision
backends=eager,codegen
bash "$src/ci/slurm/submit.sh" --shards 2 --out "$work/out" --bin "$bin" --wait -- \
  --suite "$suites" --variant small --backends "$backends" --mode accuracy --threads 1
echo "--- shard logs"
tail -n 3 "$work"/out/crucible-shard-*.log

db="$work/out/merged.db"
[ -f "$db" ] || { echo "FAIL: no merged database"; exit 1; }
q() { "$bin" query "$1" --db "$db" --format csv | tail -n +2; }
# Every model of the four manifests, on both backends, once each.
expected=0
for s in ${suites//,/ }; do
  n=$(grep -c '^model ' "$src/suites/$s/suite.manifest")
  expected=$((expected + n * 2))
done
got=$(q "SELECT count(*) FROM results WHERE mode = 'accuracy'")
dups=$(q "SELECT suite || '/' || model || '/' || backend FROM results GROUP BY suite, model, backend, mode HAVING count(*) > 1")
runs=$(q "SELECT count(*) FROM runs")
distinct=$(q "SELECT count(DISTINCT suite || '/' || model || '/' || backend) FROM results")
echo "merged: $runs runs, $got accuracy results ($distinct distinct), expected $expected"
[ "$runs" -eq 2 ] || { echo "FAIL: $runs runs in the merged store, 2 shards submitted"; exit 1; }
[ -z "$dups" ] || { echo "FAIL: results present more than once: $dups"; exit 1; }
[ "$got" -eq "$expected" ] && [ "$distinct" -eq "$expected" ] ||
  { echo "FAIL: $got results ($distinct distinct), $expected expected"; exit 1; }
# Every manifest model is there by name.
for s in ${suites//,/ }; do
  for m in $(awk '$1 == "model" {print $2}' "$src/suites/$s/suite.manifest"); do
    n=$(q "SELECT count(*) FROM results WHERE suite = '$s' AND model = '$m'")
    [ "$n" -eq 2 ] || { echo "FAIL: $s/$m has $n results, 2 expected"; exit 1; }
  done
done
# Merging the shards again adds nothing.
"$bin" db merge "$db" "$work"/out/shard_*.db
again=$(q "SELECT count(*) FROM results")
[ "$again" -eq "$got" ] || { echo "FAIL: a second merge changed $got results into $again"; exit 1; }
echo "Slurm array test wall time: $(($(date +%s) - start)) s"
