"""The PyTorch peer of the bench/*_vs_torch.py benchmarks (not a test): which
BLAS it runs on, the thread configurations it is tried in, and the pick of
the fastest.

Debian's PyTorch 1.13 calls whatever libblas.so.3 the system's alternatives
point at (BLAS_INFO=generic). With only libblas3 installed that is the netlib
reference BLAS (~3 GFLOP/s), far below the peer of shared/design/measured.md,
which ran on OpenBLAS. So the PyTorch side runs on an OpenBLAS folder when one
is found (--openblas DIR, $DTL_BENCH_OPENBLAS, or where libopenblas0-pthread
installs), put first on LD_LIBRARY_PATH of the PyTorch processes only: DIR
must hold a libblas.so.3 (libopenblas0-pthread's .../openblas-pthread/ does).
Without installing anything:
  apt-get download libopenblas0-pthread && dpkg -x libopenblas0-pthread_*.deb ob
  --openblas ob/usr/lib/x86_64-linux-gnu/openblas-pthread

The peer is measured in its fastest configuration. torch.set_num_threads does
not reach a pthreads OpenBLAS: its threads come from OPENBLAS_NUM_THREADS and
default to every core. Which is fastest depends on the machine and the job
(on the 2-core AMD machines the MLP runs fastest with torch on 1 thread and
OpenBLAS on both cores), so every benchmark runs the grid of thread_grid() and
takes the best.

A second peer, a current PyTorch 2.x from PyPI, runs from the venv that
bench/peer_venv.sh makes (found at ~/.cache/dtl-bench/torch2-venv, or
$DTL_BENCH_TORCH2 / --torch2 VENV; --torch2 none leaves it out). Its wheel
carries MKL (linked into libtorch_cpu.so) and ATen's set_num_threads sets
MKL's threads too, so MKL_NUM_THREADS cannot part them from torch's: its
grid is torch threads 1 and 2 with MKL following, each run eagerly and, where
a benchmark asks (compile_modes), under torch.compile. The peer is the
fastest configuration of either version; the report says which won.
"""
import collections
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OPENBLAS_DEFAULT = '/usr/lib/x86_64-linux-gnu/openblas-pthread'
# Variables that change which kernels or blocking OpenBLAS uses. They are left
# as the environment has them (a user's PyTorch would see them too) and
# reported with the peer.
OPENBLAS_TUNING_VARS = ('OPENBLAS_CORETYPE', 'OPENBLAS_L2_SIZE', 'OPENBLAS_VERBOSE')

SYSTEM_PYTHON = '/usr/bin/python3'  # Debian's PyTorch 1.13 is installed for it only
TORCH2_DEFAULT = os.path.join(os.path.expanduser('~'), '.cache', 'dtl-bench', 'torch2-venv')

# One PyTorch run: key and label for the report, torch threads
# (torch.set_num_threads), OpenBLAS threads (None: not an OpenBLAS), env, the
# interpreter whose torch it runs, and the torch.compile mode (None: eager).
Config = collections.namedtuple('Config', 'key label threads blas_threads env python compile',
                                defaults=(SYSTEM_PYTHON, None))


def cores():
    """The cores this process may run on (what OpenBLAS calls every core)."""
    return len(os.sched_getaffinity(0))


def openblas_dir(arg=None):
    for d in (arg, os.environ.get('DTL_BENCH_OPENBLAS'), OPENBLAS_DEFAULT):
        if d and os.path.exists(os.path.join(d, 'libblas.so.3')):
            return os.path.abspath(d)
    if arg:
        sys.exit('--openblas %s: no libblas.so.3 there' % arg)
    return None


def torch2_python(arg=None):
    """The python of the PyTorch 2.x venv (bench/peer_venv.sh), or None when
    there is none. arg: --torch2 (a venv folder, or 'none' to leave it out);
    then $DTL_BENCH_TORCH2; then the default folder. A venv named by the
    option or the variable must exist."""
    for d, named in ((arg, '--torch2'), (os.environ.get('DTL_BENCH_TORCH2'), 'DTL_BENCH_TORCH2'),
                     (TORCH2_DEFAULT, None)):
        if not d:
            continue
        if d == 'none':
            return None
        py = os.path.join(d, 'bin', 'python')
        if os.access(py, os.X_OK):
            return py
        if named:
            sys.exit('%s=%s: no venv there (bench/peer_venv.sh %s makes it)' % (named, d, d))
    return None


