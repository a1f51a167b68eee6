#!/usr/bin/python3
"""Benchmark (not a test): one GPT-2-small-shaped training step, dtl vs PyTorch.

  /usr/bin/python3 bench/gpt_step_vs_torch.py [--rounds 1] [--steps 3] [--warmup 1]
        [--threads 1,2] [--openblas DIR] [--system-blas] [--torch-layout per-layer|stacked]
        [--dtlc PATH] [--json OUT]

Model (bench/specs/gpt_step_bench.dtl): vocab 50257, d 768, 12 heads of 64,
hidden 3072, 12 pre-LN blocks (stdlib TransformerBlock: exact-erf GELU,
biases everywhere), learned positions, output tied to the token table;
sequence 128, batch 2 (so it fits), AdamW(lr 6e-4, betas (0.9, 0.95),
weight_decay 0.1), f32, one process.

dtl: `dtlc run SPEC --steps W+S --metrics FILE`; step times from the metrics
(t(n) = elapsed_s(n), seconds since the training loop started): the timed steps are W+1 .. W+S, (t(W+S) - t(W)) / S; the first step
(buffer allocation, page faults) is reported on its own.

PyTorch: a twin written with einsum like tests/parity/run_parity.py's GPT
(parameters in dtl's layouts: wq [d, heads, head_dim], wo [heads, head_dim, d],
Linear weights [in, out]), on random token ids made once. By default each
block has its own parameters, as a PyTorch model normally would
(--torch-layout stacked indexes [layers, ...] tensors as dtl stores them,
which makes PyTorch's backward build a full-size gradient per layer too).
Timed: S steps after W warm-up steps. PyTorch runs in each configuration of
its grid (torch_peer.thread_grid: each thread count of --threads with OpenBLAS
pinned to it and on every core), on OpenBLAS when a folder with one is found,
else (or also, with --system-blas) on the system's BLAS (see torch_peer.py;
on the netlib reference BLAS a step takes about a minute), and PyTorch 2.x
(MKL), eager, on each thread count when bench/peer_venv.sh's venv exists;
the peer is the fastest configuration of either version.

Reports ms/step of each (best and median over rounds), the ratio PyTorch / dtl
(how many times faster dtl is), the GEMM GFLOP/s dtl reaches over the whole
step, peak memory of each process, and dtl's op counts per kind from
`dtlc check --emit=grad`.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common as bc  # noqa: E402
import torch_peer  # noqa: E402

SPEC = os.path.join(bc.HERE, 'specs', 'gpt_step_bench.dtl')
V, S, D, H, HID, L, B = 50257, 128, 768, 12, 3072, 12, 2
EPS = 1e-5
PEAK_1CORE = 134.0


def torch_worker(threads, warmup, steps, layout):
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(threads)
    probe = torch_peer.blas_probe()
    torch.manual_seed(1337)
    hd = D // H

    def rn(*shape, std=0.02):
        return (torch.randn(*shape) * std).requires_grad_()

    def zeros(*shape):
        return torch.zeros(*shape, requires_grad=True)

    def ones(*shape):
        return torch.ones(*shape, requires_grad=True)

    def block_params(*lead):
        return {
            'ln1.weight': ones(*lead, D), 'ln1.bias': zeros(*lead, D),
            'attn.wq': rn(*lead, D, H, hd), 'attn.wk': rn(*lead, D, H, hd), 'attn.wv': rn(*lead, D, H, hd),
            'attn.bq': zeros(*lead, H, hd), 'attn.bk': zeros(*lead, H, hd), 'attn.bv': zeros(*lead, H, hd),
            'attn.wo': rn(*lead, H, hd, D), 'attn.bo': zeros(*lead, D),
            'ln2.weight': ones(*lead, D), 'ln2.bias': zeros(*lead, D),
            'mlp.up.weight': rn(*lead, D, HID), 'mlp.up.bias': zeros(*lead, HID),
            'mlp.down.weight': rn(*lead, HID, D), 'mlp.down.bias': zeros(*lead, D),
        }

    wte, wpe = rn(V, D), rn(S, D, std=0.01)
    lnf_w, lnf_b = ones(D), zeros(D)
    if layout == 'stacked':
        stacked = block_params(L)
        blocks = [{k: v[l] for k, v in stacked.items()} for l in range(L)]  # rebuilt per step below
        leaves = list(stacked.values())
    else:
        blocks = [block_params() for _ in range(L)]
        leaves = [t for b in blocks for t in b.values()]
    params = [wte, wpe, lnf_w, lnf_b] + leaves
    nparams = sum(p.numel() for p in params)
    opt = torch.optim.AdamW(params, lr=6e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    tokens = torch.randint(0, V, (B, S))
    targets = torch.randint(0, V, (B, S))
    mask = torch.ones(S, S, dtype=torch.bool).triu(1)

    def attention(x, p):
        q = torch.einsum('bsd,dhk->bshk', x, p['attn.wq']) + p['attn.bq']
        k = torch.einsum('bsd,dhk->bshk', x, p['attn.wk']) + p['attn.bk']
        v = torch.einsum('bsd,dhk->bshk', x, p['attn.wv']) + p['attn.bv']
        scores = torch.einsum('bqhk,bshk->bhqs', q, k) / math.sqrt(hd)
        a = torch.softmax(scores.masked_fill(mask, float('-inf')), dim=-1)
        o = torch.einsum('bhqs,bshk->bqhk', a, v)
        return torch.einsum('bqhk,hkd->bqd', o, p['attn.wo']) + p['attn.bo']

    def loss_fn():
        bl = [{k: v[l] for k, v in stacked.items()} for l in range(L)] if layout == 'stacked' else blocks
        h = wte[tokens] + wpe
        for p in bl:
            a = F.layer_norm(h, (D,), p['ln1.weight'], p['ln1.bias'], EPS)
            h = h + attention(a, p)
            m = F.layer_norm(h, (D,), p['ln2.weight'], p['ln2.bias'], EPS)
            m = F.gelu(m @ p['mlp.up.weight'] + p['mlp.up.bias'])
            h = h + (m @ p['mlp.down.weight'] + p['mlp.down.bias'])
        h = F.layer_norm(h, (D,), lnf_w, lnf_b, EPS)
        logits = torch.einsum('bsd,vd->bsv', h, wte)
        return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        opt.step()
        return loss.item()

    times = []
    for _ in range(warmup + steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    print(json.dumps(dict(probe, first_s=times[0], step_s=sum(times[warmup:]) / steps, params=nparams,
                          threads=torch.get_num_threads())))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--rounds', type=int, default=1)
    ap.add_argument('--steps', type=int, default=3)
    ap.add_argument('--warmup', type=int, default=1)
    ap.add_argument('--torch-layout', choices=('per-layer', 'stacked'), default='per-layer')
    bc.add_peer_args(ap)
    args = ap.parse_args()
    if args.torch_worker is not None:
        return torch_worker(args.torch_worker, args.warmup, args.steps, args.torch_layout)

    dtlc = bc.dtlc_path(args.dtlc)
    grad = subprocess.run([dtlc, 'check', SPEC, '--emit=grad'], capture_output=True, text=True, check=True).stdout
    fwd, bwd, rows = bc.contraction_flops(grad)
    # attention's own products (not contract nodes): forward q.k and P.v; the
    # one attention_grad node recomputes q.k once and makes dy.v, dv, dq and
    # dk (fast/attention.cc; the causal tiles it skips are still counted).
    att1 = 2 * B * H * S * S * (D // H)
    n_att = sum(1 for line in grad.splitlines() if '= attention(' in line)
    att_fwd = n_att * 2 * att1
    att_bwd = n_att * 5 * att1
    flops = fwd + bwd + att_fwd + att_bwd
    useful = fwd + bwd + n_att * 2 * att1 * 3  # without recomputation: forward + 2x backward
    ob = torch_peer.openblas_dir(args.openblas)
    torch2 = torch_peer.torch2_python(args.torch2)
    cfgs = torch_peer.configs(ob, bc.torch_threads(args.threads), system_blas=args.system_blas, torch2=torch2)
    peer = torch_peer.describe(ob, args.system_blas, torch2)
    limits, limits_line = bc.machine_limits(dtlc, ob)
    total = args.warmup + args.steps
    print('gpt_step_vs_torch: GPT-2 small shape (vocab 50257, d 768, 12 heads, hidden 3072, 12 layers, tied), '
          'seq 128, batch 2, AdamW, f32; %d timed steps after %d warm-up, %d round(s); PyTorch layout: %s'
          % (args.steps, args.warmup, args.rounds, args.torch_layout))
    print(bc.cpu_line())
    print(limits_line)
    print('\n'.join(peer))
    print('load before: %s   (busy: %s)' % (bc.loadavg(), bc.busy_processes() or '-'))
    dcfgs = bc.dtl_configs(args.dtl_passive)
    names = [(c[0], c[1]) for c in dcfgs] + [(c[0], c[1]) for c in cfgs]
    res = {k: [] for k, _ in names}
    first = {k: [] for k, _ in names}
    rss = {}
    blas = {}
    loads = [bc.loadavg()]
    with tempfile.TemporaryDirectory(prefix='dtl_bench_gpt_') as tmp:
        dropped = []
        for r in range(args.rounds):
            jobs = dcfgs + [c for c in cfgs if c.key not in dropped]
            for job in bc.rotated(jobs, r):
                if len(job) == 3:
                    metrics = os.path.join(tmp, 'gpt_metrics.jsonl')
                    if os.path.exists(metrics):
                        os.remove(metrics)
                    bc.run_dtlc([dtlc, 'run', SPEC, '--steps', str(total), '--metrics', metrics], metrics, total,
                                cwd=tmp, rss=True, env=job[2])
                    st, _ = bc.read_metrics(metrics)
                    t = bc.step_clock(st, B)
                    res[job[0]].append(bc.steady_step_time(st, B, args.warmup, total))
                    first[job[0]].append(t[1])
                    rss[job[0]] = bc.LAST_MAXRSS_MB[0]
                else:
                    key = job.key
                    _, out = bc.run(torch_peer.worker_cmd(job, os.path.abspath(__file__), '--torch-worker',
                                                          str(job.threads), '--warmup', str(args.warmup),
                                                          '--steps', str(args.steps), '--torch-layout',
                                                          args.torch_layout), env=job.env, rss=True)
                    o = json.loads(out.stdout.strip().splitlines()[-1])
                    res[key].append(o['step_s'])
                    first[key].append(o['first_s'])
                    rss[key] = bc.LAST_MAXRSS_MB[0]
                    blas[key] = '%s; %d parameters' % (torch_peer.probe_line(o, o['threads']), o['params'])
            loads.append(bc.loadavg())
            print('  round %d: %s   load %s' % (r + 1, '  '.join('%s %.0f ms' % (k, 1000 * v[-1])
                                                                for k, v in res.items() if len(v) == r + 1), loads[-1]))
            if r == 0:
                dropped = torch_peer.dropped_after_first_round(res, [c.key for c in cfgs], False)

    best = {k: min(v) for k, v in res.items()}
    med = {k: bc.median(v) for k, v in res.items()}
    tk = [c.key for c in cfgs]
    best_tk, med_tk = torch_peer.pick(res, tk, False)
    ratio_best = best[best_tk] / best['dtl']
    ratio_med = med[med_tk] / med['dtl']
    print()
    print('%-64s %9s %9s  %-22s %12s %10s' % ('ms/step', 'best', 'median', 'all rounds', 'first step', 'peak RSS'))
    for k, label in names:
        print('%-64s %9.0f %9.0f  %-22s %10.0f ms %7s MiB' % (
            label, 1000 * best[k], 1000 * med[k], bc.fmt_list([1000 * x for x in res[k]], '%.0f'),
            1000 * min(first[k]), '%.0f' % rss[k] if rss.get(k) else '?'))
    for k in tk:
        print('  %s: %s' % (dict(names)[k], blas.get(k, '?')))
    print('\n'.join(torch_peer.winner_lines({k: [1000 * x for x in v] for k, v in res.items()}, dict(names), tk,
                                             False, '%.0f ms', dropped)))
    print('\n'.join(torch_peer.version_lines(res, cfgs, False, '%.3f s', torch2)))
    if 'dtl_passive' in res:
        print('diagnostic: dtl with OMP_WAIT_POLICY=passive %.0f ms/step (best) = %.2fx faster than dtl as run, '
              '%.2fx PyTorch' % (1000 * best['dtl_passive'], best['dtl'] / best['dtl_passive'],
                                 best[best_tk] / best['dtl_passive']))
    print('ratio PyTorch / dtl step time (dtl is this many times faster): %.2fx (best of each), %.2fx (median)'
          % (ratio_best, ratio_med))
    print(limits_line)
    print('GEMM work per step: contractions %.1f GFLOP (forward %.1f, backward %.1f) + attention %.2f GFLOP '
          '(dtl recomputes the scores once in the backward); %.1f GFLOP without recomputation'
          % ((fwd + bwd) / 1e9, fwd / 1e9, bwd / 1e9, (att_fwd + att_bwd) / 1e9, useful / 1e9))
    print('dtl GEMM throughput over the whole step: %.1f GFLOP/s (best) = %.0f%% of one core\'s %.0f, %.0f%% of two '
          'cores\'; PyTorch (same useful FLOPs): %.1f GFLOP/s' % (
              flops / best['dtl'] / 1e9, 100 * flops / best['dtl'] / 1e9 / PEAK_1CORE, PEAK_1CORE,
              50 * flops / best['dtl'] / 1e9 / PEAK_1CORE, useful / best[best_tk] / 1e9))
    counts = bc.op_counts(grad)
    print('dtl graph (dtlc check --emit=grad), nodes per op: ' + ', '.join(
        '%s %s %d' % (sec[:3], op, n) for (sec, op), n in sorted(counts.items(), key=lambda kv: -kv[1])[:14]))
    print('load during the runs (1/5/15 min [runnable now]): %s' % ' -> '.join(loads))
    bc.write_result(args.json, {
        'name': 'gpt_step_vs_torch', 'unit': 'ms/step', 'higher_is_better': False,
        'dtl': 1000 * best['dtl'], 'torch': 1000 * best[best_tk], 'torch_config': dict(names)[best_tk],
        'torch_config_median': dict(names)[med_tk], 'limits': limits, 'cpu': bc.cpu_line(),
        'torch_version': torch_peer.version_of(next(c for c in cfgs if c.key == best_tk)),
        'ratio': ratio_best, 'ratio_median': ratio_med, 'rounds': res, 'first_step_s': first, 'peak_rss_mib': rss,
        'labels': dict(names), 'blas': blas, 'gemm_gflop_per_step': flops / 1e9, 'loads': loads, 'peer': peer,
        'warnings': bc.WARNINGS})


if __name__ == '__main__':
    sys.exit(main())
