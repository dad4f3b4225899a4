#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, builds tests/out_of_tree against it with
# find_package(crucible), and runs the installed crucible with the new plugin found by name.
set -euo pipefail
build_dir=$1
src_dir=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$src_dir" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/build" >/dev/null
test -f "$work/build/crucible_backend_doubling.so"
out=$("$work/prefix/bin/crucible" list backends --plugin-path "$work/build")
echo "$out"
grep -q "^doubling .*abi 1" <<<"$out"
graph="$work/prefix/share/crucible/suites/tutorial/sin_cos.graph"
eager=$("$work/prefix/bin/crucible" run-graph "$graph" --backend eager)
doubled=$("$work/prefix/bin/crucible" run-graph "$graph" --backend doubling --plugin-path "$work/build")
eager_sum=$(grep -o 'sum=[^ ]*' <<<"$eager" | cut -d= -f2)
doubled_sum=$(grep -o 'sum=[^ ]*' <<<"$doubled" | cut -d= -f2)
echo "eager sum $eager_sum, doubling sum $doubled_sum"
python3 -c "import sys; e, d = float('$eager_sum'), float('$doubled_sum'); sys.exit(0 if abs(d - 2 * e) <= 1e-4 * abs(e) + 1e-6 else 1)"
echo "out-of-tree plugin built against the installed tree and loaded: ok"
