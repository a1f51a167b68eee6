"""Shared helpers of the bench/*_vs_torch.py benchmarks (not a test).

Each benchmark runs dtl (`dtlc run`) and its PyTorch twin as separate
processes, interleaved round by round, and reports the best and the median of
each side together with the machine load. Run the scripts with
/usr/bin/python3: Debian's PyTorch is installed for that interpreter only.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import socket
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def dtlc_path(arg=None):
    p = arg or os.environ.get('DTLC') or os.path.join(ROOT, 'build', 'bin', 'dtlc')
    p = os.path.abspath(p)
    if not os.access(p, os.X_OK):
        sys.exit('no dtlc at %s (build first, or pass --dtlc / set DTLC)' % p)
    return p


_last_cpu_times = None


def _cpu_times():
    with open('/proc/stat') as f:
        return [int(x) for x in f.readline().split()[1:9]]


def loadavg():
    """1/5/15-minute load averages and, in brackets, the threads runnable
    right now (this benchmark's own included); from the second call on, the
    share of CPU time the hypervisor stole since the previous call. On a
    shared host a few % of steal already makes a 2-thread figure wander
    (2026-12-03: 23-26 % steal doubled dtl's Fashion wall time from one run
    to the next while the load average stayed near 1.5)."""
    global _last_cpu_times
    with open('/proc/loadavg') as f:
        a = f.read().split()
    text = '%s %s %s [%s]' % (a[0], a[1], a[2], a[3].split('/')[0])
    try:
        now = _cpu_times()
    except (OSError, ValueError):
        return text
    if _last_cpu_times is not None:
        d = [y - x for x, y in zip(_last_cpu_times, now)]
        total = sum(d)
        if total > 0:
            text += ' steal %.0f%%' % (100.0 * d[7] / total)
    _last_cpu_times = now
    return text


def busy_processes(limit=4):
    """The busiest other processes right now (name, %cpu), for the report."""
    try:
        out = subprocess.run(['ps', '-eo', 'pcpu,comm', '--sort=-pcpu', '--no-headers'],
                             capture_output=True, text=True, timeout=5).stdout
    except Exception:  # pragma: no cover
        return ''
    rows = []
    for line in out.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[1] not in ('ps',) and float(parts[0]) >= 5.0:
            rows.append('%s %s%%' % (parts[1].strip(), parts[0]))
        if len(rows) >= limit:
            break
    return ', '.join(rows)


WARNINGS = []


LAST_MAXRSS_MB = [None]  # peak resident memory of the last run(..., rss=True), MiB


def run(cmd, cwd=None, env=None, timeout=None, check=True, rss=False):
    """Runs cmd; returns (wall seconds, CompletedProcess). Exits on failure
    unless check is False (then the caller looks at returncode). With rss,
    the command runs under /usr/bin/time and its peak RSS lands in
    LAST_MAXRSS_MB[0]."""
    LAST_MAXRSS_MB[0] = None
    rss_file = None
    if rss and os.access('/usr/bin/time', os.X_OK):
        fd, rss_file = tempfile.mkstemp(prefix='dtl_bench_rss_')
        os.close(fd)
        cmd = ['/usr/bin/time', '-f', '%M', '-o', rss_file] + list(cmd)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t0
    if rss_file:
        try:
            with open(rss_file) as f:
                LAST_MAXRSS_MB[0] = int(f.read().strip().splitlines()[-1]) / 1024
        except (ValueError, IndexError):
            pass
        os.remove(rss_file)
    if r.returncode != 0 and check:
        sys.stderr.write('$ %s\n%s%s' % (' '.join(cmd), r.stdout[-4000:], r.stderr[-4000:]))
        sys.exit('command failed with status %d' % r.returncode)
    return wall, r


def run_dtlc(cmd, metrics, want_steps, cwd=None, rss=False, env=None):
    """Runs a `dtlc run`; a non-zero exit after every step's metrics line was
    written (e.g. a crash at exit) is reported as a warning, not a failure.
    Without --out the run gets a fresh run folder, removed afterwards: dtlc
    refuses a folder that already holds a run, and benches repeat runs."""
    out = None
    if '--out' not in cmd:
        out = tempfile.mkdtemp(prefix='dtl_bench_run_')
        cmd = list(cmd) + ['--out', out]
    try:
        wall, r = run(cmd, cwd=cwd, check=False, rss=rss, env=env)
    finally:
        if out:
            shutil.rmtree(out, ignore_errors=True)
    if r.returncode != 0:
        steps = read_metrics(metrics)[0] if os.path.exists(metrics) else {}
        if len(steps) < want_steps:
            sys.stderr.write('$ %s\n%s%s' % (' '.join(cmd), r.stdout[-4000:], r.stderr[-4000:]))
            sys.exit('dtlc failed with status %d after %d of %d steps' % (r.returncode, len(steps), want_steps))
        w = 'dtlc exited with status %d after finishing all %d steps (crash at exit?)' % (r.returncode, want_steps)
        if w not in WARNINGS:
            WARNINGS.append(w)
            sys.stderr.write('warning: ' + w + '\n')
    return wall, r


def read_metrics(path):
    steps, evals = {}, []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            m = json.loads(line)
            if 'eval_loss' in m:
                evals.append(m)
            elif 'loss' in m:
                steps[int(m['step'])] = m
    return steps, evals


def step_clock(steps, batch):
    """Seconds since the training loop started, at the end of each step:
    dtl's `elapsed_s` (the loop starts after start-up: parsing, graph,
    parameter init). `batch` is unused (kept for the callers)."""
    return {n: m['elapsed_s'] for n, m in steps.items() if m.get('elapsed_s') is not None}


def steady_step_time(steps, batch, first, last):
    """Mean seconds per step over steps first+1 .. last (warm-up excluded)."""
    t = step_clock(steps, batch)
    return (t[last] - t[first]) / (last - first)


def best(xs, lower_is_better=True):
    return min(xs) if lower_is_better else max(xs)


def median(xs):
    return statistics.median(xs)


def fmt_list(xs, f='%.2f'):
    return '[' + ', '.join(f % x for x in xs) + ']'


def contraction_flops(grad_text):
    """FLOPs of every `contract` node of `dtlc check SPEC --emit=grad`.

    A contraction of a and b costs 2 * prod(sizes of all distinct dim names of
    a and b) (the output's dims are a subset). Returns (forward, backward,
    list of (section, node, flops, dims)). Other ops that run GEMMs inside
    (attention) are not counted here."""
    shapes = {}
    rows = []
    section = 'forward'
    node_re = re.compile(r'^\s*%(\d+) = ([\w.]+)\(([^)]*)\)[^:]*: \w+\[([^\]]*)\]')
    for line in grad_text.splitlines():
        if line.startswith('backward'):
            section = 'backward'
        m = node_re.match(line)
        if not m:
            continue
        nid, op, args, dims = m.groups()
        shape = {}
        for d in dims.split(','):
            d = d.strip()
            if '=' in d:
                k, v = d.split('=')
                shape[k.strip()] = int(v)
        shapes[int(nid)] = shape
        if op == 'contract':
            a, b = [int(x.strip().lstrip('%')) for x in args.split(',')]
            alld = dict(shapes[a])
            alld.update(shapes[b])
            f = 2
            for v in alld.values():
                f *= v
            rows.append((section, int(nid), f, alld))
    fwd = sum(r[2] for r in rows if r[0] == 'forward')
    bwd = sum(r[2] for r in rows if r[0] == 'backward')
    return fwd, bwd, rows


def op_counts(grad_text):
    """{(section, op): count} of `dtlc check --emit=grad`."""
    counts = {}
    section = 'forward'
    for line in grad_text.splitlines():
        if line.startswith('backward'):
            section = 'backward'
        m = re.match(r'^\s*%\d+ = ([\w.]+)\(', line)
        if m:
            counts[(section, m.group(1))] = counts.get((section, m.group(1)), 0) + 1
    return counts


MLP_SPEC = os.path.join(HERE, 'specs', 'mlp_bench.dtl')


def mlp_data(tmp, samples=2048, features=784, classes=10):
    """The MLP benchmarks' training set, the same for dtl and PyTorch: x
    f32[samples, features] ~ N(0, 1) and label i32[samples] (numpy, fixed
    seed) as tmp/x.npy and tmp/label.npy, and tmp/mlp_bench.dtl, a copy of
    specs/mlp_bench.dtl that reads them in order (shuffle off). Neither side
    makes data inside the timed steps: PyTorch slices the arrays, dtl's loader
    copies its batches (dtl's `synthetic` source computes its samples per step,
    work PyTorch's fixed tensors never do). Returns the spec's path."""
    import numpy as np
    rng = np.random.default_rng(1)
    np.save(os.path.join(tmp, 'x.npy'), rng.standard_normal((samples, features), dtype=np.float32))
    np.save(os.path.join(tmp, 'label.npy'), rng.integers(0, classes, samples, dtype=np.int32))
    with open(MLP_SPEC) as f:
        text = f.read()
    old = 'train { synthetic(seed = 1) }'
    if old not in text:
        sys.exit('%s: expected `%s` in its data block' % (MLP_SPEC, old))
    text = text.replace(old, 'train { x = npy("x.npy"); label = npy("label.npy") }\n  shuffle = false')
    spec = os.path.join(tmp, 'mlp_bench.dtl')
    with open(spec, 'w') as f:
        f.write(text)
    return spec


def mlp_batches(tmp, batch, rank=0, world=1):
    """The batches of mlp_data() as torch tensors, in dtl's order: global batch
    g holds samples [g*B*W, (g+1)*B*W), rank r the r-th block of B."""
    import numpy as np
    import torch
    x = torch.from_numpy(np.load(os.path.join(tmp, 'x.npy')))
    y = torch.from_numpy(np.load(os.path.join(tmp, 'label.npy'))).long()
    out = []
    for g in range(x.shape[0] // (batch * world)):
        lo = (g * world + rank) * batch
        out.append((x[lo:lo + batch], y[lo:lo + batch]))
    return out


def add_peer_args(ap):
    """The options every dtl-vs-PyTorch benchmark shares (after its own)."""
    ap.add_argument('--openblas', default=None, help='a folder with an OpenBLAS libblas.so.3 for PyTorch')
    ap.add_argument('--threads', default='1,2',
                    help='PyTorch thread counts (per process), comma-separated; each runs with OpenBLAS pinned '
                         'to it and on every core, and the fastest is the peer (torch_peer.thread_grid)')
    ap.add_argument('--system-blas', action='store_true',
                    help='also run PyTorch on the system BLAS when an OpenBLAS folder is found')
    ap.add_argument('--dtl-passive', action='store_true',
                    help='also run dtl with OMP_WAIT_POLICY=passive (a diagnostic, not in the ratio)')
    ap.add_argument('--torch2', default=None,
                    help='the PyTorch 2.x venv of bench/peer_venv.sh (default: $DTL_BENCH_TORCH2, else '
                         '~/.cache/dtl-bench/torch2-venv when it exists; "none": PyTorch 1.13 only)')
    ap.add_argument('--dtlc', default=None)
    ap.add_argument('--json', default=None, help='write the results here (for run_all.sh)')
    ap.add_argument('--torch-worker', type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument('--compile', default=None, help=argparse.SUPPRESS)  # a worker's torch.compile mode


def add_compile_arg(ap):
    """--compile-modes, for the benchmarks that try PyTorch 2.x compiled."""
    ap.add_argument('--compile-modes', default='default,max-autotune-no-cudagraphs',
                    help='torch.compile modes PyTorch 2.x also runs in, comma-separated ("none": eager only)')


def compile_modes(arg):
    return () if arg in ('', 'none') else tuple(arg.split(','))


def rotated(jobs, round_index):
    """The jobs of one round, starting one further along each round, so no
    configuration always runs first (or right after the same neighbour)."""
    k = round_index % len(jobs)
    return jobs[k:] + jobs[:k]


def mlp_torch_step(data_dir, batch, rank=0, world=1, ddp=False, compile_mode=None):
    """PyTorch's twin of specs/mlp_bench.dtl: the model (relu MLP
    784-1024-1024-10, seeded), SGD lr 0.01 momentum 0.9, wrapped in DDP when
    asked, over mlp_batches(); returns step() -> loss, one optimiser step.
    With compile_mode, model and loss run under torch.compile (forward and,
    through AOTAutograd, backward; the first step compiles them)."""
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 10))
    if ddp:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    batches = mlp_batches(data_dir, batch, rank, world)
    n = [0]

    def loss_of(x, y):
        return F.cross_entropy(model(x), y)
    if compile_mode:
        loss_of = torch.compile(loss_of, mode=compile_mode)

    def step():
        x, y = batches[n[0] % len(batches)]
        n[0] += 1
        opt.zero_grad(set_to_none=True)
        loss = loss_of(x, y)
        loss.backward()
        opt.step()
        return loss.item()
    return step


def dtl_configs(passive):
    """[(key, label, env)] of the dtl runs: dtl as a user runs it, and with
    --dtl-passive also with OMP_WAIT_POLICY=passive: no spin at all, against
    dtlc's own passive policy with a ~1 ms spin (a diagnostic of the OpenMP
    threads' waits; never used for the ratio)."""
    out = [('dtl', 'dtl', None)]
    if passive:
        env = dict(os.environ)
        env['OMP_WAIT_POLICY'] = 'passive'
        out.append(('dtl_passive', 'dtl, OMP_WAIT_POLICY=passive (diag.)', env))
    return out


