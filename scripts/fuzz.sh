#!/usr/bin/env bash
# Fuzzes dtl's readers of untrusted input with libFuzzer (fuzz/fuzz_*.cc).
#
#   scripts/fuzz.sh [SECONDS] [TARGET]   # SECONDS per target (default 60); TARGET: one of
#                                        # the targets below, or all of them (the default)
#   scripts/fuzz.sh --build-only         # configure and build, run nothing
#
# Targets: frontend (spec text), store_wire (the TCP store's frames),
# safetensors, train_state (state.json), idx, npy, csv, gzip (data files),
# region (the kernel generator's JIT against the reference kernels on random
# regions the fuzzer's bytes choose; with LLVM 16 only).
#
# 1. Configures and builds fuzz/ into build-fuzz/ with clang-14 and
#    -fsanitize=fuzzer,address,undefined: one build, every target
#    (FUZZ_SKIP_BUILD=1 uses the build as it is: ctest builds it once first).
# 2. Per target, runs every input in fuzz/regressions/TARGET/ once: each must
#    finish cleanly.
# 3. Fuzzes for SECONDS seconds on build-fuzz/corpus/TARGET, seeded with
#    fuzz/seeds/TARGET/ (the front end: samples/*.dtl, stdlib/nn.dtl and
#    tests/golden/diagnostics/*.dtl) and the small regression inputs. A crash
#    lands in build-fuzz/artifacts/TARGET/.
#    The corpus starts from the seeds each run (at ~10–50 runs a second,
#    re-reading a grown corpus would eat a short run); FUZZ_KEEP_CORPUS=1
#    keeps what earlier runs found, for long sessions.
#
# The last line is the summary the test harness reads:
#   fuzz: N passed, M failed
# (N counts the regression inputs that ran cleanly plus 1 per timed run.)
# Exit status: 0 when nothing failed, 1 otherwise, 2 when the build failed.
set -u -o pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
all_targets=(frontend store_wire safetensors train_state idx npy csv gzip)
# The kernel generator's target needs LLVM 16, as fuzz/CMakeLists.txt does.
[[ -e /usr/lib/llvm-16/lib/libLLVM-16.so ]] && all_targets+=(region)
usage="usage: scripts/fuzz.sh [SECONDS] [TARGET] | --build-only   (TARGET: ${all_targets[*]})"
build_only=0
if [[ ${1:-} == --build-only ]]; then
  build_only=1
  set --
fi
secs=${1:-60}
if ! [[ $secs =~ ^[0-9]+$ ]] || ((secs < 1)); then
  echo "$usage" >&2
  exit 2
fi
targets=("${all_targets[@]}")
if [[ -n ${2:-} ]]; then
  if [[ " ${all_targets[*]} " != *" $2 "* ]]; then
    echo "fuzz: unknown target '$2'" >&2
    echo "$usage" >&2
    exit 2
  fi
  targets=("$2")
fi
build=$root/build-fuzz
jobs=$(nproc 2>/dev/null || echo 2)

# ---- build --------------------------------------------------------------
for tool in clang-14 clang++-14 ninja cmake; do
  if ! command -v "$tool" >/dev/null; then
    echo "fuzz: $tool not found (apt-get install clang-14 libclang-rt-14-dev ninja-build cmake)" >&2
    echo "fuzz: 0 passed, 1 failed"
    exit 2
  fi
done
start=$SECONDS
mkdir -p "$build"
if [[ ${FUZZ_SKIP_BUILD:-0} == 1 ]]; then
  for t in "${targets[@]}"; do
    if [[ ! -x $build/fuzz_$t ]]; then
      echo "fuzz: $build/fuzz_$t is not built (run scripts/fuzz.sh --build-only)" >&2
      echo "fuzz: 0 passed, 1 failed"
      exit 2
    fi
  done
elif ! CC=clang-14 CXX=clang++-14 cmake -S "$root/fuzz" -B "$build" -G Ninja >"$build/configure.log" 2>&1; then
  cat "$build/configure.log" >&2
  echo "fuzz: configuring fuzz/ failed" >&2
  echo "fuzz: 0 passed, 1 failed"
  exit 2
elif ! cmake --build "$build" -j "$jobs"; then
  echo "fuzz: building fuzz/ failed" >&2
  echo "fuzz: 0 passed, 1 failed"
  exit 2
else
  echo "fuzz: build took $((SECONDS - start)) s"
fi
if ((build_only)); then
  echo "fuzz: 0 passed, 0 failed"
  exit 0
fi

# UB and memory errors abort with a stack; leaks count as failures, except
# the ANTLR runtime's own (fuzz/lsan.supp says which and why).
export ASAN_OPTIONS=halt_on_error=1:abort_on_error=0:print_stacktrace=1:detect_leaks=1:allocator_may_return_null=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export LSAN_OPTIONS=suppressions=$root/fuzz/lsan.supp:print_suppressions=0
# The front end resolves relative imports and data paths against the current
# folder; run from an empty one so nothing in the tree is picked up by chance.
work=$build/cwd
mkdir -p "$work"
cd "$work" || exit 2

passed=0
failed=0
shopt -s nullglob

runOne() {  # FILE LOGDIR BIN
  local name
  name=$(basename "$1")
  if timeout 300 "$3" -timeout=120 -rss_limit_mb=4096 -error_exitcode=77 -timeout_exitcode=78 "$1" \
      >"$2/$name.log" 2>&1 </dev/null; then
    touch "$2/$name.ok"
  fi
}
export -f runOne

