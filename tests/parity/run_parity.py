#!/usr/bin/env python3
"""PyTorch parity tests: train the same model in PyTorch and in dtl, compare losses.

  run_parity.py CASE --dtlc PATH [--workdir DIR] [--steps N] [--no-reference]
                     [--torch-dtype float32|float64] [--debug] [--kernels fast|jit]

CASE is one of the keys of CASES (mlp_sgd, gpt_adamw). For each case:

 1. the model is built in PyTorch with parameters laid out exactly as dtl
    lays them out (same names, shapes and storage order: Linear weight is
    [in, out], attention projections are [d, heads, head_dim], stacked
    `repeat` parameters carry a leading `layers` dim), initialised from a
    fixed torch seed and written to WORKDIR/CASE/init.safetensors by hand;
 2. the data is generated deterministically and written as .npy files;
 3. tests/parity/CASE.dtl is copied next to them (its npy paths are relative);
 4. PyTorch trains N steps in batch order (batch i = samples [i*B, (i+1)*B)),
    recording each step's loss before the update;
 5. `dtlc run` trains the same N steps with --init and --metrics, once with
    the fast kernels (the default; --kernels jit: the fused regions compiled,
    objects cached in WORKDIR/CASE/cache) and once with --kernels reference;
 6. the per-step losses are compared (relative difference) and printed.

Exit status: 0 when every step of the fast-kernel run is within the case's
tolerance, 1 otherwise (or when dtlc fails), 77 when torch/numpy cannot be
imported (ctest reports a skip). The reference-kernel run is reported and
only fails the test when it does not run at all.

--debug additionally runs one dtl step with a checkpoint and compares every
parameter after step 1 with PyTorch's (and, for SGD, the gradient implied by
the update), to narrow a mismatch down to a parameter.
"""
import argparse
import json
import math
import os
import shutil
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover
    print('SKIP: cannot import torch/numpy: %s' % e)
    sys.exit(77)


# ----------------------------------------------------------------------------
# safetensors, written and read by hand (the package is not installed)

def write_safetensors(path, tensors):
    """tensors: list of (name, np.float32 array), in file order."""
    header = {}
    blobs = []
    off = 0
    for name, a in tensors:
        a = np.ascontiguousarray(a, dtype='<f4')
        b = a.tobytes()
        header[name] = {'dtype': 'F32', 'shape': list(a.shape), 'data_offsets': [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(',', ':')).encode('utf-8')
    h += b' ' * ((8 - len(h) % 8) % 8)  # align the data to 8 bytes, as the reference writer does
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, 'rb') as f:
        raw = f.read()
    n = struct.unpack('<Q', raw[:8])[0]
    header = json.loads(raw[8:8 + n].decode('utf-8'))
    base = 8 + n
    out = {}
    dtypes = {'F32': '<f4', 'F64': '<f8', 'F16': '<f2', 'I32': '<i4', 'I64': '<i8'}
    for name, info in header.items():
        if name == '__metadata__':
            continue
        b, e = info['data_offsets']
        if info['dtype'] == 'BF16':
            u = np.frombuffer(raw[base + b:base + e], dtype='<u2').astype(np.uint32) << 16
            a = u.view(np.float32)
        else:
            a = np.frombuffer(raw[base + b:base + e], dtype=dtypes[info['dtype']])
        out[name] = a.reshape(info['shape']).astype(np.float64)
    return out


# ----------------------------------------------------------------------------
# case (a): MLP 20 -> 32 -> 5, relu, cross_entropy; SGD lr 0.1 momentum 0.9

def mlp_init(g):
    f, h, c = 20, 32, 5
    return [
        ('fc1.weight', torch.randn(f, h, generator=g) / math.sqrt(f)),
        ('fc1.bias', 0.1 * torch.randn(h, generator=g)),
        ('fc2.weight', torch.randn(h, c, generator=g) / math.sqrt(h)),
        ('fc2.bias', 0.1 * torch.randn(c, generator=g)),
    ]


