#!/usr/bin/env bash
# The generated PTX on this machine's GPU against the reference kernels:
# write the bundle, run it, check what came back (tests/gpu/ptx_check.cc).
# Exits 77 (skipped) where there is no GPU, before any work.
set -u
check=$1 run=$2 work=$3
"$run" --probe || exit $?
rm -rf "$work" && mkdir -p "$work"
"$check" write "$work/bundle" || exit 1
"$run" "$work/bundle" "$work/results"
rc=$?
[ $rc -eq 0 ] || [ $rc -eq 1 ] || exit $rc  # 1: some cases failed on the GPU; compare says which
"$check" compare "$work/bundle" "$work/results"
