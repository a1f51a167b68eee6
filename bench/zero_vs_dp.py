#!/usr/bin/python3
"""Benchmark (not a test): ZeRO-1/2/3 next to plain data parallelism on 2 ranks,
and dtl's ZeRO-1 next to PyTorch DDP + ZeroRedundancyOptimizer.

  /usr/bin/python3 bench/zero_vs_dp.py [--rounds 3] [--steps 8] [--warmup 2]
        [--threads 1,2] [--openblas DIR] [--no-torch] [--no-memory]
        [--dtlc PATH] [--json OUT]

1. Step time. The GPT of bench/tp_vs_one.py's STEP_SPEC (6 pre-LN layers,
   d 512, 8 heads, hidden 2048, vocab 8192, sequence 128, learned positions,
   output tied to the token table, AdamW lr 6e-4 betas (0.9, 0.95)
   weight_decay 0.1, f32) at a **global batch of 8** on 2 ranks
   (`dtlc run SPEC --nproc 2 --set train.batch=4`), with the parallel block
     DP          mesh dp = 2; split batch over dp
     zero1       ... ; zero = 1
     zero2       ... ; zero = 2
     zero3       ... ; zero = 3; prefetch = 1
     zero3_nopf  ... ; zero = 3; prefetch = 0
   Step time from rank 0's metrics as in the other benchmarks: t(n) =
   elapsed_s(n) (seconds since the training loop started), mean of steps W+1 .. W+S = (t(W+S) - t(W)) / S. The wait:
   each metrics line's `comm_wait_s` (seconds rank 0 spent blocked in
   collective waits that step) and, at zero = 3, `gather_wait_s` (the part
   spent on gathers of parameters: what prefetching hides; the goal is on
   it), mean over the same steps. Reports ms/step
   best and median over rounds, the ratios to DP (goal for zero = 1: within
   5 %, i.e. <= 1.05), zero = 3's overhead over DP with and without prefetch,
   and the mean wait per step of zero = 3 with and without prefetch and their
   ratio (goal: with prefetch <= 30 % of without). Ratios are same-run: best
   over best and median over median.

2. Memory. The GPT-2-small shape of bench/specs/gpt_step_bench.dtl (vocab
   50257, d 768, 12 layers, 123.75 M parameters; sequence 128, **batch 2 per
   rank**, global 4) at world 2 (dp = 2) for DP and zero = 1, 2, 3: model-state
   bytes per rank (parameters + gradients + optimizer_state), as `dtlc plan
   SPEC --world 2 --format json` plans them ("memory") and as rank 0 holds
   them after one step (`dtlc run ... --steps 1 --memory-report FILE`); the
   ratio zero = 3 / DP (goal <= 0.55); beside them (not gated) the plan's
   communication buffers, peak activations and total, the executor's held
   bytes, and each run's peak RSS (the largest process of the launcher and
   its ranks: /usr/bin/time's maximum resident set, which covers the reaped
   ranks).

3. Next to PyTorch 1.13 (Debian's python3-torch) on the model and global
   batch of part 1: dtl zero = 1 on 2 ranks against PyTorch DDP (gloo) +
   torch.distributed.optim.ZeroRedundancyOptimizer(AdamW, same
   hyper-parameters) on 2 processes, 4 sequences each. The PyTorch GPT is the
   twin of bench/gpt_step_vs_torch.py (the same einsum code, parameters in
   dtl's layouts, tied output) made an nn.Module so DDP can wrap it, at this
   benchmark's shape, on random token ids made once. The ranks are two
   processes of this script (`--torch-worker 2`) started by hand with RANK,
   WORLD_SIZE, MASTER_ADDR, MASTER_PORT (Debian's torch.distributed.run fails
   under Python 3.11); they time S steps after W warm-up steps between two
   dist.barrier()s; each reports resource.getrusage's peak RSS. PyTorch runs
   on OpenBLAS when a folder is found (torch_peer.py, as ddp_vs_torch.py),
   per process in every configuration of torch_peer.thread_grid, and the
   fastest configuration is the peer; its rounds are interleaved with dtl's
   (bench_common.rotated). Reports steps/s, the ratio dtl / PyTorch (> 1:
   dtl faster) and peak RSS per rank of each (dtl: its largest process, as
   in part 2).

   Only ZeRO-1 has a PyTorch peer here: Debian's torch 1.13 FSDP refuses
   CPU-only execution and its gloo backend has no reduce-scatter, so
   zero = 2 and zero = 3 are compared only with dtl's own DP (part 1) and with
   the formulas of docs/plan.md (part 2).

The machine's limits (bench_common.machine_limits: SGEMM rate of gemm_bench
next to dtlc, memcpy bandwidth) and the load (/proc/loadavg) before and after
every round are printed beside the figures. dtlc must be a binary named
`dtlc` (its --nproc ranks re-run it); copy build/bin/dtlc and gemm_bench into
one folder when the build folder is being rebuilt.
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common as bc  # noqa: E402
import torch_peer  # noqa: E402
from tp_vs_one import STEP_SPEC, with_parallel  # noqa: E402

GLOBAL_BATCH, WORLD = 8, 2
V, S, D, H, HID, L = 8192, 128, 512, 8, 2048, 6
EPS = 1e-5
DP = 'mesh dp = 2; split batch over dp'
CONFIGS = [  # key, label, parallel block
    ('dp', 'DP (dp = 2)', DP),
    ('zero1', 'zero = 1', DP + '; zero = 1'),
    ('zero2', 'zero = 2', DP + '; zero = 2'),
    ('zero3', 'zero = 3, prefetch = 1', DP + '; zero = 3; prefetch = 1'),
    ('zero3_nopf', 'zero = 3, prefetch = 0', DP + '; zero = 3; prefetch = 0'),
]
MEM_LEVELS = [('dp', DP), ('zero1', DP + '; zero = 1'), ('zero2', DP + '; zero = 2'), ('zero3', DP + '; zero = 3')]


# ---------------------------------------------------------------- PyTorch side

def torch_gpt(torch):
    """The PyTorch twin of the dtl GPT (bench/gpt_step_vs_torch.py's, as an
    nn.Module at this benchmark's shape)."""
    import math
    import torch.nn.functional as F
    hd = D // H

    def rn(*shape, std=0.02):
        return torch.nn.Parameter(torch.randn(*shape) * std)

    def zeros(*shape):
        return torch.nn.Parameter(torch.zeros(*shape))

    def ones(*shape):
        return torch.nn.Parameter(torch.ones(*shape))

    def block_params():
        return torch.nn.ParameterDict({
            'ln1_weight': ones(D), 'ln1_bias': zeros(D),
            'wq': rn(D, H, hd), 'wk': rn(D, H, hd), 'wv': rn(D, H, hd),
            'bq': zeros(H, hd), 'bk': zeros(H, hd), 'bv': zeros(H, hd),
            'wo': rn(H, hd, D), 'bo': zeros(D),
            'ln2_weight': ones(D), 'ln2_bias': zeros(D),
            'up_weight': rn(D, HID), 'up_bias': zeros(HID),
            'down_weight': rn(HID, D), 'down_bias': zeros(D),
        })

    class Gpt(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = rn(V, D)
            self.wpe = rn(S, D, std=0.01)
            self.lnf_w, self.lnf_b = ones(D), zeros(D)
            self.blocks = torch.nn.ModuleList([torch.nn.Module() for _ in range(L)])
            for b in self.blocks:
                b.p = block_params()
            self.mask = torch.ones(S, S, dtype=torch.bool).triu(1)  # a constant, not a DDP buffer

        def attention(self, x, p):
            q = torch.einsum('bsd,dhk->bshk', x, p['wq']) + p['bq']
            k = torch.einsum('bsd,dhk->bshk', x, p['wk']) + p['bk']
            v = torch.einsum('bsd,dhk->bshk', x, p['wv']) + p['bv']
            scores = torch.einsum('bqhk,bshk->bhqs', q, k) / math.sqrt(hd)
            a = torch.softmax(scores.masked_fill(self.mask, float('-inf')), dim=-1)
            o = torch.einsum('bhqs,bshk->bqhk', a, v)
            return torch.einsum('bqhk,hkd->bqd', o, p['wo']) + p['bo']

        def forward(self, tokens, targets):
            h = self.wte[tokens] + self.wpe
            for b in self.blocks:
                p = b.p
                a = F.layer_norm(h, (D,), p['ln1_weight'], p['ln1_bias'], EPS)
                h = h + self.attention(a, p)
                m = F.layer_norm(h, (D,), p['ln2_weight'], p['ln2_bias'], EPS)
                m = F.gelu(m @ p['up_weight'] + p['up_bias'])
                h = h + (m @ p['down_weight'] + p['down_bias'])
            h = F.layer_norm(h, (D,), self.lnf_w, self.lnf_b, EPS)
            logits = torch.einsum('bsd,vd->bsv', h, self.wte)
            return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))

    return Gpt()