def torch2_configs(python, torch_threads=(1, 2), compile_modes=()):
    """[Config] of PyTorch 2.x: each torch thread count (MKL and OpenMP
    follow it), eager and under each torch.compile mode."""
    out = []
    for t in torch_threads:
        env = dict(os.environ, OMP_NUM_THREADS=str(t), MKL_NUM_THREADS=str(t))
        for mode in (None,) + tuple(compile_modes):
            short = None if mode is None else COMPILE_KEYS.get(mode, mode.replace('-', '_'))
            key = 'torch2_%d' % t + ('' if mode is None else '_' + short)
            how = 'eager' if mode is None else 'torch.compile %s' % mode
            out.append(Config(key, 'PyTorch 2.x MKL, torch %d thr, %s' % (t, how), t, None, env, python, mode))
    return out


# torch.compile modes a benchmark may try, and their short names in keys.
COMPILE_KEYS = {'default': 'compile', 'max-autotune-no-cudagraphs': 'maxat'}


def thread_grid(torch_threads=(1, 2)):
    """[(torch threads, OpenBLAS threads)] of one PyTorch process: each torch
    thread count with OpenBLAS pinned to it and with OpenBLAS on every core,
    duplicates dropped (on 2 cores, 2 pinned is every core)."""
    out = []
    for t in torch_threads:
        for b in (t, max(t, cores())):
            if (t, b) not in out:
                out.append((t, b))
    return out


def thread_label(t, b):
    if b is None:
        return 'torch %d thr' % t
    where = ['pinned'] * (b == t) + ['every core'] * (b == cores())
    return 'torch %d thr, BLAS %d thr (%s)' % (t, b, ' = '.join(where) or 'set')


def configs(openblas, torch_threads=(1, 2), system_blas=False, torch2=None, compile_modes=()):
    """[Config] of the PyTorch runs to make: the thread grid on OpenBLAS when a
    folder was found; on the system's BLAS (one thread count each: the
    netlib BLAS has no threads) when asked or when there is no OpenBLAS; and
    with torch2 (the 2.x venv's python) torch2_configs()."""
    out = []
    if system_blas or not openblas:
        for t in torch_threads:
            env = dict(os.environ, OMP_NUM_THREADS=str(t), OPENBLAS_NUM_THREADS=str(t))
            out.append(Config('torch_sys_%d' % t, 'PyTorch system BLAS, ' + thread_label(t, None), t, None, env))
    if openblas:
        for t, b in thread_grid(torch_threads):
            env = dict(os.environ, OMP_NUM_THREADS=str(t), OPENBLAS_NUM_THREADS=str(b))
            env['LD_LIBRARY_PATH'] = openblas + (':' + env['LD_LIBRARY_PATH'] if env.get('LD_LIBRARY_PATH') else '')
            out.append(Config('torch_ob_%dx%d' % (t, b), 'PyTorch OpenBLAS, ' + thread_label(t, b), t, b, env))
    if torch2:
        out += torch2_configs(torch2, torch_threads, compile_modes)
    return out


def one_core_key(key):
    """The key of the one-core configuration (torch and BLAS on 1 thread, eager)
    of key's version and BLAS: torch_ob_AxB -> torch_ob_1x1, torch_sys_N ->
    torch_sys_1, torch2_N[_mode] -> torch2_1."""
    import re
    m = re.match(r'(torch_ob_|torch_sys_|torch2_)', key)
    if not m:
        raise ValueError('not a PyTorch configuration key: %s' % key)
    return m.group(1) + ('1x1' if m.group(1) == 'torch_ob_' else '1')


def version_of(cfg):
    return '2.x' if cfg.python != SYSTEM_PYTHON else '1.13'


def worker_cmd(cfg, script, *args):
    """The command of one PyTorch worker: script run by cfg's interpreter,
    with --compile MODE when cfg is a compiled configuration."""
    return [cfg.python, script] + list(args) + (['--compile', cfg.compile] if cfg.compile else [])


