#!/usr/bin/env bash
# `dtlc report` (docs/running.md, "A report page") on a small MLP trained here
# on two ranks with metrics, evaluations and checkpoints: the page is one
# self-contained file (no script, nothing fetched) holding the curves, the
# plan picture (one segment per collective of `dtlc plan`), the checkpoints
# and the spec; a RUN_DIR that does not exist is an error. Then headless
# Chromium renders it: its DOM has the charts, the plan, the spec and the
# checkpoint rows, and a screenshot shows the curves and the plan's bars.
# Without Chromium (or Pillow) the rendering part exits 77 (skipped).
#
# usage: report.sh DTLC WORKDIR
set -euo pipefail
dtlc=$1; work=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rm -rf "$work"; mkdir -p "$work"; cd "$work"
fail() { echo "FAIL: $*"; exit 1; }

# 96 samples of y = a·b + (a − b)/2 in a CSV.
awk 'BEGIN { srand(7); for (i = 0; i < 96; i++) { a = rand(); b = rand(); printf "%.4f %.4f %.4f %.4f\n", a, b, a * b, a * b + (a - b) / 2 } }' >points.csv
# Relative data paths: the run writes its spec into the run folder with them
# made absolute, so `dtlc report ck` compiles it from there.
cat >mlp.dtl <<EOF2
model Surface {
  dim features = 3, hidden = 16, out = 1
  input x : f32[batch, features]
  input y : f32[batch, out]
  fc1 = Linear(features, hidden)
  fc2 = Linear(hidden, out)
  loss = mean((fc2(relu(fc1(x))) - y) * (fc2(relu(fc1(x))) - y))
  metric err = mean(abs(fc2(relu(fc1(x))) - y))
}
data {
  train { x = csv("points.csv", columns = 0..2, delimiter = " ")
          y = csv("points.csv", columns = 3, delimiter = " ") }
  eval  { x = csv("points.csv", columns = 0..2, delimiter = " ")
          y = csv("points.csv", columns = 3, delimiter = " ") }
}
train {
  batch = 8
  steps = 40
  optimizer = adamw(lr = 3e-2)
  schedule = cosine(warmup = 5, min_lr = 1e-3)
  eval every 10 steps
  checkpoint "ck" every 10 steps keep 3
}
parallel {
  mesh dp = auto
  split batch over dp
}
EOF2

"$dtlc" run mlp.dtl --nproc 2 >run.out 2>&1 || fail "training failed: $(cat run.out)"
[ -d ck/step-00000040 ] || fail "no checkpoint step-00000040: $(ls ck)"

# The defaults: ck/metrics.jsonl and ck/spec.dtl (the run wrote them into its
# folder), the world size of ck's state.json.
"$dtlc" report ck >report.out 2>&1 || fail "dtlc report failed: $(cat report.out)"
page=ck/report.html
[ -s "$page" ] || fail "no $page: $(cat report.out)"
grep -q '<script\|<link\|src=\|@import\|url(' "$page" && fail "the page fetches or runs something: $(grep -o '<script[^>]*>\|<link[^>]*>\|src=[^ ]*\|url([^)]*)' "$page" | head -3)"
for id in chart-loss chart-eval_err chart-lr chart-throughput; do
  grep -q "<svg id=\"$id\"" "$page" || fail "no chart $id"
done
grep -q '<h1>Surface</h1>' "$page" || fail "the page does not name the model"
grep -q '>Surface on dp = 2<' "$page" || fail "the plan is not drawn for the 2 ranks the run had"
ops=$("$dtlc" plan mlp.dtl --world 2 --format json | grep -o '"op":' | wc -l)
segs=$(grep -o 'class="plan-coll' "$page" | wc -l)
[ "$ops" -gt 0 ] && [ "$segs" -eq "$ops" ] || fail "the plan picture has $segs collectives, dtlc plan $ops"
"$dtlc" plan mlp.dtl --world 2 --format svg >plan.svg
[ "$(grep -o 'class="plan-coll' plan.svg | wc -l)" -eq "$ops" ] || fail "dtlc plan --format svg draws another plan"
for step in 00000020 00000030 00000040; do
  grep -q "<code>ck/step-$step</code>" "$page" || fail "checkpoint step-$step is not listed"
done
grep -q 'batch = 8' "$page" || fail "the spec's text is not on the page"
echo "page: $(wc -c <"$page") bytes, $segs collectives, 3 checkpoints"

# Missing pieces are named on the page; a missing RUN_DIR is an error.
mkdir bare
cp -r ck/step-00000040 bare/
"$dtlc" report bare -o bare.html >bare.out 2>&1 || fail "report of a folder without metrics or spec failed: $(cat bare.out)"
grep -q 'No metrics: bare/metrics.jsonl does not exist' bare.html || fail "bare.html does not say the metrics are missing"
grep -q 'No spec: bare/spec.dtl does not exist' bare.html || fail "bare.html does not say the spec is missing"
if "$dtlc" report nowhere >none.out 2>&1; then fail "a RUN_DIR that does not exist was accepted"; fi
grep -q "dtlc report: RUN_DIR nowhere does not exist" none.out || fail "unclear error: $(cat none.out)"

# Rendered by a browser.
. "$here/browser_lib.sh"
need_browser
browse "$work/$page" --dump-dom >dom.html || fail "chromium --dump-dom failed: $(tail -5 chromium.err)"
for want in '<svg id="chart-loss"' 'class="plan"' 'class="plan-mem"' '<pre class="spec">' '<table class="checkpoints">'; do
  grep -q "$want" dom.html || fail "the rendered DOM lacks $want"
done
[ "$(grep -o '<tr>' dom.html | wc -l)" -eq 4 ] || fail "the checkpoint table does not have a header and 3 rows"
browse "$work/$page" --screenshot="$work/page.png" --window-size=1280,2200 >/dev/null || fail "chromium --screenshot failed: $(tail -5 chromium.err)"
screenshot_shows_report "$work/page.png" || fail "the screenshot does not show the curves and the plan"
echo "rendered: DOM and screenshot checked"
