#!/usr/bin/env bash
# `dtlc export --format torch` (docs/running.md, "Exporting to PyTorch"):
# what it writes for a tiny GPT (the names and shapes of nanoGPT's
# state_dict; tests/parity/export_torch.py checks the numbers), and the
# models it refuses, each at the spec's line: a parameter with no place in
# nanoGPT's state_dict, an MLP with relu, layer norms with another eps, a
# checkpoint of another spec.
#
# usage: export.sh DTLC WORKDIR
set -euo pipefail
dtlc=$1; work=$2
rm -rf "$work"; mkdir -p "$work"; cd "$work"
fail() { echo "FAIL: $*"; exit 1; }

spec() {  # spec NAME LOGITS BLOCK → NAME.dtl checkpointing into ck-NAME
  cat >"$1.dtl" <<EOF2
layer ReluMlp(d: dim, hidden: dim) {
  up   = Linear(d, hidden)
  down = Linear(hidden, d)
  forward(x) = down(relu(up(x)))
}
layer ReluBlock(d: dim, heads: dim, hidden: dim) {
  ln1 = LayerNorm(d)
  attn = Attention(d, heads)
  ln2 = LayerNorm(d)
  mlp = ReluMlp(d, hidden)
  forward(x) {
    let h = x + attn(ln1(x))
    return h + mlp(ln2(h))
  }
}
model Tiny {
  dim vocab = 256, seq = 8, d = 16, heads = 2, hidden = 32, layers = 2
  input tokens  : i32[batch, seq]
  input targets : i32[batch, seq]
  tok    = Embedding(vocab, d)
  param pos : [seq, d] init normal(std = 0.01)
  param scale : [d] init ones
  blocks = repeat(layers) $3
  ln_f   = LayerNorm(d)
  logits = $2
  loss   = cross_entropy(logits, targets, over = vocab)
}
data { train { text("/usr/share/common-licenses/GPL-3", seq = 8) } }
train { batch = 4  steps = 2  optimizer = adamw(lr = 1e-3)  checkpoint "ck-$1" every 2 steps }
EOF2
  "$dtlc" run "$1.dtl" >"$1.run" 2>&1 || fail "training $1 failed: $(cat "$1.run")"
}
expect() {  # expect TEXT -- ARGS…: exit status 1 and TEXT in stderr
  local text=$1; shift 2
  set +e; "$dtlc" "$@" >out.txt 2>err.txt; local rc=$?; set -e
  [ "$rc" -eq 1 ] || fail "dtlc $* exited $rc, expected 1: $(cat out.txt err.txt)"
  grep -qF -- "$text" err.txt || fail "dtlc $*: no '$text' in: $(cat err.txt)"
  echo "refused: $(head -1 err.txt)"
}

# `scale` is declared but unused by the plain GPT: it has no place in nanoGPT.
spec plain 'ln_f(blocks(tok(tokens) + pos)) @ tok.table' 'TransformerBlock(d, heads, hidden)'
expect "plain.dtl:22:9: error: dtlc export: parameter \`scale\` [d=16] has no place in nanoGPT's state_dict" -- \
  export ck-plain --spec plain.dtl --format torch --out x.safetensors
[ ! -e x.safetensors ] || fail "a refused export wrote its file"

sed -i '/param scale/d' plain.dtl
rm -rf ck-plain && "$dtlc" run plain.dtl >plain.run 2>&1 || fail "training plain failed: $(cat plain.run)"
"$dtlc" export ck-plain --spec plain.dtl --format torch --out plain.safetensors >export.out 2>&1 ||
  fail "export failed: $(cat export.out)"
grep -qF "wrote plain.safetensors from ck-plain/step-00000002: 29 tensors, nanoGPT config n_layer=2 n_head=2 n_embd=16 n_hidden=32 vocab_size=256 block_size=8 bias=True (lm_head tied to wte)" export.out ||
  fail "unexpected summary: $(cat export.out)"
# The names and shapes, in order (the safetensors header).
python3 - <<'EOF2' || fail "wrong state_dict names or shapes"
import json, struct
raw = open('plain.safetensors', 'rb').read()
h = json.loads(raw[8:8 + struct.unpack('<Q', raw[:8])[0]])
meta = h.pop('__metadata__')
got = [(k, v['shape']) for k, v in h.items()]
want = [('transformer.wte.weight', [256, 16]), ('transformer.wpe.weight', [8, 16])]
for l in range(2):
    p = 'transformer.h.%d.' % l
    want += [(p + 'ln_1.weight', [16]), (p + 'ln_1.bias', [16]),
             (p + 'attn.c_attn.weight', [48, 16]), (p + 'attn.c_attn.bias', [48]),
             (p + 'attn.c_proj.weight', [16, 16]), (p + 'attn.c_proj.bias', [16]),
             (p + 'ln_2.weight', [16]), (p + 'ln_2.bias', [16]),
             (p + 'mlp.c_fc.weight', [32, 16]), (p + 'mlp.c_fc.bias', [32]),
             (p + 'mlp.c_proj.weight', [16, 32]), (p + 'mlp.c_proj.bias', [16])]
want += [('transformer.ln_f.weight', [16]), ('transformer.ln_f.bias', [16]), ('lm_head.weight', [256, 16])]
assert sorted(got) == sorted(want), (got, want)
assert meta['n_layer'] == '2' and meta['n_hidden'] == '32' and meta['tied_lm_head'] == 'true', meta
print('names and shapes: %d tensors as nanoGPT' % len(got))
EOF2

spec relu 'ln_f(blocks(tok(tokens) + pos)) * scale @ tok.table' 'ReluBlock(d, heads, hidden)'
sed -i '/param scale/d; s/ \* scale @/ @/' relu.dtl
rm -rf ck-relu && "$dtlc" run relu.dtl >relu.run 2>&1 || fail "training relu failed: $(cat relu.run)"
expect "relu.dtl:4:21: error: dtlc export: model Tiny is not nanoGPT's GPT: it uses \`relu\`" -- \
  export ck-relu --spec relu.dtl --format torch --out x.safetensors

spec eps 'ln_f(blocks(tok(tokens) + pos)) @ tok.table' 'TransformerBlock(d, heads, hidden, eps = 1e-6)'
sed -i '/param scale/d' eps.dtl
rm -rf ck-eps && "$dtlc" run eps.dtl >eps.run 2>&1 || fail "training eps failed: $(cat eps.run)"
expect "a layer norm's eps is not 1e-5" -- export ck-eps --spec eps.dtl --format torch --out x.safetensors

expect "the checkpoint does not fit the spec's model" -- export ck-eps --spec plain.dtl --set model.d=8 --format torch --out x.safetensors
expect "dtlc export: nowhere: no such folder" -- export nowhere --spec plain.dtl --format torch --out x.safetensors
echo "ok"
