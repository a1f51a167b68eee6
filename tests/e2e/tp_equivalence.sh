#!/usr/bin/env bash
# Tensor, sequence and vocabulary parallelism must not change the numbers:
# real processes, AdamW with clipping, 15 steps, f32 — each layout against
# the one-process run of the same global batch from the same weights
# (within 1e-5 relative): tp = 2 and 4 on a GPT, dp = 2 × tp = 2, dp = 3, a
# vocabulary split, a sequence split, sequence parallelism (with dp and a vocabulary split too), a LLaMA-style block, dropout, accumulation (gradients reduced once per
# step), the char_gpt
# sample at tp = 2, a run from a whole-tensor --init; and a checkpoint
# written at tp = 2 resumed at 1 rank, at tp = 4 and at dp = 2 × tp = 2;
# and the planned memory per rank against what rank 0 holds, on three layouts.
set -euo pipefail
dtlc=$1; work=$2
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$(dirname "$0")/../.." && pwd)"
rm -rf "$work"; mkdir -p "$work"; cd "$work"
status=0
source "$here/equivalence_lib.sh"
gpt() {  # $1: the block layer; $2: the norm; $3: extra layers before the model
  printf "%s\n" "$3"
  gpt_spec 16 4 32 "$1" "$2"
  cat <<SPEC
train {
  batch = 8
  steps = 15
  optimizer = adamw(lr = 1e-2)
  clip = 0.5
  seed = 4
  checkpoint "ck" every 10 steps
}
SPEC
}
gpt "TransformerBlock(d, heads, hidden)" "LayerNorm(d)" "" >g.dtl
"$dtlc" run g.dtl --metrics one.jsonl >/dev/null
layout tp2 g.dtl 2 "mesh tp = 2; split heads over tp; split hidden over tp"
layout tp4 g.dtl 4 "mesh tp = 4; split heads over tp; split hidden over tp"
layout dp2tp2 g.dtl 4 "mesh dp = 2, tp = 2; split batch over dp; split heads over tp; split hidden over tp" --set train.batch=4
layout vocab g.dtl 2 "mesh tp = 2; split vocab over tp"
layout seq g.dtl 2 "mesh tp = 2; split seq over tp"
layout sp g.dtl 2 "mesh tp = 2; split heads over tp; split hidden over tp; split seq over tp"
layout dp2sp2 g.dtl 4 "mesh dp = 2, tp = 2; split batch over dp; split vocab over tp; split heads over tp; split hidden over tp; split seq over tp" --set train.batch=4
# An odd vocabulary split unevenly (7 + 6 rows and classes; 4 + 3 + 3 + 3).
sed 's/vocab = 16/vocab = 13/' g.dtl >odd.dtl
"$dtlc" run odd.dtl --no-checkpoints --metrics odd1.jsonl --out runs/odd1 >/dev/null
base=odd1 layout odd_vocab odd.dtl 2 "mesh tp = 2; split vocab over tp; split heads over tp; split hidden over tp"
base=odd1 layout odd_vocab4 odd.dtl 4 "mesh tp = 4; split vocab over tp"
"$dtlc" run g.dtl --set train.batch=12 --no-checkpoints --metrics one12.jsonl --out runs/one12 >/dev/null
base=one12 layout dp3 g.dtl 3 "mesh dp = 3; split batch over dp" --set train.batch=4

# With accumulation the gradient buckets are reduced once per step (no_sync):
# each micro-batch's partial sums are added up first — the same numbers.
sed 's/seed = 4/seed = 4\n  accumulate = 2/' g.dtl >acc.dtl
"$dtlc" run acc.dtl --no-checkpoints --metrics acc1.jsonl --out runs/acc1 >/dev/null
base=acc1 layout acc_dp2tp2 acc.dtl 4 "mesh dp = 2, tp = 2; split batch over dp; split heads over tp; split hidden over tp; split seq over tp" \
  --set train.batch=4
base=acc1 layout acc_dp2 acc.dtl 2 "mesh dp = 2; split batch over dp" --set train.batch=4

# --verify, the check a user runs on their own spec, reports the same on
# these layouts: equal losses within the tolerance.
for name in sp odd_vocab; do
  "$dtlc" run "$name.dtl" --nproc 2 --verify 5 --no-checkpoints >"verify_$name.out" 2>&1 ||
    { echo "--verify on $name failed:"; tail -3 "verify_$name.out"; status=1; }
  grep -q ": ok$" "verify_$name.out" || { echo "--verify on $name did not report ok"; status=1; }
  tail -1 "verify_$name.out"
done

memory tp2 2
memory dp2sp2 4 --set train.batch=4
memory odd_vocab 2

