// Adam's subnormal first moments and SGD's subnormal momentum buffers
// (runtime/optim/subnormal.h): the update computes them without a subnormal
// operand, and must still give the bits
// of plain IEEE arithmetic -- PyTorch's formula evaluated element by
// element here (this file is compiled with -ffp-contract=off). Inputs are
// built to reach every branch of the rule: subnormal moments with ±0 and
// nonzero gradients, the rounding tie (M = 2^22 with beta1 = 0.9f), moments
// that decay to zero, parameters that are 0, subnormal, the smallest
// normal, a power of two, huge, ±inf and NaN, steps too small and too large
// to move them, in blocks with and without a subnormal moment.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "runtime/optim/optimizer.h"
#include "runtime/optim/simd.h"
#include "runtime/optim/subnormal.h"
#include "tests/support/optimizer_configs.h"

namespace dtl::rt::optim {
namespace {

uint32_t bitsOf(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}
float ofBits(uint32_t b) {
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}
std::string hex(float x) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%08x", bitsOf(x));
  return b;
}
bool subnormal(float x) { return x != 0 && std::fabs(x) < FLT_MIN; }

struct Tensor {
  std::vector<float> p, g;
  ParamState st;
};

// PyTorch 1.13's _single_tensor_adam(w) for one tensor, operation by operation.
void oracleStep(const OptimizerConfig& k, Tensor& t, int64_t step, double lr) {
  const double s = static_cast<double>(step);
  const double bc1 = 1 - std::pow(k.beta1, s), bc2 = 1 - std::pow(k.beta2, s);
  const float wd = static_cast<float>(k.weight_decay), decay = static_cast<float>(1 - lr * k.weight_decay);
  const float b1 = static_cast<float>(k.beta1), omb1 = static_cast<float>(1 - k.beta1);
  const float b2 = static_cast<float>(k.beta2), omb2 = static_cast<float>(1 - k.beta2);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2)), eps = static_cast<float>(k.eps);
  const float neg_step = static_cast<float>(-(lr / bc1));
  for (size_t i = 0; i < t.p.size(); ++i) {
    float gi = t.g[i], pi = t.p[i];
    if (k.name == "adam" && k.weight_decay != 0) gi = std::fma(pi, wd, gi);
    if (k.name == "adamw") pi = pi * decay;
    const float mi = std::fma(gi, omb1, t.st.a[i] * b1);
    const float vi = std::fma(omb2 * gi, gi, t.st.b[i] * b2);
    const float denom = std::sqrt(vi) / bc2_sqrt + eps;
    t.st.a[i] = mi;
    t.st.b[i] = vi;
    t.p[i] = pi + neg_step * mi / denom;
  }
}

// PyTorch 1.13's _single_tensor_sgd with momentum (not its first step).
void oracleSgdStep(const OptimizerConfig& k, Tensor& t, double lr) {
  const float wd = static_cast<float>(k.weight_decay), mom = static_cast<float>(k.momentum);
  const float omd = static_cast<float>(1 - k.dampening), neg_lr = static_cast<float>(-lr);
  for (size_t i = 0; i < t.p.size(); ++i) {
    float d = t.g[i];
    if (k.weight_decay != 0) d = std::fma(t.p[i], wd, d);
    const float b = std::fma(d, omd, t.st.a[i] * mom);
    t.st.a[i] = b;
    d = k.nesterov ? std::fma(b, mom, d) : b;
    t.p[i] = std::fma(d, neg_lr, t.p[i]);
  }
}

float pick(std::mt19937_64& rng, const std::vector<float>& from) { return from[rng() % from.size()]; }

float randomSubnormal(std::mt19937_64& rng) {
  static const uint32_t special[] = {1, 2, 3, 5, 0x400000, 0x7fffff, 0x7ffffe};
  const uint32_t mant = rng() % 4 == 0 ? special[rng() % 7] : 1 + static_cast<uint32_t>(rng() % 0x7fffff);
  return ofBits(mant | (rng() % 2 ? 0x80000000u : 0u));
}

