#!/usr/bin/env bash
# The GPU check's own plumbing, on any machine: a quick bundle, the x86
# JIT's outputs written as ptx_run writes the GPU's, compared (must pass);
# then one output value changed (compare must fail and name it).
set -u
check=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
"$check" write "$work/bundle" --quick || exit 1
"$check" jit "$work/bundle" "$work/results" || exit 1
"$check" compare "$work/bundle" "$work/results" > "$work/pass.log" || { cat "$work/pass.log"; exit 1; }
tail -2 "$work/pass.log"
# The first region module's first output value, overwritten by 0x41414141 (12.07...).
read -r _ id _ file offset _ < <(grep -m1 '^case c0\.probe ok ' "$work/results/results.txt")
printf 'AAAA' | dd of="$work/results/$file" bs=1 seek="$offset" conv=notrunc status=none
if "$check" compare "$work/bundle" "$work/results" > "$work/fail.log"; then
  echo "compare passed results with a changed value in $id"; exit 1
fi
grep -m1 'problem' "$work/fail.log"
