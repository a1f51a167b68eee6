#!/usr/bin/env bash
# One short job through everything a user sees (docs/running.md): a tiny char
# GPT on two ranks, with evaluation, clipping and checkpoints,
#   1. pre-empted by SIGTERM to the launcher: exit 0 after a checkpoint;
#   2. started again without --resume: refused, with the hint;
#   3. resumed to the end: the progress lines with every field, [ckpt] and
#      eval lines, the summary; the losses equal an uninterrupted run's, bit
#      for bit;
#   4. its run folder (runs/tiny): checkpoints, metrics.jsonl with the
#      fields, the resolved spec, the plan as text and JSON;
#   5. `dtlc report runs/tiny`, rendered by headless Chromium;
#   6. `dtlc generate` from the run folder: the prompt and N bytes, the same
#      for a seed;
#   7. `dtlc export --format torch`: nanoGPT's state_dict names and layouts.
# (Each feature's own test goes deeper; this one proves they compose.)
#
# usage: whole_run.sh DTLC WORKDIR
set -euo pipefail
dtlc=$1; work=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/e2e_lib.sh"  # wait_lines, losses; this test's fail stops it at once
rm -rf "$work"; mkdir -p "$work"; cd "$work"
fail() { echo "FAIL: $*"; exit 1; }

cat >tiny.dtl <<'SPEC'
model TinyGpt {
  dim vocab = 256, seq = 16, d = 32, heads = 2, hidden = 64, layers = 1
  input tokens  : i32[batch, seq]
  input targets : i32[batch, seq]
  tok    = Embedding(vocab, d)
  param pos : [seq, d] init normal(std = 0.01)
  blocks = repeat(layers) TransformerBlock(d, heads, hidden)
  ln_f   = LayerNorm(d)
  logits = ln_f(blocks(tok(tokens) + pos)) @ tok.table
  loss   = cross_entropy(logits, targets, over = vocab)
}
data {
  train { text("/usr/share/common-licenses/GPL-3", seq = 16) }
  eval  { text("/usr/share/common-licenses/MPL-2.0", seq = 16) }
}
train {
  batch = 8
  steps = 400
  optimizer = adamw(lr = 1e-2)
  schedule = cosine(warmup = 20, min_lr = 1e-3)
  clip = 1.0
  seed = 3
  log every 50 steps
  eval every 200 steps
  checkpoint every 100 steps keep 2
}
parallel {
  mesh dp = auto
  split batch over dp
}
SPEC
run_dir=runs/tiny

# 1. Pre-empted after a few steps: SIGTERM to the launcher.
"$dtlc" run tiny.dtl --nproc 2 >first.out 2>first.err &
launcher=$!
wait_lines $run_dir/metrics.jsonl 3 400 || true
kill -TERM "$launcher"
rc=0; wait "$launcher" || rc=$?
stop=$(sed -n "s|^stopped after step \([0-9]*\) (SIGTERM): saved $run_dir/step-[0-9]*; --resume $run_dir continues from it\$|\1|p" first.out)
[ "$rc" -eq 0 ] && [ -n "$stop" ] || fail "pre-emption: exit $rc; out: $(cat first.out); err: $(cat first.err)"
[ "$stop" -lt 400 ] || fail "the run ended before the signal"
echo "1. pre-empted after step $stop, checkpoint saved, exit 0"

# 2. The folder holds a run: starting it again is refused.
rc=0; "$dtlc" run tiny.dtl --nproc 2 >again.out 2>&1 || rc=$?
[ "$rc" -eq 2 ] && grep -q "run folder $run_dir already holds a run" again.out &&
  grep -q "hint: --resume $run_dir continues it" again.out || fail "a second run was not refused (exit $rc): $(cat again.out)"
echo "2. a second run into $run_dir refused with the hint"

# 3. Resumed to the end.
"$dtlc" run tiny.dtl --nproc 2 --resume $run_dir >resume.out 2>resume.err ||
  fail "resume failed: $(cat resume.out resume.err)"
num='[0-9][0-9.,]*'
grep -Eq "^step 400/400  loss [0-9]+\.[0-9]{4}  $num samples/s  $num tokens/s  $num ms/step  lr [0-9.e-]+  grad [0-9.e+-]+  $num [kMGT]?FLOP/s  MFU ([0-9.]+%|<0\.1%)  ETA 0s$" resume.out ||
  fail "the last progress line lacks a field: $(grep '^step' resume.out)"
grep -Eq "^\[ckpt\] step 400 → $run_dir/step-00000400 \($num (B|KiB|MiB), $num ms\)$" resume.out || fail "no [ckpt] line: $(cat resume.out)"
grep -Eq '^eval after step 400: loss [0-9.]+$' resume.out || fail "no eval line: $(cat resume.out)"
grep -q '^done: ' resume.out && grep -q '^  final eval: loss .* (after step 400)$' resume.out &&
  grep -q '^  best eval (lowest loss): loss ' resume.out && grep -q "^  checkpoint: $run_dir/step-00000400\$" resume.out &&
  grep -Eq '^  peak memory per rank: 0: [0-9.]+ MiB, 1: [0-9.]+ MiB$' resume.out || fail "the summary is incomplete: $(cat resume.out)"
