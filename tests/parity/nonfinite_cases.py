#!/usr/bin/env python3
"""Golden NaN/±inf behaviour of every kernel, computed by PyTorch.

  nonfinite_cases.py [--out DIR]     write DIR/<kernel>.txt (default tests/golden/nonfinite)
  nonfinite_cases.py --check [DIR]   recompute and compare with the files; exit 1 on drift

For each kernel of the backend seam (runtime/exec/backend.h) this builds small
inputs mixing NaN, +inf, -inf and finite values, computes PyTorch's forward
result and, through autograd, its gradient, and writes them as the IR node(s)
dtl runs with their inputs and expected outputs. tests/unit/nonfinite_test.cc
runs every case on the reference and the fast backend (NaN positions and ±inf
exact, finite values to 1e-5 relative). The values are float64 computations on
float32-representable inputs; nothing here is hand-written.

dtl's layouts and ops are spelled out per case: an op name of core/graph.h,
its fn / names / scalar / flag / index fields, the output shape as name=size
pairs, and each input. dropout's mask is dtl's own counter-based mask
(ref::dropoutKeep, rewritten below), applied the way torch applies its
Bernoulli mask: x * (mask / (1 - p)), so a dropped NaN stays NaN.

Exit status 77 (ctest: skipped) when torch cannot be imported.
"""
import argparse
import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, '..', 'golden', 'nonfinite')

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover
    print('SKIP: cannot import torch: %s' % e)
    sys.exit(77)

NAN, INF = float('nan'), float('inf')
T = torch.float64


def fmt(v):
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return 'nan'
    if math.isinf(v):
        return 'inf' if v > 0 else '-inf'
    return repr(float(v))


def flat(t):
    return [int(v) for v in t.reshape(-1).tolist()] if not t.is_floating_point() else \
        [float(v) for v in t.reshape(-1).tolist()]


def shape_str(dims):
    return ' '.join('%s=%d' % d for d in dims)


class Case:
    """One IR node: fields, inputs (dims, tensor), expected output."""

    def __init__(self, label, op, dims, expect, inputs, fn='', names=(), scalar=None, flag=False, index=None,
                 dtype='f32', node_id=7, seed=0):
        self.label, self.op, self.dims, self.expect, self.inputs = label, op, dims, expect, inputs
        self.fn, self.names, self.scalar, self.flag, self.index = fn, names, scalar, flag, index
        self.dtype, self.node_id, self.seed = dtype, node_id, seed

    def text(self):
        lines = ['case ' + self.label, 'op ' + re.sub('(?<!^)([A-Z])', r'_\1', self.op).lower()]  # ir::opName
        if self.fn:
            lines.append('fn ' + self.fn)
        if self.names:
            lines.append('names ' + ' '.join(self.names))
        if self.scalar is not None:
            lines.append('scalar ' + fmt(float(self.scalar)))
        if self.flag:
            lines.append('flag 1')
        if self.index is not None:
            lines.append('index %d' % self.index)
        if self.op == 'Dropout' or self.op == 'DropoutGrad':
            lines.append('id %d' % self.node_id)
            lines.append('seed %d' % self.seed)
        lines.append('shape %s' % shape_str(self.dims))
        lines.append('dtype ' + self.dtype)
        for dims, t in self.inputs:
            kind = 'f32' if t.is_floating_point() else 'i32'
            lines.append('in %s %s : %s' % (kind, shape_str(dims), ' '.join(fmt(v) for v in flat(t))))
        lines.append('out ' + ' '.join(fmt(v) for v in flat(self.expect)))
        lines.append('end')
        return '\n'.join(lines) + '\n'


def f64(values, shape=None):
    t = torch.tensor(values, dtype=T)
    return t.reshape(shape) if shape else t


def fwd_bwd(f, xs, dy):
    """f(*xs) and the gradients of sum(f · dy) wrt each of xs (autograd)."""
    xs = [x.clone().requires_grad_(True) for x in xs]
    y = f(*xs)
    y.backward(dy)
    return y.detach(), [x.grad.detach() for x in xs]


# ---------------------------------------------------------------------------- elementwise

