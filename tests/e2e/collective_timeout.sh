#!/usr/bin/env bash
# A rank stopped inside a collective (SIGSTOP, injected with the test hook
# DTL_FAULT, runtime/exec/fault_hook.h) through `dtlc run --nproc 2`:
#   1. shared memory: the other rank gives up at --collective-timeout 2 with
#      the collective's op, its number in `dtlc plan`, the spec line of the
#      rule and the rank that did not arrive; the launcher kills the stopped
#      rank with SIGKILL (it ignores SIGTERM), names it, and the job ends
#      non-zero within seconds, leaving no process behind;
#   2. the same over Gloo;
#   3. with --max-restarts 1 the job starts again from the last checkpoint,
#      logs how long recovery took, and finishes with the steps it ran twice
#      at the same losses.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/e2e_lib.sh"
begin_case "$@"

mlp_spec stuck.dtl 32 64 4
cat >>stuck.dtl <<'SPEC'
train {
  batch = 16
  steps = 40
  optimizer = sgd(lr = 0.05)
  seed = 3
  checkpoint "ck" every 2 steps keep 2
}
parallel {
  mesh dp = auto
  split batch over dp
}
SPEC
rule_line=$(grep -n 'split batch over dp' stuck.dtl | cut -d: -f1)
# The loss's all-reduce is the first collective of a step (dtlc plan's #1).
"$dtlc" plan stuck.dtl --world 2 >plan.txt
grep -q '#1 all_reduce over dp, f32, 4 B' plan.txt || fail "plan: no '#1 all_reduce' of the loss: $(cat plan.txt)"

# Stops rank 1 after step 3 (rank 0 then waits in step 4's first collective)
# and checks what the job said; $1 names the case, the rest are dtlc flags.
stopped_run() {
  local name=$1; shift
  local start; start=$(date +%s%N)
  DTL_FAULT=stop:rank=1:step=3 timeout 60 "$dtlc" run "$work/stuck.dtl" --nproc 2 --collective-timeout 2 \
    --no-checkpoints --out "run_$name" "$@" >"$name.out" 2>"$name.err"
  rc=$?
  took_ms=$(( ($(date +%s%N) - start) / 1000000 ))
  stopped_pid=$(sed -n 's/.*rank 1 (pid \([0-9]*\)) was stopped by SIGSTOP.*/\1/p' "$name.err" | head -1)
  left=$(pgrep -f "$work/stuck.dtl" || true)
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$took_ms" -lt 20000 ] && [ -n "$stopped_pid" ] &&
     ! kill -0 "$stopped_pid" 2>/dev/null && [ -z "$left" ] &&
     grep -q "killed with SIGKILL" "$name.err"; then
    pass "$name: ended in ${took_ms} ms (exit $rc), rank 1 killed: $(grep -m1 'was stopped by' "$name.err")"
  else
    fail "$name: exit $rc after ${took_ms} ms, stopped pid '$stopped_pid', left '$left'; $(cat "$name.err")"
  fi
}

# 1. Shared memory.
stopped_run shm --backend shm
want="step 4: all-reduce over \`dp\` (#1 in \`dtlc plan\`; rule: split batch over dp ($work/stuck.dtl:$rule_line:3)) failed: "
if grep -qF "[rank 0] $want" shm.err && grep -q "timed out after 2 s: rank 1 did not arrive (rank 1.s process [0-9]* is stopped)" shm.err; then
  pass "shm: $(grep -m1 'rank 0] step 4' shm.err)"
else
  fail "shm: no error naming the collective, its rule's line and rank 1: $(cat shm.err)"
fi

# 2. Gloo.
stopped_run gloo --backend gloo
if grep -qF "[rank 0] $want" gloo.err && grep -q "rank 1 did not reach it within 2 s" gloo.err; then
  pass "gloo: $(grep -m1 'rank 0] step 4' gloo.err)"
else
  fail "gloo: no error naming the collective, its rule's line and rank 1: $(cat gloo.err)"
fi

# 3. Restarted from the last checkpoint (step 2), only the first generation stops.
DTL_FAULT=stop:rank=1:step=3:restart=0 timeout 60 "$dtlc" run stuck.dtl --nproc 2 --collective-timeout 2 \
  --max-restarts 1 --metrics restart.jsonl >restart.out 2>restart.err
rc=$?
if [ "$rc" -eq 0 ] && grep -q "was stopped by SIGSTOP" restart.err &&
   grep -q "dtl: restart 1: recovered in [0-9.]* s (resumed from step 2)" restart.err &&
   awk -F'[:,] ' '/"loss"/ { s = $2 + 0; l = $6; if (s in seen && seen[s] != l) bad++; seen[s] = l; last = s }
       END { exit !(last == 40 && bad == 0) }' restart.jsonl; then
  pass "restarted and finished: $(grep -m1 'recovered in' restart.err)"
else
  fail "restart: exit $rc; $(cat restart.err) $(tail -3 restart.jsonl)"
fi

end_case
