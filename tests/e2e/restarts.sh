#!/usr/bin/env bash
# Restarts that make progress: one `dtlc run --nproc 2 --max-restarts 5` job
# in which a rank kills itself (SIGKILL, injected with the test hook
# DTL_FAULT, runtime/exec/fault_hook.h) at five steps drawn from a fixed
# seed, each in another generation of ranks. The job must finish, log five
# "restart k: recovered in X s (resumed from step N)" lines, and end with the
# final parameters and optimiser state of an uninterrupted run, to the bit.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/e2e_lib.sh"
begin_case "$@"
mkdir -p clean killed

mlp_spec restarts.dtl 32 64 4
cat >>restarts.dtl <<'SPEC'
train {
  batch = 16
  steps = 30
  optimizer = adamw(lr = 0.01)
  seed = 3
  checkpoint "ck" every 1 steps keep 2
}
SPEC

# Five kills, one per generation (restart=k), at increasing steps: a
# generation resumes from the checkpoint before the step its predecessor
# was killed at, so each kill lies ahead of the generation it is meant for.
RANDOM=12
faults="" step=0
for k in 0 1 2 3 4; do
  step=$((step + 2 + RANDOM % 4))
  faults+="${faults:+,}kill:rank=$((RANDOM % 2)):step=$step:restart=$k"
done
echo "DTL_FAULT=$faults"

(cd clean && "$dtlc" run ../restarts.dtl --nproc 2 >run.out 2>run.err) || fail "uninterrupted run: $(cat clean/run.err)"
(cd killed && DTL_FAULT=$faults timeout 120 "$dtlc" run ../restarts.dtl --nproc 2 --max-restarts 5 >run.out 2>run.err)
rc=$?
recovered=$(grep -c "dtl: restart [1-5]: recovered in [0-9.]* s (resumed from step [0-9]*)" killed/run.err)
killed=$(grep -c "was killed by SIGKILL" killed/run.err)
if [ "$rc" -eq 0 ] && [ "$recovered" -eq 5 ] && [ "$killed" -eq 5 ]; then
  pass "5 ranks killed, 5 recoveries: $(grep 'recovered in' killed/run.err | sed 's/^dtl: //' | tr '\n' ';')"
else
  fail "exit $rc, $killed kills, $recovered recoveries: $(cat killed/run.err)"
fi
for f in params.safetensors optimizer.safetensors state.json; do
  if cmp -s "clean/ck/step-00000030/$f" "killed/ck/step-00000030/$f"; then
    pass "step 30's $f is the uninterrupted run's, bit for bit"
  else
    fail "step 30's $f differs from the uninterrupted run's (or is missing)"
  fi
done

# A job started from one checkpoint (--resume DIR/step-N --out NEW) restarts
# from its own newest checkpoint in NEW, not from step N again.
mkdir -p branch
(cd branch && "$dtlc" run ../restarts.dtl --nproc 2 --steps 10 >first.out 2>first.err) || fail "branch: $(cat branch/first.err)"
(cd branch && DTL_FAULT=kill:rank=1:step=15:restart=0 timeout 120 "$dtlc" run ../restarts.dtl --nproc 2 --max-restarts 1 \
   --resume ck/step-00000009 --out ck2 >run.out 2>run.err)
rc=$?
if [ "$rc" -eq 0 ] && grep -q "dtl: restart 1: recovered in [0-9.]* s (resumed from step 1[45])" branch/run.err &&
   cmp -s clean/ck/step-00000030/params.safetensors branch/ck2/step-00000030/params.safetensors; then
  pass "resumed from step-00000009, restarted from its own checkpoint: $(grep -o 'recovered in.*' branch/run.err)"
else
  fail "a restart of a job resumed from a step-N folder: exit $rc; $(cat branch/run.err)"
fi

end_case
