#!/usr/bin/env bash
# A non-finite gradient on one rank (injected with the test-only fault hook
# DTL_FAULT=nan_grad:rank=R:step=S, since non-finite data is refused at load),
# through dtlc with real rank processes:
#   1. on_nonfinite = stop (the default): every rank stops before the update,
#      one message names the tensor and the rank, no checkpoint of that step;
#   2. on_nonfinite = skip: the step is skipped on every rank — parameters,
#      Adam's moments (and step count) and the schedule unchanged — counted
#      in the metrics (its grad_norm null), and training goes on finite.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/e2e_lib.sh"
begin_case "$@"

mlp_spec s.dtl 8 16 3
cat >>s.dtl <<'SPEC'
train {
  batch = 8
  steps = 8
  optimizer = adamw(lr = 0.01)
  schedule = linear(warmup = 3)
  clip = 100.0
  seed = 3
  checkpoint "ck" every 1 steps
}
SPEC

# 1. stop.
DTL_FAULT=nan_grad:rank=1:step=5:tensor=l2.weight "$dtlc" run s.dtl --nproc 2 --metrics stop.jsonl >stop.out 2>stop.err
rc=$?
msg="step 5: the gradient of \`l2.weight\` is not finite on rank 1 (the first such tensor); stopping before the update"
if [ "$rc" -ne 0 ] && [ "$(grep -c "is not finite" stop.err)" -eq 1 ] && grep -qF "$msg" stop.err &&
   [ ! -e ck/step-00000005 ] && [ "$(wc -l <stop.jsonl)" -eq 4 ]; then
  pass "stop: exit $rc after 4 steps, said once: $(grep -m1 'is not finite' stop.err)"
else
  fail "stop: exit $rc; $(ls ck); err: $(cat stop.err)"
fi

# 2. skip, with checkpoints every step to look at the state around it.
rm -rf ck
DTL_FAULT=nan_grad:rank=1:step=5 "$dtlc" run s.dtl --nproc 2 --set train.on_nonfinite=skip --metrics skip.jsonl \
  >skip.out 2>skip.err
rc=$?
# The tensors' bytes of a checkpoint file (after the header, whose metadata names the step).
tensors() { python3 -c '
import struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
sys.stdout.write(b[8 + n:].hex())' "$1"; }
same() { [ "$(tensors "ck/step-0000000$1/$3.safetensors")" == "$(tensors "ck/step-0000000$2/$3.safetensors")" ]; }
report=$(python3 - skip.jsonl <<'PY'
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
skipped = [r["skipped_steps"] for r in rows]
lr = {r["step"]: r["lr"] for r in rows}
norms = [r["grad_norm"] for r in rows]  # null on the skipped step: it was not finite
ok = (len(rows) == 8 and norms[4] is None and all(isinstance(n, float) for k, n in enumerate(norms) if k != 4) and skipped == [0, 0, 0, 0, 1, 1, 1, 1] and lr[6] == lr[5] and lr[5] != lr[4]
      and all(isinstance(r["loss"], float) and math.isfinite(r["loss"]) for r in rows))
print("ok" if ok else "bad: skipped %s, lr %s, norms %s, losses %s" % (skipped, lr, norms, [r["loss"] for r in rows]))
PY
)
if [ "$rc" -ne 0 ]; then
  fail "skip: exit $rc; $(cat skip.err)"
elif [ "$report" != ok ]; then
  fail "skip: metrics: $report"
elif ! same 4 5 params || ! same 4 5 optimizer; then
  fail "skip: the parameters or optimiser state changed at the skipped step 5"
elif same 5 6 params || same 5 6 optimizer; then
  fail "skip: step 6 did not update"
elif ! grep -q '"skipped_steps":1' ck/step-00000005/state.json; then
  fail "skip: state.json of step 5 does not record the skipped step: $(cat ck/step-00000005/state.json)"
else
  pass "skip: step 5 left parameters and Adam's state bitwise unchanged, the schedule did not advance, training went on finite"
fi

end_case