"$dtlc" run tiny.dtl --nproc 2 --out straight --no-checkpoints >straight.out 2>&1 || fail "the uninterrupted run failed: $(cat straight.out)"
[ "$(losses $run_dir/metrics.jsonl | wc -l)" -eq 400 ] && [ "$(losses $run_dir/metrics.jsonl)" == "$(losses straight/metrics.jsonl)" ] ||
  fail "the pre-empted and resumed run's losses differ from an uninterrupted run's: $(diff <(losses $run_dir/metrics.jsonl) <(losses straight/metrics.jsonl) | head -5)"
echo "3. resumed: progress, [ckpt], eval and summary lines; 400 losses equal the uninterrupted run's bit for bit"

# 4. The run folder.
for f in metrics.jsonl spec.dtl plan.txt plan.json step-00000400/params.safetensors; do
  [ -e "$run_dir/$f" ] || fail "no $run_dir/$f: $(ls $run_dir)"
done
[ "$(ls -d $run_dir/step-* | wc -l)" -eq 2 ] || fail "keep 2 did not leave two checkpoints: $(ls $run_dir)"
python3 - $run_dir/metrics.jsonl <<'PY' || fail "metrics.jsonl lacks fields"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in rows if "loss" in r]
want = {"step", "epoch", "loss", "lr", "samples_per_s", "tokens_per_s", "step_s", "comm_wait_s", "batch_s",
        "compute_s", "guard_s", "update_s", "grad_norm", "flops_per_s", "mfu", "elapsed_s"}
missing = want - set(steps[-1])
# A step's parts are measured inside it: together never more than its wall time.
parts = ("batch_s", "compute_s", "guard_s", "update_s")
over = [r["step"] for r in steps if min(r[k] for k in parts) < 0 or sum(r[k] for k in parts) > r["step_s"] * (1 + 1e-9)
        or r["compute_s"] <= 0]  # a forward and backward takes time
if over:
    print("steps whose parts exceed step_s, are negative, or have no compute_s: %s" % over[:5])
    missing = missing or {"parts"}
evals = [r for r in rows if "eval_loss" in r]
print("metrics: %d step lines, %d eval lines, last: %s" % (len(steps), len(evals), sorted(steps[-1])))
sys.exit(1 if missing or len(evals) < 2 else 0)
PY
grep -q 'text("/usr/share/common-licenses/GPL-3"' $run_dir/spec.dtl || fail "spec.dtl: $(head -5 $run_dir/spec.dtl)"
"$dtlc" plan tiny.dtl --world 2 >plan.txt
cmp -s plan.txt $run_dir/plan.txt || fail "the run folder's plan is not dtlc plan's: $(diff plan.txt $run_dir/plan.txt | head)"
echo "4. run folder: checkpoints, metrics with every field, spec, plan"

# 5. The report page, rendered.
"$dtlc" report $run_dir >report.out 2>&1 || fail "dtlc report failed: $(cat report.out)"
page=$work/$run_dir/report.html
for id in chart-loss chart-lr chart-throughput; do
  grep -q "<svg id=\"$id\"" "$page" || fail "no chart $id in the report"
done
grep -q '>TinyGpt on dp = 2<' "$page" || fail "the plan is not drawn for the run's 2 ranks"
. "$here/browser_lib.sh"
need_browser
browse "$page" --dump-dom >dom.html || fail "chromium --dump-dom failed: $(tail -5 chromium.err)"
for want in '<svg id="chart-loss"' 'class="plan"' 'class="plan-mem"' '<pre class="spec">' '<table class="checkpoints">'; do
  grep -q "$want" dom.html || fail "the rendered DOM lacks $want"
done
browse "$page" --screenshot="$work/page.png" --window-size=1280,2200 >/dev/null || fail "chromium --screenshot failed"
screenshot_shows_report "$work/page.png" || fail "the screenshot does not show the curves and the plan"
echo "5. report rendered: DOM and screenshot checked"

# 6. Text from the trained model.
gen() { "$dtlc" generate tiny.dtl --checkpoint $run_dir --prompt "This License " --tokens 30 "$@"; }
gen --seed 1 >g1.txt || fail "generate failed"
gen --seed 1 >g2.txt
cmp -s g1.txt g2.txt || fail "the same seed gave other text"
[ "$(head -c 13 g1.txt)" = "This License " ] && [ "$(wc -c <g1.txt)" -eq 44 ] || fail "generated: $(cat g1.txt)"
echo "6. generated: $(cat g1.txt)"

# 7. Export for PyTorch.
"$dtlc" export $run_dir --spec tiny.dtl --format torch --out tiny.safetensors >export.out 2>&1 || fail "export failed: $(cat export.out)"
python3 - tiny.safetensors <<'PY' || fail "the export is not nanoGPT's state_dict"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = {k: v for k, v in json.loads(raw[8:8 + n]).items() if k != "__metadata__"}
want = {"transformer.wte.weight": [256, 32], "transformer.wpe.weight": [16, 32], "lm_head.weight": [256, 32],
        "transformer.h.0.attn.c_attn.weight": [96, 32], "transformer.h.0.attn.c_proj.weight": [32, 32],
        "transformer.h.0.mlp.c_fc.weight": [64, 32], "transformer.h.0.mlp.c_proj.weight": [32, 64],
        "transformer.ln_f.weight": [32]}
bad = {k: head.get(k, {}).get("shape") for k, s in want.items() if head.get(k, {}).get("shape") != s}
print("export: %d tensors" % len(head))
sys.exit(1 if bad else 0)
PY
echo "7. exported: nanoGPT names and layouts"
