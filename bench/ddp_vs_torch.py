#!/usr/bin/python3
"""Benchmark (not a test): 2-rank data-parallel MLP training, dtl vs PyTorch DDP.

  /usr/bin/python3 bench/ddp_vs_torch.py [--rounds 3] [--steps 60] [--warmup 10]
                                          [--openblas DIR] [--system-blas] [--dtl-one-core]
                                          [--dtl-passive] [--dtlc PATH] [--json OUT]

Model: relu MLP 784-1024-1024-10, cross-entropy, SGD lr 0.01 momentum 0.9,
f32 (bench/specs/mlp_bench.dtl), **global batch 256**: 256 on one rank, 128
per rank on two.

Both sides train on the same fixed 2,048 random samples, in dtl's order
(bench_common.mlp_data: .npy files dtl's loader reads; PyTorch slices the
same arrays, rank r taking the r-th half of each global batch).

Each round runs, as separate processes and in a rotating order:
  - dtl, 1 rank:  `dtlc run SPEC --steps W+S --metrics FILE` (batch 256);
  - dtl, 2 ranks: `dtlc run SPEC --nproc 2 --set train.batch=128 --steps W+S
    --metrics FILE` (only rank 0 writes metrics);
  - PyTorch, 1 process (batch 256), and
  - PyTorch DDP, 2 processes, gloo (128 per rank),
    each in every configuration of the peer's grid, per process
    (torch_peer.thread_grid: torch threads 1 and 2, each with OpenBLAS pinned
    to them and on every core; Debian's PyTorch does not pass its thread count
    on to a pthreads OpenBLAS, so each rank's BLAS threads are set with
    OPENBLAS_NUM_THREADS). The peer is the fastest DDP configuration. The DDP
    ranks are two processes of this script (`--torch-worker 2`) started by hand
    with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT: Debian's
    `torch.distributed.run` fails under Python 3.11 (shared/design/measured.md).
PyTorch runs on OpenBLAS when a folder with one is found, else (or also, with
--system-blas) on the system's BLAS (torch_peer.py); PyTorch 2.x (MKL, eager)
joins the grid, 1 process and DDP, when bench/peer_venv.sh's venv exists. The
report prints the torch and BLAS threads each PyTorch process actually had.

Timing, `--steps` S steps after `--warmup` W warm-up steps on both sides:
  - dtl: from rank 0's metrics, t(n) = elapsed_s(n) (seconds since the
    training loop started, at the end of step n), step time
    (t(W+S) - t(W)) / S; start-up excluded;
  - PyTorch: on rank 0, perf_counter around S steps after W steps, with a
    dist.barrier() before and after the timed steps (DDP).
Reports steps/s per round, the best and the median of each configuration, the
ratio dtl 2 ranks / best PyTorch DDP configuration (goal >= 2x, at least
1.5x), the scaling of each side (steps/s with 2 ranks / steps/s with 1, the
same global batch; ideal 2.0 from a one-core base, also as a percentage of
that; PyTorch's base is its 1-process run on 1 torch and 1 BLAS thread), and, as
a sanity line (not a test), how far dtl's 2-rank losses are from its 1-rank
losses over the timed steps (same global batches; expected within 1e-5
relative).

Note on the bases: dtl's 1-rank run uses both cores for its GEMMs (its ranks
get cores / local ranks threads each), PyTorch's 1-process run one thread, so
the two scalings start from different bases. --dtl-one-core adds a diagnostic
dtl 1-rank run pinned to one core (`taskset -c 0`), a base like PyTorch's.
--dtl-passive adds both dtl runs with OMP_WAIT_POLICY=passive (a diagnostic;
dtlc sets that policy itself when the variable is unset).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common as bc  # noqa: E402
import torch_peer  # noqa: E402

SPEC = os.path.join(bc.HERE, 'specs', 'mlp_bench.dtl')
GLOBAL_BATCH, WORLD, FEATURES, H1, H2, CLASSES = 256, 2, 784, 1024, 1024, 10
LOSS_RTOL = 1e-5


def openblas_threads():
    """Threads of the OpenBLAS loaded in this process (None if it is not one)."""
    import ctypes
    with open('/proc/self/maps') as f:
        libs = {line.split()[-1] for line in f if 'blas' in os.path.basename(line.split()[-1])}
    for lib in sorted(libs):
        try:
            fn = ctypes.CDLL(lib).openblas_get_num_threads
        except (OSError, AttributeError):
            continue
        return int(fn())
    return None


def torch_worker(world, threads, warmup, steps, data_dir):
    """One PyTorch process: world 1 a plain model on the whole batch; world > 1
    one DDP rank (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the
    environment) on its share of the global batch. Rank 0 prints a JSON line."""
    import torch
    import torch.distributed as dist
    torch.set_num_threads(threads)
    rank = int(os.environ.get('RANK', '0')) if world > 1 else 0
    # The SGEMM probe only on rank 0, before the ranks meet: two probes at
    # once would measure each other.
    probe = torch_peer.blas_probe() if rank == 0 else {}
    if world > 1:
        dist.init_process_group('gloo', rank=rank, world_size=world)
    step = bc.mlp_torch_step(data_dir, GLOBAL_BATCH // world, rank, world, ddp=world > 1)

    for _ in range(warmup):
        step()
    if world > 1:
        dist.barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    if world > 1:
        dist.barrier()
    dt = time.perf_counter() - t0
    out = dict(probe, world=world, rank=rank, threads=torch.get_num_threads(), blas_threads=openblas_threads(),
               step_s=dt / steps)
    if world > 1:
        bt = torch.tensor([float(-1 if out['blas_threads'] is None else out['blas_threads'])])
        dist.all_reduce(bt, op=dist.ReduceOp.MAX)  # the most BLAS threads of any rank
        out['blas_threads_max'] = None if bt.item() < 0 else int(bt.item())
    if rank == 0:
        print(json.dumps(out))
    if world > 1:
        # Debian's PyTorch 1.13 hangs at interpreter exit after a gloo
        # process group (seen here: both ranks in a futex wait after rank 0
        # had printed, with or without destroy_process_group). The work is
        # done and every rank has passed the last collective: leave at once.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def run_torch(job, warmup, steps, tmp):
    """Runs one PyTorch configuration (1 process, or `world` DDP ranks at
    once); returns rank 0's JSON line."""
    world = job['world']
    cmd = [job['python'], os.path.abspath(__file__), '--torch-worker', str(world),
           '--torch-threads', str(job['threads']), '--warmup', str(warmup), '--steps', str(steps), '--data', tmp]
    if world == 1:
        _, r = bc.run(cmd, env=job['env'])
        return json.loads(r.stdout.strip().splitlines()[-1])
    return bc.run_torch_ranks(cmd, job['env'], world, tmp, 'PyTorch DDP', 900)