# A LLaMA-style block from the stdlib's RMSNorm and SwiGlu: the rules are not GPT-specific.
gpt "LlamaBlock(d, heads, hidden)" "RMSNorm(d)" "layer LlamaBlock(d: dim, heads: dim, hidden: dim) {
  n1 = RMSNorm(d)
  attn = Attention(d, heads, use_bias = false)
  n2 = RMSNorm(d)
  mlp = SwiGlu(d, hidden)
  forward(x) {
    let h = x + attn(n1(x))
    return h + mlp(n2(h))
  }
}" >l.dtl
"$dtlc" run l.dtl --no-checkpoints --metrics llama1.jsonl --out runs/llama1 >/dev/null
base=llama1 layout llama_tp2 l.dtl 2 "mesh tp = 2; split heads over tp; split hidden over tp"

# Dropout (p > 0) on the residual branches and on the MLP's hidden
# activations (split by `hidden`, or by `seq`): each rank draws its block's
# mask bits by global element, one process's masks.
gpt "DropBlock(d, heads, hidden)" "LayerNorm(d)" "layer DropBlock(d: dim, heads: dim, hidden: dim) {
  ln1 = LayerNorm(d)
  attn = Attention(d, heads)
  ln2 = LayerNorm(d)
  up = Linear(d, hidden)
  down = Linear(hidden, d)
  forward(x) {
    let h = x + dropout(attn(ln1(x)), p = 0.2)
    return h + down(dropout(gelu(up(ln2(h))), p = 0.3))
  }
}" >drop.dtl
"$dtlc" run drop.dtl --no-checkpoints --metrics drop1.jsonl --out runs/drop1 >/dev/null
base=drop1 layout drop_tp2 drop.dtl 2 "mesh tp = 2; split heads over tp; split hidden over tp"
base=drop1 layout drop_sp2 drop.dtl 2 "mesh tp = 2; split heads over tp; split hidden over tp; split seq over tp"

# The char_gpt sample, as its comment suggests, at dp = 1 × tp = 2.
sed '/^# No parallel block/,$d' "$root/samples/char_gpt.dtl" >c.dtl
"$dtlc" run c.dtl --steps 15 --set train.batch=8 --metrics char1.jsonl --out runs/char1 >/dev/null
base=char1 layout char_tp2 c.dtl 2 "mesh dp = auto, tp = 2; split batch over dp; split heads over tp; split hidden over tp" \
  --steps 15 --set train.batch=8

# From a whole-tensor --init (the one-process run's checkpoint at step 10):
# each rank slices its pieces.
"$dtlc" run g.dtl --init ck/step-00000010/params.safetensors --no-checkpoints --metrics init1.jsonl --out runs/init1 >/dev/null
base=init1 layout init_tp2 g.dtl 2 "mesh tp = 2; split heads over tp; split hidden over tp" \
  --init ck/step-00000010/params.safetensors

# A checkpoint written at tp = 2 (gathered whole: mesh-free) resumes
# anywhere with the uninterrupted run's losses.
rm -rf ck
{ cat g.dtl; echo "parallel { mesh dp = auto, tp = 2; split batch over dp; split heads over tp; split hidden over tp }"; } >r.dtl
"$dtlc" run r.dtl --nproc 2 --steps 10 >/dev/null
mv ck ck_tp2
resume() {  # NAME NPROC [--set …]
  local name=$1 n=$2; shift 2
  rm -rf ck; cp -r ck_tp2 ck
  "$dtlc" run "$name.dtl" --nproc "$n" "$@" --resume ck --metrics "resumed_$name.jsonl" >/dev/null 2>"resumed_$name.err" ||
    { echo "resume at $name failed:"; tail -5 "resumed_$name.err"; status=1; }
  compare "tp = 2 checkpoint resumed at $name" one.jsonl "resumed_$name.jsonl" 11
}
resume g 1
resume tp4 4
resume dp2tp2 4 --set train.batch=4
# The same with uneven pieces: an odd vocabulary's checkpoint at tp = 2, resumed at 1 and at tp = 4.
rm -rf ck
{ cat odd.dtl; echo "parallel { mesh tp = 2; split vocab over tp }"; } >rodd.dtl
"$dtlc" run rodd.dtl --nproc 2 --steps 10 >/dev/null
rm -rf ck_tp2; mv ck ck_tp2
resume_odd() {  # NAME NPROC
  rm -rf ck; cp -r ck_tp2 ck
  "$dtlc" run "$1.dtl" --nproc "$2" --resume ck --metrics "resumed_$1.jsonl" >/dev/null 2>"resumed_$1.err" ||
    { echo "resume at $1 failed:"; tail -5 "resumed_$1.err"; status=1; }
  compare "odd-vocabulary tp = 2 checkpoint resumed at $1" odd1.jsonl "resumed_$1.jsonl" 11
}
cp odd.dtl odd_one.dtl
resume_odd odd_one 1
resume_odd odd_vocab4 4
exit $status
