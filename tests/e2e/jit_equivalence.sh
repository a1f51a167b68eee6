#!/usr/bin/env bash
# --kernels jit end to end, with the object cache in a folder of the test's
# own (XDG_CACHE_HOME): the fused regions' kernels must not change what the
# layouts guarantee — data parallelism (dp = 2) and tensor parallelism
# (tp = 2 on a GPT), ZeRO 1 and 3 — reproduce the one-process jit run within 1e-5 — and a
# jit run stays within 1e-4 of the fast kernels' losses. The first run
# compiles every kernel and a second identical one loads them all from the
# cache and writes the same losses bit for bit, as does a run that does not
# name its kernels (jit is the default).
set -euo pipefail
dtlc=$1; work=$2
here="$(cd "$(dirname "$0")" && pwd)"
rm -rf "$work"; mkdir -p "$work"; cd "$work"
export XDG_CACHE_HOME="$work/cache"
status=0
source "$here/equivalence_lib.sh"
cat > s.dtl <<'SPEC'
model M {
  dim f = 16, h = 32, c = 4
  input x : f32[batch, f]
  input y : i32[batch]
  l1 = Linear(f, h)
  l2 = Linear(h, c)
  logits = l2(relu(l1(x)))
  loss = cross_entropy(logits, y, over = c) + 0.01 * mean(softmax(logits, over = c) * logits)
}
data { train { synthetic(seed = 1) } shuffle = true }
train {
  batch = 24
  steps = 10
  optimizer = sgd(lr = 0.1, momentum = 0.9)
  seed = 3
}
SPEC
"$dtlc" run s.dtl --kernels jit --no-checkpoints --out one --metrics one.jsonl >one.out
"$dtlc" run s.dtl --kernels jit --no-checkpoints --out again --metrics again.jsonl >again.out
"$dtlc" run s.dtl --kernels fast --no-checkpoints --out fast --metrics fast.jsonl >/dev/null
# No --kernels: jit is the default of a dtlc with the generator, the same kernels from the cache
"$dtlc" run s.dtl --no-checkpoints --out default --metrics default.jsonl >default.out
head -1 one.out again.out
grep -q '^jit: .* kernels ([1-9][0-9]* compiled, 0 from the cache' one.out || { echo "the first run compiled nothing"; status=1; }
grep -q '^jit: .* kernels (0 compiled, [1-9][0-9]* from the cache' again.out || { echo "the second run did not load from the cache"; status=1; }
# sgd with momentum: two update kernels (its first step and the rest), compiled once, then cached
grep -q '; update: 2 kernels (2 compiled, 0 from the cache)' one.out || { echo "the first run did not compile the update"; status=1; }
grep -q '; update: 2 kernels (0 compiled, 2 from the cache)' again.out || { echo "the second run did not load the update"; status=1; }
cmp -s <(grep -o '"loss": [^,}]*' one.jsonl) <(grep -o '"loss": [^,}]*' again.jsonl) ||
  { echo "cached kernels gave other losses"; status=1; }
grep -q '^jit: .* kernels (0 compiled, [1-9][0-9]* from the cache' default.out ||
  { echo "a run without --kernels did not run the jit kernels"; status=1; }
cmp -s <(grep -o '"loss": [^,}]*' one.jsonl) <(grep -o '"loss": [^,}]*' default.jsonl) ||
  { echo "a run without --kernels gave other losses than --kernels jit"; status=1; }
ls cache/dtl/*.o >/dev/null || { echo "no object in \$XDG_CACHE_HOME/dtl"; status=1; }
# jit against fast: other kernels, the same numbers to 1e-4
awk -F'"loss": ' 'FNR == NR { a[FNR] = $2 + 0; next }
    { b = $2 + 0; r = (a[FNR] - b) / a[FNR]; if (r < 0) r = -r; if (r > m) m = r; k++ }
    END { printf "jit vs fast: %d steps, max relative difference %.2e\n", k, m; exit !(k == 10 && m <= 1e-4) }' \
    fast.jsonl one.jsonl || status=1
# Two nodes whose kernels differ (one says fast, the other takes the default,
# jit) would train other programs: every rank refuses, naming the fingerprints.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export DTL_JOB_TOKEN=e2e-mixed-kernels
"$dtlc" run s.dtl --nnodes 2 --node-rank 1 --master "127.0.0.1:$port" --join-timeout 30 --kernels fast \
  --set train.batch=12 --no-checkpoints --out mixed1 >/dev/null 2>mixed1.err &
node1=$!
if "$dtlc" run s.dtl --nnodes 2 --node-rank 0 --master "127.0.0.1:$port" --join-timeout 30 \
     --set train.batch=12 --no-checkpoints --out mixed0 >/dev/null 2>mixed0.err; then
  echo "nodes running other kernels trained together"; status=1
fi
if wait "$node1"; then echo "node 1 (--kernels fast) trained beside a jit node"; status=1; fi
grep -q 'different programs' mixed0.err || { echo "no refusal naming the programs:"; cat mixed0.err; status=1; }
unset DTL_JOB_TOKEN
layout ddp2 s.dtl 2 "mesh dp = 2; split batch over dp; bucket = 1 KiB" --set train.batch=12 --kernels jit

{ gpt_spec 16 4 32; cat <<'SPEC'; } >g.dtl
train {
  batch = 8
  steps = 10
  optimizer = adamw(lr = 1e-2)
  clip = 0.5
  seed = 4
}
SPEC
"$dtlc" run g.dtl --kernels jit --no-checkpoints --out gone --metrics gone.jsonl >/dev/null
base=gone layout tp2 g.dtl 2 "mesh tp = 2; split heads over tp; split hidden over tp" --kernels jit
# ZeRO: each rank's generated update runs on its own pieces (level 1 gathers
# them after each update; level 3 keeps them), as the one-process jit run.
base=gone layout z1_jit g.dtl 2 "mesh dp = 2; split batch over dp; zero = 1" --set train.batch=4 --kernels jit
base=gone layout z3_jit g.dtl 2 "mesh dp = 2; split batch over dp; zero = 3" --set train.batch=4 --kernels jit
exit $status