X8 = [NAN, INF, -INF, 0.0, -1.5, 2.0, 0.5, -0.25]
DY8 = [1.0, -0.5, 2.0, 0.75, NAN, -1.0, INF, 0.5]  # a NaN and an inf upstream gradient too
# 37 elements: the specials again past the first vector registers (16 lanes) and in the remainder.
FILL = [k / 8.0 - 1.5 for k in range(21)]
X37 = X8 + FILL + X8[::-1]
DY37 = DY8 + [1.0 - k / 16.0 for k in range(21)] + DY8[::-1]

UNARY = {
    'relu': F.relu,
    'gelu': F.gelu,
    'gelu_tanh': lambda x: F.gelu(x, approximate='tanh'),
    'silu': F.silu,
    'tanh': torch.tanh,
    'sigmoid': torch.sigmoid,
    'exp': torch.exp,
    'log': torch.log,
    'sqrt': torch.sqrt,
    'rsqrt': torch.rsqrt,
    'neg': torch.neg,
    'abs': torch.abs,
}


def unary_cases(fn):
    dims = [('n', 37)]
    x, dy = f64(X37), f64(DY37)
    y, (dx,) = fwd_bwd(UNARY[fn], [x], dy)
    return [Case(fn + '.forward', 'Unary', dims, y, [(dims, x)], fn=fn),
            Case(fn + '.backward', 'UnaryGrad', dims, dx, [(dims, x), (dims, dy)], fn=fn)]


BIN_A = [NAN, INF, -INF, INF, 0.0, 1.0, -INF, 2.0, NAN]
BIN_B = [1.0, INF, -INF, -INF, 0.0, 0.0, 3.0, NAN, NAN]
BINARY = {'add': torch.add, 'sub': torch.sub, 'mul': torch.mul, 'div': torch.div, 'eq': torch.eq, 'ne': torch.ne,
          'lt': torch.lt, 'le': torch.le, 'gt': torch.gt, 'ge': torch.ge}


def binary_cases(fns):
    dims = [('n', 9)]
    a, b = f64(BIN_A), f64(BIN_B)
    out = []
    for fn in fns:
        y = BINARY[fn](a, b)
        out.append(Case(fn + '.forward', 'Binary', dims, y.to(torch.int32) if fn in ('eq', 'ne', 'lt', 'le', 'gt', 'ge')
                        else y, [(dims, a), (dims, b)], fn=fn,
                        dtype='bool' if fn in ('eq', 'ne', 'lt', 'le', 'gt', 'ge') else 'f32'))
    return out


# ---------------------------------------------------------------------------- contractions, reductions

def contract_cases():
    # [r=3, k=2] @ [k=2, c=3]: a NaN row, an inf meeting a 0 (inf·0 = NaN) and an inf meeting a finite value.
    a = f64([[NAN, 1.0], [INF, 0.5], [1.0, 2.0]])
    b = f64([[1.0, 0.0, 2.0], [0.5, -1.0, 1.5]])
    return [Case('contract.forward', 'Contract', [('r', 3), ('c', 3)], a @ b,
                 [([('r', 3), ('k', 2)], a), ([('k', 2), ('c', 3)], b)])]


# Rows of a [r=6, c=4] tensor, one non-finite pattern each.
ROWS = [[1.0, NAN, 2.0, 0.5],
        [INF, 1.0, 2.0, -1.0],
        [-INF, 1.0, 2.0, 0.5],
        [-INF, -INF, -INF, -INF],
        [0.5, -INF, INF, 1.0],
        [1.0, 3.0, -2.0, 0.5]]
ROW_DY = [[0.5, -1.0, 2.0, 1.0],
          [1.0, 0.25, -0.5, 2.0],
          [-1.0, 0.5, 1.0, -2.0],
          [1.0, 2.0, -1.0, 0.5],
          [0.25, 1.0, 0.5, -1.0],
          [2.0, -1.0, 0.5, 1.0]]
RDIMS = [('r', 6), ('c', 4)]
# Rows of 37 (vector body and remainder): NaN, +inf, or -inf deep in an otherwise finite row.
WIDE = [[k / 8.0 - 2.0 for k in range(37)] for _ in range(3)]
WIDE[0][29], WIDE[1][35], WIDE[2][20] = NAN, INF, -INF
WIDE_DY = [[1.0 - k / 16.0 for k in range(37)], [k / 32.0 for k in range(37)], [0.5] * 37]
WDIMS = [('r', 3), ('c', 37)]


