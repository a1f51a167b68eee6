// libFuzzer target: differential testing of the kernel generator. The input
// bytes are the random region generator's choices (tests/support/
// random_region.h: dims, inputs, ops, outputs, then values; past the end of
// the bytes a stream seeded by their hash goes on), so the fuzzer steers the
// region's structure with the leading bytes. The region is compiled by the
// x86 JIT (compiler/codegen, LLVM 16 at O3) and checked op by op against the
// reference kernels (tests/support/region_oracle.h: per-op ulp bounds, sums
// within γₙ·Σ|xᵢ|, NaN and ±inf exactly, the fused kernel equal to the probe
// bit for bit). A mismatch prints the report (the first problems and the
// region's text) and aborts, so libFuzzer keeps the input; the unit test
// CodegenDiff.FuzzSeedsAndRegressionsMatch replays fuzz/regressions/region/.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "tests/support/random_region.h"
#include "tests/support/region_oracle.h"

// Each input compiles two kernels, and LLVM allocates and frees a great deal
// doing so: behind ASan's default 256 MB quarantine every input faults in
// fresh pages (about 3 inputs a second, RSS climbing to ~700 MB). 16 MB still
// catches a use of recently freed memory, at 8–15 inputs a second. The
// environment's ASAN_OPTIONS (scripts/fuzz.sh) can still override it.
extern "C" const char* __asan_default_options() { return "quarantine_size_mb=16"; }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtl::codegen::testing;
  RandomCase c = randomCaseFromBytes(data, size);
  std::string report;
  compareWithReference(c.region, c.inputs, nullptr, &report);
  if (!report.empty()) {
    std::fprintf(stderr, "fuzz_region: the JIT differs from the reference (%zu input bytes)\n%s", size,
                 report.c_str());
    std::abort();
  }
  return 0;
}
