#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, builds tests/out_of_tree (a plugin) and
# tests/out_of_tree/host (a host program) against it with find_package(crucible) alone, runs the
# installed crucible with the new plugin found by name, and the host on the installed eager.
set -euo pipefail
build_dir=$1
src_dir=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
# Every backend the tree built is installed and found by name (the libtorch peers where built).
installed=$("$work/prefix/bin/crucible" list backends)
for plugin in "$build_dir"/lib/crucible/crucible_backend_*.so; do
  name=$(basename "$plugin" .so)
  name=${name#crucible_backend_}
  test -f "$work/prefix/lib/crucible/crucible_backend_$name.so" || { echo "not installed: $plugin" >&2; exit 1; }
  grep -q "^$name " <<<"$installed" || { echo "the installed crucible does not list $name:" >&2; echo "$installed" >&2; exit 1; }
done
echo "every built backend installed: $(ls "$build_dir"/lib/crucible | tr '\n' ' ')"
cmake -S "$src_dir" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/build" >/dev/null
test -f "$work/build/crucible_backend_doubling.so"
out=$("$work/prefix/bin/crucible" list backends --plugin-path "$work/build")
echo "$out"
abi=$("$work/prefix/bin/crucible" --version | sed -n 's/^plugin ABI //p')
grep -q "^doubling .*abi $abi " <<<"$out"
graph="$work/prefix/share/crucible/suites/tutorial/sin_cos.graph"
eager=$("$work/prefix/bin/crucible" run-graph "$graph" --backend eager)
doubled=$("$work/prefix/bin/crucible" run-graph "$graph" --backend doubling --plugin-path "$work/build")
eager_sum=$(grep -o 'sum=[^ ]*' <<<"$eager" | cut -d= -f2)
doubled_sum=$(grep -o 'sum=[^ ]*' <<<"$doubled" | cut -d= -f2)
echo "eager sum $eager_sum, doubling sum $doubled_sum"
python3 -c "import sys; e, d = float('$eager_sum'), float('$doubled_sum'); sys.exit(0 if abs(d - 2 * e) <= 1e-4 * abs(e) + 1e-6 else 1)"
echo "out-of-tree plugin built against the installed tree and loaded: ok"

# The minifier works with it too: its doubled outputs fail accuracy, it gives no intermediates
# (prefix bisection instead of cosim), and the repro names it with its version and reruns.
"$work/prefix/bin/crucible" minify "$graph" --backend doubling --plugin-path "$work/build" \
  --replays 2 -o "$work/repro" --db "$work/minify.db" | tee "$work/minify.out"
grep -q "nodes -> 1 (1 compute), replayed 2/2" "$work/minify.out"
grep -qx "backend_version 1.0" "$work/repro/manifest.txt"
# The manifest records the plugin file, so the repro finds the out-of-tree backend on its own.
grep -qx "plugin_file $work/build/crucible_backend_doubling.so" "$work/repro/manifest.txt"
"$work/prefix/bin/crucible" repro "$work/repro" --times 2 | grep -q "reproduced 2/2"
# --plugin-path still comes first: an eager build under the doubling name does not reproduce.
mkdir "$work/override"
cp "$work/prefix/lib/crucible/crucible_backend_eager.so" "$work/override/crucible_backend_doubling.so"
if "$work/prefix/bin/crucible" repro "$work/repro" --plugin-path "$work/override" --times 1 >"$work/override.out" 2>&1; then
  echo "--plugin-path did not override the recorded plugin" >&2; cat "$work/override.out" >&2; exit 1
fi
echo "out-of-tree plugin minified and its repro rerun: ok"

# The host: no CMAKE_CXX_STANDARD of its own, so C++20 must come from the exported targets.
cmake -S "$src_dir/host" -B "$work/host" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/host" >/dev/null
hosted=$(CRUCIBLE_PLUGIN_PATH="$work/prefix/lib/crucible" "$work/host/run_graph_host" eager "$graph")
echo "$hosted"
host_sum=$(grep -o 'sum=[^ ]*' <<<"$hosted" | head -1 | cut -d= -f2)
python3 -c "import sys; e, h = float('$eager_sum'), float('$host_sum'); sys.exit(0 if abs(h - e) <= 1e-5 * abs(e) + 1e-6 else 1)"
hosted_doubling=$("$work/host/run_graph_host" "$work/build/crucible_backend_doubling.so" "$graph")
grep -q "sum=" <<<"$hosted_doubling"
if "$work/host/run_graph_host" "$work/prefix/share/crucible/suites/tutorial/sin_cos.graph" "$graph" 2>/dev/null; then
  echo "a graph file passed as a plugin was loaded" >&2
  exit 1
fi
test -f "$work/prefix/share/crucible/examples/backend_plugin/doubling_backend.cpp"
test -f "$work/prefix/share/crucible/examples/host_program/run_graph_host.cpp"
echo "out-of-tree host built against the installed tree ran a graph on eager: ok"
