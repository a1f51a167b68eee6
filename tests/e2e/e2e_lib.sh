# Shared by the end-to-end fault and run tests (sourced): the scaffolding
# every such script repeated, and the small MLP spec most of them train.
# Source it before the script changes folder, from the script's own folder:
#   here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
#   . "$here/e2e_lib.sh"
#   begin_case "$@"   # DTLC WORKDIR: sets $dtlc and $work, empties $work and cd's into it
#   ... pass "what held" / fail "what did not" ...
#   end_case          # exit 1 after "N failure(s)" if any fail was counted, else "all passed"
# fail counts and goes on; scripts whose fail exits at once (set -e style)
# define their own after sourcing this and need not call begin_case/end_case.

# begin_case DTLC WORKDIR: $dtlc and $work set, $work empty and the current
# folder, the failure count at 0.
begin_case() {
  dtlc=$1; work=$2
  rm -rf "$work"; mkdir -p "$work"; cd "$work" || exit 1
  fails=0
}
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { echo "ok: $*"; }

# end_case: the script's end — exits 1 when a fail was counted.
end_case() {
  [ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
  echo "all passed"
}

# mlp_spec FILE F H C: writes the model and data part of the small MLP spec
# (dims f = F, h = H, c = C; synthetic data, seed 1) to FILE; the script
# appends its own `train { … }` (and `parallel { … }`) with `cat >> FILE`.
mlp_spec() {
  cat >"$1" <<SPEC
model M {
  dim f = $2, h = $3, c = $4
  input x : f32[batch, f]
  input y : i32[batch]
  l1 = Linear(f, h)
  l2 = Linear(h, c)
  loss = cross_entropy(l2(relu(l1(x))), y, over = c)
}
data { train { synthetic(seed = 1) } }
SPEC
}

# wait_lines FILE N [TRIES [PAUSE]]: waits until FILE has at least N lines,
# looking TRIES times (200) PAUSE seconds (0.05) apart; 1 if it never did.
wait_lines() {
  local tries=${3:-200} pause=${4:-0.05}
  for _ in $(seq 1 "$tries"); do [ -s "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ] && return 0; sleep "$pause"; done
  return 1
}

# rank_pid LAUNCHER RANK: the pid of the launcher's child with RANK=RANK.
rank_pid() {
  for pid in $(pgrep -P "$1"); do tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "RANK=$2" && echo "$pid"; done
}

# losses METRICS: step → loss of a metrics file, the steps in order, one per
# line (the loss as Python's repr, so equal lines mean equal bits).
losses() { python3 -c '
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "loss" in r: print(r["step"], repr(r["loss"]))' "$1"; }
