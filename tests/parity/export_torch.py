#!/usr/bin/env python3
"""`dtlc export --format torch` against PyTorch: a tiny char GPT trained 250
steps by `dtlc run`, exported, loaded into a nanoGPT-style PyTorch module
(written below, plain nn.Linear layers) with load_state_dict(strict=True),
and its logits compared with dtl's (`dtlc generate --dump-logits`).

  export_torch.py --dtlc PATH [--workdir DIR]

Checks, in order:
 1. the file holds exactly the module's state_dict names and shapes;
 2. the logits of the prompt's positions agree within 1e-5 (absolute, f32
    on both sides; dtl's fast kernels, and dtl's reference kernels);
 3. greedy decoding in PyTorch gives the bytes `dtlc generate
    --temperature 0` gives.

Exit status: 0 pass, 1 a mismatch or a failing dtlc, 77 when torch/numpy
cannot be imported (ctest reports a skip).
"""
import argparse
import math
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run_parity import read_safetensors  # noqa: E402  (exits 77 without torch/numpy)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

TOLERANCE = 1e-5
PROMPT = 'you may convey a work based on the Progr'  # longer than seq: the window is its last 16 bytes

SPEC = '''model ExportGpt {
  dim vocab = 256, seq = 16, d = 24, heads = 3, hidden = 48, layers = 2
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
  batch = 8
  steps = 250
  optimizer = adamw(lr = 1e-2)
  seed = 5
  checkpoint "ck" every 250 steps
}
'''


# ----------------------------------------------------------------------------
# nanoGPT's model (github.com/karpathy/nanoGPT, model.py) without dropout, its
# causal-mask buffer computed per call, and the MLP's hidden size a parameter
# (nanoGPT: 4 * n_embd).

class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head = n_head

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        att = F.softmax(att.masked_fill(~mask, float('-inf')), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, n_embd, n_hidden):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, n_hidden)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(n_hidden, n_embd)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, n_hidden):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd, n_hidden)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c['vocab_size'], c['n_embd']),
            wpe=nn.Embedding(c['block_size'], c['n_embd']),
            h=nn.ModuleList([Block(c['n_embd'], c['n_head'], c['n_hidden']) for _ in range(c['n_layer'])]),
            ln_f=nn.LayerNorm(c['n_embd'])))
        self.lm_head = nn.Linear(c['n_embd'], c['vocab_size'], bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied, as nanoGPT

    def forward(self, idx):
        t = idx.size(1)
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(t))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


# ----------------------------------------------------------------------------

def dtlc(args, *cmd):
    r = subprocess.run([args.dtlc] + list(cmd), capture_output=True, text=True, cwd=args.work)
    if r.returncode != 0:
        print('$ dtlc ' + ' '.join(cmd))
        print(r.stdout + r.stderr)
        sys.exit(1)
    return r.stdout


def config_of(stdout):
    """'… nanoGPT config n_layer=2 n_head=3 …' → {'n_layer': 2, …}"""
    c = {}
    for word in stdout.split():
        k, _, v = word.partition('=')
        if v.isdigit():
            c[k] = int(v)
    return c


def dtl_logits(args, kernels):
    out = os.path.join(args.work, 'logits-%s.safetensors' % kernels)
    dtlc(args, 'generate', 'gpt.dtl', '--checkpoint', 'ck', '--prompt', PROMPT, '--tokens', '0',
         '--dump-logits', out, '--kernels', kernels)
    t = read_safetensors(out)
    return t['tokens'].astype(np.int64), t['logits'].astype(np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--dtlc', required=True)
    ap.add_argument('--workdir', default='/tmp/dtl-export-torch')
    args = ap.parse_args()
    args.work = os.path.abspath(args.workdir)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    with open(os.path.join(args.work, 'gpt.dtl'), 'w') as f:
        f.write(SPEC)
    dtlc(args, 'run', 'gpt.dtl')
    said = dtlc(args, 'export', 'ck', '--spec', 'gpt.dtl', '--format', 'torch', '--out', 'gpt.safetensors')
    print(said.strip())
    c = config_of(said)
    model = GPT(c).eval()
    exported = read_safetensors(os.path.join(args.work, 'gpt.safetensors'))
    want = {k: list(v.shape) for k, v in model.state_dict().items()}
    got = {k: list(v.shape) for k, v in exported.items()}
    if want != got:
        print('module state_dict:', want)
        print('exported:         ', got)
        return 1
    model.load_state_dict({k: torch.tensor(v, dtype=torch.float32) for k, v in exported.items()}, strict=True)
    print('load_state_dict(strict=True): %d tensors' % len(exported))

    failed = False
    for kernels in ('fast', 'reference'):
        ids, dtl = dtl_logits(args, kernels)
        if bytes(ids.tolist()) != PROMPT.encode()[-c['block_size']:]:
            print('dumped tokens are not the prompt\'s last %d bytes: %r' % (c['block_size'], bytes(ids.tolist())))
            return 1
        with torch.no_grad():
            ours = model(torch.tensor(ids).unsqueeze(0))[0].numpy()
        diff = float(np.max(np.abs(ours - dtl)))
        ok = diff <= TOLERANCE
        failed |= not ok
        print('logits [%d, %d], %s kernels: largest difference %.3g (tolerance %g): %s'
              % (dtl.shape[0], dtl.shape[1], kernels, diff, TOLERANCE, 'ok' if ok else 'FAILED'))

    n = 24
    r = subprocess.run([args.dtlc, 'generate', 'gpt.dtl', '--checkpoint', 'ck', '--prompt', PROMPT,
                        '--tokens', str(n), '--temperature', '0'], capture_output=True, cwd=args.work)
    if r.returncode != 0:
        print(r.stderr.decode(errors='replace'))
        return 1
    dtl_bytes = r.stdout[:-1]  # without the newline generate ends with
    ids = list(PROMPT.encode())
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor(ids[-c['block_size']:]).unsqueeze(0))[0, -1]
            ids.append(int(torch.argmax(logits)))
    same = dtl_bytes == bytes(ids)
    failed |= not same
    print('greedy, %d bytes: dtl %r, torch %r: %s' % (n, dtl_bytes, bytes(ids), 'same' if same else 'DIFFERENT'))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
