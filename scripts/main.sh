#!/usr/bin/env bash
# Quick start, first command: builds the release tool and runs the main job.
# Extra arguments replace the main job's default arguments.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target switchyard
if (($#)); then
  exec ./build/release/tools/switchyard/switchyard "$@"
fi
exec ./build/release/tools/switchyard/switchyard run