def cpu_peak_gflops():
    """(per-core f32 peak estimate, description) from /proc/cpuinfo: 2 FMA
    ports x lanes (16 with AVX-512, 8 with AVX2) x 2 flops x the listed clock.
    A VM's listed clock is often the base clock: with turbo a GEMM can beat
    this estimate, so it is a rough guide only."""
    model, mhz, flags = '?', 0.0, ''
    with open('/proc/cpuinfo') as f:
        for line in f:
            if line.startswith('model name') and model == '?':
                model = line.split(':', 1)[1].strip()
            elif line.startswith('cpu MHz') and not mhz:
                mhz = float(line.split(':', 1)[1])
            elif line.startswith('flags') and not flags:
                flags = line
    lanes = 16 if ' avx512f' in flags else 8 if ' fma' in flags else 4
    peak = 2 * lanes * 2 * mhz / 1000
    isa = 'AVX-512' if lanes == 16 else 'AVX2+FMA' if lanes == 8 else 'SSE'
    return peak, '%s, %s, %.0f MHz listed: ~%.0f GFLOP/s per core at that clock (turbo may exceed it)' % (model, isa, mhz, peak)


def torch_threads(arg):
    """The --threads option as a tuple of ints."""
    return tuple(int(t) for t in arg.split(','))


