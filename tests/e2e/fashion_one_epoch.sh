#!/usr/bin/env bash
# The Fashion-MNIST sample, shortened to one epoch, must reach at least 0.80
# test accuracy on one process, and the same accuracy (within 0.005) on two
# ranks at half the per-rank batch (the same global batches). Runs in a
# scratch folder, where the run folders land (they go under the working
# folder), one per run.
set -euo pipefail
dtlc=$1; src=$2; work=$3
rm -rf "$work"; mkdir -p "$work"; cd "$work"
cp "$src/samples/fashion_mnist_mlp.dtl" "$work/"
accuracy() { grep -o '"eval_accuracy": [0-9.e-]*' "$1" | tail -1 | awk '{print $2}'; }
"$dtlc" run "$work/fashion_mnist_mlp.dtl" --set train.epochs=1 --metrics "$work/metrics.jsonl" --out runs/one
one=$(accuracy "$work/metrics.jsonl")
echo "test accuracy after one epoch: $one (need >= 0.80)"
"$dtlc" run "$work/fashion_mnist_mlp.dtl" --nproc 2 --set train.epochs=1 --set train.batch=64 \
  --metrics "$work/metrics2.jsonl" --out runs/two
two=$(accuracy "$work/metrics2.jsonl")
echo "two ranks (batch 64 each): $two (need within 0.005 of $one)"
awk -v a="$one" -v b="$two" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a >= 0.80 && d <= 0.005) }'
