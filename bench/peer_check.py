"""Checks the PyTorch 2.x venv of bench/peer_venv.sh (run with the venv's
python; not a test): torch imports, is a 2.x, and multiplies right on the CPU,
and no CUDA library came from outside the venv (the venv must not work only
because a CUDA toolkit happens to be installed). Prints one line on torch's
version, BLAS and threads, or with --json one JSON object (read by
bench/torch_peer.py). Exits non-zero, saying why, when a check fails."""
import json
import os
import re
import sys


def blas_of(config):
    """The BLAS named by torch.__config__.show(): 'MKL' or 'OpenBLAS' or what
    its BLAS_INFO says."""
    m = re.search(r'BLAS_INFO=(\w+)', config)
    info = m.group(1) if m else '?'
    return {'mkl': 'MKL', 'open': 'OpenBLAS', 'openblas': 'OpenBLAS'}.get(info, info)


def foreign_cuda_libs(maps_text, prefix):
    """Paths of CUDA libraries in /proc/self/maps that lie outside prefix."""
    out = set()
    for line in maps_text.splitlines():
        path = line.split()[-1] if len(line.split()) >= 6 else ''
        base = os.path.basename(path)
        if re.match(r'lib(cuda|cudart|cublas|cudnn|cufft|cufile|cupti|cusparse|nccl|nvrtc|nvshmem|nvJitLink)', base) \
                and not os.path.realpath(path).startswith(os.path.realpath(prefix) + os.sep):
            out.add(path)
    return sorted(out)


def main():
    try:
        import torch
    except Exception as e:  # the message names the missing library
        sys.exit('peer_check: import torch failed: %s' % e)
    if not torch.__version__.startswith('2.'):
        sys.exit('peer_check: torch %s is not a 2.x (%s)' % (torch.__version__, torch.__file__))
    a = torch.arange(12, dtype=torch.float32).reshape(3, 4) / 7
    b = torch.arange(20, dtype=torch.float32).reshape(4, 5) / 3
    exact = a.double() @ b.double()
    if not torch.allclose((a @ b).double(), exact, rtol=1e-6, atol=1e-6):
        sys.exit('peer_check: a CPU matmul gave a wrong result')
    with open('/proc/self/maps') as f:
        foreign = foreign_cuda_libs(f.read(), sys.prefix)
    if foreign:
        sys.exit('peer_check: CUDA libraries loaded from outside the venv %s: %s' % (sys.prefix, ', '.join(foreign)))
    config = torch.__config__.show()
    info = {'version': torch.__version__, 'python': sys.executable, 'blas': blas_of(config),
            'mkl': torch.backends.mkl.is_available(), 'mkldnn': torch.backends.mkldnn.is_available(),
            'threads': torch.get_num_threads(), 'interop_threads': torch.get_num_interop_threads(),
            'parallel': torch.__config__.parallel_info().splitlines()[:8]}
    if '--json' in sys.argv:
        print(json.dumps(info))
    else:
        print('torch %s (%s): BLAS %s, MKL %s, oneDNN %s, %d threads by default' % (
            info['version'], os.path.dirname(torch.__file__), info['blas'], info['mkl'], info['mkldnn'],
            info['threads']))


if __name__ == '__main__':
    main()
