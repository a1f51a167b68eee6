// runtime/data/box_muller.h over every input the loader can give it (2²⁴
// each) against double libm, and the loader's vectorised synthetic normals
// against the same formula evaluated one pair at a time here, bit for bit.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <numbers>
#include <vector>

#include "runtime/data/box_muller.h"
#include "runtime/data/loader_random.h"
#include "runtime/data/sources_synthetic.h"
#include "tests/support/ulps.h"

namespace dtl::rt::data::detail {
namespace {

constexpr double kU = 0x1p-24;

using dtl::testing::ulps;

float uniformOf(uint32_t k) { return static_cast<float>(static_cast<int32_t>(k + 1)) * 0x1p-24f; }

TEST(BoxMuller, LogWithinTwoUlpOfEveryUniform) {
  int64_t worst = 0;
  float at = 0;
  for (uint32_t k = 0; k < (1u << 24); ++k) {
    const float u = uniformOf(k);
    const float y = logPositive(u), r = static_cast<float>(std::log(static_cast<double>(u)));
    if (const int64_t d = ulps(y, r); d > worst) worst = d, at = u;
  }
  std::printf("log: worst %lld ulp at u = %.9g\n", static_cast<long long>(worst), at);
  EXPECT_LE(worst, 2) << "at u = " << at;
  // ln 1 is +0: u = 1 gives r = sqrt(−0) = −0, never NaN.
  EXPECT_EQ(std::bit_cast<uint32_t>(logPositive(1.0f)), 0u);
}

// Absolute error: the value is multiplied by a radius up to 5.8, so an ulp
// near 0 matters no more than one near 1.
TEST(BoxMuller, SinCosWithinFourUnitsOfEveryAngle) {
  double worst_sin = 0, worst_cos = 0;
  uint32_t at_sin = 0, at_cos = 0;
  for (uint32_t t = 0; t < (1u << 24); ++t) {
    const SinCos sc = sinCosTurn24(t);
    const double a = 2 * std::numbers::pi * static_cast<double>(t) * kU;
    const double es = std::fabs(sc.sin - std::sin(a)) / kU, ec = std::fabs(sc.cos - std::cos(a)) / kU;
    if (es > worst_sin) worst_sin = es, at_sin = t;
    if (ec > worst_cos) worst_cos = ec, at_cos = t;
  }
  std::printf("sin: worst %.3f u at t = %u; cos: worst %.3f u at t = %u (u = 2^-24)\n", worst_sin, at_sin, worst_cos,
              at_cos);
  EXPECT_LE(worst_sin, 4.0) << "at t = " << at_sin;
  EXPECT_LE(worst_cos, 4.0) << "at t = " << at_cos;
  for (uint32_t q = 0; q < 4; ++q) {  // the quarter turns are exact
    const SinCos sc = sinCosTurn24(q << 22);
    EXPECT_EQ(sc.sin, (q == 1 ? 1.0f : q == 3 ? -1.0f : 0.0f)) << q;
    EXPECT_EQ(sc.cos, (q == 0 ? 1.0f : q == 2 ? -1.0f : 0.0f)) << q;
  }
}

// The loader makes pairs in vectorised blocks of 128 and interleaves them;
// element 2p and 2p + 1 must be pair p's cos and sin halves exactly as one
// scalar evaluation gives them, for odd sizes and across blocks.
TEST(BoxMuller, SyntheticNormalsAreTheScalarFormula) {
  for (int64_t n : {1, 2, 7, 255, 256, 257, 784, 1001}) {
    std::vector<float> got(static_cast<size_t>(n) + 1, -7.0f);
    syntheticNormals(3, nameHash("x"), 41, got.data(), n);
    EXPECT_EQ(got.back(), -7.0f) << "wrote past n = " << n;
    const uint64_t base = hashKey(3 ^ 0x1000, nameHash("x"), 41);  // sources_synthetic.cc's input stream
    for (int64_t j = 0; j < n; ++j) {
      const uint64_t h = mix64(base ^ static_cast<uint64_t>(j / 2));
      const float r = std::sqrt(-2.0f * logPositive(uniformOf(static_cast<uint32_t>(h >> 40))));
      const SinCos turn = sinCosTurn24(static_cast<uint32_t>(h >> 16) & 0xffffffu);
      const float want = r * (j % 2 == 0 ? turn.cos : turn.sin);
      ASSERT_EQ(std::bit_cast<uint32_t>(got[static_cast<size_t>(j)]), std::bit_cast<uint32_t>(want))
          << "n = " << n << ", element " << j;
    }
  }
}

}  // namespace
}  // namespace dtl::rt::data::detail
