#!/usr/bin/env bash
# Determinism (the scope docs/running.md states): the same spec, seed and
# number of ranks on the same machine and thread count give bitwise the same
# losses and final parameters and optimiser state — with shuffling, dropout
# and AdamW, on 1 rank and on 4.
set -euo pipefail
dtlc=$1; work=$2
rm -rf "$work"; mkdir -p "$work"; cd "$work"
cat > s.dtl <<'SPEC'
model M {
  dim f = 16, h = 32, c = 4
  input x : f32[batch, f]
  input y : i32[batch]
  l1 = Linear(f, h)
  l2 = Linear(h, c)
  logits = l2(dropout(relu(l1(x)), p = 0.2))
  loss = cross_entropy(logits, y, over = c)
}
data { train { synthetic(seed = 1) } shuffle = true }
train {
  batch = 8
  steps = 12
  optimizer = adamw(lr = 1e-2)
  seed = 5
  checkpoint "ck" every 12 steps
}
SPEC
losses() { sed 's/.*"loss": \([^,]*\),.*/\1/' "$1"; }
status=0
for ranks in 1 4; do
  for run in a b; do
    rm -rf ck
    "$dtlc" run s.dtl --nproc "$ranks" --set "train.batch=$((8 / ranks))" --metrics "$ranks$run.jsonl" >/dev/null
    mv ck "ck$ranks$run"
  done
  if [ "$(losses "${ranks}a.jsonl")" != "$(losses "${ranks}b.jsonl")" ]; then
    echo "$ranks rank(s): the two runs' losses differ"; diff <(losses "${ranks}a.jsonl") <(losses "${ranks}b.jsonl") || true
    status=1
  fi
  [ "$(losses "${ranks}a.jsonl" | wc -l)" -eq 12 ] || { echo "$ranks rank(s): expected 12 steps"; status=1; }
  for f in params optimizer; do
    cmp -s "ck${ranks}a/step-00000012/$f.safetensors" "ck${ranks}b/step-00000012/$f.safetensors" ||
      { echo "$ranks rank(s): $f.safetensors differ between two runs"; status=1; }
  done
  [ $status -eq 0 ] && echo "$ranks rank(s): two runs bitwise equal (12 losses, parameters, optimiser state)"
done
exit $status