def reduce_cases(fn):
    x = f64(ROWS)
    dy = f64([1.0, -2.0, 0.5, 3.0, 0.25, -1.0])
    if fn == 'sum':
        y = x.sum(1)
    elif fn == 'mean':
        y = x.mean(1)
    else:
        y, (dx,) = fwd_bwd(lambda t: t.max(1).values, [x], dy)
    out = [Case('reduce_%s.forward' % fn, 'Reduce', [('r', 6)], y, [(RDIMS, x)], fn=fn, names=['c'])]
    w = f64(WIDE)
    wy = {'sum': w.sum(1), 'mean': w.mean(1), 'max': w.max(1).values}[fn]
    out.append(Case('reduce_%s.forward.wide' % fn, 'Reduce', [('r', 3)], wy, [(WDIMS, w)], fn=fn, names=['c']))
    if fn == 'max':
        out.append(Case('reduce_max.backward', 'MaxGrad', RDIMS, dx, [(RDIMS, x), ([('r', 6)], dy)], names=['c']))
    return out


def reduce_to_cases():
    # ReduceTo (a broadcast's gradient): sums over the leading rows, not the trailing dim.
    x, w = f64(ROWS), f64(WIDE)
    return [Case('reduce_to.forward', 'ReduceTo', [('c', 4)], x.sum(0), [(RDIMS, x)]),
            Case('reduce_to.forward.wide', 'ReduceTo', [('c', 37)], w.sum(0), [(WDIMS, w)])]


def argmax_cases():
    x = f64(ROWS)
    w = f64(WIDE)
    return [Case('argmax.forward', 'Argmax', [('r', 6)], torch.argmax(x, 1).to(torch.int32), [(RDIMS, x)],
                 names=['c'], dtype='i32'),
            Case('argmax.forward.wide', 'Argmax', [('r', 3)], torch.argmax(w, 1).to(torch.int32), [(WDIMS, w)],
                 names=['c'], dtype='i32')]


def softmax_cases(log):
    name, op = ('log_softmax', 'LogSoftmax') if log else ('softmax', 'Softmax')
    f = (lambda t: F.log_softmax(t, 1)) if log else (lambda t: F.softmax(t, 1))
    out = []
    for tag, rows, grads, dims in (('', ROWS, ROW_DY, RDIMS), ('.wide', WIDE, WIDE_DY, WDIMS)):
        x, dy = f64(rows), f64(grads)
        y, (dx,) = fwd_bwd(f, [x], dy)
        out += [Case(name + '.forward' + tag, op, dims, y, [(dims, x)], names=['c']),
                Case(name + '.backward' + tag, op + 'Grad', dims, dx, [(dims, y), (dims, dy)], names=['c'])]
    return out


EPS = 1e-5


def rms_norm(t):
    return t * torch.rsqrt(t.pow(2).mean(1, keepdim=True) + EPS)


def normalize_cases(rms):
    name, op = ('rms_normalize', 'RmsNormalize') if rms else ('normalize', 'Normalize')
    out = []
    for tag, rows, grads, dims in (('', ROWS, ROW_DY, RDIMS), ('.wide', WIDE, WIDE_DY, WDIMS)):
        x, dy = f64(rows), f64(grads)
        f = rms_norm if rms else (lambda t: F.layer_norm(t, (dims[1][1],), eps=EPS))
        y, (dx,) = fwd_bwd(f, [x], dy)
        out += [Case(name + '.forward' + tag, op, dims, y, [(dims, x)], names=['c'], scalar=EPS),
                Case(name + '.backward' + tag, op + 'Grad', dims, dx, [(dims, x), (dims, dy)], names=['c'],
                     scalar=EPS)]
    return out


