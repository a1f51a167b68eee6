#!/usr/bin/env bash
# Pre-emption through dtlc itself: SIGTERM (or a first SIGINT) lets the ranks
# finish the step they are in, agree on it, save a checkpoint and exit 0;
# --resume then continues with the losses of an uninterrupted run, bit for bit.
#   1. SIGTERM to rank 1 alone (not the launcher): every rank stops after the
#      same step, the launcher exits 0;
#   2. SIGTERM to the launcher, which forwards it;
#   3. SIGINT to one process run without a launcher;
#   4. --term-timeout 0: the ranks are killed at once, the launcher says so;
#   5. SIGTERM with --no-checkpoints: exit 0, saying nothing was saved.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/e2e_lib.sh"
begin_case "$@"

mlp_spec s.dtl 32 64 4
cat >>s.dtl <<'SPEC'
train {
  batch = 16
  steps = 100000000
  optimizer = adamw(lr = 0.01)
  seed = 3
  checkpoint "ck" every 1000000 steps keep 2
}
SPEC

# A case: $1 name, $2 how to signal (a command given the launcher's pid),
# $3 the dtlc flags (--nproc 2 or none). Runs, signals after 3 steps, checks
# the stop, resumes 5 steps further and compares with an uninterrupted run.
preempt() {
  local name=$1 how=$2; shift 2
  rm -rf ck
  "$dtlc" run s.dtl "$@" --metrics "$name.jsonl" >"$name.out" 2>"$name.err" &
  local launcher=$!
  wait_lines "$name.jsonl" 3 || { fail "$name: no 3 steps in 10 s: $(cat "$name.err")"; kill -KILL "$launcher"; return; }
  eval "$how"
  wait "$launcher"; local rc=$?
  local k; k=$(sed -n 's/^stopped after step \([0-9]*\) (SIG[A-Z]*): saved ck\/step-[0-9]*; --resume ck continues from it$/\1/p' "$name.out")
  if [ "$rc" -ne 0 ] || [ -z "$k" ] || [ ! -f "ck/$(printf 'step-%08d' "$k")/params.safetensors" ] ||
     [ "$(tail -1 "$name.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin)["step"])')" != "$k" ]; then
    fail "$name: exit $rc, stopped after step '$k'; out: $(cat "$name.out"); err: $(cat "$name.err")"
    return
  fi
  "$dtlc" run s.dtl "$@" --resume ck --steps $((k + 5)) --metrics "$name.jsonl" >"$name.resume.out" 2>&1 ||
    { fail "$name: resume: $(cat "$name.resume.out")"; return; }
  "$dtlc" run s.dtl "$@" --no-checkpoints --out "$name.ref" --steps $((k + 5)) --metrics "$name.ref.jsonl" >/dev/null 2>&1
  if [ "$(losses "$name.jsonl")" == "$(losses "$name.ref.jsonl")" ] && [ "$(losses "$name.jsonl" | wc -l)" -eq $((k + 5)) ]; then
    pass "$name: exit 0 after step $k with its checkpoint; resumed, the $((k + 5)) losses equal an uninterrupted run's bit for bit"
  else
    fail "$name: losses differ from the uninterrupted run's:"; diff <(losses "$name.jsonl") <(losses "$name.ref.jsonl") | head
  fi
}

preempt rank1_term 'victim=$(rank_pid "$launcher" 1); kill -TERM "$victim"' --nproc 2
grep -q "SIGTERM" rank1_term.out || fail "rank1_term: the stop line does not name SIGTERM"
preempt launcher_term 'kill -TERM "$launcher"' --nproc 2
grep -q "dtl: SIGTERM: every rank stopped after the same step" launcher_term.err ||
  fail "launcher_term: the launcher did not say the ranks stopped: $(cat launcher_term.err)"
preempt single_int 'kill -INT "$launcher"'

# 4. No time to save: killed at once, the launcher's status says the signal.
rm -rf ck
"$dtlc" run s.dtl --nproc 2 --term-timeout 0 --metrics budget.jsonl >budget.out 2>budget.err &
launcher=$!
wait_lines budget.jsonl 3
kill -TERM "$launcher"
wait "$launcher"; rc=$?
if [ "$rc" -eq 143 ] && grep -q "ranks still running after --term-timeout 0 s were killed" budget.err; then
  pass "--term-timeout 0: killed at once, exit 143: $(grep -m1 'term-timeout' budget.err)"
else
  fail "--term-timeout 0: exit $rc; $(cat budget.err)"
fi

# 5. Nothing to save to.
"$dtlc" run s.dtl --no-checkpoints --out none --metrics none.jsonl >none.out 2>none.err &
pid=$!
wait_lines none.jsonl 3
kill -TERM "$pid"
wait "$pid"; rc=$?
if [ "$rc" -eq 0 ] && grep -q "^stopped after step [0-9]* (SIGTERM): no checkpoint written" none.out; then
  pass "--no-checkpoints: exit 0: $(grep '^stopped' none.out)"
else
  fail "--no-checkpoints: exit $rc; $(cat none.out none.err)"
fi

end_case