def run_dtl(dtlc, job, warmup, steps, tmp):
    """Runs one dtl configuration; returns (seconds per step, process wall,
    {step: loss})."""
    metrics = os.path.join(tmp, 'ddp_metrics.jsonl')
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = [dtlc, 'run', os.path.join(tmp, 'mlp_bench.dtl'), '--steps', str(warmup + steps), '--metrics', metrics]
    if job['nproc'] > 1:
        cmd += ['--nproc', str(job['nproc']), '--set', 'train.batch=%d' % (GLOBAL_BATCH // job['nproc'])]
    cmd = job.get('prefix', []) + cmd
    wall, _ = bc.run_dtlc(cmd, metrics, warmup + steps, cwd=tmp, env=job['env'])
    st, _ = bc.read_metrics(metrics)
    return (bc.steady_step_time(st, GLOBAL_BATCH, warmup, warmup + steps), wall,
            {n: m['loss'] for n, m in st.items()})


def max_rel_diff(a, b, first, last):
    """Largest |a - b| / |a| over steps first+1 .. last (None if a step is missing)."""
    worst = 0.0
    for n in range(first + 1, last + 1):
        if n not in a or n not in b:
            return None
        worst = max(worst, abs(b[n] - a[n]) / max(abs(a[n]), 1e-30))
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--steps', type=int, default=60)
    ap.add_argument('--warmup', type=int, default=10)
    ap.add_argument('--dtl-one-core', action='store_true',
                    help='also run dtl on 1 rank pinned to one core (taskset -c 0; a diagnostic base for '
                         'its scaling, not in the ratio)')
    bc.add_peer_args(ap)
    ap.add_argument('--data', default=None, help=argparse.SUPPRESS)
    ap.add_argument('--torch-threads', type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.torch_worker is not None:
        return torch_worker(args.torch_worker, args.torch_threads, args.warmup, args.steps, args.data)

    dtlc = bc.dtlc_path(args.dtlc)
    ob = torch_peer.openblas_dir(args.openblas)
    torch2 = torch_peer.torch2_python(args.torch2)
    peer = torch_peer.describe(ob, args.system_blas, torch2)
    limits, limits_line = bc.machine_limits(dtlc, ob)

    # The configurations: dicts with key, label, kind ('dtl' or 'torch'),
    # nproc / world, env.
    jobs = []
    for key, label, env in bc.dtl_configs(args.dtl_passive):
        label = 'dtl passive (diag.)' if key == 'dtl_passive' else label
        for n in (1, WORLD):
            jobs.append({'key': '%s_%d' % (key, n), 'kind': 'dtl', 'nproc': n, 'env': env,
                         'label': '%s, %d rank%s (batch %d%s)' % (label, n, '' if n == 1 else 's', GLOBAL_BATCH // n,
                                                                 '' if n == 1 else ' each')})
    if args.dtl_one_core:
        if not shutil.which('taskset'):
            sys.exit('--dtl-one-core needs taskset (util-linux)')
        jobs.append({'key': 'dtl_1core', 'kind': 'dtl', 'nproc': 1, 'env': None, 'prefix': ['taskset', '-c', '0'],
                     'label': 'dtl, 1 rank on 1 core (taskset; diag.)'})
    one_keys, ddp_keys = [], []
    tcfgs = torch_peer.configs(ob, bc.torch_threads(args.threads), system_blas=args.system_blas, torch2=torch2)
    for c in tcfgs:
        blas, threads = c.label.replace('PyTorch ', '').split(', ', 1)
        one_keys.append(c.key)
        jobs.append({'key': c.key, 'kind': 'torch', 'world': 1, 'env': c.env, 'threads': c.threads,
                     'python': c.python, 'label': 'PyTorch %s, 1 process, %s' % (blas, threads)})
        ddp_keys.append(c.key.replace('torch', 'ddp', 1))
        jobs.append({'key': ddp_keys[-1], 'kind': 'torch', 'world': WORLD, 'env': c.env, 'threads': c.threads,
                     'python': c.python, 'label': 'PyTorch DDP %s, %d procs gloo, each %s' % (blas, WORLD, threads)})
    names = [(j['key'], j['label']) for j in jobs]
    labels = dict(names)
    # The DDP runs as configurations of their own (for version_lines).
    ddp_cfgs = [c._replace(key=k, label=labels[k]) for c, k in zip(tcfgs, ddp_keys)]

    print('ddp_vs_torch: MLP 784-1024-1024-10, global batch %d (%d per rank on %d ranks), SGD momentum, f32; '
          '%d timed steps after %d warm-up, %d rounds' % (GLOBAL_BATCH, GLOBAL_BATCH // WORLD, WORLD, args.steps,
                                                          args.warmup, args.rounds))
    print(bc.cpu_line())
    print(limits_line)
    print('\n'.join(peer))
    print('load before: %s   (busy: %s)' % (bc.loadavg(), bc.busy_processes() or '-'))
    res = {k: [] for k, _ in names}
    losses = {k: [] for k, _ in names if k.startswith('dtl')}
    walls = {k: [] for k, _ in names if k.startswith('dtl')}
    blas = {}
    loads = [bc.loadavg()]
    with tempfile.TemporaryDirectory(prefix='dtl_bench_ddp_') as tmp:
        bc.mlp_data(tmp)
        dropped = []
        for r in range(args.rounds):
            for job in bc.rotated([j for j in jobs if j['key'] not in dropped], r):
                if job['kind'] == 'dtl':
                    s, wall, ls = run_dtl(dtlc, job, args.warmup, args.steps, tmp)
                    res[job['key']].append(1.0 / s)
                    walls[job['key']].append(wall)
                    losses[job['key']].append(ls)
                else:
                    out = run_torch(job, args.warmup, args.steps, tmp)
                    res[job['key']].append(1.0 / out['step_s'])
                    blas[job['key']] = torch_peer.probe_line(out, out['threads']) + (
                        '; BLAS threads on the busiest rank: %s' % out.get('blas_threads_max')
                        if job['world'] > 1 else '')
            loads.append(bc.loadavg())
            print('  round %d: %s   load %s' % (r + 1, '  '.join('%s %.2f' % (k, v[-1]) for k, v in res.items()
                                                                if len(v) == r + 1), loads[-1]))
            if r == 0:  # the 1-process and the DDP configurations each against their own fastest
                dropped = (torch_peer.dropped_after_first_round(res, one_keys, True) +
                           torch_peer.dropped_after_first_round(res, ddp_keys, True))

    best = {k: max(v) for k, v in res.items()}
    med = {k: bc.median(v) for k, v in res.items()}
    best_ddp, med_ddp = torch_peer.pick(res, ddp_keys, True)
    best_t1, med_t1 = torch_peer.pick(res, one_keys, True)
    # PyTorch's scaling base: 1 process on one core (torch and BLAS 1 thread),
    # the same BLAS as its best DDP run; the best 1-process run if not run.
    base = torch_peer.one_core_key(best_ddp.replace('ddp', 'torch', 1))
    t1 = base if base in res else best_t1
    d1, d2 = 'dtl_1', 'dtl_%d' % WORLD
    ratio_best = best[d2] / best[best_ddp]
    ratio_med = med[d2] / med[med_ddp]
    scaling = {
        'dtl': {'best': best[d2] / best[d1], 'median': med[d2] / med[d1]},
        'torch': {'best': best[best_ddp] / best[t1], 'median': med[med_ddp] / med[t1]},
    }
    if 'dtl_1core' in res:
        scaling['dtl_vs_1core'] = {'best': best[d2] / best['dtl_1core'], 'median': med[d2] / med['dtl_1core']}

    print()
    print('%-72s %8s %8s   %s' % ('steps/s (rank 0)', 'best', 'median', 'all rounds'))
    for k, label in names:
        print('%-72s %8.2f %8.2f   %s' % (label, best[k], med[k], bc.fmt_list(res[k])))
    for k, label in names:
        if k in blas:
            print('  %s: %s' % (label, blas[k]))
    print('\n'.join(torch_peer.winner_lines(res, labels, ddp_keys, True, '%.2f steps/s', dropped)))
    print('\n'.join(torch_peer.version_lines(res, ddp_cfgs, True, '%.2f steps/s', torch2)))
    print('best PyTorch 1 process: %s, %.2f steps/s' % (labels[best_t1], best[best_t1]))
    print('samples/s (best, global): dtl %d ranks %.0f, PyTorch DDP %.0f; dtl 1 rank %.0f, PyTorch 1 process %.0f'
          % (WORLD, best[d2] * GLOBAL_BATCH, best[best_ddp] * GLOBAL_BATCH, best[d1] * GLOBAL_BATCH,
             best[best_t1] * GLOBAL_BATCH))
    print('ratio dtl %d ranks / best PyTorch DDP %d processes: %.2fx (best of each), %.2fx (median of each)   '
          'goal >= 2x, at least 1.5x' % (WORLD, WORLD, ratio_best, ratio_med))
    print('  (for reference: dtl 1 rank / best PyTorch 1 process: %.2fx best, %.2fx median)'
          % (best[d1] / best[best_t1], med[d1] / med[med_t1]))
    print(limits_line)
    print('scaling, steps/s %d ranks / 1 rank at the same global batch (ideal %.1f from a one-core base):'
          % (WORLD, float(WORLD)))
    for side, what in (('dtl', 'dtl (1 rank uses both cores)'), ('torch', 'PyTorch (base: %s)' % labels[t1]),
                       ('dtl_vs_1core', 'dtl vs its 1-rank run on 1 core (diag.)')):
        if side in scaling:
            sc = scaling[side]
            print('  %-40s %.2f (best) = %3.0f%% of ideal, %.2f (median) = %3.0f%%'
                  % (what, sc['best'], 100 * sc['best'] / WORLD, sc['median'], 100 * sc['median'] / WORLD))
    agree = []
    for r in range(args.rounds):
        agree.append(max_rel_diff(losses[d1][r], losses[d2][r], args.warmup, args.warmup + args.steps))
    worst = None if any(a is None for a in agree) else max(agree)
    if worst is None:
        print('dtl losses, %d ranks vs 1 rank: a step is missing from a metrics file' % WORLD)
    else:
        print('dtl losses, %d ranks vs 1 rank, steps %d..%d: max relative difference %.1e (per round %s): %s'
              % (WORLD, args.warmup + 1, args.warmup + args.steps, worst, bc.fmt_list(agree, '%.1e'),
                 'within %g' % LOSS_RTOL if worst <= LOSS_RTOL else 'NOT within %g' % LOSS_RTOL))
    for k in walls:
        print('dtl process wall time, %s, %d steps incl. start-up: %s s'
              % (labels[k], args.warmup + args.steps, bc.fmt_list(walls[k])))
    print('load during the runs (1/5/15 min [runnable now]): %s' % ' -> '.join(loads))
    bc.write_result(args.json, {
        'name': 'ddp_vs_torch', 'unit': 'steps/s', 'higher_is_better': True,
        'dtl': best[d2], 'torch': best[best_ddp], 'torch_config': labels[best_ddp],
        'torch_config_median': labels[med_ddp], 'torch_1proc_config': labels[best_t1], 'limits': limits,
        'cpu': bc.cpu_line(),
        'ratio': ratio_best, 'ratio_median': ratio_med, 'goal': '>= 2x (at least 1.5x)',
        'scaling': scaling, 'loss_max_rel_diff': worst, 'loss_rel_diffs': agree,
        'rounds': res, 'labels': labels, 'blas': blas, 'loads': loads, 'peer': peer, 'warnings': bc.WARNINGS})


if __name__ == '__main__':
    sys.exit(main())
