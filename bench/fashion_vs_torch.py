#!/usr/bin/python3
"""Benchmark (not a test): the Fashion-MNIST sample for N epochs, dtl vs PyTorch.

  /usr/bin/python3 bench/fashion_vs_torch.py [--rounds 2] [--epochs 4] [--threads 1,2]
                                              [--openblas DIR] [--system-blas] [--dtlc PATH]
                                              [--json OUT]

dtl: samples/fashion_mnist_mlp.dtl (784-512-512-10, relu, AdamW lr 1e-3
weight_decay 0.01, cosine schedule with warm-up 100 to min_lr 1e-5, batch 128,
shuffle, drop_last, eval and a checkpoint every epoch), copied to a scratch
folder (its checkpoints land there, not in the repo) and run as a user runs it:
`dtlc run SPEC --set train.epochs=N --metrics FILE`.

PyTorch: the same job written plainly: the IDX .gz files read with
gzip + numpy and scaled by 1/255, the same model (weights [in, out] drawn
normal(std 0.02), zero biases, as the stdlib's Linear), AdamW(lr 1e-3,
betas (0.9, 0.999), eps 1e-8, weight_decay 0.01), the learning rate of
runtime/optim/schedule.h set before every step (linear warm-up b*s/w for
s <= w, then m + (b - m) * 0.5 * (1 + cos(pi * (s - w) / (T - w))), steps s
from 1, T = epochs * 468), a fresh shuffle every epoch, the last short batch
dropped; after every epoch the test set is evaluated as dtl does (batches of
128, the last short batch dropped: 9,984 images) and a checkpoint (model +
optimiser state) is saved with torch.save — the same work as the spec's
`eval every 1 epoch` and `checkpoint ... every 1 epoch`.

PyTorch runs in each configuration of its grid (torch_peer.thread_grid: each
thread count of --threads with OpenBLAS pinned to it and on every core), on
OpenBLAS when a folder with one is found, else (or also, with --system-blas)
on the system's BLAS (see torch_peer.py); and when the venv of
bench/peer_venv.sh exists, PyTorch 2.x (MKL) on each thread count, eager and
with `forward` under each --compile-modes mode (its compilation, on the first
training and the first evaluation batch, is inside the wall time). The peer
is the fastest configuration of either version.

Both are timed as whole processes (wall clock, start-up and data loading
included), interleaved round by round. Reports the best and median wall time
of each, the ratio PyTorch / dtl (how many times faster dtl is), and the final
test accuracy of each.
"""
import argparse
import gzip
import json
import math
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common as bc  # noqa: E402
import torch_peer  # noqa: E402

SAMPLE = os.path.join(bc.ROOT, 'samples', 'fashion_mnist_mlp.dtl')
DATA = '/usr/share/datasets/fashion-mnist'
BATCH = 128
LR, MIN_LR, WARMUP, WD = 1e-3, 1e-5, 100, 0.01


def read_idx(path):
    import numpy as np
    with gzip.open(path, 'rb') as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], 'big') for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def cosine_lr(s, total):
    """runtime/optim/schedule.h, cosine with warm-up; s counts from 1."""
    if WARMUP > 0 and s <= WARMUP:
        return LR * s / WARMUP
    if s >= total:
        return MIN_LR
    return MIN_LR + (LR - MIN_LR) * 0.5 * (1 + math.cos(math.pi * (s - WARMUP) / (total - WARMUP)))


