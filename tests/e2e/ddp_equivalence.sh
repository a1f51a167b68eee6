#!/usr/bin/env bash
# Data parallelism must not change the numbers: N ranks at per-rank batch
# B/N reproduce the one-rank losses at batch B (same global batches), for
# N = 2, 3, 4, within 1e-5 relative over 20 steps; over Gloo, across two
# "nodes", resumed on another number of ranks, a GPT, and the diabetes
# sample's hand-written loss.
set -euo pipefail
dtlc=$1; work=$2  # each run has its own run folder (--out): a folder holding a run is not run into again
rm -rf "$work"; mkdir -p "$work"; cd "$work"
cat > s.dtl <<'SPEC'
model M {
  dim f = 16, h = 32, c = 4
  input x : f32[batch, f]
  input y : i32[batch]
  l1 = Linear(f, h)
  l2 = Linear(h, c)
  logits = l2(relu(l1(x)))
  loss = cross_entropy(logits, y, over = c)
  metric accuracy = mean(cast(argmax(logits, over = c) == y, f32))
}
data { train { synthetic(seed = 1) } shuffle = true }
train {
  batch = 24
  steps = 20
  optimizer = sgd(lr = 0.1, momentum = 0.9)
  seed = 3
}
parallel { mesh dp = auto; split batch over dp; bucket = 1 KiB }
SPEC
"$dtlc" run s.dtl --metrics one.jsonl --out one >/dev/null
status=0
for n in 2 3 4; do
  "$dtlc" run s.dtl --nproc "$n" --set "train.batch=$((24 / n))" --metrics "n$n.jsonl" --out "n$n" >/dev/null
  if ! awk -v n="$n" -F'"loss": ' '
      FNR == NR { a[FNR] = $2 + 0; next }
      { b = $2 + 0; r = (a[FNR] - b) / a[FNR]; if (r < 0) r = -r; if (r > m) m = r; k++ }
      END { printf "%d ranks: %d steps, max relative difference %.2e\n", n, k, m; exit !(k == 20 && m <= 1e-5) }' \
      one.jsonl "n$n.jsonl"; then
    status=1
  fi
done
# The same over Gloo (TCP), and as a job of two nodes (two launchers here,
# one rank each, which also picks Gloo).
compare() {  # label, metrics file: 20 steps within 1e-5 of one.jsonl
  awk -v what="$1" -F'"loss": ' '
      FNR == NR { a[FNR] = $2 + 0; next }
      { b = $2 + 0; r = (a[FNR] - b) / a[FNR]; if (r < 0) r = -r; if (r > m) m = r; k++ }
      END { printf "%s: %d steps, max relative difference %.2e\n", what, k, m; exit !(k == 20 && m <= 1e-5) }' \
      one.jsonl "$2" || status=1
}
"$dtlc" run s.dtl --nproc 2 --backend gloo --set train.batch=12 --metrics gloo.jsonl --out gloo >gloo.out
grep -q "group of 2 ranks over gloo" gloo.out || { echo "--backend gloo did not use Gloo: $(cat gloo.out)"; status=1; }
compare "2 ranks over Gloo" gloo.jsonl
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export DTL_JOB_TOKEN=e2e-two-nodes
"$dtlc" run s.dtl --nnodes 2 --node-rank 1 --master "127.0.0.1:$port" --set train.batch=12 --out nodes >/dev/null 2>nodes1.err &
node1=$!
"$dtlc" run s.dtl --nnodes 2 --node-rank 0 --master "127.0.0.1:$port" --set train.batch=12 --metrics nodes.jsonl --out nodes \
  >nodes0.out 2>nodes0.err || { cat nodes0.err; status=1; }
grep -q "group of 2 ranks over gloo" nodes0.out || { echo "two nodes did not use Gloo: $(cat nodes0.out)"; status=1; }
wait "$node1" || { cat nodes1.err; status=1; }
unset DTL_JOB_TOKEN
compare "2 nodes of 1 rank" nodes.jsonl

