// Random valid regions for differential testing of the kernel generator (in
// the spirit of Csmith): 1–4 named dims (sizes 0, 1, odd, powers of two, up
// to 1000 for long reductions); 1–3 inputs over random subsets of them in
// random orders (so binary ops broadcast and permute by name, scalars
// included); 1–12 ops chained mostly on the newest value: every Unary fn,
// add/sub/mul/div with values or scalar constants (±0, ±inf, NaN, denormals
// among them), the six comparisons (Bool outputs, and select's conditions),
// every fn's unaryGrad, select, sum/mean/max along one dim (empty extents
// included), softmax and log-softmax, their gradients, normalize,
// rms_normalize and their gradients (eps 0, 1e-6, 1e-5, 1); outputs: the last
// value plus random earlier nodes (inputs and constants now and then). Input
// values mix normal(0, scale) for scales 1e-30 … 1e30, small integers (ties
// for max and the comparisons), any 32-bit pattern, and the specials NaN,
// ±inf, ±0, denormals, FLT_MIN and ±FLT_MAX, each input at its own rate.
//
// Every choice comes from a ChoiceStream (choice_stream.h): a seed for the
// unit test, the fuzzer's bytes for fuzz/fuzz_region.cc. Every region the
// builder accepts is valid (Region::validate), so the generator only makes
// choices the builder allows (a reduction needs a dim, a comparison's Bool
// result is an operand of a select only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "compiler/codegen/region.h"
#include "tests/support/choice_stream.h"
#include "tests/support/region_oracle.h"

namespace dtl::codegen::testing {

struct RandomCase {
  Region region;
  std::vector<Values> inputs;  // one per region input
};

// No node has more than `max_points` elements (the product of the dims'
// sizes, an empty dim counted as 1), so a case runs in milliseconds.
inline constexpr int64_t kMaxRandomPoints = 4096;

RandomCase randomCase(ChoiceStream& choices, const std::string& name, int64_t max_points = kMaxRandomPoints);
RandomCase randomCase(uint64_t seed, int64_t max_points = kMaxRandomPoints);
RandomCase randomCaseFromBytes(const uint8_t* data, size_t size, int64_t max_points = kMaxRandomPoints);

// The gradients the generator computes in f32 (exp tanh sigmoid silu gelu
// gelu_tanh), more densely than randomCase: x and dy over random dims (dy
// broadcast, or a constant), x now and then an op's result, 1–3 gradients
// chained as a backward pass does, now and then summed along a dim; inputs
// as randomCase's.
RandomCase randomGradientCase(uint64_t seed, int64_t max_points = kMaxRandomPoints);

// Every op class once over small shapes (3 x 7, operands permuted and
// broadcast): each unary fn, binary fn and reduction, softmax and
// log-softmax, each fn's gradient, a select, every normalization and softmax
// gradient in one region, a bias + relu. Their inputs are the caller's.
std::vector<Region> opClassRegions();

// n values: mostly normal(0, scale) with scale in {1, 10, 100}, and with
// probability `special` each one of NaN, ±inf, ±0, a denormal, ±FLT_MAX or 1e30.
Values randomValues(int64_t n, std::mt19937_64& rng, double special = 0.08);

}  // namespace dtl::codegen::testing
