#!/usr/bin/env bash
# Run folders and what a run shows (docs/running.md, "Run folders", "What
# you see", "Metrics"): the default folder runs/<spec name> under the working
# folder (not beside the spec) holds the checkpoints, metrics.jsonl, the
# resolved spec and the plan; a second run into it is refused with a hint;
# --resume takes the folder or a step-N in it; --out; the progress lines'
# fields, [ckpt] lines and the summary; tokens/s for a sequence input;
# `dtlc report` reads the folder as it is, with the run's --sets.
#
# usage: run_folders.sh DTLC WORKDIR
set -euo pipefail
dtlc=$1; work=$2
rm -rf "$work"; mkdir -p "$work/specs" "$work/elsewhere"
fail() { echo "FAIL: $*"; exit 1; }

for i in $(seq 0 39); do echo "$i $((2 * i - 1))"; done >"$work/specs/line.csv"
cat >"$work/specs/line.dtl" <<'SPEC'
model Line {
  dim one = 1, hidden = 4, out = 1
  input x : f32[batch, one]
  input y : f32[batch, out]
  l1 = Linear(one, hidden)
  l2 = Linear(hidden, out)
  loss = mean((l2(l1(x)) - y) * (l2(l1(x)) - y))
  metric err = mean(abs(l2(l1(x)) - y))
}
data {
  train { x = csv("line.csv", columns = 0, delimiter = " ") / 40
          y = csv("line.csv", columns = 1, delimiter = " ") / 40 }
  eval  { x = csv("line.csv", columns = 0, delimiter = " ") / 40
          y = csv("line.csv", columns = 1, delimiter = " ") / 40 }
}
train {
  batch = 8
  steps = 6
  optimizer = sgd(lr = 0.1)
  log every 2 steps
  eval every 2 steps
  checkpoint every 2 steps
}
SPEC
cd "$work/elsewhere"

# 1. The default folder, its files and what the run printed.
"$dtlc" run ../specs/line.dtl --steps 4 >a.out 2>a.err || fail "the first run failed: $(cat a.out a.err)"
[ ! -e ../specs/runs ] || fail "the run folder went beside the spec"
for f in metrics.jsonl spec.dtl plan.txt plan.json index.json step-00000002 step-00000004; do
  [ -e "runs/line/$f" ] || fail "no runs/line/$f: $(ls runs/line)"
done
grep -q "csv(\"$work/specs/line.csv\"" runs/line/spec.dtl || fail "the data paths of runs/line/spec.dtl are not absolute: $(grep csv runs/line/spec.dtl)"
grep -q '^plan for Line on 1 rank' runs/line/plan.txt || fail "plan.txt: $(head -1 runs/line/plan.txt)"
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' runs/line/plan.json || fail "plan.json is not JSON"
num='[0-9][0-9.,]*'
grep -Eq "^step 2/4  loss [0-9]+\.[0-9]{4}  $num samples/s  $num ms/step  lr 0\.1  grad [0-9.e+-]+  $num [kMGT]?FLOP/s  MFU ([0-9.]+%|<0\.1%)  ETA [0-9]+s$" a.out ||
  fail "the log line lacks a field: $(grep '^step' a.out)"
grep -q '^step 4/4 .*  ETA 0s$' a.out || fail "no line for the last step: $(cat a.out)"
grep -Eq "^\[ckpt\] step 2 → runs/line/step-00000002 \($num (B|KiB), $num ms\)$" a.out || fail "no [ckpt] line: $(cat a.out)"
grep -q '^done: 4 steps in ' a.out && grep -Eq '^  a step, mean of 4: .* = forward\+backward .*, update .*, batch .*, checks .*, other .*$' a.out &&
  grep -q '^  final eval: loss .* (after step 4)$' a.out &&
  grep -q '^  best eval (lowest loss): loss ' a.out && grep -q '^  checkpoint: runs/line/step-00000004$' a.out &&
  grep -q '^  metrics: runs/line/metrics.jsonl$' a.out && grep -Eq '^  peak memory: [0-9.]+ MiB$' a.out ||
  fail "the summary lacks a line: $(sed -n '/^done:/,$p' a.out)"
for field in samples_per_s step_s comm_wait_s batch_s compute_s guard_s update_s grad_norm flops_per_s mfu eta_s elapsed_s; do
  [ "$(grep -c "\"$field\": " runs/line/metrics.jsonl)" -eq 4 ] || fail "metrics.jsonl lacks $field on some step"
done
echo "runs/line: $(ls runs/line | tr '\n' ' ')"
echo "log line: $(grep -m1 '^step 2/4' a.out)"

# 2. A second run into it is refused, before anything is written.
rc=0; "$dtlc" run ../specs/line.dtl >b.out 2>b.err || rc=$?
[ "$rc" -eq 2 ] && grep -q '^dtlc run: run folder runs/line already holds a run (index.json, metrics.jsonl, step-00000002, …)$' b.err &&
  grep -q '^hint: --resume runs/line continues it; --out DIR starts a new run in another folder' b.err ||
  fail "a second run was not refused (exit $rc): $(cat b.out b.err)"
[ "$(grep -c '"loss"' runs/line/metrics.jsonl)" -eq 4 ] || fail "the refused run touched metrics.jsonl"
echo "refused: $(head -1 b.err)"

