#!/usr/bin/env bash
# The README's first command: set up, build, check and train a sample.
#
# usage: [EPOCHS=N | STEPS=N] [NPROC=N] bash scripts/sample.sh [SAMPLE]
#   SAMPLE    a spec (default samples/fashion_mnist_mlp.dtl)
#   EPOCHS=N  train N passes over the data, whether the sample counts
#             epochs or steps (`--set train.epochs=N` replaces either)
#   STEPS=N   train N optimiser steps (`dtlc run --steps N`)
#   NPROC=N   check for N ranks and train on N ranks (`--nproc N`)
# Trains in build/, so the metrics (build/sample-metrics.jsonl) and the run
# folder (build/runs/<sample>-<time>: a fresh one each time, as dtlc run
# refuses a folder holding a run) stay out of the source tree.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
sample=$(realpath "${1:-samples/fashion_mnist_mlp.dtl}")
sets=(); steps=(); world=(); nproc=()
if [ -n "${EPOCHS:-}" ]; then sets=(--set "train.epochs=$EPOCHS"); fi
if [ -n "${STEPS:-}" ]; then steps=(--steps "$STEPS"); fi
if [ -n "${NPROC:-}" ]; then world=(--world "$NPROC"); nproc=(--nproc "$NPROC"); fi
cd build
echo
echo "\$ build/bin/dtlc check $sample ${sets[*]} ${world[*]}"
bin/dtlc check "$sample" "${sets[@]}" "${world[@]}"
echo
out=runs/$(basename "$sample" .dtl)-$(date -u +%Y%m%d-%H%M%S)
echo "\$ (cd build && bin/dtlc run $sample ${sets[*]} ${steps[*]} ${nproc[*]} --metrics sample-metrics.jsonl --out $out)"
bin/dtlc run "$sample" "${sets[@]}" "${steps[@]}" "${nproc[@]}" --metrics sample-metrics.jsonl --out "$out"
