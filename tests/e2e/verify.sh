#!/usr/bin/env bash
# `dtlc run --verify K`: a layout that reproduces one process passes with its
# summary and leaves the spec's checkpoint folder alone; a difference over
# the tolerance fails with the first step over it (the 2-rank MLP's losses
# differ from one process's in the last bits from step 3: summation order,
# so a tolerance of 1e-12 catches it); usage errors exit 2; a spec the
# layout refuses is refused as `dtlc run` refuses it.
set -euo pipefail
dtlc=$1; work=$2
rm -rf "$work"; mkdir -p "$work"; cd "$work"
cat > s.dtl <<'SPEC'
model M {
  dim f = 16, h = 32, c = 4
  input x : f32[batch, f]
  input y : i32[batch]
  l1 = Linear(f, h)
  l2 = Linear(h, c)
  logits = l2(relu(l1(x)))
  loss = cross_entropy(logits, y, over = c)
}
data { train { synthetic(seed = 1) } shuffle = true }
train {
  batch = 24
  steps = 20
  optimizer = sgd(lr = 0.1, momentum = 0.9)
  seed = 3
  checkpoint "ck" every 1 steps keep 2
}
parallel { mesh dp = auto; split batch over dp; bucket = 1 KiB }
SPEC
status=0
fail() { echo "FAIL: $*"; status=1; }
expect() {  # expected status, pattern (grep -E) for stdout+stderr, command…
  local want=$1 pattern=$2; shift 2
  local rc=0
  "$@" >out.txt 2>&1 || rc=$?
  [ "$rc" = "$want" ] || fail "$* exited $rc, not $want: $(cat out.txt)"
  grep -qE -- "$pattern" out.txt || fail "$*: no '$pattern' in: $(cat out.txt)"
}

# (1) 2 ranks reproduce one process at the global batch 48; the spec's
# checkpoint folder is neither created nor touched.
mkdir ck; echo keep > ck/mine
expect 0 '^verify: 5 steps on 2 ranks \(mesh dp = 2\) against 1 process at batch 48: (largest relative loss difference [0-9.e+-]+ at step [1-5]|the losses are equal at every step) \(tolerance 1e-05\): ok$' \
  "$dtlc" run s.dtl --verify 5 --nproc 2
grep -q '^verify: 1 of 2: 5 steps on 2 ranks (mesh dp = 2)$' out.txt || fail "no progress line for the layout: $(cat out.txt)"
grep -q '^verify: 2 of 2: 5 steps on 1 process at batch 48$' out.txt || fail "no progress line for one process: $(cat out.txt)"
[ "$(ls -A ck)" = mine ] && [ "$(cat ck/mine)" = keep ] || fail "--verify touched the checkpoint folder: $(ls -A ck)"
cp out.txt pass.txt
# 3 ranks and no parallel block (implied dp = auto); 2 ranks over Gloo with
# accumulation (the one process accumulates as the spec says).
grep -v '^parallel' s.dtl > implied.dtl
expect 0 'on 3 ranks \(mesh dp = 3\) against 1 process at batch 72: .*: ok$' "$dtlc" run implied.dtl --verify 3 --nproc 3
sed 's/batch = 24/batch = 8\n  accumulate = 3/' s.dtl > acc.dtl
expect 0 'against 1 process at batch 16, accumulate 3: .*: ok$' "$dtlc" run acc.dtl --verify 3 --nproc 2 --backend gloo

# (2) The comparison fails: the same runs held to 1e-12.
expect 1 '^dtlc run: --verify: step [1-5] is the first over the tolerance 1e-12: loss [0-9.]+ on 2 ranks, [0-9.]+ on 1 process \(relative difference [0-9.e+-]+\)$' \
  "$dtlc" run s.dtl --verify 5 --nproc 2 --verify-tolerance 1e-12
grep -q '(tolerance 1e-12): FAILED$' out.txt || fail "no FAILED summary: $(cat out.txt)"

# A job that fails stops the verify with its errors, comparing nothing.
expect 1 '^dtlc run: --verify: the run on 2 ranks \(mesh dp = 2\) failed \(exit status 1\); nothing was compared$' \
  "$dtlc" run s.dtl --verify 3 --nproc 2 --init missing.safetensors
grep -q 'missing.safetensors: cannot open' out.txt || fail "the failed job's error was not shown: $(cat out.txt)"

# (3) Usage errors, with the flag parser's wording.
expect 2 "^dtlc run: --verify expects a positive number of steps, got '0'$" "$dtlc" run s.dtl --verify 0 --nproc 2
expect 2 "^dtlc run: --verify expects a positive number of steps, got 'five'$" "$dtlc" run s.dtl --verify five --nproc 2
expect 2 "^dtlc run: --verify-tolerance expects a relative tolerance from 0, e.g. 1e-5, got '-1'$" \
  "$dtlc" run s.dtl --verify 5 --nproc 2 --verify-tolerance -1
expect 2 '^dtlc run: --verify-tolerance is the tolerance of --verify K; give --verify too$' \
  "$dtlc" run s.dtl --verify-tolerance 1e-3
expect 2 "^dtlc run: --verify does not take --resume: both runs start from the spec's initial weights" \
  "$dtlc" run s.dtl --verify 5 --nproc 2 --resume ck
expect 2 '^dtlc run: --verify does not take --steps' "$dtlc" run s.dtl --verify 5 --nproc 2 --steps 3
expect 2 '^dtlc run: --verify compares a layout on several ranks with one process' "$dtlc" run s.dtl --verify 5

# A spec the layout refuses: the same messages and status as `dtlc run`.
rc=0; "$dtlc" run s.dtl --nproc 2 --set parallel.mesh.dp=4 >run.out 2>run.err || rc=$?
vrc=0; "$dtlc" run s.dtl --nproc 2 --set parallel.mesh.dp=4 --verify 3 >verify.out 2>verify.err || vrc=$?
[ "$rc" = 1 ] && [ "$vrc" = 1 ] || fail "a refused layout: dtlc run exited $rc, --verify $vrc"
cmp -s run.err verify.err || fail "--verify refused the layout otherwise than dtlc run: $(cat verify.err)"
[ -s verify.out ] && fail "--verify printed for a refused layout: $(cat verify.out)"
[ "$(ls -A ck)" = mine ] || fail "the checkpoint folder changed: $(ls -A ck)"

[ "$status" = 0 ] && cat pass.txt
exit $status
