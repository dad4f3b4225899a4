#!/usr/bin/env bash
# A/A check of the change detector on this machine: the same build runs the same suites N times
# into a fresh store, then `crucible regressions --all` judges the history. With no code change
# every regression or improvement it reports is a false alert (target 0).
#   ci/aa_false_alerts.sh [--runs N] [--db FILE] [--suites LIST] [--slow MODEL=PCT[@RUN][,...] --slow-from K]
#                         [--change-from K --change 'RUN_ARGS'] [--before K 'SHELL_COMMAND']
#                         [-- CRUCIBLE_RUN_ARGS...]
# Default: 14 runs (the full rule needs 8 of baseline first) of the tutorial and small suites,
# eager and codegen, performance mode, into aa.db. Measure on a quiet machine.
# --slow adds the test backend `faulty` (eager's interpreter, from build/test_plugins), which from
# run K (or from RUN, where a model names its own) on busy-waits PCT% longer on each named model:
# real runs with a planted slowdown of one backend beside the A/A series of the others.
# --change-from K adds RUN_ARGS (word-split, e.g. '--threads 1') from run K on: a new environment.
# --before K CMD runs CMD in a shell just before run K (repeatable): a change of the machine the
# store's environment does not record, e.g. 'echo always > /sys/kernel/mm/transparent_hugepage/enabled'.
set -euo pipefail
runs=14 db=aa.db slow="" slow_from=0 change_from=0 change="" suites=tutorial,mlp,transformer,vision
declare -A before=()
while (($#)); do
  case "$1" in
    --slow) slow=${2:?--slow wants MODEL=PCT,...}; shift 2 ;;
    --slow-from) slow_from=${2:?--slow-from wants a run number}; shift 2 ;;
    --runs) runs=${2:?--runs wants a number}; shift 2 ;;
    --suites) suites=${2:?--suites wants a list}; shift 2 ;;
    --change-from) change_from=${2:?--change-from wants a run number}; shift 2 ;;
    --change) change=${2:?--change wants run arguments}; shift 2 ;;
    --db) db=${2:?--db wants a file}; shift 2 ;;
    --before) before[${2:?--before wants a run number}]=${3:?--before wants a command}; shift 3 ;;
    --) shift; break ;;
    *) echo "aa_false_alerts: unknown option '$1'" >&2; exit 2 ;;
  esac
done
root="$(cd "$(dirname "$0")/.." && pwd)"
crucible=${CRUCIBLE_BIN:-$root/${BUILD_DIR:-build}/bin/crucible}
[ -x "$crucible" ] || { echo "aa_false_alerts: no crucible at $crucible (build first)" >&2; exit 2; }
[ ! -e "$db" ] || { echo "aa_false_alerts: $db exists; A/A wants a fresh store" >&2; exit 2; }
backends=eager,codegen
[ -z "$slow" ] || backends=eager,codegen,faulty
args=(--suite "$suites" --variant small --backends "$backends"
  --mode performance --tag aa --db "$db" --plugin-path "$(dirname "$crucible")/../test_plugins")
for ((i = 1; i <= runs; ++i)); do
  echo "A/A run $i of $runs"
  [ -z "${before[$i]:-}" ] || bash -c "${before[$i]}" ||
    { echo "aa_false_alerts: the command before run $i failed" >&2; exit 2; }
  faults=() changed=()
  if [ -n "$slow" ]; then
    IFS=, read -ra pairs <<<"$slow"
    for p in "${pairs[@]}"; do
      pct=${p#*=} from=$slow_from
      [[ $pct != *@* ]] || { from=${pct#*@}; pct=${pct%@*}; }
      ((from > 0 && i >= from)) || continue
      faults+=(-c "faulty:fault.${p%%=*}=slower_pct:$pct")
    done
  fi
  # shellcheck disable=SC2206  # word-split on purpose: the arguments of the change
  ((change_from == 0 || i < change_from)) || changed=($change)
  "$crucible" run "${args[@]}" "${faults[@]}" "${changed[@]}" "$@" > "$db.run$i.log" 2>&1 ||
    [ $? -eq 1 ] ||
    { echo "aa_false_alerts: run $i failed (see $db.run$i.log)" >&2; exit 2; }
done
# Exit 1 only says that something was listed: the count below is the answer.
alerts=$("$crucible" regressions --all --db "$db" --format csv || [ $? -eq 1 ])
alerts=$(tail -n +2 <<<"$alerts")
count() { grep -c "^$1," <<<"$alerts" || true; }
series=$("$crucible" query "SELECT count(DISTINCT suite || model || backend) FROM results WHERE mode = 'performance'" --db "$db" --format csv | tail -n +2)
noisy=$("$crucible" query "SELECT count(*) FROM results WHERE mode = 'performance' AND noisy = 1" --db "$db" --format csv | tail -n +2)
echo "A/A: $runs runs x $series series; results flagged noisy: $noisy"
echo "false alerts: $(count regression) regressions, $(count improvement) improvements" \
  "($(count suspicious) suspicious single runs, $(count environment) environment notes)"
echo "listed, not alerted: $(count absorbed) absorbed into a baseline, $(count with_event) bent at a machine-wide shift"
grep -E '^(regression|improvement|suspicious|absorbed|with_event),' <<<"$alerts" || true
