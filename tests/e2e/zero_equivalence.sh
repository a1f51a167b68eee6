#!/usr/bin/env bash
# ZeRO must not change the numbers: real processes, AdamW with clipping, 15
# steps, f32 — from the spec's initialisation and from one --init file —
# `zero = 1, 2, 3` on dp = 2, dp = 3 (uneven flat pieces) and
# dp = 4, zero = 3 with tp = 2, every level with `accumulate = 4`, each
# against the one-process run of the same global batch from the same
# weights (within 1e-5 relative); a checkpoint of each level written at
# dp = 2 resumed at dp = 1, 3 and 4 with the uninterrupted run's losses; and
# the planned memory per rank (parameters, gradients, optimiser state, the
# executor's buffers) against what rank 0 holds, for each level.
set -euo pipefail
dtlc=$1; work=$2
here="$(cd "$(dirname "$0")" && pwd)"
rm -rf "$work"; mkdir -p "$work"; cd "$work"
status=0
source "$here/equivalence_lib.sh"
{ gpt_spec 13 4 36; cat <<'SPEC'; } >g.dtl
train {
  batch = 24
  steps = 15
  optimizer = adamw(lr = 1e-2)
  clip = 0.5
  seed = 4
  checkpoint "ck" every 10 steps
}
SPEC
"$dtlc" run g.dtl --no-checkpoints --metrics one.jsonl --out runs/one >/dev/null
sed 's/seed = 4/seed = 4\n  accumulate = 4/' g.dtl >acc.dtl
"$dtlc" run acc.dtl --no-checkpoints --set train.batch=8 --metrics acc1.jsonl --out runs/acc1 >/dev/null
for z in 1 2 3; do
  layout "z${z}_dp2" g.dtl 2 "mesh dp = 2; split batch over dp; zero = $z" --set train.batch=12
  layout "z${z}_dp3" g.dtl 3 "mesh dp = 3; split batch over dp; zero = $z" --set train.batch=8
  layout "z${z}_dp4" g.dtl 4 "mesh dp = 4; split batch over dp; zero = $z" --set train.batch=6
  base=acc1 layout "z${z}_acc4" acc.dtl 2 "mesh dp = 2; split batch over dp; zero = $z" --set train.batch=4
done
layout z3_tp2 g.dtl 4 "mesh dp = 2, tp = 2; split batch over dp; split heads over tp; split hidden over tp; zero = 3" \
  --set train.batch=12
layout z1_tp2 g.dtl 4 "mesh dp = 2, tp = 2; split batch over dp; split vocab over tp; split heads over tp; zero = 1" \
  --set train.batch=12
# A parameter a rule already splits over the data-parallel axis is updated
# by those pieces, as without ZeRO; the others are cut flat.
layout z2_hidden g.dtl 2 "mesh dp = 2; split batch over dp; split hidden over dp; zero = 2" --set train.batch=12

# Pieces smaller than the ranks: l2's 2-element bias on dp = 4 leaves two
# ranks without a piece of it (they update nothing, and still take part in
# every gather, checkpoints included).
cat >m.dtl <<'SPEC'
model M {
  dim f = 8, h = 6, c = 2
  input x : f32[batch, f]
  input y : i32[batch]
  l1 = Linear(f, h)
  l2 = Linear(h, c)
  loss = cross_entropy(l2(relu(l1(x))), y, over = c)
}
data { train { synthetic(seed = 3) } }
train {
  batch = 24
  steps = 15
  optimizer = adamw(lr = 1e-2)
  clip = 0.5
  seed = 2
  checkpoint "ck" every 10 steps
}
SPEC
"$dtlc" run m.dtl --no-checkpoints --metrics m1.jsonl --out runs/m1 >/dev/null
for z in 1 2 3; do base=m1 layout "m_z${z}_dp4" m.dtl 4 "mesh dp = 4; split batch over dp; zero = $z" --set train.batch=6; done
rm -rf ck
"$dtlc" run m_z3_dp4.dtl --nproc 4 --set train.batch=6 --steps 10 >/dev/null 2>m_save.err ||
  { echo "tiny pieces: saving failed"; tail -5 m_save.err; status=1; }
"$dtlc" run m.dtl --resume ck --metrics m_resumed.jsonl >/dev/null 2>m_resume.err ||
  { echo "tiny pieces: resuming failed"; tail -5 m_resume.err; status=1; }
compare "zero = 3 checkpoint of dp 4 with empty pieces resumed on one process" m1.jsonl m_resumed.jsonl 11

# From one --init file (whole tensors), each rank slicing its pieces.
rm -rf ck; "$dtlc" run g.dtl --steps 3 >/dev/null; mv ck ck_init
init=$(ls -d ck_init/step-*/ | tail -1)params.safetensors
"$dtlc" run g.dtl --init "$init" --no-checkpoints --metrics init1.jsonl --out runs/init1 >/dev/null
base=init1 layout z3_init g.dtl 2 "mesh dp = 2; split batch over dp; zero = 3" --set train.batch=12 --init "$init"
base=init1 layout z1_init g.dtl 3 "mesh dp = 3; split batch over dp; zero = 1" --set train.batch=8 --init "$init"

# Checkpoints are mesh-free: optimiser state and (zero = 3) parameters are
# gathered whole, and sliced again into any other mesh's pieces.
for z in 1 2 3; do
  rm -rf ck
  "$dtlc" run "z${z}_dp2.dtl" --nproc 2 --set train.batch=12 --steps 10 >/dev/null 2>"save_$z.err" ||
    { echo "zero $z: saving failed"; tail -5 "save_$z.err"; status=1; }
  rm -rf "ck_z$z"; mv ck "ck_z$z"
  for n in 1 3 4; do
    rm -rf ck; cp -r "ck_z$z" ck
    "$dtlc" run "z${z}_dp2.dtl" --nproc "$n" --set "parallel.mesh.dp=$n" --set "train.batch=$((24 / n))" --resume ck \
      --metrics "resumed_z${z}_dp$n.jsonl" >/dev/null 2>"resumed_z${z}_dp$n.err" ||
      { echo "zero $z resumed at dp $n failed:"; tail -5 "resumed_z${z}_dp$n.err"; status=1; }
    compare "zero = $z checkpoint of dp 2 resumed at dp $n" one.jsonl "resumed_z${z}_dp$n.jsonl" 11
  done
done

for z in 1 2 3; do memory "z${z}_dp3" 3 --set train.batch=8; done
memory z3_tp2 4 --set train.batch=12
exit $status
