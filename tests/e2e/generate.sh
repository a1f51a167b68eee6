#!/usr/bin/env bash
# `dtlc generate` (docs/running.md, "Generating text") on a tiny char GPT
# trained here: the output starts with the prompt and holds N more bytes;
# a seed gives the same text and another seed other text; top-k 1 is greedy;
# the trained model's greedy text is printable (an untrained one's is not);
# a step folder works as --checkpoint; and the refusals — no checkpoint, a
# checkpoint of another model, a spec fed by `tokens`, flags that do not
# fit — exit non-zero naming the problem.
#
# usage: generate.sh DTLC WORKDIR
set -euo pipefail
dtlc=$1; work=$2
rm -rf "$work"; mkdir -p "$work"; cd "$work"
fail() { echo "FAIL: $*"; exit 1; }

cat >tiny.dtl <<'EOF2'
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
data { train { text("/usr/share/common-licenses/GPL-3", seq = 16) } }
train {
  batch = 16
  steps = 300
  optimizer = adamw(lr = 1e-2)
  seed = 3
  checkpoint "ck" every 150 steps keep 2
}
EOF2

"$dtlc" run tiny.dtl >run.out 2>&1 || fail "training failed: $(cat run.out)"
[ -d ck/step-00000300 ] || fail "no checkpoint step-00000300: $(ls ck)"

gen() { "$dtlc" generate tiny.dtl --checkpoint ck --prompt "This License " "$@"; }

# A seed gives the same text; the output is the prompt and 60 bytes more.
gen --tokens 60 --seed 1 >s1a.txt || fail "generate failed"
gen --tokens 60 --seed 1 >s1b.txt
gen --tokens 60 --seed 2 >s2.txt
cmp -s s1a.txt s1b.txt || fail "the same seed gave different text: $(cat s1a.txt) / $(cat s1b.txt)"
! cmp -s s1a.txt s2.txt || fail "seeds 1 and 2 gave the same text: $(cat s1a.txt)"
[ "$(head -c 13 s1a.txt)" = "This License " ] || fail "the output does not start with the prompt: $(cat s1a.txt)"
[ "$(wc -c <s1a.txt)" -eq 74 ] || fail "expected 13 + 60 bytes and a newline, got $(wc -c <s1a.txt): $(cat s1a.txt)"
echo "seed 1: $(cat s1a.txt)"
echo "seed 2: $(cat s2.txt)"

# Greedy (temperature 0) is top-k 1 at any seed and temperature.
gen --tokens 40 --temperature 0 >greedy.txt
gen --tokens 40 --top-k 1 --seed 7 --temperature 1.5 >top1.txt
cmp -s greedy.txt top1.txt || fail "top-k 1 is not greedy: $(cat greedy.txt) / $(cat top1.txt)"
echo "greedy: $(cat greedy.txt)"
# What was learned: the text is English, so greedy text is printable ASCII.
LC_ALL=C grep -q '[^ -~]' <(head -c -1 greedy.txt) && fail "greedy text is not printable: $(od -c greedy.txt)"
tail -c +14 greedy.txt | grep -q "the" || fail "greedy text holds no 'the': $(cat greedy.txt)"

# One checkpoint of the folder, by its step folder.
"$dtlc" generate tiny.dtl --checkpoint ck/step-00000150 --prompt "the " --tokens 10 --seed 1 >older.txt ||
  fail "--checkpoint ck/step-00000150 failed"
echo "step 150: $(cat older.txt)"

# Refusals.
expect() {  # expect STATUS TEXT -- ARGS…
  local status=$1 text=$2; shift 3
  set +e; "$dtlc" "$@" >out.txt 2>err.txt; local rc=$?; set -e
  [ "$rc" -eq "$status" ] || fail "dtlc $* exited $rc, expected $status: $(cat err.txt)"
  grep -qF -- "$text" err.txt || fail "dtlc $*: no '$text' in: $(cat err.txt)"
  echo "refused ($rc): $(head -1 err.txt)"
}
expect 1 "dtlc generate: --checkpoint nowhere: no such folder" -- generate tiny.dtl --checkpoint nowhere --prompt a
expect 1 "not a checkpoint: it holds neither index.json nor params.safetensors" -- generate tiny.dtl --checkpoint . --prompt a
expect 1 "the checkpoint does not fit the spec's model" -- generate tiny.dtl --set model.d=16 --checkpoint ck --prompt a
expect 2 "--prompt TEXT is required" -- generate tiny.dtl --checkpoint ck
expect 2 "--prompt is empty" -- generate tiny.dtl --checkpoint ck --prompt ""
expect 2 "--tokens 0 generates nothing" -- generate tiny.dtl --checkpoint ck --prompt a --tokens 0
expect 2 "--temperature expects a number from 0" -- generate tiny.dtl --checkpoint ck --prompt a --temperature -1

python3 -c "import struct; open('ids.bin', 'wb').write(struct.pack('<400H', *[i % 200 for i in range(400)]))"
sed 's|text("/usr/share/common-licenses/GPL-3", seq = 16)|tokens("ids.bin", dtype = u16, seq = 16)|' tiny.dtl >tok.dtl
expect 1 "is fed by \`tokens\`, ids of a tokenizer dtl does not have" -- generate tok.dtl --checkpoint ck --prompt a
grep -q "tok.dtl:12:" err.txt || fail "the tokens refusal is not located at the data line: $(cat err.txt)"
echo "ok"