def mlp_data(g, n):
    x = torch.randn(n, 20, generator=g)
    teacher = torch.randn(20, 5, generator=g)
    label = torch.argmax(x @ teacher + 0.5 * torch.randn(n, 5, generator=g), dim=1)
    return {'x': x.numpy().astype(np.float32), 'label': label.numpy().astype(np.int32)}


def mlp_loss(p, batch):
    x, label = batch['x'], batch['label']
    h = torch.relu(x @ p['fc1.weight'] + p['fc1.bias'])
    logits = h @ p['fc2.weight'] + p['fc2.bias']
    return F.cross_entropy(logits, label)


# ----------------------------------------------------------------------------
# case (b): 2-layer pre-LN GPT with tied output; AdamW lr 1e-2, wd 0.01

GPT = dict(vocab=11, seq=8, d=16, heads=2, hidden=32, layers=2, eps=1e-5)


def gpt_init(g):
    V, S, D, H, HID, L = (GPT[k] for k in ('vocab', 'seq', 'd', 'heads', 'hidden', 'layers'))
    hd = D // H

    def rn(*shape, std):
        return std * torch.randn(*shape, generator=g)

    return [
        ('tok.table', rn(V, D, std=0.5)),
        ('pos', rn(S, D, std=0.2)),
        ('blocks.ln1.weight', 1.0 + rn(L, D, std=0.1)),
        ('blocks.ln1.bias', rn(L, D, std=0.1)),
        ('blocks.attn.wq', rn(L, D, H, hd, std=0.3)),
        ('blocks.attn.wk', rn(L, D, H, hd, std=0.3)),
        ('blocks.attn.wv', rn(L, D, H, hd, std=0.3)),
        ('blocks.attn.bq', rn(L, H, hd, std=0.1)),
        ('blocks.attn.bk', rn(L, H, hd, std=0.1)),
        ('blocks.attn.bv', rn(L, H, hd, std=0.1)),
        ('blocks.attn.wo', rn(L, H, hd, D, std=0.2)),
        ('blocks.attn.bo', rn(L, D, std=0.1)),
        ('blocks.ln2.weight', 1.0 + rn(L, D, std=0.1)),
        ('blocks.ln2.bias', rn(L, D, std=0.1)),
        ('blocks.mlp.up.weight', rn(L, D, HID, std=0.25)),
        ('blocks.mlp.up.bias', rn(L, HID, std=0.1)),
        ('blocks.mlp.down.weight', rn(L, HID, D, std=0.18)),
        ('blocks.mlp.down.bias', rn(L, D, std=0.1)),
        ('ln_f.weight', 1.0 + rn(D, std=0.1)),
        ('ln_f.bias', rn(D, std=0.1)),
    ]


def gpt_data(g, n):
    # Learnable sequences: an arithmetic progression mod vocab with a random
    # start and stride per sample, with a little noise; targets = the next token.
    V, S = GPT['vocab'], GPT['seq']
    start = torch.randint(0, V, (n, 1), generator=g)
    stride = torch.randint(1, 4, (n, 1), generator=g)
    full = (start + stride * torch.arange(S + 1).unsqueeze(0)) % V
    noise = torch.rand(n, S + 1, generator=g) < 0.1
    full = torch.where(noise, torch.randint(0, V, (n, S + 1), generator=g), full)
    return {'tokens': full[:, :S].numpy().astype(np.int32),
            'targets': full[:, 1:].numpy().astype(np.int32)}


def attention_block(x, p, l):
    """stdlib Attention(d, heads), causal, with params of layer l of the stack."""
    hd = GPT['d'] // GPT['heads']
    q = torch.einsum('bsd,dhk->bshk', x, p['blocks.attn.wq'][l]) + p['blocks.attn.bq'][l]
    k = torch.einsum('bsd,dhk->bshk', x, p['blocks.attn.wk'][l]) + p['blocks.attn.bk'][l]
    v = torch.einsum('bsd,dhk->bshk', x, p['blocks.attn.wv'][l]) + p['blocks.attn.bv'][l]
    scores = torch.einsum('bqhk,bshk->bhqs', q, k) / math.sqrt(hd)
    S = x.shape[1]
    mask = torch.ones(S, S, dtype=torch.bool).triu(1)  # key s > query q: masked
    scores = scores.masked_fill(mask, float('-inf'))
    a = torch.softmax(scores, dim=-1)
    o = torch.einsum('bhqs,bshk->bqhk', a, v)
    return torch.einsum('bqhk,hkd->bqd', o, p['blocks.attn.wo'][l]) + p['blocks.attn.bo'][l]


