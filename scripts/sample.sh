#!/usr/bin/env bash
# The README's first command: set up, build, check and train a sample.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
sample=${1:-samples/fashion_mnist_mlp.dtl}
extra=()
if [ -n "${EPOCHS:-}" ]; then extra=(--set "train.epochs=$EPOCHS"); fi
echo
echo "\$ build/bin/dtlc check $sample"
build/bin/dtlc check "$sample" "${extra[@]}"
echo
echo "\$ build/bin/dtlc run $sample ${extra[*]} --metrics build/sample-metrics.jsonl"
build/bin/dtlc run "$sample" "${extra[@]}" --metrics build/sample-metrics.jsonl
