#!/usr/bin/env bash
# Silent divergence between data-parallel replicas, through dtlc with real
# rank processes: the test-only fault hook flips one bit of one parameter on
# rank 1 (DTL_FAULT=flip_bit:rank=1:step=3); with `replica_check = 2` the
# ranks compare hashes before step 4's update, and the run stops naming the
# tensor and the ranks (with two, neither is known to be right: both are
# named; with three, the odd one out). Without the fault (and at ZeRO 1, where only the
# parameters are replicas, the optimiser state being pieces) nothing is found.
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
  seed = 3
  replica_check = 2
}
SPEC

DTL_FAULT=flip_bit:rank=1:step=3:tensor=l2.bias "$dtlc" run s.dtl --nproc 2 >flip.out 2>flip.err
rc=$?
if [ "$rc" -ne 0 ] && grep -q "step 4: replicas over \`dp\` hold different values (" flip.err &&
   grep -qF '`l2.bias`: ranks 0, 1 hold different values' flip.err &&
   [ "$(grep -c 'replicas over' flip.err)" -eq 1 ]; then
  pass "flipped bit found at step 4, once: $(grep -A1 'replicas over' flip.err | tr '\n' ' ')"
else
  fail "flipped bit: exit $rc; $(cat flip.err)"
fi

DTL_FAULT=flip_bit:rank=2:step=3:tensor=l1.weight "$dtlc" run s.dtl --nproc 3 --set train.batch=4 --out flip3 >flip3.out 2>flip3.err
if [ "$?" -ne 0 ] && grep -qF '`l1.weight`: rank 2 holds another value than ranks 0, 1' flip3.err; then
  pass "3 ranks: the odd one out named: $(grep -F '`l1.weight`' flip3.err)"
else
  fail "3 ranks: $(cat flip3.err)"
fi

for zero in 0 1; do
  sed "s/^data/parallel { mesh dp = auto; split batch over dp; zero = $zero }\ndata/" s.dtl >z.dtl
  if "$dtlc" run z.dtl --nproc 2 --set train.replica_check=1 --out clean$zero >clean$zero.out 2>&1; then
    pass "zero = $zero: no divergence found in 8 checks"
  else
    fail "zero = $zero: a clean run failed: $(cat clean$zero.out)"
  fi
done

end_case