float randomNormal(std::mt19937_64& rng, int lo_exp, int hi_exp) {
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  const int e = lo_exp + static_cast<int>(rng() % static_cast<uint64_t>(hi_exp - lo_exp + 1));
  return std::ldexp(mant(rng), e) * (rng() % 2 ? -1.0f : 1.0f);
}

// n elements; `dense` of every 64-element block have subnormal moments
// (so some blocks take the plain loop and some the emulating one).
Tensor makeTensor(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  Tensor t;
  t.p.resize(n);
  t.g.resize(n);
  t.st.a.resize(n);
  t.st.b.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const bool block_has_subnormals = (i / 64) % 3 != 1;
    const int r = static_cast<int>(rng() % 100);
    t.st.a[i] = block_has_subnormals && r < 60 ? randomSubnormal(rng)
                : r < 80                       ? randomNormal(rng, -20, 0)
                                               : pick(rng, {0.0f, -0.0f, FLT_MIN, -FLT_MIN, inf, nan});
    const int q = static_cast<int>(rng() % 100);
    t.g[i] = q < 70 ? pick(rng, {0.0f, -0.0f}) : q < 95 ? randomNormal(rng, -30, 2) : pick(rng, {1e-40f, inf, nan});
    const int u = static_cast<int>(rng() % 100);
    t.p[i] = u < 60   ? randomNormal(rng, -100, 10)
             : u < 75 ? randomNormal(rng, -126, -90)
             : u < 85 ? pick(rng, {1.0f, -0.5f, 0x1p-100f, FLT_MIN, -FLT_MIN, FLT_MAX, 0x1p56f, -0x1p60f, 0x1p100f})
                      : pick(rng, {0.0f, -0.0f, 1e-40f, -3e-39f, inf, -inf, nan});
    const int w = static_cast<int>(rng() % 100);
    t.st.b[i] = w < 80 ? std::fabs(randomNormal(rng, -40, 0)) : pick(rng, {0.0f, 1e-40f, inf});
  }
  return t;
}

OptimizerConfig adamConfig(const std::string& name, double lr, double wd, double eps) {
  OptimizerConfig c;
  c.name = name;
  c.lr = lr;
  c.weight_decay = wd;
  c.eps = eps;
  return c;
}

OptimizerConfig sgdConfig(double lr, double momentum, double dampening, double wd, bool nesterov) {
  return dtl::testing::optimizerConfig("sgd", lr, momentum, dampening, wd, nesterov);
}

struct Coverage {
  int64_t emulable = 0, kept = 0, moved = 0;
};

// Elements the rule applies to, and how many of those kept their parameter.
void count(const OptimizerConfig& k, const Tensor& before, const Tensor& after, Coverage& c) {
  for (size_t i = 0; i < before.p.size(); ++i) {
    float gi = before.g[i];
    if (k.name != "adamw" && k.weight_decay != 0) gi = std::fma(before.p[i], static_cast<float>(k.weight_decay), gi);
    if (gi != 0 || !subnormal(before.st.a[i]) || after.st.a[i] == 0) continue;
    ++c.emulable;
    const bool same = std::memcmp(&after.p[i], &before.p[i], 4) == 0 ||
                      (k.name == "adamw" && !std::isnan(after.p[i]) &&
                       after.p[i] == before.p[i] * static_cast<float>(1 - k.lr * k.weight_decay));
    ++(same ? c.kept : c.moved);
  }
}

::testing::AssertionResult sameBits(const std::vector<float>& want, const std::vector<float>& got, const Tensor& in,
                                    const char* what) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i]) && std::isnan(got[i])) continue;
    if (bitsOf(want[i]) != bitsOf(got[i]))
      return ::testing::AssertionFailure()
             << what << "[" << i << "]: want " << want[i] << " (" << hex(want[i]) << "), got " << got[i] << " ("
             << hex(got[i]) << ") from p " << in.p[i] << " g " << in.g[i]
             << " exp_avg " << in.st.a[i] << " exp_avg_sq " << in.st.b[i];
  }
  return ::testing::AssertionSuccess();
}

