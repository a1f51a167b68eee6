// Test support for the kernel generator: runs a region's JIT kernel and
// checks it against the reference kernels (runtime/kernels/reference), op by
// op. checkRegion compiles the region twice: a *probe* that also outputs
// every node, so each node's JIT result is compared with the reference of
// that node applied to the JIT's own operand values (a per-op bound, not an
// error accumulated along a chain); and the region as given, whose outputs
// must equal the probe's bit for bit (fusing changes no numbers).
//
// Bounds (`ulpBound`): elementwise within that many f32 ulps of the
// reference rounded to f32 (an overflow to ±inf counts as one ulp past
// FLT_MAX; the sign of a zero is not compared); NaN exactly where the
// reference is NaN; an infinite reference (not an overflow) exactly. sum:
// |y − s| ≤ γₙ·Σ|xᵢ| (γₙ = n·u/(1 − n·u), u = 2⁻²⁴), mean: that over n plus
// its last rounding, and either may be ±inf or NaN where the finite terms'
// Σ|xᵢ| reaches FLT_MAX (an f32 partial sum overflows; the double reference
// does not); max and comparisons: exact.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "compiler/codegen/jit_x86.h"
#include "compiler/codegen/region.h"

namespace dtl::codegen::testing {

using Values = std::vector<float>;

// ulps allowed for each elementwise op (0 = correctly rounded or exact).
int64_t ulpBound(UnaryFn fn);
inline int64_t ulpBound(BinaryFn) { return 0; }

// Distance between two floats in ulps (ordered as integers; -0 == +0; inf is
// one past FLT_MAX). Both must be non-NaN.
int64_t ulpDistance(float a, float b);

// The two comparisons the check makes, exposed for their own test.
bool withinUlps(float y, double reference, int64_t bound, int64_t* ulps);
bool withinSumBound(float y, double reference, double finite_abs_sum, int64_t n, bool mean, double* ratio);

// The largest error seen per op over everything checked: ulps for
// elementwise ops, err / bound for sum and mean.
struct Stats {
  std::map<std::string, int64_t> max_ulps;
  std::map<std::string, double> max_bound_ratio;
  int64_t values = 0;      // values compared
  int64_t nonfinite = 0;   // of which the reference was NaN or ±inf
  double compile_ms = 0;   // summed over every kernel compiled
  int kernels = 0;
};

// Every output's values as float (a Bool output as 0 or 1). Fails the test
// (and returns empty) when the region does not compile.
std::vector<Values> runJit(const Region& r, const std::vector<Values>& inputs, Stats* stats = nullptr);

// The whole region in double by the reference kernels, from its inputs.
std::vector<std::vector<double>> runReference(const Region& r, const std::vector<Values>& inputs);

// The check described above; failures are gtest failures naming the region,
// the node and the element (at most a few per region). Returns the outputs.
std::vector<Values> checkRegion(const Region& r, const std::vector<Values>& inputs, Stats* stats);

// n values: mostly normal(0, scale) with scale in {1, 10, 100}, and with
// probability `special` each one of NaN, ±inf, ±0, a denormal, ±FLT_MAX or 1e30.
Values randomValues(int64_t n, std::mt19937_64& rng, double special = 0.08);

// Prints the stats as a table (one line per op).
std::string formatStats(const Stats& s);

// The ptxas to assemble PTX with: the one CMake found (DTL_PTXAS), else the
// first on PATH, else /usr/local/cuda/bin's; "" when there is none.
std::string ptxasPath();

}  // namespace dtl::codegen::testing
