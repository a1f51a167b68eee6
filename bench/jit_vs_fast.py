#!/usr/bin/python3
"""Benchmark (not a test): step times of `--kernels fast` and `--kernels jit`
side by side, on 1 and 2 cores (taskset: dtlc uses the cores it may run on).

  /usr/bin/python3 bench/jit_vs_fast.py [--rounds 2] [--threads 1,2] [--only mlp,fashion,char_gpt,gpt2_step]
                                   [--dtlc PATH]

Specs: the MLP of bench/mlp_vs_torch.py (its npy data, steps 10+60), the
Fashion-MNIST sample (steps 10+100 of its real data), samples/char_gpt.dtl
(steps 2+20) and the GPT-2-small-shaped step of bench/specs/gpt_step_bench.dtl
(steps 1+3). Each round runs every
configuration once, in a rotated order (so a load change hits them alike);
the jit's object cache is a fresh folder per run, so every jit run compiles.
Reports the best and median ms/step of the timed steps (the warm-up steps
excluded: allocation, page faults, the first call of each kernel), and
jit / fast.
"""
import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common as bc  # noqa: E402

ROOT = os.path.dirname(bc.HERE)
SPECS = [('mlp', None, 10, 60),  # the spec bc.mlp_data writes
         ('fashion', os.path.join(ROOT, 'samples', 'fashion_mnist_mlp.dtl'), 10, 100),
         ('char_gpt', os.path.join(ROOT, 'samples', 'char_gpt.dtl'), 2, 20),
         ('gpt2_step', os.path.join(bc.HERE, 'specs', 'gpt_step_bench.dtl'), 1, 3)]


def step_ms(dtlc, spec, kernels, threads, warmup, steps, tmp):
    metrics = os.path.join(tmp, 'metrics.jsonl')
    if os.path.exists(metrics):
        os.remove(metrics)
    env = dict(os.environ)
    env['XDG_CACHE_HOME'] = tempfile.mkdtemp(prefix='cache_', dir=tmp)
    cores = ','.join(str(c) for c in sorted(os.sched_getaffinity(0))[:threads])
    total = warmup + steps
    bc.run_dtlc(['taskset', '-c', cores, dtlc, 'run', spec, '--steps', str(total), '--metrics', metrics,
                 '--kernels', kernels], metrics, total, cwd=tmp, env=env)
    st, _ = bc.read_metrics(metrics)
    return 1000 * bc.steady_step_time(st, 1, warmup, total)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--rounds', type=int, default=2)
    ap.add_argument('--threads', default='1,2')
    ap.add_argument('--dtlc', default=None)
    ap.add_argument('--only', default=','.join(s[0] for s in SPECS), help='specs to run, comma-separated')
    args = ap.parse_args()
    only = args.only.split(',')
    dtlc = bc.dtlc_path(args.dtlc)
    threads = [int(t) for t in args.threads.split(',')]
    jobs = [(name, spec, w, s, k, t) for name, spec, w, s in SPECS if name in only
            for t in threads for k in ('fast', 'jit')]
    print('load before: %s' % bc.loadavg())
    with tempfile.TemporaryDirectory(prefix='dtl_bench_jit_') as tmp:
        mlp = bc.mlp_data(tmp)
        jobs = [(n, spec or mlp, w, s, k, t) for n, spec, w, s, k, t in jobs]
        res = {j: [] for j in jobs}
        for r in range(args.rounds):
            for job in bc.rotated(jobs, r):
                name, spec, w, s, k, t = job
                res[job].append(step_ms(dtlc, spec, k, t, w, s, tmp))
    print('load after: %s' % bc.loadavg())
    print('%-10s %7s %-5s %10s %10s %10s' % ('spec', 'threads', 'kern', 'best ms', 'median ms', 'jit/fast'))
    for name, _, w, s in SPECS:
        for t in threads if name in only else []:
            times = {j[4]: xs for j, xs in res.items() if j[0] == name and j[5] == t}
            fast = min(times['fast'])
            for k in ('fast', 'jit'):
                xs = times[k]
                ratio = '%.3f' % (min(xs) / fast) if k == 'jit' else ''
                print('%-10s %7d %-5s %10.1f %10.1f %10s' % (name, t, k, min(xs), statistics.median(xs), ratio))


if __name__ == '__main__':
    main()
