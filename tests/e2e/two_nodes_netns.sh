#!/usr/bin/env bash
# A job of two nodes that share nothing but a network link: two network
# namespaces joined by a veth pair (10.231.0.1/30 and .2), each node also in
# its own UTS (host name), IPC and mount namespace with a private /dev/shm,
# so a rank can reach the other node only over the veth:
#   1. two launchers of two ranks each train together (Gloo binds the veth's
#      address, not loopback: node 0 by the route to the master, node 1 by
#      --iface) and match the one-rank losses;
#   2. node 1's ranks fail (its spec does not compile): node 0's launcher
#      ends within seconds, naming the failure, not at its 60 s join timeout;
#   3. the same the other way round;
#   4. a rank of node 1 killed mid-run: node 0's launcher ends within seconds,
#      naming it.
# Needs root (ip netns, unshare); elsewhere it skips (exit 77) saying why.
set -uo pipefail
dtlc=$1; work=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/e2e_lib.sh"
skip() { echo "SKIPPED: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root to create network namespaces"
command -v ip >/dev/null && command -v unshare >/dev/null || skip "needs ip (iproute2) and unshare (util-linux)"

ns0=dtl2n$$a; ns1=dtl2n$$b; veth0=d2n$$a; veth1=d2n$$b
cleanup() {
  for p in $(jobs -p); do kill -KILL "$p" 2>/dev/null; done  # only background jobs still running
  ip netns del "$ns0" 2>/dev/null
  ip netns del "$ns1" 2>/dev/null  # deleting a namespace deletes its end of the veth
}
trap cleanup EXIT
ip netns add "$ns0" 2>/dev/null && ip netns add "$ns1" 2>/dev/null || skip "cannot create network namespaces here"
ip link add "$veth0" type veth peer name "$veth1" 2>/dev/null || skip "cannot create a veth pair here"
ip link set "$veth0" netns "$ns0" && ip link set "$veth1" netns "$ns1" &&
  ip -n "$ns0" addr add 10.231.0.1/30 dev "$veth0" && ip -n "$ns1" addr add 10.231.0.2/30 dev "$veth1" &&
  ip -n "$ns0" link set "$veth0" up && ip -n "$ns1" link set "$veth1" up &&
  ip -n "$ns0" link set lo up && ip -n "$ns1" link set lo up || { echo "FAIL: cannot set up the veth pair"; exit 1; }
ip netns exec "$ns0" unshare --mount --uts --ipc --propagation private true 2>/dev/null ||
  skip "cannot unshare the mount, UTS and IPC namespaces here"

# node K COMMAND...: run COMMAND as node K, with its own host name and /dev/shm.
node() {
  local k=$1; shift
  local ns=$ns0; [ "$k" -eq 1 ] && ns=$ns1
  ip netns exec "$ns" unshare --mount --uts --ipc --propagation private \
    sh -c 'mount -t tmpfs tmpfs /dev/shm && hostname "dtl-node-$0" && exec timeout 90 "$@"' "$k" "$@"
}

begin_case "$dtlc" "$work"
mlp_spec s.dtl 16 32 4
cat >>s.dtl <<'SPEC'
train {
  batch = 24
  steps = 8
  optimizer = sgd(lr = 0.1, momentum = 0.9)
  seed = 3
}
SPEC
export DTL_JOB_TOKEN=two-nodes-netns-$$
master=10.231.0.1:29731
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

# Each job has its own run folder (--out): a folder holding a run is not run
# into again.
# 1. Training across the link (a rank that bound loopback would be refused
# by the other node within the 20 s join timeout).
"$dtlc" run s.dtl --metrics one.jsonl --out runs/one >/dev/null || fail "the one-rank run failed"
node 1 "$dtlc" run s.dtl --nproc 2 --nnodes 2 --node-rank 1 --master "$master" --join-timeout 20 \
  --iface "$veth1" --set train.batch=6 --out runs/two >train1.out 2>train1.err &
node1=$!
node 0 "$dtlc" run s.dtl --nproc 2 --nnodes 2 --node-rank 0 --master "$master" --join-timeout 20 \
  --set train.batch=6 --metrics two.jsonl --out runs/two >train0.out 2>train0.err
rc0=$?
wait "$node1"; rc1=$?
if [ "$rc0" -ne 0 ] || [ "$rc1" -ne 0 ]; then
  fail "training across two namespaces: node 0 exit $rc0, node 1 exit $rc1"
  echo "--- node 0:"; cat train0.out train0.err; echo "--- node 1:"; cat train1.out train1.err
elif ! grep -q "group of 4 ranks over gloo from 10.231.0.1" train0.out; then
  fail "node 0 did not say it binds 10.231.0.1: $(cat train0.out)"
elif awk -F'"loss": ' 'FNR == NR { a[FNR] = $2 + 0; next }
       { r = (a[FNR] - $2) / a[FNR]; if (r < 0) r = -r; if (r > m) m = r; k++ }
       END { printf "4 ranks on 2 nodes: %d steps, max relative difference %.2e\n", k, m; exit !(k == 8 && m <= 1e-5) }' \
       one.jsonl two.jsonl; then
  pass "two nodes trained over the veth: $(grep -m1 'over gloo' train0.out)"
else
  fail "the two-node losses differ from the one-rank run"
fi

# 2, 3. One node's ranks fail (their --init file is missing: the launcher
# itself refuses a missing spec before starting ranks, so that is not the
# way to make ranks fail); the other node's launcher must stop within
# seconds (its ranks would wait for the missing ones for 60 s).
one_node_fails() {
  local bad=$1 good=$((1 - $1)) start rc_good rc_bad took bad_pid
  start=$(date +%s%N)
  node "$bad" "$dtlc" run s.dtl --init missing.safetensors --nproc 2 --nnodes 2 --node-rank "$bad" --master "$master" \
    --join-timeout 60 --out "runs/fail$bad" >"bad$bad.out" 2>"bad$bad.err" &
  bad_pid=$!
  node "$good" "$dtlc" run s.dtl --nproc 2 --nnodes 2 --node-rank "$good" --master "$master" \
    --join-timeout 60 --out "runs/fail$bad" >"good$good.out" 2>"good$good.err"
  rc_good=$?; took=$(ms_since "$start")
  wait "$bad_pid"; rc_bad=$?
  if [ "$rc_good" -ne 0 ] && [ "$rc_bad" -ne 0 ] && [ "$took" -lt 15000 ] &&
     grep -q "node $bad failed: rank [0-9]* (local rank [01] on dtl-node-$bad)" "good$good.err"; then
    pass "node $bad's ranks failed; node $good's launcher ended in ${took} ms: $(grep -m1 "node $bad failed" "good$good.err")"
  else
    fail "node $bad's ranks failed; node $good exit $rc_good after ${took} ms, node $bad exit $rc_bad"
    echo "--- node $good:"; cat "good$good.err"; echo "--- node $bad:"; cat "bad$bad.err"
  fi
}
one_node_fails 1
one_node_fails 0

# 4. A rank of node 1 killed mid-run: node 0's launcher ends within seconds,
# naming it.
node 1 "$dtlc" run s.dtl --nproc 2 --nnodes 2 --node-rank 1 --master "$master" --set train.steps=100000000 \
  --set train.batch=6 --out runs/mid >mid1.out 2>mid1.err &
mid1=$!
node 0 "$dtlc" run s.dtl --nproc 2 --nnodes 2 --node-rank 0 --master "$master" --set train.steps=100000000 \
  --set train.batch=6 --metrics mid.jsonl --out runs/mid >mid0.out 2>mid0.err &
mid0=$!
wait_lines mid.jsonl 3 300 0.1
victim=""
for pid in $(ip netns pids "$ns1"); do
  tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx 'RANK=3' && victim=$pid
done
if [ -z "$victim" ]; then
  fail "rank killed mid-run: could not find rank 3's process in node 1"
else
  start=$(date +%s%N)
  kill -KILL "$victim"
  wait "$mid0"; rc0=$?; took=$(ms_since "$start")
  wait "$mid1"; rc1=$?
  if [ "$rc0" -ne 0 ] && [ "$rc1" -ne 0 ] && [ "$took" -lt 15000 ] &&
     grep -q "rank 3 (local rank 1 on dtl-node-1) (pid $victim) was killed by SIGKILL after step" mid0.err; then
    pass "rank 3 killed on node 1; node 0's launcher ended in ${took} ms: $(grep -m1 'dtlc run: ' mid0.err)"
  else
    fail "rank 3 killed on node 1: node 0 exit $rc0 after ${took} ms, node 1 exit $rc1"
    echo "--- node 0:"; cat mid0.err; echo "--- node 1:"; cat mid1.err
  fi
fi
end_case