def cpu_line():
    """The processor for the report: model, vector ISA, cores."""
    _, cpu = cpu_peak_gflops()
    return 'cpu: %s; %d cores online' % (cpu, os.cpu_count())


def memcpy_gbs(mib=128, reps=5):
    """One core's memory bandwidth: bytes copied per second by a memcpy of mib
    MiB (numpy copyto), best of reps; the limit of elementwise kernels."""
    import numpy as np
    a = np.ones(mib << 18, dtype=np.float32)
    b = np.empty_like(a)
    np.copyto(b, a)
    t = 1e9
    for _ in range(reps):
        t0 = time.perf_counter()
        np.copyto(b, a)
        t = min(t, time.perf_counter() - t0)
    return a.nbytes / t / 1e9


def machine_limits(dtlc, openblas=None):
    """The limits a figure is read against: the 1024^3 SGEMM rate on every
    core of bench's gemm_bench (dtl's kernel, and OpenBLAS's when a folder
    was given; built next to dtlc), and one core's memcpy bandwidth. Returns
    (dict, line for the report)."""
    lim = {'cores': os.cpu_count(), 'memcpy_gbs': memcpy_gbs()}
    exe = os.path.join(os.path.dirname(dtlc), 'gemm_bench')
    if os.access(exe, os.X_OK):
        cmd = [exe, '--threads=%d' % os.cpu_count(), '--reps=3']
        if openblas:
            cmd.append('--openblas=' + os.path.join(openblas, 'libopenblas.so.0'))
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300).stdout
        m = re.search(r'^1024\^3\s+([\d.]+)\s+\d+%(?:\s+([\d.]+))?', out, re.M)
        if m:
            lim['gemm_dtl_gflops'] = float(m.group(1))
            lim['gemm_openblas_gflops'] = float(m.group(2)) if m.group(2) else None
    gemm = ('1024^3 SGEMM on %d cores (gemm_bench): dtl %.0f GFLOP/s%s' % (
        lim['cores'], lim['gemm_dtl_gflops'], ', OpenBLAS %.0f' % lim['gemm_openblas_gflops']
        if lim.get('gemm_openblas_gflops') else '') if 'gemm_dtl_gflops' in lim
        else 'GEMM rate: no gemm_bench next to dtlc (build the gemm_bench target)')
    return lim, 'machine limits: %s; memcpy %.1f GB/s on one core' % (gemm, lim['memcpy_gbs'])