# 3. --resume the folder: steps 5 and 6 appended.
"$dtlc" run ../specs/line.dtl --resume runs/line >c.out 2>&1 || fail "--resume runs/line failed: $(cat c.out)"
steps=$(grep -o '"step": [0-9]*, "epoch": [0-9]*, "loss"' runs/line/metrics.jsonl | awk '{printf "%s", $2}')
[ "$steps" = "1,2,3,4,5,6," ] || fail "--resume runs/line: training steps $steps"
grep -q '^resumed from runs/line at step 4$' c.out || fail "$(cat c.out)"

rc=0; "$dtlc" run ../specs/line.dtl --resume runs/line/step-00000009 >n.out 2>&1 || rc=$?
[ "$rc" -eq 1 ] && grep -q '^dtlc run: --resume runs/line/step-00000009: no such folder$' n.out || fail "a missing checkpoint: exit $rc: $(cat n.out)"

# 4. --resume one checkpoint (step 2, not the newest), into a new folder: the
#    same losses as the first run's steps 3-6, to the bit.
"$dtlc" run ../specs/line.dtl --resume runs/line/step-00000002 --out runs/from2 >d.out 2>&1 ||
  fail "--resume runs/line/step-00000002 failed: $(cat d.out)"
grep -q '^resumed from runs/line at step 2$' d.out || fail "did not resume at step 2: $(cat d.out)"
losses() { grep -o '"step": [0-9]*, "epoch": [0-9]*, "loss": [^,]*' "$1" | awk -v from="$2" '$2 + 0 >= from { print $2, $6 }'; }
[ "$(losses runs/from2/metrics.jsonl 3)" = "$(losses runs/line/metrics.jsonl 3)" ] ||
  fail "resumed from step-00000002: $(losses runs/from2/metrics.jsonl 3) against $(losses runs/line/metrics.jsonl 3)"
echo "--resume runs/line/step-00000002 --out runs/from2: steps 3-6 equal the first run's"

# 5. --out DIR (anywhere) with --metrics FILE as well, and the --set in the
#    folder's spec header, which `dtlc report` applies.
"$dtlc" run ../specs/line.dtl --steps 2 --set train.batch=4 --out ../other/b4 --metrics m.jsonl >e.out 2>&1 ||
  fail "--out ../other/b4 failed: $(cat e.out)"
[ -d ../other/b4/step-00000002 ] && cmp -s m.jsonl ../other/b4/metrics.jsonl || fail "--out with --metrics: $(ls ../other/b4)"
grep -q '^# set: train.batch=4$' ../other/b4/spec.dtl || fail "the spec header does not name the --set"
"$dtlc" report ../other/b4 >r.out 2>&1 || fail "dtlc report failed: $(cat r.out)"
grep -q 'No plan\|No metrics\|No spec' ../other/b4/report.html && fail "the report misses a part: $(cat r.out)"
grep -q 'micro-batch of 4' ../other/b4/report.html || fail "the report's plan is not the run's (batch 4)"
echo "--out ../other/b4: $(ls ../other/b4 | tr '\n' ' ')"

# 6. A sequence input: tokens/s; --no-checkpoints still writes the folder's
#    metrics, spec and plan; two ranks: the launcher refuses a taken folder.
cat >../specs/tok.dtl <<'SPEC'
model T {
  dim vocab = 11, seq = 4, d = 8
  input tokens : i32[batch, seq]
  input targets : i32[batch, seq]
  tok = Embedding(vocab, d)
  loss = cross_entropy(tok(tokens) @ tok.table, targets, over = vocab)
}
data { train { synthetic(seed = 5) } }
train { batch = 4  steps = 2  optimizer = adamw(lr = 1e-2) }
SPEC
"$dtlc" run ../specs/tok.dtl --no-checkpoints >f.out 2>&1 || fail "tok.dtl failed: $(cat f.out)"
grep -Eq "^step 2/2  loss [0-9.]+  $num samples/s  $num tokens/s  " f.out || fail "no tokens/s: $(cat f.out)"
[ "$(grep -c '"tokens_per_s": ' runs/tok/metrics.jsonl)" -eq 2 ] || fail "metrics.jsonl lacks tokens_per_s"
[ -f runs/tok/plan.txt ] && ! ls -d runs/tok/step-* >/dev/null 2>&1 || fail "--no-checkpoints: $(ls runs/tok)"
"$dtlc" run ../specs/tok.dtl --nproc 2 --set train.batch=2 --out runs/tok2 >g.out 2>&1 || fail "2 ranks failed: $(cat g.out)"
[ "$(grep -c '"loss"' runs/tok2/metrics.jsonl)" -eq 2 ] || fail "2 ranks: $(cat runs/tok2/metrics.jsonl)"
grep -Eq '^  peak memory per rank: 0: [0-9.]+ MiB, 1: [0-9.]+ MiB$' g.out || fail "2 ranks: no peak memory per rank: $(cat g.out)"
rc=0; "$dtlc" run ../specs/tok.dtl --nproc 2 --set train.batch=2 --out runs/tok2 >h.out 2>&1 || rc=$?
[ "$rc" -eq 2 ] && grep -q 'run folder runs/tok2 already holds a run' h.out && ! grep -q '^rank 0' h.out ||
  fail "2 ranks into a taken folder: exit $rc: $(cat h.out)"
echo "tokens/s: $(grep -m1 -o '[0-9,.]* tokens/s' f.out); 2 ranks refused a taken folder before starting"
