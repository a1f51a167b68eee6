#!/usr/bin/env bash
# The README's first command: set up, build, and run a sample.
# Until one-process training lands, "run" means `dtlc check`: the sample is
# parsed, type-checked against its data files and summarised.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
sample=${1:-samples/fashion_mnist_mlp.dtl}
echo
echo "\$ build/bin/dtlc check $sample --world 2"
build/bin/dtlc check "$sample" --world 2
