// The oracle for the kernel generator: runs a region's x86 JIT kernel and
// compares it with the reference kernels (runtime/kernels/reference, double
// precision), op by op. No gtest here: the unit tests (tests/unit/
// codegen_check.h) turn each problem into a test failure, the fuzz target
// (fuzz/fuzz_region.cc) into a crash.
//
// compareWithReference compiles the region twice: a *probe* that also
// outputs every node, so each node's JIT result is compared with the
// reference of that node applied to the JIT's own operand values (a per-op
// bound, not an error accumulated along a chain); and the region as given,
// whose outputs must equal the probe's bit for bit (fusing changes no numbers).
//
// Bounds (`ulpBound`): elementwise within that many f32 ulps of the
// reference rounded to f32 (an overflow to ±inf counts as one ulp past
// FLT_MAX; the sign of a zero is not compared); gelu and gelu_tanh within
// `operandUnitsBound` units of u·|x| + 2⁻¹⁴⁹ instead (x their operand); NaN
// exactly where the reference is NaN; an infinite reference (not an
// overflow) exactly. sum:
// |y − s| ≤ γₙ·Σ|xᵢ| (γₙ = n·u/(1 − n·u), u = 2⁻²⁴), mean: that over n plus
// its last rounding, and either may be ±inf or NaN where the finite terms'
// Σ|xᵢ| reaches FLT_MAX (an f32 partial sum overflows; the double reference
// does not); max, comparisons and select: exact; a UnaryGrad: gradUlpBound,
// or gradUnitsBound (below) for the gradients whose f' cancels in f32.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "compiler/codegen/region.h"

namespace dtl::codegen::testing {

using Values = std::vector<float>;

// ulps allowed for each elementwise op (0 = correctly rounded or exact);
// the measured worst error of what the generator emits (docs/compiler.md).
int64_t ulpBound(UnaryFn fn);
inline int64_t ulpBound(BinaryFn) { return 0; }
// A UnaryGrad's: 0 for the reference's double formula rounded once (relu
// neg abs log sqrt rsqrt); exp's dy · e^x in f32 (emit_llvm.cc, expGrad):
// the measured worst; 0 for the fns gradUnitsBound bounds.
int64_t gradUlpBound(UnaryFn fn);

// gelu, gelu_tanh, silu, tanh and sigmoid: the generator computes f'(x) in
// f32 (the fast backend's formulas), where 1 − t², 1 − s or 1 + erf cancel:
// f' has an absolute error of a few u, so dy · f'(x) has one of a few u·|dy|
// while its ulps grow without bound where f' is tiny (tanh' at x = 9: 1 − t²
// is 0 in f32, 6e-8 in double). The bound: y = dy · s̃ with
// |dy · s̃ − r| ≤ gradUnitsBound(fn) · (u·|dy| + 2⁻¹⁴⁹), the result's rounding
// included; so with an infinite dy, NaN or either inf where the reference's
// slope f'(x) is within bound·u of 0 (the f32 slope may be 0 there:
// inf · 0), else the reference's inf exactly; an overflow to ±inf where
// |r| is within the bound of FLT_MAX's rounding threshold. 0 for the other fns.
double gradUnitsBound(UnaryFn fn);

// gelu and gelu_tanh are x·Φ(x) with Φ ∈ [0, 1] computed in f32 to an
// absolute error (the fast backend's formulas, as the generator's): where
// 1 + erf or 1 + tanh cancels (x < −3 or so) their ulps grow without bound,
// as do the double reference's own, while |y − r| stays a few u·|x|. Their
// bound: |y − r| ≤ operandUnitsBound(fn) · (u·|x| + 2⁻¹⁴⁹). 0 for the other
// fns, which are bounded in ulps.
double operandUnitsBound(UnaryFn fn);

// Distance between two floats in ulps (ordered as integers; -0 == +0; inf is
// one past FLT_MAX). Both must be non-NaN.
int64_t ulpDistance(float a, float b);

// The two comparisons the check makes, exposed for their own test.
bool withinUlps(float y, double reference, int64_t bound, int64_t* ulps);
bool withinOperandUnits(float y, double reference, float x, double bound, double* units);
bool withinSumBound(float y, double reference, double finite_abs_sum, int64_t n, bool mean, double* ratio);
// slope: the reference's f'(x) (its dy · f'(x) at dy = 1).
bool withinGradUnits(float y, double reference, float dy, double slope, double bound, double* units);

// The largest error seen per op over everything checked: ulps for
// elementwise ops, err / bound for sum and mean.
struct Stats {
  std::map<std::string, int64_t> max_ulps;
  std::map<std::string, double> max_bound_ratio;
  std::map<std::string, double> max_operand_units;  // gelu, gelu_tanh: |err| / (u·|x| + 2⁻¹⁴⁹)
  std::map<std::string, double> max_dy_units;       // their gradients, silu's, tanh's, sigmoid's: |err| / (u·|dy| + 2⁻¹⁴⁹)
  int64_t values = 0;     // values compared
  int64_t nonfinite = 0;  // of which the reference was NaN or ±inf
  double compile_ms = 0;  // summed over every kernel compiled
  int kernels = 0;
};

// Prints the stats as a table (one line per op).
std::string formatStats(const Stats& s);

// Every output's values as float (a Bool output as 0 or 1). Empty, with
// *error set, when the region does not compile or the inputs do not fit it.
std::vector<Values> jitOutputs(const Region& r, const std::vector<Values>& inputs, Stats* stats, std::string* error);

// The whole region in double by the reference kernels, from its inputs.
std::vector<std::vector<double>> runReference(const Region& r, const std::vector<Values>& inputs);

// What runs a region for the check: jitOutputs by default; the GPU check
// (tests/gpu/ptx_check.cc) hands back what the GPU computed.
using RegionRunner = std::function<std::vector<Values>(const Region&, const std::vector<Values>& inputs, Stats*,
                                                        std::string* error)>;

// The region with every node that is not an input or constant also an
// output (after the region's own outputs, in node order): the oracle's probe.
Region probeOf(const Region& r);

struct OracleOptions {
  int max_problems = 5;  // per region: the first few are the ones to read
  RegionRunner run;      // empty: the x86 JIT (jitOutputs)
  // A test of the oracle itself: changes a node's probe values before they are checked.
  std::function<void(int node, Values& values)> tamper;
};

// The check described above. *report is "" when the region passes, else how
// many problems there were, the first max_problems (one line each: the node,
// the element, both values, the error against the bound) and the region's
// text (printRegion). Returns the region's outputs (empty when it did not
// compile). `stats` may be null.
std::vector<Values> compareWithReference(const Region& r, const std::vector<Values>& inputs, Stats* stats,
                                         std::string* report, const OracleOptions& options = {});

}  // namespace dtl::codegen::testing
