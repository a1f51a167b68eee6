#!/usr/bin/env bash
# Where `dtlc run` reads and writes (docs/running.md, "Where files go"): data
# paths are relative to the spec, outputs — the spec's checkpoint folder and
# --metrics — to the working folder, where `--resume` finds them. Also: the
# eval line shows four decimals while the metrics file keeps every digit, and
# the last step's progress line is shown even without `log every`.
#
# usage: working_folder.sh DTLC WORKDIR
set -euo pipefail
dtlc=$1; work=$2
rm -rf "$work"; mkdir -p "$work/specs" "$work/elsewhere"
fail() { echo "FAIL: $*"; exit 1; }

# 40 samples of y = 2x - 1 in a CSV beside the spec.
for i in $(seq 0 39); do echo "$i $((2 * i - 1))"; done >"$work/specs/line.csv"
cat >"$work/specs/line.dtl" <<'EOF'
model Line {
  dim one = 1, out = 1
  input x : f32[batch, one]
  input y : f32[batch, out]
  fc = Linear(one, out)
  loss = mean((fc(x) - y) * (fc(x) - y))
  metric err = mean(abs(fc(x) - y))
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
  eval every 3 steps
  checkpoint "ck" every 3 steps
}
EOF

cd "$work/elsewhere"
"$dtlc" run ../specs/line.dtl --steps 3 --metrics m.jsonl >run1.out 2>&1 || fail "the first run failed: $(cat run1.out)"
[ -f ck/index.json ] || fail "no checkpoint under the working folder: $(ls -R "$work")"
[ ! -e ../specs/ck ] || fail "the checkpoint went beside the spec (specs/ck)"
[ -f m.jsonl ] || fail "no metrics file under the working folder"
echo "checkpoint and metrics under the working folder: $(ls ck | tr '\n' ' ')"
grep -Eq '^step 3/3  loss [0-9]+\.[0-9]{4}  ' run1.out || fail "no progress line for the last step: $(cat run1.out)"

"$dtlc" run ../specs/line.dtl --resume ck --metrics m.jsonl >run2.out 2>&1 || fail "--resume ck failed: $(cat run2.out)"
steps=$(grep -o '"step": [0-9]*, "epoch": [0-9]*, "loss"' m.jsonl | awk '{printf "%s", $2}')
[ "$steps" = "1,2,3,4,5,6," ] || fail "the resumed run did not continue at step 4: training steps $steps"
echo "--resume ck continued: training steps $steps"

line=$(grep -h '^eval after step 6:' run2.out) || fail "no eval line after step 6: $(cat run2.out)"
echo "$line" | grep -Eq '^eval after step 6: loss ([0-9]+\.[0-9]{4}|[0-9]\.[0-9]{3}e[-+][0-9]+), err ([0-9]+\.[0-9]{4}|[0-9]\.[0-9]{3}e[-+][0-9]+)$' ||
  fail "the eval line does not show four decimals: '$line'"
digits=$(grep -o '"eval_loss": [0-9.e-]*' m.jsonl | tail -1 | awk '{print length($2)}')
[ "$digits" -gt 8 ] || fail "the metrics file lost digits: $(grep eval_loss m.jsonl | tail -1)"
echo "eval line: $line"