void expectIeeeBits(const OptimizerConfig& k, Coverage& coverage) {
  Tensor fast = makeTensor(64 * 40 + 37, 11), ieee = fast;
  const Optimizer opt(k);
  for (int64_t step : {1, 2, 3, 40, 1000}) {
    const double lr = k.lr * (1.0 - 0.001 * static_cast<double>(step));
    const Tensor before = fast;
    if (k.name == "sgd") {
      oracleSgdStep(k, ieee, lr);
    } else {
      oracleStep(k, ieee, step, lr);
    }
    opt.update(fast.p.data(), fast.g.data(), static_cast<int64_t>(fast.p.size()), fast.st, step, lr);
    const std::string at = k.name + " lr " + std::to_string(k.lr) + " step " + std::to_string(step);
    ASSERT_TRUE(sameBits(ieee.st.a, fast.st.a, before, (at + " exp_avg").c_str()));
    if (k.name != "sgd") ASSERT_TRUE(sameBits(ieee.st.b, fast.st.b, before, (at + " exp_avg_sq").c_str()));
    ASSERT_TRUE(sameBits(ieee.p, fast.p, before, (at + " param").c_str()));
    count(k, before, fast, coverage);
    // the next step's inputs: fresh subnormal moments where the old ones decayed or grew
    Tensor fresh = makeTensor(fast.p.size(), 100 + static_cast<uint64_t>(step));
    for (size_t i = 0; i < fast.p.size(); ++i)
      if (!subnormal(fast.st.a[i]) && subnormal(fresh.st.a[i])) fast.st.a[i] = ieee.st.a[i] = fresh.st.a[i];
  }
}

std::vector<OptimizerConfig> configs() {
  return {adamConfig("adam", 1e-3, 0, 1e-8),    adamConfig("adam", 1e-3, 0.05, 1e-8),
          adamConfig("adamw", 3e-4, 0.1, 1e-8),  adamConfig("adamw", 1e-3, 0, 1e-8),
          adamConfig("adam", 1e6, 0, 1e-30),     adamConfig("adam", 0, 0, 1e-8),
          adamConfig("adamw", 10, 0.01, 0),
          // steps far above any parameter's gap: eps the smallest subnormal, or 0 (denom 0 or subnormal)
          adamConfig("adam", 100, 0, 0x1p-149), adamConfig("adam", 1e30, 0, 0), adamConfig("adamw", 1e38, 0, 0x1p-149)};
}

// SGD with momentum past its first step (the state exists): its buffer
// decays like Adam's first moment; Nesterov is left to the plain arithmetic.
std::vector<OptimizerConfig> sgdConfigs() {
  return {sgdConfig(0.05, 0.9, 0, 0, false), sgdConfig(0.05, 0.9, 0.25, 0.01, false),
          sgdConfig(1e6, 0.5, 0, 0, false),   sgdConfig(0.1, 1.5, 0, 0, false),
          sgdConfig(0.05, 0.9, 0, 0, true),
          // 1 - dampening infinite or NaN: 0·inf is NaN, so no zero gradient leaves the buffer alone
          sgdConfig(0.05, 0.9, std::numeric_limits<double>::infinity(), 0, false),
          sgdConfig(0.05, 0.9, -std::numeric_limits<double>::infinity(), 0, false),
          sgdConfig(0.05, 0.9, std::nan(""), 0, false), sgdConfig(1e38, 0.9, 0, 0, false)};
}

// Every config in both builds; the inputs reached the rule, with
// parameters it keeps and ones it must move.
void expectIeeeBitsInBothBuilds(const std::vector<OptimizerConfig>& configs, int64_t min_emulable) {
  Coverage fma_build, baseline_build;
  for (const OptimizerConfig& k : configs) expectIeeeBits(k, fma_build);
  detail::forceBaselineBuild() = true;
  for (const OptimizerConfig& k : configs) expectIeeeBits(k, baseline_build);
  detail::forceBaselineBuild() = false;
  for (const Coverage& c : {fma_build, baseline_build}) {
    EXPECT_GT(c.emulable, min_emulable);
    EXPECT_GT(c.kept, 1000);
    EXPECT_GT(c.moved, 100);
  }
}