def torch_worker(world, threads, warmup, steps):
    """One rank of PyTorch DDP + ZeroRedundancyOptimizer(AdamW) (RANK,
    WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the environment). Rank 0 prints
    a JSON line with the step time, its BLAS and every rank's peak RSS."""
    import torch
    import torch.distributed as dist
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from ddp_vs_torch import openblas_threads
    torch.set_num_threads(threads)
    rank = int(os.environ['RANK'])
    probe = torch_peer.blas_probe() if rank == 0 else {}  # before the ranks meet
    dist.init_process_group('gloo', rank=rank, world_size=world)
    torch.manual_seed(1337)  # the same initial weights on every rank
    model = torch_gpt(torch)
    nparams = sum(p.numel() for p in model.parameters())
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.AdamW,
                                  lr=6e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    g = torch.Generator().manual_seed(100 + rank)
    batch = GLOBAL_BATCH // world
    tokens = torch.randint(0, V, (batch, S), generator=g)
    targets = torch.randint(0, V, (batch, S), generator=g)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = ddp(tokens, targets)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(warmup):
        step()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    dist.barrier()
    dt = time.perf_counter() - t0
    rss = torch.zeros(world)
    rss[rank] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB -> MiB
    dist.all_reduce(rss)
    bt = torch.tensor([float(openblas_threads() or -1)])
    dist.all_reduce(bt, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(json.dumps(dict(probe, step_s=dt / steps, rss_mib=rss.tolist(), params=nparams,
                              threads=torch.get_num_threads(),
                              blas_threads_max=None if bt.item() < 0 else int(bt.item()))))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # Debian's 1.13 hangs at exit after a gloo group (see ddp_vs_torch.py)


def run_torch(job, warmup, steps, tmp):
    """Starts the WORLD ranks of one PyTorch configuration; rank 0's JSON."""
    cmd = ['/usr/bin/python3', os.path.abspath(__file__), '--torch-worker', str(WORLD),
           '--torch-threads', str(job['threads']), '--warmup', str(warmup), '--steps', str(steps)]
    return bc.run_torch_ranks(cmd, job['env'], WORLD, tmp, 'PyTorch DDP + ZeroRedundancyOptimizer', 1800)


# ---------------------------------------------------------------- dtl side

def run_dtl(dtlc, spec, warmup, steps, tmp, name):
    """One 2-rank run of the step spec: (s/step, mean comm_wait_s per step,
    peak RSS MiB of the largest process)."""
    metrics = os.path.join(tmp, name + '.jsonl')
    if os.path.exists(metrics):
        os.remove(metrics)
    total = warmup + steps
    cmd = [dtlc, 'run', spec, '--nproc', str(WORLD), '--set', 'train.batch=%d' % (GLOBAL_BATCH // WORLD),
           '--steps', str(total), '--no-checkpoints', '--metrics', metrics]
    bc.run_dtlc(cmd, metrics, total, cwd=tmp, rss=True)
    st, _ = bc.read_metrics(metrics)
    def mean(field):
        xs = [st[n].get(field) for n in range(warmup + 1, total + 1)]
        return None if any(x is None for x in xs) else sum(xs) / len(xs)
    return (bc.steady_step_time(st, GLOBAL_BATCH, warmup, total), mean('comm_wait_s'), bc.LAST_MAXRSS_MB[0],
            mean('gather_wait_s'))


def memory_part(dtlc, tmp):
    """Model-state bytes per rank of the GPT-2-small shape at world 2, planned
    and held, per level; peak RSS of each held run."""
    from tp_vs_one import plan_memory, held_memory
    base = open(os.path.join(bc.HERE, 'specs', 'gpt_step_bench.dtl')).read()
    out = {}
    for key, block in MEM_LEVELS:
        spec = os.path.join(tmp, 'gpt2_%s.dtl' % key)
        with open(spec, 'w') as f:
            f.write(with_parallel(base, block))
        plan = plan_memory(dtlc, spec, WORLD)
        held, rss = held_memory(dtlc, spec, WORLD, tmp, 'gpt2_' + key)
        state = ('parameters', 'gradients', 'optimizer_state')
        out[key] = {'plan': plan, 'held': held, 'peak_rss_mib': rss,
                    'planned_model_state': sum(plan[k] for k in state),
                    'held_model_state': sum(held[k] for k in state)}
        print('  %-6s done (load %s)' % (key, bc.loadavg()))
    for key in out:
        for w in ('planned', 'held'):
            out[key]['ratio_%s_vs_dp' % w] = out[key]['%s_model_state' % w] / out['dp']['%s_model_state' % w]
    return out


def mib(b):
    return b / 2**20


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--steps', type=int, default=8, help='timed steps per run (after --warmup)')
    ap.add_argument('--warmup', type=int, default=2)
    ap.add_argument('--no-torch', action='store_true', help='skip the PyTorch peer (part 3)')
    ap.add_argument('--no-memory', action='store_true', help='skip the GPT-2-small memory part (part 2)')
    bc.add_peer_args(ap)
    ap.add_argument('--torch-threads', type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.torch_worker is not None:
        return torch_worker(args.torch_worker, args.torch_threads, args.warmup, args.steps)

    dtlc = bc.dtlc_path(args.dtlc)
    ob = torch_peer.openblas_dir(args.openblas)
    limits, limits_line = bc.machine_limits(dtlc, ob)
    print('zero_vs_dp: GPT 6 layers, d 512, 8 heads, hidden 2048, vocab 8192, seq 128, global batch %d on %d ranks '
          '(%d each), AdamW, f32; %d timed steps after %d warm-up, %d rounds'
          % (GLOBAL_BATCH, WORLD, GLOBAL_BATCH // WORLD, args.steps, args.warmup, args.rounds))
    print(bc.cpu_line())
    print(limits_line)
    peer = [] if args.no_torch else torch_peer.describe(ob, args.system_blas)
    if peer:
        print('\n'.join(peer))
    loads = [bc.loadavg()]
    print('load before: %s   (busy: %s)' % (loads[0], bc.busy_processes() or '-'))
    result = {'name': 'zero_vs_dp', 'cpu': bc.cpu_line(), 'limits': limits, 'limits_line': limits_line,
              'peer': peer, 'warnings': bc.WARNINGS}

    tmp = tempfile.mkdtemp(prefix='dtl_zero_bench_')
    if not args.no_memory:
        print('part 2 first (memory, GPT-2 small shape, world 2, batch 2 per rank), one run per level:')
        result['memory'] = memory_part(dtlc, tmp)
        loads.append(bc.loadavg())

    jobs = []
    for key, label, block in CONFIGS:
        spec = os.path.join(tmp, 'step_%s.dtl' % key)
        with open(spec, 'w') as f:
            f.write(with_parallel(STEP_SPEC, block))
        jobs.append({'key': key, 'kind': 'dtl', 'label': 'dtl ' + label, 'spec': spec})
    torch_keys = []
    if not args.no_torch:
        for c in torch_peer.configs(ob, bc.torch_threads(args.threads), system_blas=args.system_blas):
            blas, threads = c.label.replace('PyTorch ', '').split(', ', 1)
            key = c.key.replace('torch_', 'zero_', 1)
            torch_keys.append(key)
            jobs.append({'key': key, 'kind': 'torch', 'env': c.env, 'threads': c.threads,
                         'label': 'PyTorch %s DDP+ZeRO-opt., each rank %s' % (blas, threads)})
    labels = {j['key']: j['label'] for j in jobs}
    ms = {j['key']: [] for j in jobs}
    wait = {j['key']: [] for j in jobs if j['kind'] == 'dtl'}
    gather_wait = {'zero3': [], 'zero3_nopf': []}  # zero = 3's metrics: the part spent on gathers of parameters
    rss = {j['key']: [] for j in jobs}
    blas = {}
    dropped = []
    for r in range(args.rounds):
        for job in bc.rotated([j for j in jobs if j['key'] not in dropped], r):
            if job['kind'] == 'dtl':
                s, w, m, gw = run_dtl(dtlc, job['spec'], args.warmup, args.steps, tmp, job['key'])
                ms[job['key']].append(1000 * s)
                wait[job['key']].append(w)
                if job['key'] in gather_wait:
                    gather_wait[job['key']].append(gw)
                rss[job['key']].append(m)
            else:
                o = run_torch(job, args.warmup, args.steps, tmp)
                ms[job['key']].append(1000 * o['step_s'])
                rss[job['key']].append(max(o['rss_mib']))
                blas[job['key']] = '%s; BLAS threads on the busiest rank %s; %d parameters; peak RSS per rank %s MiB' % (
                    torch_peer.probe_line(o, o['threads']), o.get('blas_threads_max'), o['params'],
                    bc.fmt_list(o['rss_mib'], '%.0f'))
        loads.append(bc.loadavg())
        print('  round %d: %s   load %s' % (r + 1, '  '.join('%s %.0f ms' % (k, v[-1]) for k, v in ms.items()
                                                            if len(v) == r + 1), loads[-1]))
        if r == 0 and torch_keys:
            dropped = torch_peer.dropped_after_first_round(ms, torch_keys, False)

    best = {k: min(v) for k, v in ms.items()}
    med = {k: bc.median(v) for k, v in ms.items()}
    print()
    print('part 1: dtl on %d ranks, ms/step (rank 0; global batch %d)' % (WORLD, GLOBAL_BATCH))
    print('%-74s %8s %8s  %-26s %10s %8s' % ('', 'best', 'median', 'all rounds', 'wait/step', 'peak RSS'))
    for j in jobs:
        k = j['key']
        w = wait.get(k)
        wtxt = '%.0f ms' % (1000 * bc.median(w)) if w and all(x is not None for x in w) else '-'
        print('%-74s %8.1f %8.1f  %-26s %10s %5.0f MiB' % (labels[k], best[k], med[k], bc.fmt_list(ms[k], '%.0f'),
                                                           wtxt, max(x for x in rss[k] if x) if any(rss[k]) else 0))
    ratios = {}
    for k in ('zero1', 'zero2', 'zero3', 'zero3_nopf'):
        ratios[k + '_vs_dp'] = {'best': best[k] / best['dp'], 'median': med[k] / med['dp']}
    goal = {'zero1_vs_dp': 'goal <= 1.05 (within 5 %)'}
    for k, v in ratios.items():
        print('  step time %-20s %.3f (best / best), %.3f (median / median)  %s%s' % (
            k.replace('_vs_dp', ' / DP:'), v['best'], v['median'],
            '= %+.1f %% over DP' % (100 * (v['best'] - 1)), '   ' + goal[k] if k in goal else ''))
    per_round = [ms['zero1'][i] / ms['dp'][i] for i in range(args.rounds)]
    print('  zero = 1 / DP per round (same round): %s' % bc.fmt_list(per_round, '%.3f'))
    ratios['zero1_vs_dp']['per_round'] = per_round
    wres = {}
    if all(x is not None for k in ('zero3', 'zero3_nopf') for x in wait[k]):
        wp, wn = wait['zero3'], wait['zero3_nopf']
        wres = {'zero3_prefetch_s': wp, 'zero3_no_prefetch_s': wn,
                'ratio_best': min(wp) / min(wn), 'ratio_median': bc.median(wp) / bc.median(wn),
                'per_round': [a / b if b else None for a, b in zip(wp, wn)],
                'all_configs_s': wait}
        print('  comm_wait_s per step, zero = 3 (rank 0, mean of steps %d..%d): prefetch = 1 %.1f ms (best) / %.1f '
              '(median), prefetch = 0 %.1f / %.1f ms' % (args.warmup + 1, args.warmup + args.steps, 1000 * min(wp),
                                                         1000 * bc.median(wp), 1000 * min(wn), 1000 * bc.median(wn)))
        print('  wait with prefetch / without: %.2f (best / best), %.2f (median / median), per round %s   '
              'goal <= 0.30' % (wres['ratio_best'], wres['ratio_median'],
                                bc.fmt_list([x for x in wres['per_round'] if x is not None], '%.2f')))
        print('  (wait per step of every configuration, per round, ms: %s)' % '; '.join(
            '%s %s' % (k, bc.fmt_list([1000 * x for x in v], '%.0f')) for k, v in wait.items()))
        gp, gn = gather_wait['zero3'], gather_wait['zero3_nopf']
        if gp and gn and all(x is not None for x in gp + gn):
            wres['gather_prefetch_s'], wres['gather_no_prefetch_s'] = gp, gn
            wres['gather_ratio_best'], wres['gather_ratio_median'] = min(gp) / min(gn), bc.median(gp) / bc.median(gn)
            print('  of it on gathers of parameters (gather_wait_s): prefetch = 1 %.1f ms (best) / %.1f (median), '
                  'prefetch = 0 %.1f / %.1f ms; with / without %.2f (best / best), %.2f (median / median)   goal <= 0.30'
                  % (1000 * min(gp), 1000 * bc.median(gp), 1000 * min(gn), 1000 * bc.median(gn),
                     wres['gather_ratio_best'], wres['gather_ratio_median']))
    else:
        print('  comm_wait_s missing from the metrics: this dtlc does not write it')
    result['step'] = {'ms_per_step': ms, 'best_ms': best, 'median_ms': med, 'ratios': ratios,
                      'comm_wait': wres, 'peak_rss_mib': rss, 'labels': labels}

    if not args.no_memory:
        mem = result['memory']
        print()
        print('part 2: GPT-2 small shape (vocab 50257, d 768, 12 layers; seq 128, batch 2 per rank), world 2, '
              'MiB per rank (rank 0)')
        print('%-7s %-33s %-33s %9s %9s %9s %9s %9s' % (
            '', '  planned: params+grads+opt.=state', '  held after 1 step: the same', 'plan comm', 'plan act.',
            'plan tot.', 'held exec', 'peak RSS'))
        for key, _ in MEM_LEVELS:
            m = mem[key]
            p, h = m['plan'], m['held']
            print('%-7s %6.0f+%5.0f+%5.0f=%6.0f (%.3f) %6.0f+%5.0f+%5.0f=%6.0f (%.3f) %9.0f %9.0f %9.0f %9.0f %9s' % (
                key, mib(p['parameters']), mib(p['gradients']), mib(p['optimizer_state']),
                mib(m['planned_model_state']), m['ratio_planned_vs_dp'], mib(h['parameters']), mib(h['gradients']),
                mib(h['optimizer_state']), mib(m['held_model_state']), m['ratio_held_vs_dp'],
                mib(p.get('communication', 0)), mib(p.get('peak_activations', 0)), mib(p.get('total', 0)),
                mib(h.get('executor', 0)), '%.0f MiB' % m['peak_rss_mib'] if m['peak_rss_mib'] else '?'))
        print('  model state zero = 3 / DP: %.3f planned, %.3f held   goal <= 0.55   (ratio in brackets: / DP; '
              'peak RSS: the largest process, not gated)' % (mem['zero3']['ratio_planned_vs_dp'],
                                                              mem['zero3']['ratio_held_vs_dp']))

    if torch_keys:
        best_tk, med_tk = torch_peer.pick(ms, torch_keys, False)
        sps = {k: 1000.0 / best[k] for k in ms}
        ratio_best = best[best_tk] / best['zero1']
        ratio_med = med[med_tk] / med['zero1']
        print()
        print('part 3: ZeRO-1 on %d ranks, global batch %d: dtl zero = 1 vs PyTorch DDP + ZeroRedundancyOptimizer '
              '(gloo)' % (WORLD, GLOBAL_BATCH))
        for k in torch_keys:
            print('  %s: %s' % (labels[k], blas.get(k, '?')))
        print('\n'.join('  ' + x for x in torch_peer.winner_lines(ms, labels, torch_keys, False, '%.0f ms', dropped)))
        rss_t = [x for x in rss[best_tk] if x]
        rss_d = [x for x in rss['zero1'] if x]
        print('  steps/s (best): dtl zero = 1 %.3f, PyTorch %.3f (%s)' % (sps['zero1'], sps[best_tk], labels[best_tk]))
        print('  ratio dtl / PyTorch steps/s: %.2fx (best of each), %.2fx (median of each)' % (ratio_best, ratio_med))
        print('  peak RSS per rank: dtl %s MiB (largest process), PyTorch %s (largest rank of each run; per rank: '
              'see its line above)' % ('%.0f' % max(rss_d) if rss_d else '?', '%.0f MiB' % max(rss_t) if rss_t else '?'))
        result['torch'] = {'dtl_zero1_steps_per_s': sps['zero1'], 'torch_steps_per_s': sps[best_tk],
                           'torch_config': labels[best_tk], 'torch_config_median': labels[med_tk],
                           'ratio': ratio_best, 'ratio_median': ratio_med, 'blas': blas, 'dropped': dropped,
                           'peak_rss_mib': {'dtl_zero1': max(rss_d) if rss_d else None,
                                            'torch': max(rss_t) if rss_t else None}}
    print(limits_line)
    print('load during the runs (1/5/15 min [runnable now]): %s' % ' -> '.join(loads))
    result['loads'] = loads
    bc.write_result(args.json, result)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
