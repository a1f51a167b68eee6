#!/usr/bin/python3
"""Benchmark (not a test): MLP 784-1024-1024-10 training steps, dtl vs PyTorch.

  /usr/bin/python3 bench/mlp_vs_torch.py [--rounds 3] [--steps 60] [--warmup 10]
                                          [--openblas DIR] [--system-blas] [--dtlc PATH]
                                          [--json OUT]

Model: relu MLP 784-1024-1024-10, cross-entropy, batch 256, SGD lr 0.01
momentum 0.9, f32 (bench/specs/mlp_bench.dtl). Both train on the same fixed
2,048 random samples, in order (bench_common.mlp_data: .npy files dtl's
loader reads; PyTorch slices the same arrays).

Each round runs, as separate processes and in a rotating order: dtl, then
PyTorch in each configuration of its grid (torch_peer.thread_grid: torch
threads 1 and 2, each with OpenBLAS pinned to them and on every core), on
OpenBLAS when a folder with one is found, else (or also, with --system-blas)
on the system's BLAS (see torch_peer.py: Debian's PyTorch uses whatever
libblas.so.3 is installed, which is the slow netlib reference BLAS when only
libblas3 is); and when the venv of bench/peer_venv.sh exists, PyTorch 2.x
(MKL) on torch threads 1 and 2, eager and under each --compile-modes mode
(the first step, which compiles, is outside the timed steps and reported
apart). The peer is the fastest configuration of either version.
Both sides time `--steps` steps after `--warmup` warm-up steps:
  - dtl: `dtlc run --steps warmup+steps --metrics FILE`; the step time comes
    from the metrics (t(n) = elapsed_s(n), seconds since the training loop
    started), so start-up is excluded: (t(W+S) - t(W)) / S;
  - PyTorch: perf_counter around S steps after W steps.
Reports steps/s per round, the best and the median of each configuration, which
PyTorch configuration won, the ratio dtl / best PyTorch configuration (best over best and median over
median), and the GEMM GFLOP/s dtl reaches: FLOPs of the step's contractions
(`dtlc check --emit=grad`, 2*M*N*K each) / dtl's step time, against the
134 GFLOP/s one-core peak of measured.md (268 for two) and this CPU's own
estimated peak.
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
import torch_peer  # noqa: E402

SPEC = os.path.join(bc.HERE, 'specs', 'mlp_bench.dtl')
BATCH, FEATURES, H1, H2, CLASSES = 256, 784, 1024, 1024, 10
PEAK_1CORE = 134.0


def torch_worker(threads, warmup, steps, data_dir, compile_mode):
    import torch
    torch.set_num_threads(threads)
    probe = torch_peer.blas_probe()
    step = bc.mlp_torch_step(data_dir, BATCH, compile_mode=compile_mode)

    t0 = time.perf_counter()
    step()  # with compile_mode: compiles, so it is timed apart
    first_s = time.perf_counter() - t0
    for _ in range(warmup - 1):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    dt = time.perf_counter() - t0
    print(json.dumps(dict(probe, threads=torch.get_num_threads(), step_s=dt / steps, first_step_s=first_s,
                          version=torch.__version__)))


def run_torch(cfg, warmup, steps, data_dir):
    _, r = bc.run(torch_peer.worker_cmd(cfg, os.path.abspath(__file__), '--torch-worker', str(cfg.threads),
                                        '--warmup', str(warmup), '--steps', str(steps), '--data', data_dir),
                  env=cfg.env)
    return json.loads(r.stdout.strip().splitlines()[-1])


def run_dtl(dtlc, warmup, steps, tmp, env=None):
    metrics = os.path.join(tmp, 'mlp_metrics.jsonl')
    if os.path.exists(metrics):
        os.remove(metrics)
    wall, _ = bc.run_dtlc([dtlc, 'run', os.path.join(tmp, 'mlp_bench.dtl'), '--steps', str(warmup + steps), '--metrics', metrics],
                          metrics, warmup + steps, cwd=tmp, env=env)
    st, _ = bc.read_metrics(metrics)
    return bc.steady_step_time(st, BATCH, warmup, warmup + steps), wall


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--steps', type=int, default=60)
    ap.add_argument('--warmup', type=int, default=10)
    bc.add_peer_args(ap)
    bc.add_compile_arg(ap)
    ap.add_argument('--data', default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.torch_worker is not None:
        return torch_worker(args.torch_worker, args.warmup, args.steps, args.data, args.compile)

    dtlc = bc.dtlc_path(args.dtlc)
    grad = subprocess.run([dtlc, 'check', SPEC, '--emit=grad'], capture_output=True, text=True, check=True).stdout
    fwd, bwd, rows = bc.contraction_flops(grad)
    n_fwd = sum(1 for r in rows if r[0] == 'forward')
    n_bwd = len(rows) - n_fwd
    flops = fwd + bwd
    ob = torch_peer.openblas_dir(args.openblas)
    torch2 = torch_peer.torch2_python(args.torch2)
    cfgs = torch_peer.configs(ob, bc.torch_threads(args.threads), system_blas=args.system_blas, torch2=torch2,
                              compile_modes=bc.compile_modes(args.compile_modes))
    peer = torch_peer.describe(ob, args.system_blas, torch2)
    peak, _ = bc.cpu_peak_gflops()
    limits, limits_line = bc.machine_limits(dtlc, ob)

    print('mlp_vs_torch: MLP 784-1024-1024-10, batch 256, SGD momentum, f32; %d timed steps after %d warm-up, '
          '%d rounds' % (args.steps, args.warmup, args.rounds))
    print(bc.cpu_line())
    print(limits_line)
    print('\n'.join(peer))
    print('load before: %s   (busy: %s)' % (bc.loadavg(), bc.busy_processes() or '-'))
    dcfgs = bc.dtl_configs(args.dtl_passive)
    names = [(c[0], c[1]) for c in dcfgs] + [(c[0], c[1]) for c in cfgs]
    res = {k: [] for k, _ in names}
    blas = {}
    compile_s = {}  # first step (torch.compile's compilation) per round of each compiled configuration
    walls = []
    loads = [bc.loadavg()]
    with tempfile.TemporaryDirectory(prefix='dtl_bench_mlp_') as tmp:
        bc.mlp_data(tmp)
        dropped = []
        for r in range(args.rounds):
            jobs = dcfgs + [c for c in cfgs if c.key not in dropped]
            for job in bc.rotated(jobs, r):
                if len(job) == 3:
                    s, wall = run_dtl(dtlc, args.warmup, args.steps, tmp, env=job[2])
                    res[job[0]].append(1.0 / s)
                    if job[0] == 'dtl':
                        walls.append(wall)
                else:
                    out = run_torch(job, args.warmup, args.steps, tmp)
                    res[job[0]].append(1.0 / out['step_s'])
                    blas[job.key] = torch_peer.probe_line(out, out['threads'])
                    if job.compile:
                        compile_s.setdefault(job.key, []).append(out['first_step_s'])
            loads.append(bc.loadavg())
            print('  round %d: %s   load %s' % (r + 1, '  '.join('%s %.2f' % (k, v[-1]) for k, v in res.items()
                                                                if len(v) == r + 1), loads[-1]))
            if r == 0:
                dropped = torch_peer.dropped_after_first_round(res, [c.key for c in cfgs], True)

    best = {k: max(v) for k, v in res.items()}
    med = {k: bc.median(v) for k, v in res.items()}
    tk = [c.key for c in cfgs]
    best_tk, med_tk = torch_peer.pick(res, tk, True)
    ratio_best = best['dtl'] / best[best_tk]
    ratio_med = med['dtl'] / med[med_tk]
    gflops_best = flops * best['dtl'] / 1e9
    gflops_med = flops * med['dtl'] / 1e9
    print()
    print('%-64s %8s %8s   %s' % ('steps/s', 'best', 'median', 'all rounds'))
    for k, label in names:
        print('%-64s %8.2f %8.2f   %s' % (label, best[k], med[k], bc.fmt_list(res[k])))
    for k in tk:
        print('  %s: %s' % (dict(names)[k], blas.get(k, '?')))
    print('\n'.join(torch_peer.winner_lines(res, dict(names), tk, True, '%.2f steps/s', dropped)))
    print('\n'.join(torch_peer.version_lines(res, cfgs, True, '%.2f steps/s', torch2)))
    for k, v in compile_s.items():
        print('  %s: first step (compilation, not in the step time) %s s' % (dict(names)[k], bc.fmt_list(v, '%.1f')))
    if 'dtl_passive' in res:
        print('diagnostic: dtl with OMP_WAIT_POLICY=passive %.2f steps/s (best) = %.2fx dtl as run, %.2fx best PyTorch'
              % (best['dtl_passive'], best['dtl_passive'] / best['dtl'], best['dtl_passive'] / best[best_tk]))
    print('samples/s (best): dtl %.0f, PyTorch %.0f' % (best['dtl'] * BATCH, best[best_tk] * BATCH))
    print('ratio dtl / best PyTorch: %.2fx (best of each), %.2fx (median of each)   goal >= 1.25x (issue 11)'
          % (ratio_best, ratio_med))
    print(limits_line)
    print('GEMMs in dtl\'s step: %d forward + %d backward contractions (the first layer\'s input grad is not '
          'derived) = %.3f GFLOP/step (forward %.3f, backward %.3f)' % (n_fwd, n_bwd, flops / 1e9, fwd / 1e9,
                                                                       bwd / 1e9))
    print('dtl GEMM throughput over the whole step: %.1f GFLOP/s (best), %.1f (median) = %.0f%% of the %.0f GFLOP/s '
          'one-core peak of measured.md, %.0f%% of two cores (%.0f); this CPU: %.0f%% of ~%.0f per core'
          % (gflops_best, gflops_med, 100 * gflops_best / PEAK_1CORE, PEAK_1CORE, 50 * gflops_best / PEAK_1CORE,
             2 * PEAK_1CORE, 100 * gflops_best / peak, peak))
    print('(a lower bound on the GEMM kernels\' own rate: the step time also holds the elementwise ops, the '
          'optimiser and the data loader; bench/gemm_bench measures the kernels alone)')
    print('dtl process wall time for %d steps incl. start-up: %s s' % (args.warmup + args.steps, bc.fmt_list(walls)))
    print('load during the runs (1/5/15 min [runnable now]): %s' % ' -> '.join(loads))
    bc.write_result(args.json, {
        'name': 'mlp_vs_torch', 'unit': 'steps/s', 'higher_is_better': True,
        'dtl': best['dtl'], 'torch': best[best_tk], 'torch_config': dict(names)[best_tk],
        'torch_config_median': dict(names)[med_tk], 'torch_version': torch_peer.version_of(
            next(c for c in cfgs if c.key == best_tk)), 'compile_first_step_s': compile_s,
        'ratio': ratio_best, 'ratio_median': ratio_med, 'goal': '>= 1.25x',
        'rounds': res, 'labels': dict(names), 'blas': blas, 'gemm_gflop_per_step': flops / 1e9,
        'gemm_gflops_best': gflops_best, 'loads': loads, 'peer': peer, 'limits': limits, 'cpu': bc.cpu_line(),
        'warnings': bc.WARNINGS})


if __name__ == '__main__':
    sys.exit(main())
