#!/usr/bin/env bash
# The Fashion-MNIST sample, shortened to one epoch, must reach at least 0.80
# test accuracy. Runs a copy of the sample in a scratch folder so its
# checkpoints do not land in the source tree.
set -euo pipefail
dtlc=$1; src=$2; work=$3
rm -rf "$work"; mkdir -p "$work"
cp "$src/samples/fashion_mnist_mlp.dtl" "$work/"
"$dtlc" run "$work/fashion_mnist_mlp.dtl" --set train.epochs=1 --metrics "$work/metrics.jsonl"
acc=$(grep -o '"eval_accuracy": [0-9.e-]*' "$work/metrics.jsonl" | tail -1 | awk '{print $2}')
echo "test accuracy after one epoch: $acc (need >= 0.80)"
awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }'
