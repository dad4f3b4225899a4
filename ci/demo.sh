#!/usr/bin/env bash
# README command 1: set up, build, and run the main job — every tutorial graph on the eager backend.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
for g in suites/tutorial/*.graph; do
  ./build/bin/crucible run-graph "$g" --backend eager --seed 0
done
