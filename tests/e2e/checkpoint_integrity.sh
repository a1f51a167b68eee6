#!/usr/bin/env bash
# Checkpoints on a real two-rank job, through dtlc itself:
#   1. one bit flipped in the newest checkpoint: `--resume` on 2 ranks names
#      the checkpoint and the tensor, both ranks continue from the older one
#      (their parameter hashes agree), and rank 0 alone says so;
#   2. logs and metrics come from global rank 0 only: each step's metrics line
#      once, no `[rank 1]` progress line — also on a dp × tp mesh, where ranks
#      0 and 1 both have dp coordinate 0;
#   3. a second job on the same checkpoint folder is refused, naming the first.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/e2e_lib.sh"
begin_case "$@"

mlp_spec s.dtl 16 32 4
cat >>s.dtl <<'SPEC'
train {
  batch = 8
  steps = 12
  optimizer = sgd(lr = 0.05)
  seed = 3
  log every 1 step
  checkpoint "ck" every 5 steps keep 3
}
SPEC

# 1. A corrupt newest checkpoint on resume.
"$dtlc" run s.dtl --nproc 2 --steps 10 >first.out 2>first.err || fail "first run: $(cat first.err)"
file=ck/step-00000010/params.safetensors
size=$(stat -c %s "$file")
byte=$(od -An -tu1 -j $((size - 2)) -N1 "$file" | tr -d ' ')
printf "$(printf '\\%03o' $((byte ^ 64)))" | dd of="$file" bs=1 seek=$((size - 2)) conv=notrunc status=none
"$dtlc" run s.dtl --nproc 2 --resume ck --metrics m.jsonl >resume.out 2>resume.err; rc=$?
if [ "$rc" -eq 0 ] &&
   [ "$(grep -c "passed over step-00000010: .*/step-00000010/params.safetensors: tensor \`l2.bias\` does not match its checksum" resume.err)" -eq 1 ] &&
   [ "$(grep -c 'resuming from step-00000005 instead, the newest checkpoint that verifies' resume.err)" -eq 1 ] &&
   [ "$(grep -c 'resumed from ck at step 5' resume.out)" -eq 1 ]; then
  pass "corrupt step-00000010 passed over, both ranks resumed from step 5"
else
  fail "resume past a corrupt checkpoint: exit $rc; stdout: $(cat resume.out); stderr: $(cat resume.err)"
fi

# 2. One metrics line per step (6..12), progress lines from rank 0 only.
steps=$(grep -o '"step": [0-9]*' m.jsonl | awk '{print $2}' | tr '\n' ' ')
if [ "$steps" = "6 7 8 9 10 11 12 " ] && ! grep -q 'rank 1' resume.out; then
  pass "metrics once per step, no rank 1 lines"
else
  fail "metrics steps '$steps'; stdout: $(cat resume.out)"
fi

# 2b. A 2 × 2 mesh (nothing split over tp: it runs replicated over it).
sed -e 's/steps = 12/steps = 3/' -e '/checkpoint "ck"/d' s.dtl >mesh.dtl
printf 'parallel {\n  mesh dp = 2, tp = 2\n  split batch over dp\n}\n' >>mesh.dtl
"$dtlc" run mesh.dtl --nproc 4 --metrics mesh.jsonl >mesh.out 2>mesh.err; rc=$?
if [ "$rc" -ne 0 ] && grep -q "not built yet" mesh.err; then
  echo "skip: a dp × tp mesh is refused by this build: $(head -1 mesh.err)"
elif [ "$rc" -eq 0 ] && [ "$(grep -c '"step"' mesh.jsonl)" -eq 3 ] && [ "$(grep -c '^step [0-9]/3' mesh.out)" -eq 3 ] &&
     ! grep -q 'rank 1' mesh.out; then
  pass "dp × tp mesh: metrics and progress once per step"
else
  fail "dp × tp mesh: exit $rc; metrics: $(cat mesh.jsonl); stdout: $(cat mesh.out); stderr: $(cat mesh.err)"
fi

# 3. Two jobs, one folder. (Without --resume the second is refused before
# that when the first has written a metrics line: the folder holds a run.)
sed -e 's/steps = 12/steps = 100000000/' -e 's/every 5 steps/every 1000000 steps/' s.dtl >long.dtl
rm -rf ck
"$dtlc" run long.dtl >long.out 2>long.err &
first=$!
for _ in $(seq 1 300); do [ -s ck/.lock ] && grep -q "pid $first " ck/.lock && break; sleep 0.1; done
"$dtlc" run s.dtl --steps 1 --resume ck >second.out 2>second.err; rc=$?
kill "$first" 2>/dev/null; wait "$first" 2>/dev/null
if [ "$rc" -eq 1 ] && grep -q "ck: in use by another job (pid $first on host " second.err &&
   grep -q 'steps = 100000000' ck/spec.dtl; then
  pass "second job refused, the first one's spec.dtl left as it was: $(head -1 second.err)"
else
  fail "second job: exit $rc; stderr: $(cat second.err)"
fi

end_case
