#!/usr/bin/env bash
# Installs what crucible needs from Debian 12's archive (idempotent; silent when all is present),
# then configures and builds the tree in ./build. Both README commands start here.
#   setup.sh              everything: the CLI, plugins, tests, benchmarks, the onnx-zoo models
#   setup.sh TARGET...    those targets alone (the demo's: crucible, which brings eager and codegen)
set -euo pipefail
targets=("$@")

PACKAGES=(
  g++ cmake ninja-build pkg-config git
  libboost-dev libboost-program-options-dev
  libfmt-dev libsqlite3-dev sqlite3
  libgtest-dev libgmock-dev libbenchmark-dev
  libdnnl-dev ocl-icd-opencl-dev libomp-dev
  numactl clang-format valgrind
  libbenchmark-tools python3-scipy python3-numpy
  chromium fonts-dejavu-core
  slurm-wlm munge python3-yaml
  libtorch-dev libopenblas0-pthread libjemalloc2 libtcmalloc-minimal4
  libonnx-dev libprotobuf-dev libonnx-testdata python3-onnx python3-torch python3-torchvision
)

# CRUCIBLE_EXTRA_PACKAGES: what another tree needs beyond these (ci/fuzz.sh's clang and libFuzzer).
# shellcheck disable=SC2206 # a list of words
PACKAGES+=(${CRUCIBLE_EXTRA_PACKAGES:-})
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
# CRUCIBLE_CMAKE_ARGS: extra configure options of another tree (ci/sanitize.sh's), applied each time.
if [ ! -f "$BUILD_DIR/build.ninja" ] || [ -n "${CRUCIBLE_CMAKE_ARGS:-}" ]; then
  # shellcheck disable=SC2086 # the options are words
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo ${CRUCIBLE_CMAKE_ARGS:-} >/dev/null
fi
cmake --build "$BUILD_DIR" -j "$(nproc)" ${targets[@]+--target "${targets[@]}"}
# Named targets are a first run's: the onnx-zoo models are for the tests and that suite.
[ ${#targets[@]} -eq 0 ] || exit 0

# The onnx-zoo suite's models: exported by PyTorch once per script and torch version into a cache
# shared by every clone (about 80 s and 2.3 GB the first time, a second when cached).
if /usr/bin/python3 -c 'import torch, torchvision' 2>/dev/null; then
  zoo_dir=${CRUCIBLE_ONNX_ZOO_DIR:-$HOME/.cache/crucible/onnx-zoo}
  mkdir -p "$(dirname "$zoo_dir")"
  if ! /usr/bin/python3 suites/onnx-zoo/export_models.py --out "$zoo_dir" >"$BUILD_DIR/onnx-zoo-export.log" 2>&1; then
    echo "setup: exporting the onnx-zoo models failed; see $BUILD_DIR/onnx-zoo-export.log:" >&2
    tail -5 "$BUILD_DIR/onnx-zoo-export.log" >&2
    exit 1
  fi
fi
