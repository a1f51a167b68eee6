#!/usr/bin/env python3
"""PyTorch's answers for the optimiser parity test (tests/unit/optim_test.cc).

Inputs come from a splitmix64 hash that optim_test.cc reproduces bit for bit,
so nothing but the results crosses the pipe.  Every float is printed as the
8 hex digits of its IEEE bits:  `<label> <count> <hex> <hex> ...` per line.
Exit status 77 (and a `SKIP` line) when torch cannot be imported.

  optim_reference.py optim NAME LR MOMENTUM DAMPENING WD NESTEROV BETA1 BETA2 EPS N STEPS SEED LR_VARY
  optim_reference.py clip MAX_NORM SEED SCALE N1 [N2 ...]

Several cases may be given at once, separated by a lone `+` (torch imports
once); each case's output starts with a `case K` line.

optim: the parameter starts at value(SEED, 0, i, param) in [-1, 1); step t
(1-based) sees the gradient value(SEED, t, i, grad) and, with LR_VARY=1, the
rate LR * ((t % 4) + 1) / 4.  clip: tensor k (0-based) has the gradient
value(SEED, k + 1, i, grad) * SCALE.
"""
import struct
import sys

M64 = (1 << 64) - 1


def mix(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def value(seed, t, i, kind, scale_exp_range):
    """A float32-exact value: a 24-bit signed mantissa times a power of two."""
    h = mix(mix(mix(seed) ^ t) ^ (i * 2 + kind))
    if kind == 1 and (h >> 40) % 17 == 0:
        return 0.0
    mant = (h & 0xFFFFFF) - (1 << 23)
    e = 0 if scale_exp_range == 0 else ((h >> 24) % scale_exp_range) - (scale_exp_range - 3)
    return mant / float(1 << 23) * (2.0 ** e)


def hexes(label, t):
    vals = t.detach().reshape(-1).tolist()
    words = [struct.unpack('<I', struct.pack('<f', v))[0] for v in vals]
    return label + ' ' + str(len(words)) + ''.join(' %08x' % w for w in words)


def run_optim(args, torch):
    name = args[0]
    lr, momentum, dampening, wd = map(float, args[1:5])
    nesterov = args[5] == '1'
    beta1, beta2, eps = map(float, args[6:9])
    n, steps, seed, lr_vary = map(int, args[9:13])
    p = torch.tensor([value(seed, 0, i, 0, 0) for i in range(n)], dtype=torch.float32,
                     requires_grad=True)
    if name == 'sgd':
        opt = torch.optim.SGD([p], lr=lr, momentum=momentum, dampening=dampening,
                              weight_decay=wd, nesterov=nesterov, foreach=False)
    elif name == 'adam':
        opt = torch.optim.Adam([p], lr=lr, betas=(beta1, beta2), eps=eps, weight_decay=wd,
                               foreach=False)
    elif name == 'adamw':
        opt = torch.optim.AdamW([p], lr=lr, betas=(beta1, beta2), eps=eps, weight_decay=wd,
                                foreach=False)
    else:
        raise SystemExit('unknown optimiser ' + name)
    for t in range(1, steps + 1):
        if lr_vary:
            for g in opt.param_groups:
                g['lr'] = lr * ((t % 4) + 1) / 4.0
        p.grad = torch.tensor([value(seed, t, i, 1, 11) for i in range(n)], dtype=torch.float32)
        opt.step()
    print(hexes('param', p))
    st = opt.state[p]
    for key in ('momentum_buffer', 'exp_avg', 'exp_avg_sq'):
        if key in st and st[key] is not None:
            print(hexes(key, st[key]))


def run_clip(args, torch):
    max_norm = float(args[0])
    seed = int(args[1])
    scale = float(args[2])
    sizes = [int(a) for a in args[3:]]
    params = []
    for k, n in enumerate(sizes):
        p = torch.zeros(n, dtype=torch.float32, requires_grad=True)
        p.grad = torch.tensor([value(seed, k + 1, i, 1, 11) * scale for i in range(n)],
                              dtype=torch.float32)
        params.append(p)
    total = torch.nn.utils.clip_grad_norm_(params, max_norm)
    print(hexes('total', total))
    for k, p in enumerate(params):
        print(hexes('grad%d' % k, p.grad))


def main():
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means: skip
        print('SKIP torch unavailable: %s' % e)
        sys.exit(77)
    torch.set_num_threads(1)
    cases, cur = [], []
    for a in sys.argv[1:]:
        if a == '+':
            cases.append(cur)
            cur = []
        else:
            cur.append(a)
    cases.append(cur)
    for k, case in enumerate(cases):
        print('case %d' % k)
        mode, args = case[0], case[1:]
        if mode == 'optim':
            run_optim(args, torch)
        elif mode == 'clip':
            run_clip(args, torch)
        else:
            raise SystemExit('unknown mode ' + mode)


if __name__ == '__main__':
    main()
