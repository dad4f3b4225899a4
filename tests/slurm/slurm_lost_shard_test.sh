#!/usr/bin/env bash
# Issue 31 item 10 on a real Slurm (ci/slurm/local_cluster.sh): a 2-shard job array whose shard 1
# is killed with SIGKILL right after its run row exists (a --bin wrapper does it), as the OOM
# killer or a lost node would. The merge job must fail naming shard 1, its database and its
# unfinished run, and `submit.sh --wait` must exit non-zero. Also: the shards' --threads follow
# --cpus-per-task; without a cluster, the merge step names a shard that wrote no database, and a
# rerun of the lost shard alone (sbatch --array=1) lets the merge succeed.
#   slurm_lost_shard_test.sh SOURCE_DIR CRUCIBLE_BIN
# Exit 77 (ctest: skipped) only when this machine will not let the daemons start.
set -euo pipefail
src=$1 bin=$2
work=$(mktemp -d /tmp/crucible_slurm_lost.XXXXXX)
cleanup() {
  bash "$src/ci/slurm/local_cluster.sh" stop "$work/cluster" || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
start=$(date +%s)

# The wrapper: logs every call; `run --shard 1/2` is killed with SIGKILL once its run is recorded
# with its plan (it may have written its first result by then: at most 1 of its 2).
cat > "$work/crucible" <<WRAP
#!/usr/bin/env bash
real="$bin"
echo "\$*" >> "$work/calls.log"
if [ "\${1:-}" = run ] && [[ " \$* " == *" --shard 1/2 "* ]]; then
  db=""
  args=("\$@")
  for ((i = 0; i < \${#args[@]}; ++i)); do [ "\${args[i]}" = --db ] && db=\${args[i + 1]}; done
  "\$real" "\$@" & pid=\$!
  for _ in \$(seq 1200); do
    n=\$("\$real" query "SELECT count(*) FROM runs WHERE planned_results = 2" --db "\$db" --format csv 2>/dev/null | tail -n 1) || true
    [ "\$n" = 1 ] && break
    sleep 0.05
  done
  kill -KILL "\$pid"
  wait "\$pid" || exit \$?
  exit 0
fi
exec "\$real" "\$@"
WRAP
chmod +x "$work/crucible"

status=0
export SLURM_LOCAL_PORT=${SLURM_LOCAL_PORT:-16827}  # beside the other Slurm test's cluster
conf=$(bash "$src/ci/slurm/local_cluster.sh" start "$work/cluster") || status=$?
if ((status == 3)); then
  echo "SKIPPED: this machine does not let a Slurm cluster start (see the line above)"
  exit 77
fi
((status == 0)) || exit "$status"
eval "$conf"

out="$work/out"
run_args=(--suite tutorial --backends eager --mode accuracy)
status=0
bash "$src/ci/slurm/submit.sh" --shards 2 --out "$out" --bin "$work/crucible" --wait \
  --cpus-per-task 2 --time 10 -- "${run_args[@]}" >"$work/submit.log" 2>&1 || status=$?
cat "$work/submit.log"
echo "--- shard logs"
tail -n 3 "$out"/crucible-shard-*.log || true
echo "--- calls"
cat "$work/calls.log"

((status != 0)) || fail "submit.sh --wait exited 0 although shard 1 was killed"
merge_log=$(cat "$out"/crucible-merge-*.log)
for needed in "shard 1 of 2 ($out/shard_1.db)" "'running'" "of 2 planned results" "1 of 2 shards lost"; do
  [[ "$merge_log" == *"$needed"* ]] || fail "the merge log does not say '$needed':
$merge_log"
done
[[ "$merge_log" != *"shard 0 of 2"* ]] || fail "the merge blamed shard 0:
$merge_log"
[ ! -e "$out/merged.db" ] || fail "a merged database was written from a lost shard"
# Shard 0 finished, and its threads followed --cpus-per-task 2 (the run was not given --threads).
grep -q -- "run --shard 0/2 .*--threads 2 " "$work/calls.log" ||
  fail "shard 0 did not run with --threads 2 from SLURM_CPUS_PER_TASK"
"$bin" db check "$out/shard_0.db" || fail "shard 0's run did not finish"
# The C++ merge refuses the killed shard on its own too, naming the file and run.
status=0
"$bin" db merge "$work/by_hand.db" "$out/shard_0.db" "$out/shard_1.db" 2>"$work/merge.err" || status=$?
cat "$work/merge.err"
((status == 1)) || fail "db merge of a killed shard exited $status, 1 expected"
grep -q "$out/shard_1.db: 1 run did not finish" "$work/merge.err" || fail "db merge did not name shard_1.db"

# Without the cluster: the merge step names a shard that wrote no database.
export CRUCIBLE_BIN="$bin" CRUCIBLE_OUT="$out" CRUCIBLE_SHARDS=2
mv "$out/shard_1.db" "$work/killed.db"
status=0
bash "$src/ci/slurm/crucible_merge.sbatch" 2>"$work/merge.err" || status=$?
cat "$work/merge.err"
((status != 0)) || fail "the merge step passed without shard 1's database"
grep -q "shard 1 of 2 ($out/shard_1.db): wrote no database" "$work/merge.err" ||
  fail "the merge step did not name the missing database"
# Rerunning the lost shard alone (what `sbatch --array=1` does) repairs the night: its task count
# is 1 then, and the shard count comes from CRUCIBLE_SHARDS.
cp "$work/killed.db" "$out/shard_1.db"
(cd "$out" && SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=1 SLURM_CPUS_PER_TASK=1 \
  bash "$src/ci/slurm/crucible_shard.sbatch" "${run_args[@]}") || fail "rerunning shard 1 failed"
ls "$out"/shard_1.db.replaced-* >/dev/null || fail "the killed attempt's database was not set aside"
bash "$src/ci/slurm/crucible_merge.sbatch" || fail "the merge failed after shard 1 was rerun"
n=$("$bin" query "SELECT count(*) FROM runs WHERE status = 'complete'" --db "$out/merged.db" --format csv | tail -n 1)
expected=$(grep -c '^model ' "$src/suites/tutorial/suite.manifest")
got=$("$bin" query "SELECT count(*) FROM results" --db "$out/merged.db" --format csv | tail -n 1)
[ "$n" = 2 ] || fail "$n complete runs merged, 2 expected"
[ "$got" = "$expected" ] || fail "$got results merged, $expected expected"
echo "Slurm lost-shard test wall time: $(($(date +%s) - start)) s"
