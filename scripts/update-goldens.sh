#!/usr/bin/env bash
# Regenerates every tests/golden/diagnostics/NAME.expected from the current
# build: the stderr of `dtlc check NAME.dtl`, run from that folder so file
# names in messages are just `NAME.dtl`. A case whose first line is
# `# args: …` gets those extra arguments (e.g. `# args: --world 6`).
#
# usage: scripts/update-goldens.sh [DTLC]      (or DTLC=path/to/dtlc)
# Default: build/bin/dtlc. Read the diff before committing.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dtlc="${1:-${DTLC:-$root/build/bin/dtlc}}"
case "$dtlc" in
  /*) ;;
  *) dtlc="$(pwd)/$dtlc" ;;
esac
if [[ ! -x "$dtlc" ]]; then
  echo "update-goldens: no dtlc at $dtlc (build first, or pass its path)" >&2
  exit 2
fi

cd "$root/tests/golden/diagnostics"
shopt -s nullglob
count=0
for spec in *.dtl; do
  name="${spec%.dtl}"
  args=()
  first="$(head -n 1 "$spec")"
  if [[ "$first" == "# args:"* ]]; then
    read -r -a args <<< "${first#"# args:"}"
  fi
  status=0
  "$dtlc" check "$spec" "${args[@]}" > /dev/null 2> "$name.expected" || status=$?
  if [[ $status -ne 1 ]]; then
    echo "update-goldens: $spec: dtlc exited $status (expected 1)" >&2
  fi
  count=$((count + 1))
done
echo "update-goldens: regenerated $count cases"
