#!/usr/bin/python3
"""Benchmark (not a test): MLP 784-1024-1024-10 training steps, dtl vs PyTorch.

  /usr/bin/python3 bench/mlp_vs_torch.py [--rounds 3] [--steps 60] [--warmup 10]
                                          [--dtlc PATH] [--json OUT]

Model: relu MLP 784-1024-1024-10, cross-entropy, batch 256, SGD lr 0.01
momentum 0.9, f32 (bench/specs/mlp_bench.dtl). dtl trains on
`synthetic(seed = 1)` data; PyTorch on random tensors made once.

Each round runs, as separate processes and in a rotating order: dtl, PyTorch
with 1 thread, PyTorch with 2 threads (torch.set_num_threads). Both sides
time `--steps` steps after `--warmup` warm-up steps:
  - dtl: `dtlc run --steps warmup+steps --metrics FILE`; the step time is
    taken from the metrics (t(n) = n * batch / samples_per_s(n), cumulative
    since the loop started), so start-up is excluded: (t(W+S) - t(W)) / S.
  - PyTorch: perf_counter around S steps after W steps.
Reports steps/s per round, best and median of each, the ratio dtl / best
PyTorch configuration (best-of-rounds over best-of-rounds, and median over
median), and the GEMM GFLOP/s dtl reaches: FLOPs of the step's contractions
(from `dtlc check --emit=grad`, 2*M*N*K each) / dtl's step time, against the
134 GFLOP/s one-core f32 peak (268 for two cores).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common as bc  # noqa: E402

SPEC = os.path.join(bc.HERE, 'specs', 'mlp_bench.dtl')
BATCH, FEATURES, H1, H2, CLASSES = 256, 784, 1024, 1024, 10
PEAK_1CORE = 134.0


def torch_worker(threads, warmup, steps):
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(FEATURES, H1), torch.nn.ReLU(),
        torch.nn.Linear(H1, H2), torch.nn.ReLU(),
        torch.nn.Linear(H2, CLASSES))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(BATCH, FEATURES)
    y = torch.randint(0, CLASSES, (BATCH,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    dt = time.perf_counter() - t0
    print(json.dumps({'threads': torch.get_num_threads(), 'step_s': dt / steps}))


def run_torch(threads, warmup, steps):
    _, r = bc.run(['/usr/bin/python3', os.path.abspath(__file__), '--torch-worker', str(threads),
                   '--warmup', str(warmup), '--steps', str(steps)])
    return json.loads(r.stdout.strip().splitlines()[-1])['step_s']


def run_dtl(dtlc, warmup, steps, tmp):
    metrics = os.path.join(tmp, 'mlp_metrics.jsonl')
    if os.path.exists(metrics):
        os.remove(metrics)
    wall, _ = bc.run([dtlc, 'run', SPEC, '--steps', str(warmup + steps), '--metrics', metrics], cwd=tmp)
    st, _ = bc.read_metrics(metrics)
    return bc.steady_step_time(st, BATCH, warmup, warmup + steps), wall


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--steps', type=int, default=60)
    ap.add_argument('--warmup', type=int, default=10)
    ap.add_argument('--dtlc', default=None)
    ap.add_argument('--json', default=None, help='write the results here (for run_all.sh)')
    ap.add_argument('--torch-worker', type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.torch_worker is not None:
        return torch_worker(args.torch_worker, args.warmup, args.steps)

    dtlc = bc.dtlc_path(args.dtlc)
    grad = subprocess.run([dtlc, 'check', SPEC, '--emit=grad'], capture_output=True, text=True, check=True).stdout
    fwd, bwd, rows = bc.contraction_flops(grad)
    n_fwd = sum(1 for r in rows if r[0] == 'forward')
    n_bwd = len(rows) - n_fwd
    flops = fwd + bwd

    print('mlp_vs_torch: MLP 784-1024-1024-10, batch 256, SGD momentum, f32; %d timed steps after %d warm-up, '
          '%d rounds' % (args.steps, args.warmup, args.rounds))
    print('load before: %s   (busy: %s)' % (bc.loadavg(), bc.busy_processes() or '-'))
    res = {'dtl': [], 'torch1': [], 'torch2': [], 'dtl_wall': []}
    loads = [bc.loadavg()]
    order = ['dtl', 'torch1', 'torch2']
    with tempfile.TemporaryDirectory(prefix='dtl_bench_mlp_') as tmp:
        for r in range(args.rounds):
            for who in order[r % 3:] + order[:r % 3]:
                if who == 'dtl':
                    s, wall = run_dtl(dtlc, args.warmup, args.steps, tmp)
                    res['dtl'].append(1.0 / s)
                    res['dtl_wall'].append(wall)
                else:
                    res[who].append(1.0 / run_torch(int(who[-1]), args.warmup, args.steps))
            loads.append(bc.loadavg())
            print('  round %d: dtl %.2f  torch(1 thread) %.2f  torch(2 threads) %.2f steps/s   load %s'
                  % (r + 1, res['dtl'][-1], res['torch1'][-1], res['torch2'][-1], loads[-1]))

    best = {k: max(v) for k, v in res.items() if k != 'dtl_wall'}
    med = {k: bc.median(v) for k, v in res.items() if k != 'dtl_wall'}
    best_torch = max(best['torch1'], best['torch2'])
    med_torch = max(med['torch1'], med['torch2'])
    ratio_best = best['dtl'] / best_torch
    ratio_med = med['dtl'] / med_torch
    gflops_best = flops * best['dtl'] / 1e9
    gflops_med = flops * med['dtl'] / 1e9
    print()
    print('%-22s %10s %10s   %s' % ('steps/s', 'best', 'median', 'all rounds'))
    for k, name in (('dtl', 'dtl'), ('torch1', 'PyTorch, 1 thread'), ('torch2', 'PyTorch, 2 threads')):
        print('%-22s %10.2f %10.2f   %s' % (name, best[k], med[k], bc.fmt_list(res[k])))
    print('samples/s (best): dtl %.0f, PyTorch %.0f' % (best['dtl'] * BATCH, best_torch * BATCH))
    print('ratio dtl / best PyTorch: %.2fx (best of each), %.2fx (median of each)   goal >= 4x'
          % (ratio_best, ratio_med))
    print('GEMMs in dtl\'s step: %d forward + %d backward contractions = %.3f GFLOP/step '
          '(forward %.3f, backward %.3f)' % (n_fwd, n_bwd, flops / 1e9, fwd / 1e9, bwd / 1e9))
    print('dtl GEMM throughput: %.1f GFLOP/s (best), %.1f (median) = %.0f%% of one core\'s %.0f GFLOP/s peak, '
          '%.0f%% of two cores\' %.0f' % (gflops_best, gflops_med, 100 * gflops_best / PEAK_1CORE, PEAK_1CORE,
                                          50 * gflops_best / PEAK_1CORE, 2 * PEAK_1CORE))
    print('(a lower bound on the GEMM kernels\' own rate: the step time also holds the elementwise ops, the '
          'optimiser and the data loader)')
    print('dtl process wall time for %d steps incl. start-up: %s s' % (args.warmup + args.steps,
                                                                      bc.fmt_list(res['dtl_wall'])))
    print('load during the runs: %s' % ' -> '.join(loads))
    bc.write_result(args.json, {
        'name': 'mlp_vs_torch', 'unit': 'steps/s', 'higher_is_better': True,
        'dtl': best['dtl'], 'torch': best_torch,
        'torch_config': '1 thread' if best['torch1'] >= best['torch2'] else '2 threads',
        'ratio': ratio_best, 'ratio_median': ratio_med, 'goal': '>= 4x',
        'rounds': res, 'gemm_gflop_per_step': flops / 1e9, 'gemm_gflops_best': gflops_best,
        'loads': loads})


if __name__ == '__main__':
    sys.exit(main())
