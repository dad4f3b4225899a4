#!/usr/bin/env bash
# libFuzzer campaigns on the fuzz targets (tests/libfuzzer/), built with clang, ASan and UBSan in
# a tree of their own (build-fuzz). Not part of CI, which replays the corpora instead:
#   bash ci/fuzz.sh [--seconds S | --runs N] [--merge] [--no-build] [TARGET...]
# (default: every target, 60 s each; --no-build: campaigns running side by side on a built tree)
# Prints each target's executions, coverage and findings. A crash leaves its input in
# fuzz-out/TARGET/ and fails the script; --merge folds new coverage into the committed corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=(-max_total_time=60)
merge=0
build=1
targets=()
while (($#)); do
  case "$1" in
    --seconds) limit=(-max_total_time="$2"); shift 2 ;;
    --runs) limit=(-runs="$2"); shift 2 ;;
    --merge) merge=1; shift ;;
    --no-build) build=0; shift ;;
    -*) echo "fuzz: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
((${#targets[@]})) || targets=(graph_text suite_manifest repro_dir worker_report plugin_elf
  store_file store_rows options onnx_model onnx_tensor)

((build)) && BUILD_DIR=build-fuzz CRUCIBLE_EXTRA_PACKAGES="clang-14 libclang-rt-14-dev" \
  CRUCIBLE_CMAKE_ARGS="-DCMAKE_CXX_COMPILER=clang++-14 -DCRUCIBLE_FUZZ=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON" bash ci/setup.sh

# Per target: the largest input worth trying and its dictionary (none for binary formats).
declare -A max_len=([graph_text]=4096 [suite_manifest]=4096 [repro_dir]=8192 [worker_report]=16384
  [plugin_elf]=16384 [store_file]=262144 [store_rows]=16384 [options]=1024 [onnx_model]=65536 [onnx_tensor]=65536)
declare -A dict=([graph_text]=graph [suite_manifest]=manifest [repro_dir]=repro
  [worker_report]=report [options]=options [store_rows]=store_rows)
# Seeds the tree already has beyond the committed corpus (the same the replay tests read), copied
# into fuzz-out/TARGET/seeds: libFuzzer reads corpus folders, and a seed over max_len is useless.
seed() {
  local t=$1 dir=fuzz-out/$1/seeds f n=0
  rm -rf "$dir" && mkdir -p "$dir"
  case $t in
    graph_text) set -- suites/*/*.graph $(find tests -name '*.graph') ;;
    suite_manifest) set -- suites/*/suite.manifest ;;
    plugin_elf) set -- build-fuzz/test_plugins/*.so build-fuzz/lib/*.so ;;
    onnx_model) set -- /usr/share/libonnx-testdata/data/node/*/model.onnx ;;
    onnx_tensor) set -- /usr/share/libonnx-testdata/data/node/*/test_data_set_0/*.pb ;;
    *) set -- ;;
  esac
  for f in "$@"; do
    [ -f "$f" ] || continue
    n=$((n + 1))
    # ELF files: their first max_len bytes hold the headers the check reads.
    head -c "${max_len[$t]}" "$f" >"$dir/$n.$(basename "$f")"
  done
}

export OMP_NUM_THREADS=1 ASAN_OPTIONS="detect_leaks=1:malloc_context_size=20" \
  UBSAN_OPTIONS="print_stacktrace=1"
src=tests/libfuzzer
status=0
for t in "${targets[@]}"; do
  bin=build-fuzz/bin/fuzz_$t
  [ -x "$bin" ] || { echo "fuzz: no target $t" >&2; exit 2; }
  out=fuzz-out/$t
  mkdir -p "$out/corpus"
  seed "$t"
  flags=(-max_len="${max_len[$t]}" -timeout=10 -rss_limit_mb=2560 -malloc_limit_mb=1024
    -print_final_stats=1 -artifact_prefix="$out/" "${limit[@]}")
  [ -n "${dict[$t]:-}" ] && flags+=(-dict="$src/dict/${dict[$t]}.dict")
  [ "$t" = plugin_elf ] && flags+=(-use_value_profile=1)
  if "$bin" "${flags[@]}" "$out/corpus" "$src/corpus/$t" "$out/seeds" >"$out/log" 2>&1; then
    result=clean
  else
    result="FOUND: $(ls "$out" | grep -E '^(crash|leak|timeout|oom|slow-unit)-' | tr '\n' ' ')"
    status=1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$out/log" | grep -o '[0-9]*$' || echo 0)
  secs=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$out/log" | grep -o 'in [0-9]*' | grep -o '[0-9]*' || echo '?')
  cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$out/log" | tail -1)
  echo "fuzz: $t: $runs executions in ${secs} s, $cov, corpus $(ls "$out/corpus" | wc -l) new," \
    "$(ls "$out/seeds" | wc -l) seeds; $result"
  if ((merge)) && [ "$result" = clean ]; then
    # One input per new edge (no hit-count buckets): repro_dir's 1-hour corpus is 187 inputs and
    # 768 KB so, 897 and 3.8 MB with the buckets, for the same edges. The buckets stay in fuzz-out.
    # The seeds count as covered but are not committed: the replay tests read them where they are.
    scratch=$out/merge
    rm -rf "$scratch" && mkdir -p "$scratch"
    cp -r "$src/corpus/$t"/. "$scratch"/ && cp -r "$out/seeds"/. "$scratch"/
    ls "$scratch" | sort >"$out/merge.before"
    "$bin" -merge=1 -use_counters=0 -max_len="${max_len[$t]}" "$scratch" "$out/corpus" \
      >>"$out/log" 2>&1
    kept=0
    for f in $(ls "$scratch" | sort | comm -13 "$out/merge.before" -); do
      cp "$scratch/$f" "$src/corpus/$t/" && kept=$((kept + 1))
    done
    echo "fuzz: $t: merge kept $kept new inputs in $src/corpus/$t"
  fi
done
exit $status
