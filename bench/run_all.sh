#!/usr/bin/env bash
# Benchmarks (not tests): runs bench/mlp_vs_torch.py, bench/fashion_vs_torch.py,
# bench/gpt_step_vs_torch.py, bench/ddp_vs_torch.py and bench/check_gpt2.sh,
# then prints one summary table with the dtl / PyTorch ratios. See
# bench/README.md for how to read it.
#
#   bench/run_all.sh                 # full run: ~15-25 min on the 2-core machine
#   QUICK=1 bench/run_all.sh         # smoke run: fewer rounds, steps and epochs
#
# Environment:
#   DTLC=PATH          the dtlc to measure (default build/bin/dtlc)
#   OPENBLAS=DIR       a folder holding an OpenBLAS libblas.so.3 for PyTorch
#   FETCH_OPENBLAS=0   do not fetch one when none is found (see below)
#   OUT=DIR            where the per-benchmark logs and JSON go (default a
#                      fresh folder under /tmp)
#   TORCH2=1           make the PyTorch 2.x venv of bench/peer_venv.sh first
#                      when it is missing (~2 GB from PyPI); an existing one
#                      (~/.cache/dtl-bench/torch2-venv or DTL_BENCH_TORCH2) is
#                      used either way, and without one 2.x is not measured
#
# The PyTorch peer: Debian's PyTorch calls whatever libblas.so.3 is installed;
# with only libblas3 that is the netlib reference BLAS (~3 GFLOP/s), far
# slower than the OpenBLAS-backed peer of shared/design/measured.md. When no
# OpenBLAS folder is given or installed (libopenblas0-pthread), this script
# unpacks Debian's libopenblas0-pthread into /tmp with `apt-get download` +
# `dpkg -x` (nothing is installed) and points only the PyTorch processes at it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
export DTLC=${DTLC:-build/bin/dtlc}
OUT=${OUT:-$(mktemp -d /tmp/dtl_bench_XXXXXX)}
mkdir -p "$OUT"

if [[ -z "${OPENBLAS:-}" && -e /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 ]]; then
  OPENBLAS=/usr/lib/x86_64-linux-gnu/openblas-pthread
fi
if [[ -z "${OPENBLAS:-}" && "${FETCH_OPENBLAS:-1}" != 0 ]] && command -v apt-get >/dev/null; then
  cache=/tmp/dtl_bench_openblas
  dir=$cache/root/usr/lib/x86_64-linux-gnu/openblas-pthread
  if [[ ! -e $dir/libblas.so.3 ]]; then
    echo "fetching Debian's libopenblas0-pthread into $cache (not installed) for the PyTorch peer ..."
    mkdir -p "$cache"
    (cd "$cache" && rm -f libopenblas0-pthread_*.deb && apt-get download libopenblas0-pthread >/dev/null 2>&1 &&
      dpkg -x libopenblas0-pthread_*.deb root) || echo "  could not fetch it; PyTorch runs on the system BLAS"
  fi
  [[ -e $dir/libblas.so.3 ]] && OPENBLAS=$dir
fi
ob=()
[[ -n "${OPENBLAS:-}" ]] && ob=(--openblas "$OPENBLAS")
if [[ "${TORCH2:-0}" != 0 ]]; then
  bash bench/peer_venv.sh || echo "  no PyTorch 2.x venv: the benchmarks measure PyTorch 1.13 only"
fi

if [[ "${QUICK:-0}" != 0 ]]; then
  mlp_args=(--rounds 1 --steps 20 --warmup 5 --compile-modes none)
  fashion_args=(--rounds 1 --epochs 1 --threads 1 --compile-modes none)
  gpt_args=(--rounds 1 --steps 1 --warmup 1 --threads 1)
  ddp_args=(--rounds 1 --steps 10 --warmup 3)
  check_runs=10
else
  mlp_args=(--rounds 3 --dtl-passive)
  fashion_args=(--rounds 2 --epochs 4 --dtl-passive)
  gpt_args=(--rounds 2 --steps 3 --warmup 1 --dtl-passive)
  ddp_args=(--rounds 3 --dtl-one-core)
  check_runs=50
fi

echo "dtl benchmarks: $(date -u +%FT%TZ), $(nproc) cores, dtlc $DTLC, logs in $OUT"
echo "load at start (1/5/15 min, runnable/threads): $(cut -d" " -f1-4 /proc/loadavg)"
status=0
run() {  # name, command...
  local name=$1
  shift
  echo
  echo "== $name"
  if "$@" 2>&1 | tee "$OUT/$name.log"; then :; else
    echo "!! $name failed (see $OUT/$name.log)"
    status=1
  fi
}
run mlp_vs_torch $PY bench/mlp_vs_torch.py "${mlp_args[@]}" "${ob[@]}" --json "$OUT/mlp_vs_torch.json"
run fashion_vs_torch $PY bench/fashion_vs_torch.py "${fashion_args[@]}" "${ob[@]}" --json "$OUT/fashion_vs_torch.json"
run gpt_step_vs_torch $PY bench/gpt_step_vs_torch.py "${gpt_args[@]}" "${ob[@]}" --json "$OUT/gpt_step_vs_torch.json"
run ddp_vs_torch $PY bench/ddp_vs_torch.py "${ddp_args[@]}" "${ob[@]}" --json "$OUT/ddp_vs_torch.json"
run check_gpt2 env RUNS=$check_runs DTLC="$DTLC" bash bench/check_gpt2.sh
echo "load at end (1/5/15 min, runnable/threads): $(cut -d" " -f1-4 /proc/loadavg)"