def torch_worker(threads, epochs, workdir, compile_mode):
    t_start = time.perf_counter()
    import numpy as np
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(threads)
    torch.manual_seed(42)
    xtr = torch.from_numpy(read_idx(os.path.join(DATA, 'train-images-idx3-ubyte.gz')).reshape(-1, 784)
                           .astype(np.float32) / 255)
    ytr = torch.from_numpy(read_idx(os.path.join(DATA, 'train-labels-idx1-ubyte.gz')).astype(np.int64))
    xte = torch.from_numpy(read_idx(os.path.join(DATA, 't10k-images-idx3-ubyte.gz')).reshape(-1, 784)
                           .astype(np.float32) / 255)
    yte = torch.from_numpy(read_idx(os.path.join(DATA, 't10k-labels-idx1-ubyte.gz')).astype(np.int64))

    def linear(i, o):
        return [(torch.randn(i, o) * 0.02).requires_grad_(), torch.zeros(o, requires_grad=True)]

    params = linear(784, 512) + linear(512, 512) + linear(512, 10)

    def forward(x):
        w1, b1, w2, b2, w3, b3 = params
        h = torch.relu(x @ w1 + b1)
        h = torch.relu(h @ w2 + b2)
        return h @ w3 + b3

    if compile_mode:  # compiled on the first call of each of training and evaluation: inside the wall time
        forward = torch.compile(forward, mode=compile_mode)
    opt = torch.optim.AdamW(params, lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=WD)
    per_epoch = xtr.shape[0] // BATCH
    total = epochs * per_epoch
    g = torch.Generator().manual_seed(42)
    step = 0
    evals = []
    for epoch in range(epochs):
        order = torch.randperm(xtr.shape[0], generator=g)
        for i in range(per_epoch):
            idx = order[i * BATCH:(i + 1) * BATCH]
            step += 1
            for group in opt.param_groups:
                group['lr'] = cosine_lr(step, total)
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(forward(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
            loss.item()
        with torch.no_grad():
            n = xte.shape[0] // BATCH
            correct, loss_sum = 0, 0.0
            for i in range(n):
                logits = forward(xte[i * BATCH:(i + 1) * BATCH])
                y = yte[i * BATCH:(i + 1) * BATCH]
                loss_sum += F.cross_entropy(logits, y).item()
                correct += (logits.argmax(1) == y).sum().item()
            evals.append({'epoch': epoch, 'eval_loss': loss_sum / n, 'eval_accuracy': correct / (n * BATCH)})
        torch.save({'params': [p.detach() for p in params], 'opt': opt.state_dict()},
                   os.path.join(workdir, 'torch_ckpt_%d.pt' % epoch))
    print(json.dumps({'wall_s': time.perf_counter() - t_start, 'evals': evals, 'steps': step,
                      'version': torch.__version__}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--rounds', type=int, default=2)
    ap.add_argument('--epochs', type=int, default=4)
    bc.add_peer_args(ap)
    bc.add_compile_arg(ap)
    ap.add_argument('--workdir', default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.torch_worker is not None:
        return torch_worker(args.torch_worker, args.epochs, args.workdir, args.compile)

    dtlc = bc.dtlc_path(args.dtlc)
    ob = torch_peer.openblas_dir(args.openblas)
    torch2 = torch_peer.torch2_python(args.torch2)
    cfgs = torch_peer.configs(ob, bc.torch_threads(args.threads), system_blas=args.system_blas, torch2=torch2,
                              compile_modes=bc.compile_modes(args.compile_modes))
    peer = torch_peer.describe(ob, args.system_blas, torch2)
    limits, limits_line = bc.machine_limits(dtlc, ob)
    print('fashion_vs_torch: samples/fashion_mnist_mlp.dtl for %d epochs (%d steps of batch %d), %d rounds'
          % (args.epochs, args.epochs * (60000 // BATCH), BATCH, args.rounds))
    print(bc.cpu_line())
    print(limits_line)
    print('\n'.join(peer))
    print('load before: %s   (busy: %s)' % (bc.loadavg(), bc.busy_processes() or '-'))
    dcfgs = bc.dtl_configs(args.dtl_passive)
    names = [(c[0], c[1]) for c in dcfgs] + [(c[0], c[1]) for c in cfgs]
    wall = {k: [] for k, _ in names}
    acc = {k: [] for k, _ in names}
    loads = [bc.loadavg()]
    with tempfile.TemporaryDirectory(prefix='dtl_bench_fashion_') as tmp:
        spec = os.path.join(tmp, 'fashion_mnist_mlp.dtl')
        shutil.copyfile(SAMPLE, spec)
        dropped = []
        for r in range(args.rounds):
            jobs = dcfgs + [c for c in cfgs if c.key not in dropped]
            for job in bc.rotated(jobs, r):
                if len(job) == 3:
                    metrics = os.path.join(tmp, 'metrics.jsonl')
                    if os.path.exists(metrics):
                        os.remove(metrics)
                    shutil.rmtree(os.path.join(tmp, 'runs'), ignore_errors=True)
                    w, _ = bc.run_dtlc([dtlc, 'run', spec, '--set', 'train.epochs=%d' % args.epochs,
                                        '--metrics', metrics], metrics, args.epochs * (60000 // BATCH), cwd=tmp,
                                       env=job[2])
                    _, evals = bc.read_metrics(metrics)
                    wall[job[0]].append(w)
                    acc[job[0]].append(evals[-1]['eval_accuracy'])
                else:
                    key = job.key
                    w, out = bc.run(torch_peer.worker_cmd(job, os.path.abspath(__file__), '--torch-worker',
                                                          str(job.threads), '--epochs', str(args.epochs),
                                                          '--workdir', tmp), env=job.env)
                    res = json.loads(out.stdout.strip().splitlines()[-1])
                    wall[key].append(w)
                    acc[key].append(res['evals'][-1]['eval_accuracy'])
            loads.append(bc.loadavg())
            print('  round %d: %s   load %s' % (r + 1, '  '.join('%s %.1f s (acc %.4f)' % (k, wall[k][-1], acc[k][-1])
                                                                for k, _ in names if len(wall[k]) == r + 1), loads[-1]))
            if r == 0:
                dropped = torch_peer.dropped_after_first_round(wall, [c.key for c in cfgs], False)

    best = {k: min(v) for k, v in wall.items()}
    med = {k: bc.median(v) for k, v in wall.items()}
    tk = [c.key for c in cfgs]
    best_tk, med_tk = torch_peer.pick(wall, tk, False)
    ratio_best = best[best_tk] / best['dtl']
    ratio_med = med[med_tk] / med['dtl']
    print()
    print('%-64s %9s %9s   %-22s %s' % ('wall time, s', 'best', 'median', 'all rounds', 'final test accuracy'))
    for k, label in names:
        print('%-64s %9.1f %9.1f   %-22s %s' % (label, best[k], med[k], bc.fmt_list(wall[k], '%.1f'),
                                                bc.fmt_list(acc[k], '%.4f')))
    print('\n'.join(torch_peer.winner_lines(wall, dict(names), tk, False, '%.1f s', dropped)))
    print('\n'.join(torch_peer.version_lines(wall, cfgs, False, '%.1f s', torch2)))
    if 'dtl_passive' in wall:
        print('diagnostic: dtl with OMP_WAIT_POLICY=passive %.1f s (best) = %.2fx faster than dtl as run, %.2fx '
              'PyTorch' % (best['dtl_passive'], best['dtl'] / best['dtl_passive'], best[best_tk] / best['dtl_passive']))
    print('ratio PyTorch / dtl wall time (dtl is this many times faster): %.2fx (best of each), %.2fx (median)'
          % (ratio_best, ratio_med))
    print(limits_line)
    print('final test accuracy (9,984 test images, last round): dtl %.4f, best PyTorch config %.4f'
          % (acc['dtl'][-1], acc[best_tk][-1]))
    print('load during the runs (1/5/15 min [runnable now]): %s' % ' -> '.join(loads))
    bc.write_result(args.json, {
        'name': 'fashion_vs_torch', 'unit': 's (wall, %d epochs)' % args.epochs, 'higher_is_better': False,
        'dtl': best['dtl'], 'torch': best[best_tk], 'torch_config': dict(names)[best_tk],
        'torch_config_median': dict(names)[med_tk], 'limits': limits,
        'torch_version': torch_peer.version_of(next(c for c in cfgs if c.key == best_tk)), 'cpu': bc.cpu_line(),
        'ratio': ratio_best, 'ratio_median': ratio_med, 'rounds': wall, 'accuracy': acc,
        'labels': dict(names), 'loads': loads, 'peer': peer, 'warnings': bc.WARNINGS})


if __name__ == '__main__':
    sys.exit(main())