def version_lines(res, cfgs, higher_is_better, fmt, torch2):
    """The report's lines on the two PyTorch versions: the best configuration
    of each (by best round) and which version won; or that PyTorch 2.x was
    not measured."""
    sel = max if higher_is_better else min
    by_version = collections.defaultdict(list)
    for c in cfgs:
        if res.get(c.key):
            by_version[version_of(c)].append(c)
    best = {v: sel(cs, key=lambda c: sel(res[c.key])) for v, cs in by_version.items()}
    lines = ['  best of each PyTorch version: ' + '; '.join(
        '%s %s (%s)' % (v, fmt % sel(res[c.key]), c.label) for v, c in sorted(best.items()))]
    if len(best) == 2:
        win = sel(best.values(), key=lambda c: sel(res[c.key]))
        lines.append('  faster PyTorch version: %s' % version_of(win))
    elif not torch2:
        lines.append('  PyTorch 2.x: not measured (no venv; bench/peer_venv.sh makes one at %s)' % TORCH2_DEFAULT)
    return lines


def blas_probe():
    """{'blas': library path, 'core': OpenBLAS core type, 'blas_threads':
    OpenBLAS's threads, 'mm_gflops': one 1024^3 SGEMM} in this PyTorch process
    (with its current threads). Call it after torch.set_num_threads."""
    import ctypes
    import time
    import torch
    lib = '?'
    with open('/proc/self/maps') as f:
        for line in f:
            name = line.split()[-1]
            # libblas.so.3 and the OpenBLAS behind it; not numpy's wheel OpenBLAS
            # (libscipy_openblas*) nor cuBLAS (libcublas*) of the 2.x venv
            if os.path.basename(name).startswith(('libblas', 'libopenblas')) and name.endswith(tuple('0123456789o')):
                lib = name
                break
    core, threads = None, None
    if lib != '?':
        try:
            so = ctypes.CDLL(lib)
            so.openblas_get_corename.restype = ctypes.c_char_p
            core = so.openblas_get_corename().decode()
            threads = int(so.openblas_get_num_threads())
        except (OSError, AttributeError):
            pass  # not an OpenBLAS (the netlib reference BLAS has no threads)
    if lib == '?':  # PyPI's torch 2.x: MKL linked into libtorch_cpu.so, threads set by torch
        import re
        m = re.search(r'BLAS_INFO=(\w+)', torch.__config__.show())
        lib = 'torch %s, BLAS %s (linked in)' % (torch.__version__, m.group(1) if m else '?')
        threads = torch.get_num_threads()
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    best_s = 1e9
    for _ in range(3):
        t0 = time.perf_counter()
        a @ b
        best_s = min(best_s, time.perf_counter() - t0)
    return {'blas': lib, 'core': core, 'blas_threads': threads, 'mm_gflops': 2 * 1024 ** 3 / best_s / 1e9}


def probe_line(p, torch_threads):
    """One line of a blas_probe() result for the report."""
    return '%s%s: 1024^3 SGEMM %.0f GFLOP/s with torch %d thr, BLAS %s thr' % (
        p['blas'], ' (core %s)' % p['core'] if p['core'] else '', p['mm_gflops'], torch_threads,
        'n/a' if p['blas_threads'] is None else p['blas_threads'])


def _probe_process(env, threads, python=SYSTEM_PYTHON):
    code = ('import sys, json; sys.path.insert(0, %r); import torch_peer, torch; torch.set_num_threads(%d); '
            'print(json.dumps(torch_peer.blas_probe()))' % (HERE, threads))
    try:
        import json
        out = subprocess.run([python, '-c', code], capture_output=True, text=True, timeout=120, env=env)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except Exception:  # pragma: no cover
        return {'blas': '?', 'core': None, 'blas_threads': None, 'mm_gflops': 0.0}


def describe(openblas, system_blas, torch2=None):
    """Lines saying which BLAS PyTorch gets: the system BLAS's SGEMM rate and,
    with an OpenBLAS folder, its core type and SGEMM rate pinned to one thread
    and on every core; with torch2 (the 2.x venv's python), its version,
    BLAS and SGEMM rate on one thread and every core (quick probes in
    separate processes)."""
    sys_p = _probe_process(dict(os.environ, OPENBLAS_NUM_THREADS='1'), 1)
    lines = ['PyTorch: system BLAS %s%s' % (probe_line(sys_p, 1), '' if system_blas or not openblas
                                              else '; not run (--system-blas runs it)')]
    set_vars = ['%s=%s' % (v, os.environ[v]) for v in OPENBLAS_TUNING_VARS if v in os.environ]
    if openblas:
        lines.append('PyTorch: OpenBLAS from %s (LD_LIBRARY_PATH of the PyTorch processes only); OpenBLAS tuning '
                     'variables in the environment: %s' % (openblas, ', '.join(set_vars) or 'none'))
        for b in sorted({1, cores()}):
            env = dict(os.environ, OPENBLAS_NUM_THREADS=str(b),
                       LD_LIBRARY_PATH=openblas + ':' + os.environ.get('LD_LIBRARY_PATH', ''))
            lines.append('  OpenBLAS %s' % probe_line(_probe_process(env, 1), 1))
    elif sys_p['mm_gflops'] < 10:
        lines.append('WARNING: no OpenBLAS found and the system BLAS is slow: PyTorch here is far weaker than the '
                     'peer of measured.md, so the ratios flatter dtl (see bench/README.md, "The PyTorch peer")')
    return lines + torch2_lines(torch2)


