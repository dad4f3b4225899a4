#!/usr/bin/env bash
# README command 2: set up, build, check formatting, and run every test through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
bash ci/check_format.sh
cd build
ctest --output-on-failure -j "$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)" --timeout 600
