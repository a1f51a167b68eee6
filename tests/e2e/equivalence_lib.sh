# Shared by the equivalence tests (tp_equivalence.sh, zero_equivalence.sh,
# jit_equivalence.sh): the small GPT they train, comparing a layout's losses
# with one process's, and its planned memory with what rank 0 holds. They read $dtlc and set status=1 on a failure;
# `layout` compares with ${base:-one}.jsonl. Each run has its own run folder
# (--out runs/NAME): a folder holding a run is not run into again.

# gpt_spec VOCAB HEADS HIDDEN [BLOCK] [NORM]: prints the model and data part of
# a two-layer GPT (seq 8, d 16; BLOCK TransformerBlock(d, heads, hidden) and
# NORM LayerNorm(d) unless given; synthetic data, seed 5); the test adds its
# own `train { … }` after it.
gpt_spec() {
  cat <<SPEC
model G {
  dim vocab = $1, seq = 8, d = 16, heads = $2, hidden = $3, layers = 2
  input tokens : i32[batch, seq]
  input targets : i32[batch, seq]
  tok = Embedding(vocab, d)
  param pos : [seq, d] init normal(std = 0.02)
  blocks = repeat(layers) ${4:-TransformerBlock(d, heads, hidden)}
  ln_f = ${5:-LayerNorm(d)}
  logits = ln_f(blocks(tok(tokens) + pos)) @ tok.table
  loss = cross_entropy(logits, targets, over = vocab)
}
data { train { synthetic(seed = 5) } }
SPEC
}

# compare LABEL ONE MANY [FIRST]: steps FIRST.. of ONE against MANY's, within 1e-5.
compare() {
  awk -v what="$1" -v first="${4:-1}" -F'"loss": ' '
      FNR == NR { a[FNR] = $2 + 0; next }
      { b = $2 + 0; x = a[FNR + first - 1]; r = (x - b) / x; if (r < 0) r = -r; if (r > m) m = r; k++ }
      END { printf "%s: %d steps, max relative difference %.2e\n", what, k, m; exit !(k > 0 && m <= 1e-5) }' \
      "$2" "$3" || status=1
}

# layout NAME SPEC NPROC "parallel block" [--set …]: trains NAME.dtl and compares it with one.jsonl.
layout() {
  local name=$1 spec=$2 n=$3 par=$4; shift 4
  { cat "$spec"; echo "parallel { $par }"; } >"$name.dtl"
  "$dtlc" run "$name.dtl" --nproc "$n" "$@" --no-checkpoints --metrics "$name.jsonl" --out "runs/$name" >"$name.out" 2>"$name.err" ||
    { echo "$name failed:"; tail -5 "$name.err"; status=1; }
  compare "$name ($par)" "${base:-one}.jsonl" "$name.jsonl"
}

# The plan's memory per rank is what rank 0 holds (--memory-report after
# step 1): parameters, gradients and optimiser state to the byte, and the
# executor's buffers equal the planned activations plus communication buffers.
memory() {  # NAME NPROC [--set …]: compares NAME.dtl's report with its plan
  local name=$1 n=$2; shift 2
  "$dtlc" run "$name.dtl" --nproc "$n" "$@" --steps 1 --no-checkpoints --memory-report "mem_$name.json" --out "runs/mem_$name" >/dev/null &&
    "$dtlc" plan "$name.dtl" --world "$n" "$@" --format json >"plan_$name.json" &&
    python3 - "$name" "mem_$name.json" "plan_$name.json" <<'PY' || status=1
import json, sys
name, held, plan = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))["memory"]
want = {k: plan[k] for k in ("parameters", "gradients", "optimizer_state")}
want["executor"] = plan["peak_activations"] + plan["communication"]
print(f"{name}: held {held}, planned {want}")
sys.exit(0 if held == want else 1)
PY
}
