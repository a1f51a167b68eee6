#!/bin/sh
# All-reduce busbw of dtl's shared-memory and Gloo communicators next to
# OpenMPI's MPI_Allreduce on this machine (Debian openmpi-bin, libopenmpi-dev),
# run back to back with the same method; prints allreduce_bench's table with
# the MPI busbw and the ratios shm/MPI and shm/gloo added.
# Usage: bench/allreduce_vs_mpi.sh [ranks=2] [build dir=build] [max MiB=256] [repeat=3]
# Each time is the best of 3 blocks x `repeat`; on a shared, noisy machine
# raise `repeat` (and consider running the script under `nice -n -20`).
set -e
ranks=${1:-2}
build=${2:-build}
maxmib=${3:-256}
repeat=${4:-3}
here=$(dirname "$0")
out=${TMPDIR:-/tmp}/dtl_allreduce_vs_mpi.$$
if ! command -v mpicxx >/dev/null || ! command -v mpirun >/dev/null; then
  echo "allreduce_vs_mpi: mpicxx/mpirun not found (apt-get install openmpi-bin libopenmpi-dev)" >&2
  exit 77
fi
mkdir -p "$out"
trap 'rm -rf "$out"' EXIT
mpicxx -O2 -std=c++17 -o "$out/mpi_allreduce_bench" "$here/mpi_allreduce_bench.cc"
flags="-np $ranks"
# --oversubscribe makes Open MPI yield while it polls: only when it must.
[ "$ranks" -gt "$(nproc)" ] && flags="--oversubscribe $flags"
[ "$(id -u)" = 0 ] && flags="--allow-run-as-root $flags"
mpirun $flags "$out/mpi_allreduce_bench" "$maxmib" "$repeat" > "$out/mpi.txt"
echo "# OpenMPI $(mpirun --version 2>/dev/null | head -1 | awk '{print $NF}'):"
cat "$out/mpi.txt"
echo
"$build/bin/allreduce_bench" --ranks "$ranks" --max-bytes "${maxmib}M" --repeat "$repeat" --compare "$out/mpi.txt"
