#!/usr/bin/env bash
# Benchmark (not a test): wall time of `dtlc check` on the GPT-2 small sample,
# the whole front end as a user runs it (process start, parse of spec and
# stdlib, instantiation of 12 stacked blocks, parallel checks). Goal: median
# well under 50 ms. Prints the median and the spread over RUNS runs.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-50}
dtlc=${DTLC:-build/bin/dtlc}
spec=samples/gpt2_small.dtl
"$dtlc" check "$spec" --world 8 >/dev/null
if command -v hyperfine >/dev/null; then
  hyperfine -N --warmup 5 --runs "$runs" --export-json /tmp/dtl_check_bench.json \
    "$dtlc check $spec --world 8" >/dev/null
  python3 - <<'PY'
import json, statistics
r = json.load(open("/tmp/dtl_check_bench.json"))["results"][0]
t = sorted(x * 1000 for x in r["times"])
print(f"dtlc check gpt2_small: median {statistics.median(t):.2f} ms, "
      f"min {t[0]:.2f} ms, p90 {t[int(0.9 * (len(t) - 1))]:.2f} ms over {len(t)} runs (goal < 50 ms)")
PY
else
  for i in $(seq "$runs"); do
    s=$(date +%s%N); "$dtlc" check "$spec" --world 8 >/dev/null; e=$(date +%s%N)
    echo $(( (e - s) / 1000 ))
  done | sort -n | awk '{a[NR]=$1} END {printf "dtlc check gpt2_small: median %.2f ms over %d runs (goal < 50 ms)\n", a[int((NR+1)/2)]/1000, NR}'
fi
