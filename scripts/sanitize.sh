#!/usr/bin/env bash
# The whole test suite under AddressSanitizer + UBSan (a separate tree,
# build-asan/; the fuzz test is left out: it is its own sanitizer build).
#
#   scripts/sanitize.sh [ctest args...]     # e.g. -R 'Run\.' to narrow it
#
# Any memory error, leak or undefined behaviour aborts the test that hit it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
if [ ! -f build-asan/build.ninja ]; then
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDTL_FUZZ=OFF \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined"
fi
cmake --build build-asan -j"$(nproc)"
export ASAN_OPTIONS=halt_on_error=1:abort_on_error=0:detect_leaks=1:allocator_may_return_null=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export LSAN_OPTIONS=suppressions=$PWD/fuzz/lsan.supp:print_suppressions=0
cd build-asan
ctest --output-on-failure -j"$(nproc)" --timeout 1500 -E '^fuzz\.' "$@"