def cross_entropy_cases():
    x = f64(ROWS)
    labels = torch.tensor([0, 2, 0, 1, 2, 1], dtype=torch.int32)  # row 2: label at the -inf logit: loss inf
    dloss = f64(1.5)
    out = []
    # All rows (NaN loss) and only the rows without NaN / +inf (row 2's inf loss, finite gradients).
    for tag, rows in (('all_rows', range(6)), ('neg_inf_rows', [2, 5])):
        xs, ls = x[list(rows)], labels[list(rows)]
        n = len(rows)
        y, (dx,) = fwd_bwd(lambda t: F.cross_entropy(t, ls.long()), [xs], dloss)
        dims = [('r', n), ('c', 4)]
        out.append(Case('cross_entropy.forward.' + tag, 'CrossEntropy', [], y, [(dims, xs), ([('r', n)], ls)],
                        names=['c']))
        out.append(Case('cross_entropy.backward.' + tag, 'CrossEntropyGrad', dims, dx,
                        [(dims, xs), ([('r', n)], ls), ([], dloss)], names=['c']))
    w, wl = f64(WIDE), torch.tensor([3, 36, 20], dtype=torch.int32)  # row 2: label at its -inf
    y, (dx,) = fwd_bwd(lambda t: F.cross_entropy(t, wl.long()), [w], dloss)
    out.append(Case('cross_entropy.forward.wide', 'CrossEntropy', [], y, [(WDIMS, w), ([('r', 3)], wl)], names=['c']))
    out.append(Case('cross_entropy.backward.wide', 'CrossEntropyGrad', WDIMS, dx,
                    [(WDIMS, w), ([('r', 3)], wl), ([], dloss)], names=['c']))
    return out


# ---------------------------------------------------------------------------- embed, attention, dropout

def embed_cases():
    table = f64([[NAN, 1.0], [INF, -INF], [0.5, 2.0]])
    ids = torch.tensor([[2, 0], [1, 1]], dtype=torch.int32)
    dy = f64([[[1.0, NAN], [0.5, 1.0]], [[INF, 1.0], [-INF, 2.0]]])
    y, (dtable,) = fwd_bwd(lambda t: F.embedding(ids.long(), t), [table], dy)
    tdims, ydims = [('v', 3), ('e', 2)], [('b', 2), ('s', 2), ('e', 2)]
    return [Case('embed.forward', 'Embed', ydims, y, [(tdims, table), ([('b', 2), ('s', 2)], ids)]),
            Case('embed.backward', 'EmbedGrad', tdims, dtable, [([('b', 2), ('s', 2)], ids), (ydims, dy)])]


def attention_torch(q, k, v, causal):
    # dtl: [seq, heads, dim]; torch: [heads, seq, dim]
    qh, kh, vh = (t.transpose(0, 1) for t in (q, k, v))
    s = qh @ kh.transpose(1, 2) / math.sqrt(q.shape[-1])
    if causal:
        mask = torch.ones(s.shape[-2:], dtype=torch.bool).triu(1)
        s = s.masked_fill(mask, -INF)
    return (F.softmax(s, -1) @ vh).transpose(0, 1)


def attention_cases():
    # [seq=3, heads=2, dim=2]; head 0 carries a NaN key at position 2 (masked for queries 0 and 1 when causal),
    # head 1 an inf value.
    q = f64([[[0.5, 1.0], [1.0, -0.5]], [[-1.0, 0.5], [0.25, 1.0]], [[1.0, 1.0], [-0.5, 0.5]]])
    k = f64([[[1.0, 0.0], [0.5, 0.5]], [[0.0, 1.0], [-1.0, 0.25]], [[NAN, 1.0], [1.0, -1.0]]])
    v = f64([[[1.0, 2.0], [INF, 1.0]], [[-1.0, 0.5], [0.5, 0.5]], [[0.25, 1.0], [1.0, -2.0]]])
    dy = f64([[[1.0, -1.0], [0.5, 1.0]], [[0.5, 2.0], [-1.0, 1.0]], [[1.0, 0.5], [2.0, -0.5]]])
    dims = [('s', 3), ('h', 2), ('d', 2)]
    out = []
    for causal in (False, True):
        tag = 'causal' if causal else 'full'
        y, grads = fwd_bwd(lambda a, b, c: attention_torch(a, b, c, causal), [q, k, v], dy)
        ins = [(dims, q), (dims, k), (dims, v)]
        out.append(Case('attention.forward.' + tag, 'Attention', dims, y, ins, flag=causal))
        for which, g in enumerate(grads):
            out.append(Case('attention.backward.%s.%s' % (tag, 'qkv'[which]), 'AttentionGrad', dims, g,
                            ins + [(dims, dy)], flag=causal, index=which))
    return out


