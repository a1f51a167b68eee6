#!/usr/bin/env bash
# The second PyTorch peer of the bench/*_vs_torch.py benchmarks (not a test):
# a current PyTorch 2.x from PyPI in a venv of Debian's /usr/bin/python3, next
# to Debian's PyTorch 1.13. Never needed by the tests.
#
#   bench/peer_venv.sh [VENV]     # default ~/.cache/dtl-bench/torch2-venv
#
# Environment: TORCH_SPEC (default 'torch>=2,<3': the newest 2.x), PY (default
# /usr/bin/python3). The benchmarks find the venv at the default path or
# through DTL_BENCH_TORCH2=VENV / --torch2 VENV (bench/torch_peer.py).
#
# Why not `pip install torch`: PyPI's Linux x86_64 torch wheel is the CUDA
# build, and its dependencies add ~3 GB of CUDA wheels plus triton. A CPU run
# calls none of them, but the dynamic loader still has to find the CUDA
# libraries the torch libraries list as NEEDED (libtorch_cpu.so itself needs
# libcudart and libcupti), so torch goes in with --no-deps and beside it:
#   - its pure Python dependencies (sympy, networkx, jinja2, ...) and numpy
#     (the benchmarks' workers read their data with it);
#   - the NVIDIA runtime wheels of the resolved set (cudart, cupti, cublas,
#     cudnn, nccl, ...: each holds a library NEEDED by libtorch_cpu.so,
#     libtorch_cuda.so or libtorch_python.so, or by one of those), less
#     those no CPU import loads: triton, cuda-bindings, the cuda-toolkit meta
#     package, headers (cccl), nvtx, and cusolver (NEEDED only by
#     libtorch_cuda_linalg.so, which torch opens on a CUDA linear algebra op).
#     That is the bulk of the download still (~2 GB); a CPU-only libtorch
#     is not on PyPI for Linux x86_64.
# The check at the end (bench/peer_check.py) imports torch, multiplies on
# the CPU and fails when any CUDA library was loaded from outside the venv:
# the venv must never work only because a CUDA toolkit is installed.
#
# Idempotent: a venv that already passes the check is left as it is. Fails
# with a clear message when PyPI cannot be reached.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
VENV=${1:-${DTL_BENCH_TORCH2:-$HOME/.cache/dtl-bench/torch2-venv}}
PY=${PY:-/usr/bin/python3}
TORCH_SPEC=${TORCH_SPEC:-torch>=2,<3}
VENV=$(realpath -m "$VENV")
case "$VENV/" in
  "$ROOT"/*) echo "peer_venv.sh: $VENV is inside the repository; put the venv elsewhere" >&2; exit 2 ;;
esac

say() { echo "peer_venv: $*"; }

check() {  # prints torch's version, BLAS and threads; non-zero when it does not work on the CPU
  "$VENV/bin/python" "$HERE/peer_check.py"
}

if [[ -x $VENV/bin/python ]] && check >/dev/null 2>&1; then
  say "$VENV already holds a working PyTorch 2.x; nothing to do"
  check
  exit 0
fi

say "creating the venv $VENV (from $PY)"
mkdir -p "$(dirname "$VENV")"
"$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)

say "asking PyPI which torch '$TORCH_SPEC' is newest ..."
report=$(mktemp /tmp/dtl_peer_report_XXXXXX.json)
trap 'rm -f "$report"' EXIT
# --dry-run --report resolves torch's whole dependency set from PyPI's
# metadata files alone (no CUDA wheel is downloaded) and fails fast offline.
if ! "${PIP[@]}" install --quiet --dry-run --ignore-installed --report "$report" "$TORCH_SPEC" numpy >/dev/null 2>"$report.err"; then
  echo "peer_venv.sh: could not resolve $TORCH_SPEC from PyPI (is PyPI reachable? pip said:)" >&2
  tail -5 "$report.err" >&2
  rm -f "$report.err"
  exit 1
fi
rm -f "$report.err"

# Lines "name==version" of the resolved set, torch first.
mapfile -t resolved < <("$PY" - "$report" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
rows = sorted(((i['metadata']['name'], i['metadata']['version']) for i in r['install']),
              key=lambda nv: nv[0].lower() != 'torch')
for n, v in rows:
    print('%s==%s' % (n, v))
EOF
)
torch_req=${resolved[0]}
[[ $torch_req == torch==2.* ]] || { echo "peer_venv.sh: resolved $torch_req, not a torch 2.x" >&2; exit 1; }
pure=()
nvidia=()
for req in "${resolved[@]:1}"; do
  name=${req%%==*}
  case "${name,,}" in
    triton|cuda-bindings|cuda-pathfinder|cuda-toolkit|nvidia-cuda-cccl*|nvidia-nvtx*|nvidia-cusolver*) ;;
    nvidia-*) nvidia+=("$req") ;;
    *) pure+=("$req") ;;
  esac
done

say "installing $torch_req without its dependencies (the CUDA build: PyPI has no CPU-only Linux wheel)"
"${PIP[@]}" install --no-deps "$torch_req"
say "installing the pure Python dependencies and numpy: ${pure[*]}"
"${PIP[@]}" install --no-deps "${pure[@]}"

say "installing the NVIDIA runtime wheels the loader needs: ${nvidia[*]}"
"${PIP[@]}" install --no-deps "${nvidia[@]}"

if ! check; then
  echo "peer_venv.sh: torch in $VENV does not import or multiply on the CPU (see above)" >&2
  exit 1
fi
say "done: $VENV (bench/*_vs_torch.py find it at the default path; else DTL_BENCH_TORCH2=$VENV)"
