#!/usr/bin/env bash
# The layout check can fail: a tree with a 105-line function defined inside a class, a long
# top-level one, and a 16-file folder is refused, each named; the same tree with why-comments
# above both functions and one file fewer passes; a long function in reports/ after a one-line one
# is refused from its own first line.
#   check_harness_layout_selftest.sh CHECKER
set -euo pipefail
checker=$1
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/harness/room"
for i in $(seq 1 16); do echo "// file $i" >"$tree/harness/room/f$i.h"; done
body() { for _ in $(seq 1 103); do echo "    x += 1;"; done; }
{
  echo "class Runner {"
  echo " public:"
  echo "  void run_performance(int x) {"
  body
  echo "  }"
  echo "};"
  echo "int top_level(int x) {"
  body
  echo "}"
} >"$tree/harness/room/long.cpp"
out=$(/usr/bin/python3 "$checker" "$tree" || true)
grep -q "harness/room/long.cpp:3: a function of 105 lines" <<<"$out" || { echo "missed the in-class function: $out"; exit 1; }
grep -q "harness/room/long.cpp:109: a function of 105 lines" <<<"$out" || { echo "missed the top-level function: $out"; exit 1; }
grep -q "harness/room: 17 source files" <<<"$out" || { echo "missed the crowded room: $out"; exit 1; }
sed -i 's|^  void run_performance|  // why: kept whole\n  void run_performance|; s|^int top_level|// why: kept whole\nint top_level|' \
  "$tree/harness/room/long.cpp"
rm "$tree/harness/room/f1.h" "$tree/harness/room/f2.h"
/usr/bin/python3 "$checker" "$tree" | grep -qx "harness layout: ok" || { echo "refused a tree that keeps the rules"; exit 1; }
# Outside harness/ too, and measured from its own first line even after one-line functions.
mkdir -p "$tree/reports/src"
{
  echo "int one(int x) { return x; }"
  echo "int table(int x) {"
  body
  echo "}"
} >"$tree/reports/src/t.cpp"
out=$(/usr/bin/python3 "$checker" "$tree" || true)
grep -q "reports/src/t.cpp:2: a function of 105 lines" <<<"$out" || { echo "missed reports/: $out"; exit 1; }
echo "layout check self-test: ok"
