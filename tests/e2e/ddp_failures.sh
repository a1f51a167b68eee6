#!/usr/bin/env bash
# How a multi-rank job fails, through dtlc itself (the launcher's and the
# rendezvous' own tests use a stand-in rank; this is the real binary):
#   1. a rank killed mid-run: the launcher exits within 10 s, naming it, its
#      signal and its last step;
#   2. a rank that never joins: the rank that did names it within the join
#      timeout;
#   3. a connection without the job's token is refused;
#   4. ranks that compiled different programs are refused before step 1;
#   5. ranks that would start from different parameters are refused before step 1.
# Cases 2-5 start ranks by hand with torchrun's variables, as a user of
# another launcher would.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/e2e_lib.sh"
begin_case "$@"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

mlp_spec s.dtl 32 64 4
cat >>s.dtl <<'SPEC'
train {
  batch = 16
  steps = 100000000
  optimizer = sgd(lr = 0.05)
  seed = 3
}
SPEC

# 1. A rank killed mid-run.
"$dtlc" run s.dtl --nproc 2 --metrics kill.jsonl >kill.out 2>kill.err &
launcher=$!
wait_lines kill.jsonl 3 300 0.1
victim=$(rank_pid "$launcher" 1)
if [ -z "$victim" ]; then
  fail "killed rank: could not find rank 1's process"
  kill "$launcher" 2>/dev/null
else
  start=$(date +%s%N)
  kill -KILL "$victim"
  wait "$launcher"; rc=$?
  took_ms=$(( ($(date +%s%N) - start) / 1000000 ))
  if [ "$rc" -ne 0 ] && grep -q "rank 1 (pid $victim) was killed by SIGKILL after step [0-9]" kill.err &&
     [ "$took_ms" -lt 10000 ]; then
    pass "killed rank named in ${took_ms} ms: $(grep -m1 'rank 1 (pid' kill.err)"
  else
    fail "killed rank: exit $rc after ${took_ms} ms; stderr: $(cat kill.err)"
  fi
fi

# 1b. With --max-restarts the launcher starts every rank again and they
#     continue from the latest checkpoint: the job finishes, and the steps run
#     twice have the same losses.
sed 's/steps = 100000000/steps = 3000/; s/seed = 3/seed = 3\n  checkpoint "ck" every 50 steps keep 2/' s.dtl >restart.dtl
"$dtlc" run restart.dtl --nproc 2 --max-restarts 1 --metrics restart.jsonl >restart.out 2>restart.err &
launcher=$!
for _ in $(seq 1 300); do [ -s ck/index.json ] && break; sleep 0.05; done
victim=$(rank_pid "$launcher" 1)
[ -n "$victim" ] && kill -KILL "$victim"
wait "$launcher"; rc=$?
if [ -n "$victim" ] && [ "$rc" -eq 0 ] && grep -q "restart 1: resuming from" restart.out &&
   awk -F'[:,] ' '/"loss"/ { s = $2 + 0; l = $6; if (s in seen && seen[s] != l) bad++; seen[s] = l; last = s }
       END { exit !(last == 3000 && bad == 0) }' restart.jsonl; then
  pass "restarted after a killed rank, resumed and finished: $(grep -m1 'restart 1' restart.out)"
else
  fail "restart: victim '$victim', exit $rc; $(tail -3 restart.out) $(cat restart.err)"
fi

# Ranks by hand: rank R of 2 with the given token; extra arguments go to dtlc.
# Each job has its own run folder (the killed run's holds a run).
rank() {
  local r=$1 token=$2; shift 2
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    DTL_JOB_TOKEN=$token "$dtlc" run s.dtl --steps 3 --out "runs/by_hand_$port" "$@"
}

# 2. A rank that never joins.
port=$(free_port)
start=$(date +%s)
rank 0 tok --join-timeout 3 >alone.out 2>alone.err; rc=$?
took=$(( $(date +%s) - start ))
if [ "$rc" -ne 0 ] && grep -q "rank 1 did not join within 3 s" alone.err && [ "$took" -le 8 ]; then
  pass "missing rank named after ${took}s: $(cat alone.err)"
else
  fail "missing rank: exit $rc after ${took}s; stderr: $(cat alone.err)"
fi

# 3. A connection without the job's token.
port=$(free_port)
rank 0 right --join-timeout 5 >tok0.out 2>tok0.err &
r0=$!
sleep 0.5
rank 1 wrong --join-timeout 5 >tok1.out 2>tok1.err; rc1=$?
wait "$r0"; rc0=$?
if [ "$rc1" -ne 0 ] && grep -q "token" tok1.err && [ "$rc0" -ne 0 ] && grep -q "rank 1 did not join" tok0.err; then
  pass "wrong token refused: $(head -1 tok1.err)"
else
  fail "wrong token: rank 1 exit $rc1 ($(cat tok1.err)), rank 0 exit $rc0 ($(cat tok0.err))"
fi

# 4. Different programs (another learning rate on rank 1).
port=$(free_port)
rank 0 tok --metrics prog.jsonl >prog0.out 2>prog0.err &
r0=$!
rank 1 tok --set 'train.optimizer=sgd(lr = 0.1)' >prog1.out 2>prog1.err; rc1=$?
wait "$r0"; rc0=$?
if [ "$rc0" -ne 0 ] && [ "$rc1" -ne 0 ] && grep -q "ranks compiled different programs: rank 1 has" prog0.err &&
   grep -q "ranks compiled different programs" prog1.err && [ ! -s prog.jsonl ]; then
  pass "different programs refused before step 1: $(cat prog0.err)"
else
  fail "different programs: exit $rc0/$rc1; $(cat prog0.err prog1.err)"
fi

# 5. Different parameters: each rank loads another --init file (checkpoints
#    of two one-step runs with other seeds).
for k in a b; do
  sed "s/seed = 3/seed = $([ $k = a ] && echo 11 || echo 12)\n  checkpoint \"ck_$k\" every 1 step/" s.dtl >"init_$k.dtl"
  "$dtlc" run "init_$k.dtl" --steps 1 >/dev/null 2>&1
done
a=$(ls ck_a/*/params.safetensors 2>/dev/null | head -1); b=$(ls ck_b/*/params.safetensors 2>/dev/null | head -1)
if [ -z "$a" ] || [ -z "$b" ]; then
  fail "different parameters: could not make two checkpoints ($(ls -R ck_a ck_b 2>&1 | head -5))"
else
  port=$(free_port)
  rank 0 tok --init "$a" --metrics par.jsonl >par0.out 2>par0.err &
  r0=$!
  rank 1 tok --init "$b" >par1.out 2>par1.err; rc1=$?
  wait "$r0"; rc0=$?
  if [ "$rc0" -ne 0 ] && [ "$rc1" -ne 0 ] && grep -q "ranks start from different parameters: rank 1 has parameter hash" par0.err &&
     [ ! -s par.jsonl ]; then
    pass "different parameters refused before step 1: $(cat par0.err)"
  else
    fail "different parameters: exit $rc0/$rc1; $(cat par0.err par1.err)"
  fi
fi
end_case
