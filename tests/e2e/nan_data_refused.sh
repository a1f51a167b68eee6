#!/usr/bin/env bash
# A NaN in the training data is refused when the data is loaded, before any
# step: `dtlc run` exits non-zero naming the file, line and column, and writes
# no checkpoint (it used to train to a ruined model and exit 0). The same spec
# with the NaN replaced trains and exits 0, so the refusal is the NaN's.
set -uo pipefail
dtlc=$(realpath "$1"); work=$2
rm -rf "$work"; mkdir -p "$work"; cd "$work" || exit 1

cat > s.dtl <<'SPEC'
model M {
  dim f = 3, h = 8, out = 1
  input x : f32[batch, f]
  input y : f32[batch, out]
  l1 = Linear(f, h)
  l2 = Linear(h, out)
  pred = l2(relu(l1(x)))
  loss = mean((pred - y) * (pred - y))
}
data {
  train {
    x = csv("x.csv", columns = 0..2, header = true)
    y = csv("y.csv", columns = 0, header = false)
  }
}
train {
  batch = 2
  steps = 4
  optimizer = sgd(lr = 0.1)
  seed = 1
  checkpoint "ckpt" every 2 steps keep 1
}
SPEC
printf 'age,height,weight\n1,2,3\n4,5,6\n0.5,nan,1\n2,1,0\n' > x.csv
printf '0\n1\n1\n0\n' > y.csv

"$dtlc" run s.dtl >nan.out 2>nan.err
rc=$?
cat nan.out nan.err
want="x.csv:4: column 1 ('height') is nan; input 'x' takes finite numbers only"
if [ "$rc" -eq 0 ]; then echo "FAIL: dtlc run exited 0 on data with a NaN"; exit 1; fi
if ! grep -qF "$want" nan.err; then echo "FAIL: the message does not say: $want"; exit 1; fi
if [ -e ckpt/index.json ] || ls -d ckpt/step-* >/dev/null 2>&1; then echo "FAIL: a checkpoint was written from NaN data"; exit 1; fi

sed -i 's/nan/2.5/' x.csv
if ! "$dtlc" run s.dtl >ok.out 2>ok.err; then cat ok.out ok.err; echo "FAIL: the clean data does not train"; exit 1; fi
echo "ok: refused with exit $rc and '$want'; the clean data trains"
