"""Shared helpers of the bench/*_vs_torch.py benchmarks (not a test).

Each benchmark runs dtl (`dtlc run`) and its PyTorch twin as separate
processes, interleaved round by round, and reports the best and the median of
each side together with the machine load. Run the scripts with
/usr/bin/python3: Debian's PyTorch is installed for that interpreter only.
"""
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def dtlc_path(arg=None):
    p = arg or os.environ.get('DTLC') or os.path.join(ROOT, 'build', 'bin', 'dtlc')
    p = os.path.abspath(p)
    if not os.access(p, os.X_OK):
        sys.exit('no dtlc at %s (build first, or pass --dtlc / set DTLC)' % p)
    return p


def loadavg():
    with open('/proc/loadavg') as f:
        a = f.read().split()
    return '%s %s %s' % (a[0], a[1], a[2])


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


def run(cmd, cwd=None, env=None, timeout=None):
    """Runs cmd; returns (wall seconds, CompletedProcess). Exits on failure."""
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.stderr.write('$ %s\n%s%s' % (' '.join(cmd), r.stdout[-4000:], r.stderr[-4000:]))
        sys.exit('command failed with status %d' % r.returncode)
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
    """Seconds since the training loop started, at the end of each step.

    dtl's `samples_per_s` is cumulative: samples trained since the loop
    started (after start-up: parsing, graph, parameter init) divided by the
    time since then, so t(n) = n * batch / samples_per_s(n)."""
    return {n: n * batch / m['samples_per_s'] for n, m in steps.items() if m.get('samples_per_s')}


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


def write_result(path, result):
    """One JSON object per benchmark, read by bench/run_all.sh's summary."""
    if path:
        with open(path, 'w') as f:
            json.dump(result, f, indent=1)