# The front end's seeds are the repository's specs; a dictionary of the
# language's words: grammar literals, builtin names (quoted words in sema),
# stdlib layers and the harness's `#set` prefixes.
frontendSeeds() {
  printf '%s\n' "$root"/samples/*.dtl "$root"/stdlib/nn.dtl "$root"/tests/golden/diagnostics/*.dtl
}
frontendDict() {
  grep -o "'[^'\\\\]\{2,\}'" "$root/grammar/Dtl.g4" | tr -d "'"
  grep -oh '"[a-z_][a-z0-9_]\{1,23\}"' "$root"/compiler/sema/*.cc | tr -d '"'
  sed -n 's/^layer \([A-Za-z_][A-Za-z0-9_]*\).*/\1/p' "$root/stdlib/nn.dtl"
  printf '%s\n' "#set model." "#set train." "#set data." "#set parallel." "#set parallel.mesh." "#world "
}

fuzzTarget() {  # TARGET
  local t=$1 bin=$build/fuzz_$1 f name start status new a
  # ---- 1. regressions ---------------------------------------------------
  local logs=$build/regressions/$t
  rm -rf "$logs"
  mkdir -p "$logs"
  local regressions=("$root"/fuzz/regressions/"$t"/*)
  local tfailed=0
  start=$SECONDS
  if ((${#regressions[@]})); then
    # Largest first, so the slow ones do not end up last on one worker.
    local by_size
    mapfile -t by_size < <(ls -S "${regressions[@]}")
    printf '%s\0' "${by_size[@]}" | xargs -0 -P "$jobs" -I{} bash -c 'runOne "$1" "$2" "$3"' _ {} "$logs" "$bin"
  fi
  for f in "${regressions[@]}"; do
    name=$(basename "$f")
    if [[ -e $logs/$name.ok ]]; then
      passed=$((passed + 1))
    else
      failed=$((failed + 1))
      tfailed=$((tfailed + 1))
      echo "fuzz: FAILED regression fuzz/regressions/$t/$name (log: $logs/$name.log)"
      grep -E "ERROR:|runtime error:|SUMMARY:|invariant broken|differs from the reference" "$logs/$name.log" | head -5 | sed 's/^/    /'
    fi
  done
  echo "fuzz: $t: ${#regressions[@]} regression inputs, $tfailed failed ($((SECONDS - start)) s)"

  # ---- 2. timed run -----------------------------------------------------
  local corpus=$build/corpus/$t artifacts=$build/artifacts/$t
  [[ ${FUZZ_KEEP_CORPUS:-0} == 1 ]] || rm -rf "$corpus"
  mkdir -p "$corpus" "$artifacts"
  local seeds=("$root"/fuzz/seeds/"$t"/*)
  local max_len=4096 dict_args=()
  if [[ $t == frontend ]]; then
    mapfile -t seeds < <(frontendSeeds)
    max_len=8192
    frontendDict | sort -u | sed 's/.*/"&"/' >"$build/frontend.dict"
    dict_args=(-dict="$build/frontend.dict")
  elif [[ $t == region ]]; then
    max_len=1024  # past the first ~100 bytes they only set input values
  elif [[ -f $root/fuzz/dict/$t.dict ]]; then
    dict_args=(-dict="$root/fuzz/dict/$t.dict")
  fi
  for f in "${seeds[@]}" "${regressions[@]}"; do
    # libFuzzer would truncate longer seeds to -max_len anyway.
    (($(stat -c %s "$f") <= max_len)) || continue
    cp -n "$f" "$corpus/seed-$(basename "$(dirname "$f")")-$(basename "$f")"
  done

  touch "$build/fuzz-$t.start"
  local log=$build/fuzz-$t.log
  echo "fuzz: $t: fuzzing for $secs s (log: $log)"
  timeout $((secs + 300)) "$bin" "$corpus" "${dict_args[@]}" -max_total_time="$secs" -max_len="$max_len" -timeout=10 \
    -rss_limit_mb=4096 -artifact_prefix="$artifacts/" -print_final_stats=1 </dev/null >"$log" 2>&1
  status=$?
  grep -E "^#[0-9]+[[:space:]]+(INITED|DONE)|^stat::number_of_executed_units|ERROR:|runtime error:|invariant broken|differs from the reference|SUMMARY:|Test unit written" "$log" | sed 's/^/    /'
  new=$(find "$artifacts" -type f -newer "$build/fuzz-$t.start" | sort)
  if ((status != 0)) || [[ -n $new ]]; then
    failed=$((failed + 1))
    echo "fuzz: $t: the timed run FAILED (exit $status); see $log"
    for a in $new; do
      echo "fuzz: crashing input: $a"
    done
    echo "fuzz: minimise it ($bin -minimize_crash=1 -runs=10000 FILE), fix the reader, and add it"
    echo "      as fuzz/regressions/$t/crash-<short description>"
    if [[ $t == region ]]; then
      echo "      (for region: the log has the report, i.e. the node, the element, both values and the"
      echo "      region's text; fix compiler/codegen, and CodegenDiff.FuzzSeedsAndRegressionsMatch"
      echo "      replays the input in the normal build too)"
    fi
    if [[ $t == frontend ]]; then
      echo "      (a timeout's stack shows only the main thread waiting for the worker that runs the"
      echo "      front end: run FILE under gdb and interrupt it to see where the worker is)"
    fi
  else
    passed=$((passed + 1))
  fi
}

for t in "${targets[@]}"; do
  fuzzTarget "$t"
done

echo "fuzz: $passed passed, $failed failed"
((failed == 0))
