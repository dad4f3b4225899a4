#!/usr/bin/env bash
# README command 1: set up, build, and run the main job — the tutorial suite in both modes on the
# embedded SQLite default (crucible.db in the working directory), eager against codegen.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
./build/bin/crucible run --suite tutorial --backends eager,codegen --mode both --threads "$(nproc)"
