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
chromium=$(command -v chromium || true)
if [ -z "$chromium" ] || ! /usr/bin/python3 -c 'import PIL' 2>/dev/null; then
  echo "SKIP: the page's checks passed, but rendering needs chromium and python3-pil (bash scripts/setup.sh installs them)"
  exit 77
fi
browse() { timeout 120 "$chromium" --headless --no-sandbox --disable-dev-shm-usage --disable-gpu --hide-scrollbars \
             --user-data-dir="$work/chromium-profile" "$@" "file://$work/$page" 2>>chromium.err; }
browse --dump-dom >dom.html || fail "chromium --dump-dom failed: $(tail -5 chromium.err)"
for want in '<svg id="chart-loss"' 'class="plan"' 'class="plan-mem"' '<pre class="spec">' '<table class="checkpoints">'; do
  grep -q "$want" dom.html || fail "the rendered DOM lacks $want"
done
[ "$(grep -o '<tr>' dom.html | wc -l)" -eq 4 ] || fail "the checkpoint table does not have a header and 3 rows"
browse --screenshot="$work/page.png" --window-size=1280,2200 >/dev/null || fail "chromium --screenshot failed: $(tail -5 chromium.err)"
/usr/bin/python3 - "$work/page.png" <<'EOF2' || fail "the screenshot does not show the curves and the plan"
import sys
from PIL import Image
img = Image.open(sys.argv[1]).convert("RGB")
w, h = img.size
px = img.load()
def near(c, want, tol=40):
    return all(abs(a - b) <= tol for a, b in zip(c, want))
# Colours the page draws with: curves and all-reduce segments (blue), eval
# dots (orange), memory bars (red), rank boxes (pale blue).
counts = {"curve blue": 0, "eval orange": 0, "memory red": 0, "rank boxes": 0}
rows = {k: [] for k in counts}
want = {"curve blue": (59, 117, 175), "eval orange": (225, 129, 44), "memory red": (196, 78, 82), "rank boxes": (232, 238, 247)}
for y in range(0, h, 2):
    for x in range(0, w, 2):
        c = px[x, y]
        for k, v in want.items():
            if near(c, v, 8 if k == "rank boxes" else 40):
                counts[k] += 1
                rows[k].append(y)
print("screenshot %dx%d, pixels (every 2nd row and column): %s" % (w, h, counts))
ok = counts["curve blue"] > 300 and counts["eval orange"] > 20 and counts["memory red"] > 300 and counts["rank boxes"] > 100
# The curves come before the plan: blue appears above the first memory bar.
ok = ok and min(rows["curve blue"]) < min(rows["memory red"])
sys.exit(0 if ok else 1)
EOF2
echo "rendered: DOM and screenshot checked"
