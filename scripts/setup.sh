#!/usr/bin/env bash
# Installs everything dtl needs from Debian's packages. Idempotent: installs
# only what is missing, and runs `apt-get update` only when it must.
set -euo pipefail

packages=(
  # build
  cmake ninja-build g++ default-jre-headless
  # front end: ANTLR4 tool (Java) and its C++ runtime; fuzzing with clang
  antlr4 libantlr4-runtime-dev uuid-dev clang-14 libclang-rt-14-dev
  # code generation and kernels (later stages)
  llvm-14-dev llvm-16-dev libdnnl-dev ocl-icd-opencl-dev zlib1g-dev
  # communication (later stages)
  libgloo-dev libopenmpi-dev openmpi-bin
  # tests and benchmarks
  googletest libgtest-dev libgmock-dev libbenchmark-dev hyperfine iproute2
  # the report page rendered headless (tests/e2e/report.sh): a browser, and PNG pixels
  chromium python3-pil
  # real data for the samples
  dataset-fashion-mnist python3-sklearn base-files
  # the PyTorch peer: parity tests and benchmarks (Debian's 1.13, for /usr/bin/python3)
  python3-torch python3-numpy
)

# `setup.sh --list` prints the list (tests/deps/check_build_deps.py reads it).
if [ "${1:-}" = --list ]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