def torch2_lines(torch2):
    if not torch2:
        return ['PyTorch 2.x: not measured (no venv at %s: bench/peer_venv.sh makes one; or --torch2 VENV)'
                % TORCH2_DEFAULT]
    try:
        import json
        out = subprocess.run([torch2, os.path.join(HERE, 'peer_check.py'), '--json'], capture_output=True,
                             text=True, timeout=300)
        info = json.loads(out.stdout.strip().splitlines()[-1])
    except Exception:  # pragma: no cover
        sys.exit('PyTorch 2.x venv of %s fails its check: run bench/peer_venv.sh again' % torch2)
    lines = ['PyTorch 2.x: torch %s from %s: BLAS %s (MKL %s, oneDNN %s), %d threads by default; '
             'torch.set_num_threads sets MKL\'s threads too' % (info['version'], os.path.dirname(os.path.dirname(torch2)),
                                                               info['blas'], info['mkl'], info['mkldnn'], info['threads'])]
    for t in sorted({1, cores()}):
        env = dict(os.environ, OMP_NUM_THREADS=str(t), MKL_NUM_THREADS=str(t))
        lines.append('  %s' % probe_line(_probe_process(env, t, torch2), t))
    return lines


def pick(res, keys, higher_is_better):
    """(key with the best single round, key with the best median) among the
    peer's configuration keys of res ({key: [figure per round]})."""
    import statistics
    sel = max if higher_is_better else min
    return sel(keys, key=lambda k: sel(res[k])), sel(keys, key=lambda k: statistics.median(res[k]))


# A configuration this many times slower than the fastest in the first round
# is not run again: the first round is its calibration. On a quiet machine
# the grid's configurations lie within ~1.3x of each other; on a busy one an
# oversubscribed configuration (torch's OpenMP threads spinning beside other
# work) can be 5-10x slower and take minutes a run, without a chance to win.
DROP_FACTOR = 3.0


def dropped_after_first_round(res, keys, higher_is_better, factor=DROP_FACTOR):
    """The keys (among keys, each with a first round in res) to run no more."""
    first = {k: res[k][0] for k in keys}
    if higher_is_better:
        top = max(first.values())
        return [k for k in keys if first[k] * factor < top]
    top = min(first.values())
    return [k for k in keys if first[k] > factor * top]


def winner_lines(res, labels, keys, higher_is_better, fmt, dropped=()):
    """The report's lines on the peer's grid: which configuration won (best
    round and median), with its figure, how many rounds each won (among the
    configurations run in every round), and which were dropped."""
    import statistics
    sel = max if higher_is_better else min
    best_k, med_k = pick(res, keys, higher_is_better)
    kept = [k for k in keys if k not in dropped]
    rounds = min(len(res[k]) for k in kept)
    wins = collections.Counter(sel(kept, key=lambda k: res[k][r]) for r in range(rounds))
    lines = ['best PyTorch configuration: %s, %s (best round), %s (median)' % (
        labels[best_k], fmt % sel(res[best_k]), fmt % statistics.median(res[best_k]))]
    if med_k != best_k:
        lines.append('  by median: %s, %s' % (labels[med_k], fmt % statistics.median(res[med_k])))
    lines.append('  rounds won: ' + ', '.join('%s %d' % (labels[k], wins[k]) for k in kept) + ' (of %d)' % rounds)
    if dropped:
        lines.append('  run in the first round only (over %.0fx slower than the fastest there): %s'
                     % (DROP_FACTOR, ', '.join(labels[k] for k in dropped)))
    return lines