M64 = (1 << 64) - 1


def splitmix64(z):
    z = (z + 0x9e3779b97f4a7c15) & M64
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M64
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M64
    return z ^ (z >> 31)


def dropout_mask(step_seed, node_id, n, p):
    """runtime/exec/backend.h dropoutSeed and ref::dropoutKeep."""
    seed = splitmix64(step_seed ^ splitmix64(node_id))
    base = splitmix64(seed)
    return [1.0 if (splitmix64((base + k) & M64) >> 11) * 2.0 ** -53 >= p else 0.0 for k in range(n)]


def dropout_cases():
    p, node_id, seed = 0.5, 7, 3
    x, dy = f64(X37), f64(DY37)
    mask = f64(dropout_mask(seed, node_id, 37, p))
    assert 0 < mask[:3].sum() < 3 and 0 < mask[-3:].sum() < 3, 'the mask should drop some specials, keep others'
    noise = mask / (1 - p)
    y, (dx,) = fwd_bwd(lambda t: t * noise, [x], dy)
    dims = [('n', 37)]
    # Both seed the mask with the forward node's lowering id, in `index`
    return [Case('dropout.forward', 'Dropout', dims, y, [(dims, x)], scalar=p, index=node_id, node_id=node_id,
                 seed=seed),
            Case('dropout.backward', 'DropoutGrad', dims, dx, [(dims, dy)], scalar=p, index=node_id, seed=seed,
                 node_id=node_id + 1)]


def all_kernels():
    k = {fn: unary_cases(fn) for fn in UNARY}
    k['arithmetic'] = binary_cases(['add', 'sub', 'mul', 'div'])
    k['compare'] = binary_cases(['eq', 'ne', 'lt', 'le', 'gt', 'ge'])
    k['contract'] = contract_cases()
    for fn in ('sum', 'mean', 'max'):
        k['reduce_' + fn] = reduce_cases(fn)
    k['reduce_to'] = reduce_to_cases()
    k['argmax'] = argmax_cases()
    k['softmax'] = softmax_cases(False)
    k['log_softmax'] = softmax_cases(True)
    k['normalize'] = normalize_cases(False)
    k['rms_normalize'] = normalize_cases(True)
    k['cross_entropy'] = cross_entropy_cases()
    k['embed'] = embed_cases()
    k['attention'] = attention_cases()
    k['dropout'] = dropout_cases()
    return k


HEADER = ('# Generated by tests/parity/nonfinite_cases.py from PyTorch %s; do not edit.\n'
          '# Regenerate: /usr/bin/python3 tests/parity/nonfinite_cases.py\n')


def render(cases):
    return HEADER % torch.__version__.split('+')[0] + ''.join(c.text() for c in cases)


def strip_header(text):
    return ''.join(l for l in text.splitlines(True) if not l.startswith('#'))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--out', default=DEFAULT_OUT)
    ap.add_argument('--check', nargs='?', const=DEFAULT_OUT, metavar='DIR')
    args = ap.parse_args()
    kernels = all_kernels()
    if args.check:
        stale = []
        for name, cases in kernels.items():
            path = os.path.join(args.check, name + '.txt')
            have = open(path).read() if os.path.exists(path) else ''
            if strip_header(have) != strip_header(render(cases)):
                stale.append(path)
        extra = set(os.listdir(args.check)) - {n + '.txt' for n in kernels}
        for path in stale:
            print('DRIFT: %s differs from what PyTorch %s computes' % (path, torch.__version__))
        for name in sorted(extra):
            print('DRIFT: %s is not generated by this script' % os.path.join(args.check, name))
        if stale or extra:
            print('regenerate with: /usr/bin/python3 tests/parity/nonfinite_cases.py')
            return 1
        print('OK: %d kernels match PyTorch %s' % (len(kernels), torch.__version__))
        return 0
    os.makedirs(args.out, exist_ok=True)
    for name, cases in kernels.items():
        with open(os.path.join(args.out, name + '.txt'), 'w') as f:
            f.write(render(cases))
    print('wrote %d kernels to %s' % (len(kernels), os.path.normpath(args.out)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
