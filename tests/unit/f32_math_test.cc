// core/f32_math.h's exp and erf against double libm over a sweep of every
// exponent (every 509th f32 bit pattern, both signs, NaN payloads and
// denormals included) and dense uniform ranges where they bend, saturate or
// underflow: exp within 1 ulp of the correctly rounded result (an overflow
// to inf counts as one past FLT_MAX), erf within 2 u absolute (u = 2⁻²⁴;
// 1.92 over every f32, measured once, minutes),
// NaN exactly where libm's is, and the special values exactly.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <random>
#include <vector>

#include "core/f32_math.h"
#include "tests/support/ulps.h"

namespace dtl {
namespace {

using f32math::erfF32;
using f32math::expF32;

constexpr double kU = 0x1p-24;

using dtl::testing::ulps;

std::vector<float> samples() {
  std::vector<float> x;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 509) x.push_back(std::bit_cast<float>(static_cast<uint32_t>(b)));
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> wide(-110.0f, 95.0f), narrow(-6.0f, 6.0f), tiny(-1e-3f, 1e-3f);
  for (int i = 0; i < 1000000; ++i) x.insert(x.end(), {wide(rng), narrow(rng), tiny(rng)});
  return x;
}

TEST(F32Math, ExpWithinOneUlp) {
  int64_t worst = 0;
  float at = 0;
  for (float x : samples()) {
    const float y = expF32(x), r = static_cast<float>(std::exp(static_cast<double>(x)));
    if (std::isnan(r)) {
      EXPECT_TRUE(std::isnan(y)) << x;
      continue;
    }
    ASSERT_FALSE(std::isnan(y)) << x;
    ASSERT_GE(y, 0.0f) << x;
    if (const int64_t d = ulps(y, r); d > worst) worst = d, at = x;
  }
  std::printf("exp: worst %lld ulp at x = %.9g\n", static_cast<long long>(worst), at);
  EXPECT_LE(worst, 1) << "at x = " << at;
}

TEST(F32Math, ExpSpecialValues) {
  EXPECT_EQ(expF32(0.0f), 1.0f);
  EXPECT_EQ(expF32(-0.0f), 1.0f);
  EXPECT_EQ(expF32(INFINITY), INFINITY);
  EXPECT_EQ(expF32(-INFINITY), 0.0f);
  EXPECT_EQ(expF32(-FLT_MAX), 0.0f);
  EXPECT_EQ(expF32(FLT_MAX), INFINITY);
  EXPECT_EQ(expF32(88.73f), INFINITY);                     // just past ln FLT_MAX
  EXPECT_EQ(expF32(-103.97f), std::nextafter(0.0f, 1.0f));  // the least denormal
  EXPECT_EQ(expF32(-104.0f), 0.0f);
  EXPECT_TRUE(std::isnan(expF32(NAN)));
  EXPECT_TRUE(std::isnan(expF32(-NAN)));
}

TEST(F32Math, ErfWithinItsAbsoluteBound) {
  double worst = 0;
  float at = 0;
  for (float x : samples()) {
    const float y = erfF32(x);
    const double r = std::erf(static_cast<double>(x));
    if (std::isnan(r)) {
      EXPECT_TRUE(std::isnan(y)) << x;
      continue;
    }
    ASSERT_FALSE(std::isnan(y)) << x;
    ASSERT_EQ(erfF32(-x), -y) << "erf is odd, at x = " << x;
    if (const double e = std::fabs(y - r) / kU; e > worst) worst = e, at = x;
  }
  std::printf("erf: worst %.3f u at x = %.9g\n", worst, at);
  EXPECT_LE(worst, 2.0) << "at x = " << at;
}

TEST(F32Math, ErfSpecialValues) {
  EXPECT_EQ(std::bit_cast<uint32_t>(erfF32(0.0f)), std::bit_cast<uint32_t>(0.0f));
  EXPECT_EQ(std::bit_cast<uint32_t>(erfF32(-0.0f)), std::bit_cast<uint32_t>(-0.0f));
  EXPECT_EQ(erfF32(INFINITY), 1.0f);
  EXPECT_EQ(erfF32(-INFINITY), -1.0f);
  EXPECT_EQ(erfF32(4.0f), 1.0f);
  EXPECT_EQ(erfF32(-1e30f), -1.0f);
  EXPECT_TRUE(std::isnan(erfF32(NAN)));
  const float tiny = std::nextafter(0.0f, 1.0f);
  EXPECT_EQ(erfF32(tiny), tiny);  // 2/√π · 2⁻¹⁴⁹ rounds to 2⁻¹⁴⁹
}

}  // namespace
}  // namespace dtl