# A checkpoint from N ranks resumes on M ranks: 2 ranks train 10 steps and
# checkpoint; 1 rank (batch 24) and 3 ranks (batch 8) continue from it with
# the losses of the uninterrupted run (constant learning rate, so stopping at
# 10 changes nothing else).
sed 's/seed = 3/seed = 3\n  checkpoint "ck" every 10 steps/' s.dtl >ck.dtl
"$dtlc" run ck.dtl --nproc 2 --set train.batch=12 --steps 10 >/dev/null
mv ck ck_at_10
for m in 1 3; do
  rm -rf ck; cp -r ck_at_10 ck  # each resumed run adds its own checkpoint at step 20
  "$dtlc" run ck.dtl --nproc "$m" --set "train.batch=$((24 / m))" --resume ck \
    --metrics "resumed$m.jsonl" >/dev/null 2>"resume$m.err" || { cat "resume$m.err"; status=1; }
  if ! awk -v m="$m" -F'"loss": ' '
      FNR == NR { if (FNR > 10) a[FNR - 10] = $2 + 0; next }
      { b = $2 + 0; r = (a[FNR] - b) / a[FNR]; if (r < 0) r = -r; if (r > x) x = r; k++ }
      END { printf "checkpoint of 2 ranks resumed on %d: steps 11-20, max relative difference %.2e\n", m, x; exit !(k == 10 && x <= 1e-5) }' \
      one.jsonl "resumed$m.jsonl"; then
    status=1
  fi
done
# A two-layer GPT with AdamW: attention, layer norms, a tied output layer.
cat > g.dtl <<'SPEC'
model G {
  dim vocab = 13, seq = 8, d = 16, heads = 2, hidden = 32, layers = 2
  input tokens : i32[batch, seq]
  input targets : i32[batch, seq]
  tok = Embedding(vocab, d)
  param pos : [seq, d] init normal(std = 0.02)
  blocks = repeat(layers) TransformerBlock(d, heads, hidden)
  ln_f = LayerNorm(d)
  logits = ln_f(blocks(tok(tokens) + pos)) @ tok.table
  loss = cross_entropy(logits, targets, over = vocab)
}
data { train { synthetic(seed = 5) } }
train {
  batch = 8
  steps = 15
  optimizer = adamw(lr = 1e-2)
  seed = 4
}
SPEC
"$dtlc" run g.dtl --metrics g1.jsonl --out g1 >/dev/null
"$dtlc" run g.dtl --nproc 2 --set train.batch=4 --metrics g2.jsonl --out g2 >/dev/null
awk -F'"loss": ' '
    FNR == NR { a[FNR] = $2 + 0; next }
    { b = $2 + 0; r = (a[FNR] - b) / a[FNR]; if (r < 0) r = -r; if (r > m) m = r; k++ }
    END { printf "GPT, 2 ranks: %d steps, max relative difference %.2e\n", k, m; exit !(k == 15 && m <= 1e-5) }' \
    g1.jsonl g2.jsonl || status=1
# A hand-written loss (mean squared error over [batch, out]): its gradient
# broadcasts a replicated constant over `batch`, which each rank slices
# locally to meet its shard of the batch.
diabetes="$(cd "$(dirname "$0")/../.." && pwd)/samples/diabetes_regression.dtl"
"$dtlc" run "$diabetes" --steps 20 --set train.batch=32 --metrics d1.jsonl --out d1 >/dev/null
"$dtlc" run "$diabetes" --steps 20 --nproc 2 --set train.batch=16 --metrics d2.jsonl --out d2 >/dev/null || status=1
awk -F'"loss": ' '
    FNR == NR { a[FNR] = $2 + 0; next }
    { b = $2 + 0; r = (a[FNR] - b) / a[FNR]; if (r < 0) r = -r; if (r > m) m = r; k++ }
    END { printf "diabetes regression, 2 ranks: %d steps, max relative difference %.2e\n", k, m; exit !(k == 20 && m <= 1e-5) }' \
    d1.jsonl d2.jsonl || status=1
exit $status