def gpt_loss(p, batch):
    D, eps = GPT['d'], GPT['eps']
    tokens, targets = batch['tokens'], batch['targets']
    h = p['tok.table'][tokens] + p['pos']
    for l in range(GPT['layers']):
        a = F.layer_norm(h, (D,), p['blocks.ln1.weight'][l], p['blocks.ln1.bias'][l], eps)
        h = h + attention_block(a, p, l)
        m = F.layer_norm(h, (D,), p['blocks.ln2.weight'][l], p['blocks.ln2.bias'][l], eps)
        m = m @ p['blocks.mlp.up.weight'][l] + p['blocks.mlp.up.bias'][l]
        m = F.gelu(m)  # exact (erf) form
        m = m @ p['blocks.mlp.down.weight'][l] + p['blocks.mlp.down.bias'][l]
        h = h + m
    h = F.layer_norm(h, (D,), p['ln_f.weight'], p['ln_f.bias'], eps)
    logits = torch.einsum('bsd,vd->bsv', h, p['tok.table'])
    return F.cross_entropy(logits.reshape(-1, GPT['vocab']), targets.reshape(-1).long())


CASES = {
    'mlp_sgd': dict(
        spec='mlp_sgd.dtl', batch=16, steps=20, tol=1e-4,
        init=mlp_init, data=mlp_data, loss=mlp_loss,
        optim=lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, foreach=False),
        sgd_lr=0.1),
    'gpt_adamw': dict(
        spec='gpt_adamw.dtl', batch=4, steps=15, tol=1e-3,
        init=gpt_init, data=gpt_data, loss=gpt_loss,
        optim=lambda ps: torch.optim.AdamW(ps, lr=1e-2, betas=(0.9, 0.999), eps=1e-8,
                                           weight_decay=0.01, foreach=False),
        sgd_lr=None),
}


# ----------------------------------------------------------------------------

def torch_batch(data, i, B):
    out = {}
    for k, a in data.items():
        t = torch.from_numpy(a[i * B:(i + 1) * B].copy())
        out[k] = t.long() if a.dtype.kind in 'iu' else t
    return out


def train_torch(case, init, data, steps, dtype):
    params = {n: t.clone().to(dtype).requires_grad_(True) for n, t in init}
    opt = case['optim'](list(params.values()))
    losses = []
    grads1 = None
    for i in range(steps):
        b = torch_batch(data, i, case['batch'])
        b = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in b.items()}
        opt.zero_grad(set_to_none=True)
        loss = case['loss'](params, b)
        loss.backward()
        if i == 0:
            grads1 = {n: p.grad.detach().double().numpy().copy() for n, p in params.items()}
        losses.append(loss.item())
        opt.step()
        if i == 0:
            after1 = {n: p.detach().double().numpy().copy() for n, p in params.items()}
    return losses, grads1, after1


def check_layout(dtlc, spec, init):
    """The torch parameter names/shapes must be dtl's, in dtl's order."""
    r = subprocess.run([dtlc, 'check', spec, '--format', 'json'], capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout + r.stderr)
        raise SystemExit('dtlc check failed on %s' % spec)
    j = json.loads(r.stdout)
    dtl = [(p['path'], [s[1] for s in p['shape']]) for p in j['params']]
    ours = [(n, list(t.shape)) for n, t in init]
    if sorted(dtl) != sorted(ours):
        print('dtl parameters:  ', dtl)
        print('torch parameters:', ours)
        raise SystemExit('parameter layout mismatch between PyTorch and dtl')


