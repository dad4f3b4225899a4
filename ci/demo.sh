#!/usr/bin/env bash
# README command 1: set up, build, and run the main job — the tutorial suite in both modes on the
# embedded SQLite default (crucible.db in the working directory), eager against codegen.
set -euo pipefail
cd "$(dirname "$0")/.."
# Only what the tutorial run needs: the CLI and the plugins it runs (tests and benchmarks are
# command 2's).
bash ci/setup.sh crucible
./build/bin/crucible run --suite tutorial --backends eager,codegen --mode both --threads "$(nproc)"
