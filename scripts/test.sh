#!/usr/bin/env bash
# The README's second command: set up, build, and run every test (unit,
# golden, samples, end-to-end, and a bounded fuzzing run) under ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 1500