$PY - "$OUT" <<'PY'
import json, os, re, sys
out = sys.argv[1]
rows = []
for name in ('mlp_vs_torch', 'fashion_vs_torch', 'gpt_step_vs_torch', 'ddp_vs_torch'):
    p = os.path.join(out, name + '.json')
    if not os.path.exists(p):
        rows.append((name, '-', '-', '-', 'failed', '', ''))
        continue
    r = json.load(open(p))
    fmt = '%.2f' if r['unit'] == 'steps/s' else '%.1f' if r['unit'].startswith('s') else '%.0f'
    note = ''
    if name == 'mlp_vs_torch':
        note = 'GEMM %.1f GFLOP/s in the step; goal >= 4x' % r['gemm_gflops_best']
    elif name == 'fashion_vs_torch':
        acc = r['accuracy']
        note = 'test acc dtl %.4f, PyTorch %.4f' % (acc['dtl'][-1], acc[[k for k in r['labels'] if r['labels'][k] == r['torch_config']][0]][-1])
    elif name == 'gpt_step_vs_torch':
        rss = r['peak_rss_mib']
        note = 'peak RSS dtl %s MiB, PyTorch %s MiB' % (
            '%.0f' % rss['dtl'] if rss.get('dtl') else '?',
            '%.0f' % max(v for k, v in rss.items() if not k.startswith('dtl') and v)
            if any(not k.startswith('dtl') and v for k, v in rss.items()) else '?')
    elif name == 'ddp_vs_torch':
        sc, lr = r['scaling'], r['loss_max_rel_diff']
        note = ('dtl 2 ranks vs PyTorch DDP 2 procs; scaling 2/1 rank: dtl %.2f, PyTorch %.2f (ideal 2.0); '
                'dtl losses 2 vs 1 rank: max rel. diff %s; goal >= 2x' % (
                    sc['dtl']['best'], sc['torch']['best'], '?' if lr is None else '%.1e' % lr))
    if 'dtl_passive' in r['labels']:
        rounds = r['rounds']
        pick = max if r['higher_is_better'] else min
        d, p = pick(rounds['dtl']), pick(rounds['dtl_passive'])
        note += '; diag.: dtl with OMP_WAIT_POLICY=passive %.2fx faster than dtl' % ((p / d) if r['higher_is_better'] else (d / p))
    if r.get('warnings'):
        note += '; ' + '; '.join(r['warnings'])
    if r.get('torch_config_median') not in (None, r['torch_config']):
        note += '; by median PyTorch was fastest with ' + r['torch_config_median'].replace('PyTorch ', '')
    rows.append((name, r['unit'], fmt % r['dtl'], fmt % r['torch'] + ' (' + r['torch_config'].replace('PyTorch ', '') + ')',
                 '%.2fx' % r['ratio'], '%.2fx' % r['ratio_median'], note))
check = ''
p = os.path.join(out, 'check_gpt2.log')
if os.path.exists(p):
    m = re.search(r'median ([\d.]+) ms', open(p).read())
    check = m.group(1) if m else ''
print()
print('Summary (dtl vs PyTorch in the same run; best of rounds for each side, PyTorch in its fastest configuration of '
      'torch threads 1/2 x OpenBLAS threads pinned/every core; ratio > 1 means dtl is faster)')
for name in ('mlp_vs_torch', 'fashion_vs_torch', 'gpt_step_vs_torch', 'ddp_vs_torch'):
    p = os.path.join(out, name + '.json')
    if os.path.exists(p):
        r = json.load(open(p))
        print(r.get('cpu', ''))
        print('\n'.join(l for l in r.get('peer', []) if 'OpenBLAS' in l))
        lim = r.get('limits') or {}
        if lim:
            print('machine limits: 1024^3 SGEMM on %d cores (gemm_bench): dtl %s GFLOP/s, OpenBLAS %s; memcpy %.1f GB/s '
                  'on one core' % (lim['cores'], '%.0f' % lim['gemm_dtl_gflops'] if lim.get('gemm_dtl_gflops') else '?',
                                   '%.0f' % lim['gemm_openblas_gflops'] if lim.get('gemm_openblas_gflops') else '?',
                                   lim['memcpy_gbs']))
        break
hdr = ('benchmark', 'unit', 'dtl', 'PyTorch (best config)', 'ratio best', 'ratio median', 'notes')
w = [max(len(str(x[i])) for x in rows + [hdr]) for i in range(6)]
line = lambda x: ' | '.join(str(x[i]).ljust(w[i]) for i in range(6)) + ' | ' + x[6]
print(line(hdr))
print('-+-'.join('-' * n for n in w) + '-+-' + '-' * 20)
for r in rows:
    print(line(r))
print(line(('check_gpt2', 'ms (median)', check or 'failed', '-', '-', '-', 'dtlc check of samples/gpt2_small.dtl; goal < 50 ms')))
PY
exit $status
