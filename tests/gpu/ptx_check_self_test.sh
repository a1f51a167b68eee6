#!/usr/bin/env bash
# The GPU check's own plumbing, on any machine: a quick bundle, the x86
# JIT's outputs written as ptx_run writes the GPU's, compared (must pass);
# then one value changed at a time where each check reads — a region's own
# output (the probe-equals-region check), a node of the probe (the per-node
# oracle), an update's parameter (the bitwise update check) — and compare
# must fail, naming it.
set -u
check=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
"$check" write "$work/bundle" --quick || exit 1
"$check" jit "$work/bundle" "$work/results" || exit 1
"$check" compare "$work/bundle" "$work/results" > "$work/pass.log" || { cat "$work/pass.log"; exit 1; }
tail -2 "$work/pass.log"

# tamper ID WHERE PATTERN: 0x41414141 (12.07) written over the float at
# byte WHERE (first|last) of module ID's outputs; compare must fail with PATTERN.
tamper() {
  rm -rf "$work/tampered" && cp -r "$work/results" "$work/tampered"
  read -r _ _ _ file offset bytes < <(grep -m1 "^case $1 ok " "$work/tampered/results.txt")
  [ "$2" = last ] && offset=$((offset + bytes - 4))
  printf 'AAAA' | dd of="$work/tampered/$file" bs=1 seek="$offset" conv=notrunc status=none
  if "$check" compare "$work/bundle" "$work/tampered" > "$work/fail.log"; then
    echo "compare passed results with a changed value in $1 ($2)"; exit 1
  fi
  grep -m1 -E "$3" "$work/fail.log" || { echo "compare failed without naming $1 ($2):"; cat "$work/fail.log"; exit 1; }
}
tamper c0.probe first 'output y element 0 is .* fused but'
tamper c0.probe last '^  %[0-9]+ \(.*\) element [0-9]+: '
tamper u0 first '^update u0 '
