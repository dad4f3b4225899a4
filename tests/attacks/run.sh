#!/usr/bin/env bash
# The attack corpus: builds tests/attacks against an installed crucible as a third party would,
# runs each hostile backend on tutorial graphs and on copies of ONNX node cases in `both` and in
# `performance` mode, and checks that none gets a pass (accuracy fail_accuracy; performance not
# timed, or failed by the parent's check of what the timing worker handed out) and that the
# expected outputs on disk are untouched. Each attack's log must show it acted (it reached the process it was
# loaded in), so a test that passes because an attack never ran cannot hide here.
#   run.sh BUILD_DIR
set -euo pipefail
build_dir=$1
src_dir=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$src_dir" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/build" >/dev/null
crucible="$work/prefix/bin/crucible"

# Two tutorial graphs and three ONNX node cases (copies: an attack may write to them).
mkdir -p "$work/suite/cases"
cp "$work/prefix/share/crucible/suites/tutorial/"{sin_cos,add_add_mul_add}.graph "$work/suite/"
node=/usr/share/libonnx-testdata/data/node
cases=()
if [ -d "$node" ]; then
  for c in test_add test_sigmoid test_relu; do cp -r "$node/$c" "$work/suite/cases/"; cases+=("$c"); done
  cp -r "$work/suite/cases" "$work/pristine"
