#!/usr/bin/env bash
# ci/nightly twice on the tutorial suite, as two nights of one store: the first is clean and
# exits 0; the second has `-c inject=neg:times2` planted and must exit 1, name the regression,
# minify it, and put the repro command on the dashboard's regressions page.
#   nightly_test.sh SOURCE_DIR CRUCIBLE_BIN
set -euo pipefail
src=$1
export CRUCIBLE_BIN=$2
work=$(mktemp -d /tmp/crucible_nightly.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
night() {  # night N [crucible run args...]: runs ci/nightly, keeps its output and exit status
  local n=$1; shift
  status=0
  bash "$src/ci/nightly" --no-build --suites tutorial --db "$work/nightly.db" --out "$work/night$n" \
    -- --repeat 3 --min-time-ms 0 "$@" > "$work/night$n.log" 2>&1 || status=$?
  echo "night $n: exit $status"
  grep -A20 '^== nightly: summary' "$work/night$n.log"
}

night 1
((status == 0)) || { cat "$work/night1.log"; fail "a clean first night exited $status"; }
grep -q '^no regression$' "$work/night1.log" || fail "night 1 did not say 'no regression'"
[ -f "$work/night1/site/index.html" ] && [ -f "$work/night1/junit.xml" ] ||
  fail "night 1 wrote no dashboard or JUnit"
/usr/bin/python3 -c "import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); \
  assert r.tag in ('testsuites', 'testsuite'), r.tag" "$work/night1/junit.xml" ||
  fail "night 1's JUnit does not parse"

night 2 -c inject=neg:times2
((status == 1)) || { cat "$work/night2.log"; fail "the planted bug's night exited $status, not 1"; }
grep -q '^REGRESSION: ' "$work/night2.log" || fail "night 2 did not say REGRESSION"
# The status row, its note on the line under it.
grep -EA1 '^status +tutorial +neg_maximum_cat_f32 +codegen ' "$work/night2.log" |
  grep -q '^  note: pass -> fail_accuracy' ||
  fail "night 2 did not name neg_maximum_cat_f32's pass -> fail_accuracy"
grep -Eq '^tutorial +neg_maximum_cat_f32 +codegen +pass +fail_accuracy +FAIL' "$work/night2.log" ||
  fail "the expected-accuracy gate did not FAIL neg_maximum_cat_f32 on codegen"
grep -Eq '^new failures minified: [1-9]' "$work/night2.log" || fail "night 2 minified nothing"
page="$work/night2/site/regressions.html"
repro=$(grep -o "crucible repro [^<]*neg_maximum_cat_f32[^<]*" "$page" | head -1)
[ -n "$repro" ] || fail "the regressions page shows no repro command for neg_maximum_cat_f32"
echo "regressions page: $repro"
# The command on the page works: the repro still fails the same way (exit 0: reproduced).
out=$("$CRUCIBLE_BIN" ${repro#crucible } --times 2) || fail "'$repro' did not reproduce: $out"
echo "$out"
grep -q '^reproduced 2/2: fail_accuracy' <<<"$out" || fail "'$repro' said: $out"
echo "nightly test: both nights judged as expected"