def run_dtl(dtlc, spec, init_path, metrics, steps, kernels, extra=(), out=None):
    if os.path.exists(metrics):
        os.remove(metrics)
    # A fresh run folder each time: dtlc refuses one that already holds a run.
    out = out or os.path.splitext(metrics)[0] + '.run'
    shutil.rmtree(out, ignore_errors=True)
    cmd = [dtlc, 'run', spec, '--init', init_path, '--metrics', metrics, '--out', out,
           '--steps', str(steps), '--kernels', kernels] + list(extra)
    # jit's compiled objects go into the case's folder, not the user's cache
    env = dict(os.environ, XDG_CACHE_HOME=os.path.join(os.path.dirname(metrics), 'cache'))
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        print('$ ' + ' '.join(cmd))
        print(r.stdout + r.stderr)
        return None
    losses = {}
    with open(metrics) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            m = json.loads(line)
            if 'loss' in m and 'step' in m:
                losses[int(m['step'])] = float(m['loss'])
    return [losses.get(s) for s in range(1, steps + 1)]


def rel(a, b):
    if b is None:
        return float('inf')
    return abs(a - b) / max(abs(a), 1e-12)


def debug_step1(args, case, spec_dir, spec, init_path, init, torch_after1, torch_grads1):
    """One dtl step with a checkpoint; compare every parameter after the update."""
    dbg_spec = os.path.join(spec_dir, 'debug_' + os.path.basename(spec))
    with open(spec) as f:
        text = f.read()
    text = text.rstrip()
    assert text.endswith('}')
    ck = os.path.abspath(os.path.join(spec_dir, 'ckpt'))  # a relative one would be under the working folder
    text = text[:-1] + '  checkpoint "%s" every 1 step\n}\n' % ck
    with open(dbg_spec, 'w') as f:
        f.write(text)
    p0 = {n: t.double().numpy() for n, t in init}
    for kernels in ('fast', 'reference'):
        shutil.rmtree(ck, ignore_errors=True)
        got = run_dtl(args.dtlc, dbg_spec, init_path, os.path.join(spec_dir, 'debug.jsonl'), 1,
                      kernels, out=ck)
        path = os.path.join(ck, 'step-00000001', 'params.safetensors')
        if got is None or not os.path.exists(path):
            print('debug (%s): no checkpoint at %s' % (kernels, path))
            continue
        p1 = read_safetensors(path)
        print('\nparameters after step 1 (%s kernels): max |dtl - torch| / max |torch update|' % kernels)
        for n, _ in init:
            ref = torch_after1[n]
            upd = np.max(np.abs(ref - p0[n])) or 1e-30
            d = np.max(np.abs(p1[n] - ref))
            gmax = np.max(np.abs(torch_grads1[n]))
            flag = ''
            if d / upd > 1e-3:
                # A parameter whose true gradient is zero (e.g. attention's bk:
                # softmax ignores a per-query constant) gets rounding noise as
                # its gradient, which Adam scales up to a full-size update.
                flag = '!! (torch |grad| only %.1e: noise)' % gmax if gmax < 1e-6 else '!!'
            line = '  %-26s %10.3e  (update %9.3e, torch max|grad| %9.3e)  %s' % (
                n, d / upd, upd, gmax, flag)
            if case['sgd_lr']:
                g = (p0[n] - p1[n]) / case['sgd_lr']
                tg = torch_grads1[n]
                gd = np.max(np.abs(g - tg)) / (np.max(np.abs(tg)) or 1e-30)
                line += '  implied grad rel err %9.3e' % gd
            print(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('case', choices=sorted(CASES))
    ap.add_argument('--dtlc', required=True)
    ap.add_argument('--workdir', default=os.path.join(os.getcwd(), 'parity'))
    ap.add_argument('--steps', type=int, default=None)
    ap.add_argument('--no-reference', action='store_true', help='skip the --kernels reference run')
    ap.add_argument('--kernels', choices=('fast', 'jit'), default='fast',
                    help="the kernels held to the tolerance: fast (default) or jit (fused regions compiled)")
    ap.add_argument('--torch-dtype', choices=('float32', 'float64'), default='float32')
    ap.add_argument('--debug', action='store_true', help='compare parameters after step 1')
    ap.add_argument('--tol', type=float, default=None, help="override the case's tolerance")
    args = ap.parse_args()

    case = CASES[args.case]
    args.dtlc = os.path.abspath(args.dtlc)
    if not os.access(args.dtlc, os.X_OK):
        print('FAIL: %s is not an executable' % args.dtlc)
        return 1
    steps = args.steps or case['steps']
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)

    d = os.path.join(os.path.abspath(args.workdir), args.case)
    os.makedirs(d, exist_ok=True)

    g = torch.Generator().manual_seed(1234)
    init = case['init'](g)
    data = case['data'](torch.Generator().manual_seed(5678), steps * case['batch'])
    init = [(n, t.float()) for n, t in init]  # what dtl loads: exactly these f32 values

    init_path = os.path.join(d, 'init.safetensors')
    write_safetensors(init_path, [(n, t.numpy()) for n, t in init])
    for k, a in data.items():
        np.save(os.path.join(d, k + '.npy'), a)
    spec = os.path.join(d, case['spec'])
    shutil.copyfile(os.path.join(HERE, case['spec']), spec)
    check_layout(args.dtlc, spec, init)

    dtype = torch.float64 if args.torch_dtype == 'float64' else torch.float32
    t_loss, t_grads1, t_after1 = train_torch(case, init, data, steps, dtype)

    fast = run_dtl(args.dtlc, spec, init_path, os.path.join(d, 'metrics_%s.jsonl' % args.kernels), steps, args.kernels)
    ref = None
    if not args.no_reference:
        ref = run_dtl(args.dtlc, spec, init_path, os.path.join(d, 'metrics_reference.jsonl'),
                      steps, 'reference')

    tol = args.tol if args.tol is not None else case['tol']
    print('parity %s: %d steps, batch %d, tolerance %.0e relative (torch %s)'
          % (args.case, steps, case['batch'], tol, args.torch_dtype))
    head = '%4s | %-14s | %-14s | %-9s' % ('step', 'torch', 'dtl ' + args.kernels, 'rel')
    if ref is not None:
        head += ' | %-14s | %-9s' % ('dtl reference', 'rel')
    print(head)
    worst_fast = worst_ref = 0.0
    for s in range(steps):
        tl = t_loss[s]
        fl = fast[s] if fast else None
        r1 = rel(tl, fl)
        worst_fast = max(worst_fast, r1)
        fs = '%-14.8f' % fl if fl is not None else '%-14s' % '-'
        line = '%4d | %-14.8f | %s | %-9.2e' % (s + 1, tl, fs, r1)
        if ref is not None:
            rl = ref[s]
            r2 = rel(tl, rl)
            worst_ref = max(worst_ref, r2)
            rs = '%-14.8f' % rl if rl is not None else '%-14s' % '-'
            line += ' | %s | %-9.2e' % (rs, r2)
        flag = '  <-- over' if r1 > tol else ''
        if fast is not None and fl is None:
            flag = '  <-- no metrics line for this step'
        print(line + flag)
    print('max rel: %s %.3e%s' % (args.kernels, worst_fast, '' if args.no_reference else
                                    ', reference %.3e' % worst_ref))

    if args.debug:
        debug_step1(args, case, d, spec, init_path, init, t_after1, t_grads1)

    ok = fast is not None and worst_fast <= tol
    if not args.no_reference and ref is None:
        print('FAIL: dtlc run --kernels reference failed')
        ok = False
    if not args.no_reference and ref is not None and worst_ref > tol:
        print('note: the reference kernels are over tolerance (%.3e > %.0e)' % (worst_ref, tol))
    print('PASS' if ok else 'FAIL: dtl %s kernels are over tolerance %.0e (max %.3e)' % (args.kernels, tol, worst_fast))
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