fi
{
  echo "model sin_cos graph=sin_cos.graph"
  echo "model add_add_mul_add graph=add_add_mul_add.graph"
  [ ${#cases[@]} -eq 0 ] || echo "onnx_cases cases"
} >"$work/suite/suite.manifest"
head -2 "$work/suite/suite.manifest" >"$work/suite/speed.manifest"

failed=0
want=$((2 + ${#cases[@]}))
for attack in scan_zero scan_nan hook_interpreter rewrite_expected; do
  for mode in both performance; do
    run="$attack.$mode"
    set +e
    "$crucible" run --suite "$work/suite/suite.manifest" --backends "attack_$attack" --mode "$mode" \
      --repeat 2 --min-time-ms 0 --plugin-path "$work/build" --db "$work/$run.db" -o "$work/out_$run" \
      >"$work/$run.txt" 2>&1
    status=$?
    set -e
    if [ "$status" -ne 1 ]; then
      echo "attack $run: run exited $status, not 1 (some models failed)" >&2; cat "$work/$run.txt" >&2; failed=1
    fi
    rows=$(sqlite3 "$work/$run.db" "select model || ' ' || mode || ' ' || status from results
                                    where backend = 'attack_$attack' order by model, mode")
    echo "$rows" | sed "s/^/attack $run: /"
    if grep -Eq " pass(_suspicious)?$" <<<"$rows"; then
      echo "attack $run: a result passed" >&2; failed=1
    fi
    want_rows=$([ "$mode" = both ] && echo $((2 * want)) || echo "$want")
    if [ "$(grep -c . <<<"$rows")" -ne "$want_rows" ]; then
      echo "attack $run: $(grep -c . <<<"$rows") results, want $want_rows" >&2; failed=1
    fi
    # The worker that ran the attack's code: the accuracy one in both mode, the timing one else.
    logs=("$work/out_$run"/logs/*."attack_$attack".accuracy.log)
    [ "$mode" = both ] || logs=("$work/out_$run"/logs/*.timing.log)
    if ! grep -qh "^attack $attack: " "${logs[@]}"; then
      echo "attack $run: its logs show it never acted" >&2; failed=1
    fi
  done
  n_acc=$(sqlite3 "$work/$attack.both.db" "select count(*) from results where backend = 'attack_$attack'
                                           and mode = 'accuracy' and status = 'fail_accuracy'")
  if [ "$n_acc" -ne "$want" ]; then
    echo "attack $attack: $n_acc of $want models fail accuracy" >&2; failed=1
  fi
done
# One attack in performance mode on the speed manifest with eager, --repeat $2, named with suffix
# $3 (a second run's): its results, one
# "model backend status speed-up" line each, in $rows; a run without 2 results of the attack, or
# whose timing log shows the attack never acted, fails the corpus.
speed_run() {
  local attack=$1 repeat=$2
  run="$attack.performance${3:-}"
  set +e
  "$crucible" run --suite "$work/suite/speed.manifest" \
    --backends "attack_$attack" --mode performance --repeat "$repeat" --min-time-ms 0 \
    --plugin-path "$work/build" --db "$work/$run.db" -o "$work/out_$run" >"$work/$run.txt" 2>&1
  set -e
  rows=$(sqlite3 "$work/$run.db" "select model || ' ' || backend || ' ' || status || ' ' ||
                                  (case when speedup is null then '-' else printf('%.2f', speedup) end) ||
                                  (case when noisy then ' noisy' else '' end) from results
                                  where mode = 'performance' order by model, backend")
  echo "$rows" | sed "s/^/attack $run: /"
  if [ "$(grep -c " attack_$attack " <<<"$rows")" -ne 2 ]; then
    echo "attack $run: not 2 results" >&2; cat "$work/$run.txt" >&2; failed=1
  fi
  if ! grep -qh "^attack $attack: " "$work/out_$run"/logs/*."attack_$attack".timing.log; then
    echo "attack $run: its logs show it never acted" >&2; failed=1
  fi
}
# Whether attack $1's results in $rows show a speed-up over $2 (with status $3 alone, if given).
# An honest computation's true speed-up is at most 1x, but one run of a few samples on a shared
# 2-vCPU host has read 1.32x for it: a speed-up over the limit is run again, and a cheat that works
# shows it again while noise rarely does twice. Both runs' rows are printed; each loop checks this
# last, once what does not depend on the clock has been checked on the first run.
speedup_over() {
  local attack=$1 limit=$2 status=${3:-}
  awk -v a="attack_$attack" -v l="$limit" -v s="$status" \
    '$2 == a && $4 != "-" && (s == "" || $3 == s) && $4 + 0 > l { bad = 1 } END { exit !bad }' <<<"$rows"
}
speedup_confirmed_over() {
  local attack=$1 repeat=$2 limit=$3 status=${4:-}
  speedup_over "$attack" "$limit" "$status" || return 1
  echo "attack $run: a speed-up over ${limit}x, run again to tell a cheat from the host's noise"
  speed_run "$attack" "$repeat" .again
  speedup_over "$attack" "$limit" "$status"
}
# The attacks on the clock compute honest outputs: in performance mode none may show a speed-up
# over eager (theirs is about 1x, the interpreter's), those that work outside their calls or stop
# eager by a signal the kernel vouches for must not pass, and none that stops eager may show any
# speed-up. secret_scan computes honestly unless it finds the seed of the calls' inputs in
# its process (then it serves outputs made ahead, 10x and more faster): it must not find it.
for attack in clock_slow pin_eager thread_chain clone_parent secret_scan stop_eager stop_eager_queued; do
  speed_run "$attack" 4
  if [ "$attack" = secret_scan ] && grep -qh "found the inputs' seed" "$work/out_$run"/logs/*.timing.log; then
    echo "attack $run: it found the seed of the timed calls' inputs in its process" >&2; failed=1
  fi
  if [ "$attack" = thread_chain ] || [ "$attack" = clone_parent ] || [ "$attack" = stop_eager ]; then
    if grep -q " attack_$attack pass" <<<"$rows"; then
      echo "attack $run: work outside its calls passed" >&2; cat "$work/$run.txt" >&2; failed=1
    fi
  fi
  # A process beside the worker's tree is named, whatever CPU it happened to get.
  if [ "$attack" = clone_parent ] && [ "$(sqlite3 "$work/$run.db" "select count(*) from results
      where backend = 'attack_$attack' and error like '%left its worker''s tree%'")" -ne 2 ]; then
    echo "attack $run: its CLONE_PARENT process was not named in both results" >&2; failed=1
  fi
  # Eager stopped from outside is not a baseline: no backend gets a speed-up over it.
  if [ "${attack#stop_eager}" != "$attack" ] && grep -Eq " attack_$attack pass [0-9]" <<<"$rows"; then
    echo "attack $run: a speed-up over an eager stopped from outside" >&2; failed=1
  fi
  if speedup_confirmed_over "$attack" 4 1.3; then
    echo "attack $run: a speed-up over 1.3x in two runs" >&2; failed=1
  fi
done
# Partial memos: every timed call has inputs of its own, so a served call's outputs are stale, and
# the parent reads random calls' outputs out of the stopped worker. On sin_cos (hundreds of calls
# a sample, 8 read of each) none may pass; on add_add_mul_add (a call or two a sample) one that
# escaped may not show a speed-up past what it served (q = 10%: 1.11x in the mean, none in the
# median).
for attack in memo_cadence_q10 memo_cadence_q30 memo_cadence_q60 memo_random_q30; do
  speed_run "$attack" 20
  if grep -q "^sin_cos attack_$attack pass" <<<"$rows"; then
    echo "attack $run: a memo passed on sin_cos" >&2; failed=1
  fi
  if speedup_confirmed_over "$attack" 20 1.15 pass; then
    echo "attack $run: a memo passed with a speed-up in two runs" >&2; failed=1
  fi
done
# A backend that computes honestly but writes where no plugin may: its results pass, and no file
# outside its own folder changes (no marker in the store, the suite or the installed crucible, none
# planted in another worker's folder), and it never leaves its cgroup.
run=tamper_files
set +e
"$crucible" run --suite "$work/suite/suite.manifest" --backends attack_tamper_files --mode both \
  --repeat 2 --min-time-ms 0 --plugin-path "$work/build" --db "$work/$run.db" -o "$work/out_$run" \
  >"$work/$run.txt" 2>&1
status=$?
set -e
rows=$(sqlite3 "$work/$run.db" "select model || ' ' || mode || ' ' || status from results
                                where backend = 'attack_tamper_files' order by model, mode")
echo "$rows" | sed "s/^/attack $run: /"
if [ "$status" -ne 0 ] || grep -vq " pass$" <<<"$rows" || [ "$(grep -c . <<<"$rows")" -ne $((2 * want)) ]; then
  echo "attack $run: an honest backend that tried to write did not pass everywhere (exit $status)" >&2
  cat "$work/$run.txt" >&2; failed=1
fi
said=$(cat "$work/out_$run"/logs/*.attack_tamper_files.*.log | grep "^attack tamper_files: " || true)
if ! grep -q "wrote 0 of [1-9][0-9]* files, left its cgroup 0 times" <<<"$said" ||
  grep -Eq "wrote [1-9][0-9]* of|wrote /|left its cgroup [1-9]" <<<"$said"; then
  echo "attack $run: it wrote outside its folder, left its cgroup, or never acted:" >&2
  sort <<<"$said" | uniq -c >&2; failed=1
fi
if grep -rlq crucible-attack-was-here "$work/$run.db" "$work/suite" "$work/prefix" ||
  [ -n "$(find "$work/out_$run" "${XDG_CACHE_HOME:-$HOME/.cache}/crucible/kernels" -maxdepth 4 \
    -name planted 2>/dev/null)" ]; then
  echo "attack $run: a file outside its folder holds its marker" >&2; failed=1
fi
if [ ${#cases[@]} -gt 0 ] && ! diff -r "$work/pristine" "$work/suite/cases" >/dev/null; then
  echo "an attack changed the expected outputs on disk" >&2; failed=1
fi
[ "$failed" -eq 0 ] && echo "attack corpus: no attack got a pass"
exit "$failed"