TEST(OptimSubnormalMoments, GiveTheBitsOfPlainFloatArithmeticInBothBuilds) {
  expectIeeeBitsInBothBuilds(configs(), 10000);
}

TEST(OptimSubnormalMomentumBuffers, GiveTheBitsOfPlainFloatArithmeticInBothBuilds) {
  expectIeeeBitsInBothBuilds(sgdConfigs(), 5000);
}

// The tie: 0x400000 · 0.9f = 3774873.5 on the subnormal grid rounds to the even 3774874.
TEST(OptimSubnormalMoments, RoundHalfToEvenOnTheSubnormalGrid) {
  Tensor t;
  t.p = {1.0f, 0.0f};
  t.g = {0.0f, -0.0f};
  t.st.a = {ofBits(0x400000), ofBits(0x80000001)};  // the tie, and -2^-149
  t.st.b = {1e-6f, 0.0f};
  const Optimizer opt(adamConfig("adam", 1e-3, 0, 1e-8));
  opt.update(t.p.data(), t.g.data(), 2, t.st, 5, 1e-3);
  EXPECT_EQ(bitsOf(t.st.a[0]), 3774874u);
  EXPECT_EQ(bitsOf(t.st.a[1]), 0x80000001u);  // 0.9 rounds to 1: the smallest subnormal stays
  EXPECT_EQ(t.p[0], 1.0f);
}

// The decayed mantissa (one f32 fma onto the integers of [2^23, 2^24)) is
// on the grid exactly where IEEE's m·beta is a nonzero subnormal, and then
// has its bits: every small M, a stride through the rest, for the factors
// Adam and SGD take (a factor above 1 grows M; 0.5 makes exact halves, ties).
// A factor of 0 or below, NaN or infinite is never on the grid (the
// product's sign would be the factor's, or it is not finite: those elements
// take the plain arithmetic).
TEST(OptimSubnormalMoments, DecayedMantissaIsTheFloatProductOnTheGrid) {
  const float inf = std::numeric_limits<float>::infinity();
  auto check = [](uint32_t m, float beta) -> ::testing::AssertionResult {
    for (uint32_t sign : {0u, 0x80000000u}) {
      const float product = ofBits(sign | m) * beta;  // IEEE, the assist and all
      const uint32_t decayed = subnormal::decayedMantissa(sign | m, beta);
      const bool grid = subnormal::onGrid(decayed);
      if (grid != (beta > 0 && subnormal(product)) || (grid && (bitsOf(product) & 0x7fffffffu) != decayed))
        return ::testing::AssertionFailure() << "M " << m << " sign " << sign << " beta " << beta << ": product "
                                             << hex(product) << ", decayed mantissa " << decayed;
    }
    return ::testing::AssertionSuccess();
  };
  for (float beta : {0.9f, 0.999f, 0.5f, 0.75f, 1.5f, 0.0f, -0.0f, -0.9f, 1e30f, inf, -inf,
                     std::numeric_limits<float>::quiet_NaN()}) {
    for (uint32_t m = 1; m < 0x00800000u; m += m < 4096 ? 1 : 97) ASSERT_TRUE(check(m, beta));
    ASSERT_TRUE(check(0x007fffffu, beta));  // the largest subnormal
  }
  // 5592405 · 1.5 = 8388607.5: the tie rounds to 2^23, FLT_MIN, a normal product
  EXPECT_TRUE(check(5592405u, 1.5f));
  EXPECT_EQ(subnormal::decayedMantissa(5592405u, 1.5f), 0x00800000u);
  EXPECT_TRUE(check(5592404u, 1.5f));  // 8388606: the largest subnormal
  EXPECT_EQ(subnormal::decayedMantissa(5592404u, 1.5f), 0x007ffffeu);
}

}  // namespace
}  // namespace dtl::rt::optim
