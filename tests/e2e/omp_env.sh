#!/usr/bin/env bash
# What dtlc sets for its OpenMP threads (docs/running.md, "Threads"):
# OMP_WAIT_POLICY=PASSIVE and GOMP_SPINCOUNT=30000 in the process that
# trains (dtlc restarts itself once, in place, so libgomp reads them when it
# loads); a user's OMP_WAIT_POLICY is kept and then no spin count is added;
# a user's GOMP_SPINCOUNT is kept. Read from /proc/PID/environ of the
# running trainer.
#
# usage: omp_env.sh DTLC SAMPLES WORKDIR
set -euo pipefail
dtlc=$1; samples=$2; work=$3
rm -rf "$work"; mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

# The training process's environment, one variable per line, once it is
# training (its metrics file exists: the restart, if any, is behind it).
environOfRun() {
  local out=$work/run$1 pid; shift
  env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$@" "$dtlc" run "$samples/synthetic_mlp.dtl" --set train.steps=1000000 \
    --out "$out" --no-checkpoints >"$out.log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    [ -s "$out/metrics.jsonl" ] && break
    kill -0 $pid 2>/dev/null || fail "dtlc run ended early: $(cat "$out.log")"
    sleep 0.1
  done
  [ -s "$out/metrics.jsonl" ] || { kill -9 $pid; fail "no step in 60 s: $(cat "$out.log")"; }
  tr '\0' '\n' </proc/$pid/environ | grep -E '^(OMP_WAIT_POLICY|GOMP_SPINCOUNT)=' | sort || true
  kill -9 $pid 2>/dev/null || true
  wait $pid 2>/dev/null || true
}

got=$(environOfRun 1)
[ "$got" = $'GOMP_SPINCOUNT=30000\nOMP_WAIT_POLICY=PASSIVE' ] || fail "default: $got"
got=$(environOfRun 2 OMP_WAIT_POLICY=active)
[ "$got" = 'OMP_WAIT_POLICY=active' ] || fail "the user's OMP_WAIT_POLICY=active: $got"
got=$(environOfRun 3 GOMP_SPINCOUNT=5)
[ "$got" = $'GOMP_SPINCOUNT=5\nOMP_WAIT_POLICY=PASSIVE' ] || fail "the user's GOMP_SPINCOUNT=5: $got"
echo "dtlc sets OMP_WAIT_POLICY=PASSIVE with GOMP_SPINCOUNT=30000, and keeps a user's own"