def write_result(path, result):
    """One JSON object per benchmark, read by bench/run_all.sh's summary."""
    if path:
        with open(path, 'w') as f:
            json.dump(result, f, indent=1)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def run_torch_ranks(cmd, env, world, tmp, label, timeout):
    """Starts `world` processes of `cmd` as torch.distributed ranks on this
    machine (RANK, WORLD_SIZE, MASTER_ADDR/PORT set by hand: Debian's
    torch.distributed.run fails under Python 3.11) and returns the JSON of
    rank 0's last stdout line; exits naming `label` when a rank fails."""
    port = str(free_port())
    procs = []
    for rank in range(world):
        e = dict(env)
        e.update({'RANK': str(rank), 'LOCAL_RANK': str(rank), 'WORLD_SIZE': str(world),
                  'LOCAL_WORLD_SIZE': str(world), 'MASTER_ADDR': '127.0.0.1', 'MASTER_PORT': port})
        e.setdefault('GLOO_SOCKET_IFNAME', 'lo')
        out = open(os.path.join(tmp, '%s_rank%d.out' % (label.replace(' ', '_'), rank)), 'w+')
        err = open(os.path.join(tmp, '%s_rank%d.err' % (label.replace(' ', '_'), rank)), 'w+')
        procs.append((subprocess.Popen(cmd, env=e, stdout=out, stderr=err), out, err))
    codes = []
    deadline = time.time() + timeout
    for i, (p, _, _) in enumerate(procs):
        try:  # once rank 0 is done, the others have passed the last collective too
            codes.append(p.wait(timeout=max(1, deadline - time.time()) if i == 0 else 60))
        except subprocess.TimeoutExpired:
            codes.append(None)
    texts = []
    for p, out, err in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
        out.seek(0)
        err.seek(0)
        texts.append((out.read(), err.read()))
        out.close()
        err.close()
    if any(c != 0 for c in codes):
        for rank, (o, e) in enumerate(texts):
            sys.stderr.write('--- %s rank %d (exit %s)\n%s%s' % (label, rank, codes[rank], o[-3000:], e[-3000:]))
        sys.exit('%s failed: exit statuses %s' % (label, codes))
    return json.loads(texts[0][0].strip().splitlines()[-1])
