// The x86 JIT, op class by op class, against the reference kernels
// (codegen_check.h), with NaN, ±inf, ±0 and denormals in every input; and the
// values PyTorch 1.13 gives for the non-finite cases a user would notice.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>

#include "tests/unit/codegen_check.h"

namespace dtl::codegen::testing {
namespace {

const Shape kRows{{{"batch", 3}, {"hidden", 7}}};

// Every special value, then ordinary ones of several magnitudes.
Values edgeValues(int64_t n) {
  Values v = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -1e-45f, FLT_MIN, FLT_MAX, -FLT_MAX, 1.0f, -1.0f,
              0.5f, -2.5f, 88.72f, 89.0f, -87.3f, -104.0f, 20.0f, -20.0f, 1e-20f};
  std::mt19937_64 rng(7);
  Values more = randomValues(n, rng, 0.0);
  v.insert(v.end(), more.begin(), more.end());
  v.resize(static_cast<size_t>(n));
  return v;
}

class CodegenOps : public ::testing::Test {
 protected:
  static void TearDownTestSuite() { std::printf("%s", formatStats(stats_).c_str()); }
  static Stats stats_;
};
Stats CodegenOps::stats_;

TEST_F(CodegenOps, EachUnaryFnWithinItsBound) {
  for (UnaryFn fn : kAllUnaryFns) {
    Region r(std::string("unary_") + fnName(fn));
    r.output("y", r.unary(fn, r.input("x", kRows)));
    checkRegion(r, {edgeValues(21)}, &stats_);
  }
}

TEST_F(CodegenOps, EachBinaryFnWithinItsBound) {
  // every pair of the edge values: a along batch·hidden, b along the transposed order (strides differ)
  const Shape a_shape{{{"i", 21}, {"j", 21}}};
  const Shape b_shape{{{"j", 21}, {"i", 21}}};
  Values a(21 * 21), b(21 * 21);
  Values edge = edgeValues(21);
  for (int i = 0; i < 21; ++i)
    for (int j = 0; j < 21; ++j) a[i * 21 + j] = edge[i], b[j * 21 + i] = edge[j];
  for (BinaryFn fn : kAllBinaryFns) {
    Region r(std::string("binary_") + fnName(fn));
    r.output("y", r.binary(fn, r.input("a", a_shape), r.input("b", b_shape)));
    checkRegion(r, {a, b}, &stats_);
  }
}

TEST_F(CodegenOps, EachReductionAlongEachDim) {
  std::mt19937_64 rng(11);
  const Shape s{{{"a", 4}, {"b", 33}, {"c", 5}}};
  for (ReduceFn fn : kAllReduceFns)
    for (const char* dim : {"a", "b", "c"}) {
      Region r(std::string("reduce_") + fnName(fn) + "_" + dim);
      r.output("y", r.reduce(fn, r.input("x", s), dim));
      checkRegion(r, {randomValues(4 * 33 * 5, rng, 0.0)}, &stats_);
      checkRegion(r, {randomValues(4 * 33 * 5, rng, 0.05)}, &stats_);
    }
}

TEST_F(CodegenOps, ReductionsOverEmptyAndUnitExtents) {
  for (ReduceFn fn : kAllReduceFns) {
    Region r(std::string("reduce_empty_") + fnName(fn));
    r.output("y", r.reduce(fn, r.input("x", Shape{{{"rows", 2}, {"none", 0}}}), "none"));
    std::vector<Values> y = checkRegion(r, {Values{}}, &stats_);
    ASSERT_EQ(y.size(), 1u);
    ASSERT_EQ(y[0].size(), 2u);
    if (fn == ReduceFn::Sum) EXPECT_EQ(y[0][0], 0.0f);
    if (fn == ReduceFn::Mean) EXPECT_TRUE(std::isnan(y[0][0]));  // 0/0, as PyTorch's mean of nothing
    if (fn == ReduceFn::Max) EXPECT_EQ(y[0][0], -INFINITY);
    Region one(std::string("reduce_unit_") + fnName(fn));
    one.output("y", one.reduce(fn, one.input("x", Shape{{{"one", 1}}}), "one"));
    EXPECT_EQ(checkRegion(one, {Values{-3.5f}}, &stats_)[0][0], -3.5f);
  }
}

TEST_F(CodegenOps, MaxPropagatesNaNAndKeepsInfinities) {
  Region r("max_nonfinite");
  r.output("y", r.reduce(ReduceFn::Max, r.input("x", Shape{{{"row", 4}, {"col", 3}}}), "col"));
  std::vector<Values> y =
      checkRegion(r, {{1, NAN, 2, -INFINITY, -INFINITY, -INFINITY, 5, INFINITY, NAN, NAN, -1, -2}}, &stats_);
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(std::isnan(y[0][0]));
  EXPECT_EQ(y[0][1], -INFINITY);
  EXPECT_TRUE(std::isnan(y[0][2]));  // NaN after +inf still wins, as torch.max
  EXPECT_TRUE(std::isnan(y[0][3]));
}

TEST_F(CodegenOps, SoftmaxAndLogSoftmaxRows) {
  std::mt19937_64 rng(3);
  for (bool log : {false, true}) {
    Region r(log ? "log_softmax" : "softmax");
    int x = r.input("logits", kRows);
    r.output("y", log ? r.logSoftmax(x, "hidden") : r.softmax(x, "hidden"));
    checkRegion(r, {randomValues(21, rng, 0.0)}, &stats_);
    // a row with +inf is NaN (inf − inf), a row of −inf NaN too, a NaN row NaN; the others are untouched
    Values v = randomValues(21, rng, 0.0);
    v[2] = INFINITY;
    for (int j = 7; j < 14; ++j) v[j] = -INFINITY;
    std::vector<Values> y = checkRegion(r, {v}, &stats_);
    ASSERT_EQ(y.size(), 1u);
    for (int j = 0; j < 14; ++j) EXPECT_TRUE(std::isnan(y[0][j])) << j;
    float total = 0;
    for (int j = 14; j < 21; ++j) total += log ? std::exp(y[0][j]) : y[0][j];
    EXPECT_NEAR(total, 1.0f, 1e-5f);
  }
}

TEST_F(CodegenOps, BiasReluBroadcastsTheBias) {
  Region r("bias_relu");
  int x = r.input("x", kRows);
  int bias = r.input("bias", Shape{{{"hidden", 7}}});
  r.output("y", r.unary(UnaryFn::Relu, r.binary(BinaryFn::Add, x, bias)));
  Values xs(21, 1.0f);
  xs[0] = NAN, xs[1] = -INFINITY, xs[2] = INFINITY;
  Values bs = {0.5f, 0.0f, -INFINITY, -2.0f, -1.0f, 1e-40f, -0.0f};
  std::vector<Values> y = checkRegion(r, {xs, bs}, &stats_);
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(std::isnan(y[0][0]));  // relu(NaN) = NaN, as torch.relu
  EXPECT_EQ(y[0][1], 0.0f);
  EXPECT_TRUE(std::isnan(y[0][2]));  // inf + -inf
  EXPECT_EQ(y[0][3], 0.0f);
  EXPECT_EQ(y[0][5], 1.0f);
  EXPECT_EQ(y[0][7 + 5], 1.0f);
  EXPECT_EQ(y[0][7 + 3], 0.0f);
}

TEST_F(CodegenOps, ScalarsConstantsAndSeveralOutputs) {
  Region r("mixed");
  int x = r.input("x", kRows);
  int s = r.input("scale", Shape{});
  int half = r.constant(0.5f);
  int y = r.binary(BinaryFn::Mul, r.binary(BinaryFn::Mul, x, s), half);
  r.output("y", y);
  r.output("positive", r.binary(BinaryFn::Gt, y, r.constant(0.0f)));
  r.output("total", r.reduce(ReduceFn::Sum, r.reduce(ReduceFn::Sum, y, "hidden"), "batch"));
  r.output("x_again", x);
  std::mt19937_64 rng(5);
  std::vector<Values> out = checkRegion(r, {randomValues(21, rng), {3.0f}}, &stats_);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[2].size(), 1u);
}

TEST(CodegenJit, ReportsTheHostItCompilesFor) {
  HostTarget h = hostTarget();
  EXPECT_FALSE(h.cpu.empty());
  EXPECT_NE(h.features.find("sse2"), std::string::npos) << h.features;
  std::printf("host: %s, cpu %s, avx2 %d, avx512f %d\n", h.triple.c_str(), h.cpu.c_str(), h.avx2, h.avx512);
}

// The check itself must be able to fail.
TEST(CodegenCheck, UlpsAndSumBoundsAsDocumented) {
  EXPECT_EQ(ulpDistance(1.0f, std::nextafter(1.0f, 2.0f)), 1);
  EXPECT_EQ(ulpDistance(-0.0f, 0.0f), 0);
  EXPECT_EQ(ulpDistance(-1e-45f, 1e-45f), 2);
  EXPECT_EQ(ulpDistance(FLT_MAX, INFINITY), 1);
  int64_t ulps;
  EXPECT_TRUE(withinUlps(1.0f, 1.0, 0, &ulps));
  EXPECT_FALSE(withinUlps(std::nextafter(1.0f, 2.0f), 1.0, 0, &ulps));
  EXPECT_TRUE(withinUlps(std::nextafter(1.0f, 2.0f), 1.0, 1, &ulps));
  EXPECT_FALSE(withinUlps(1.0f, NAN, 5, &ulps));
  EXPECT_FALSE(withinUlps(NAN, 1.0, 5, &ulps));
  EXPECT_TRUE(withinUlps(INFINITY, 1e39, 0, &ulps));  // an overflow: the reference rounds to inf too
  EXPECT_FALSE(withinUlps(FLT_MAX, INFINITY, 5, &ulps));  // a true infinity exactly
  EXPECT_FALSE(withinUlps(-INFINITY, INFINITY, 5, &ulps));
  double ratio;
  // n = 4, Σ|x| = 4: bound γ₄·4 ≈ 9.5e-7
  EXPECT_TRUE(withinSumBound(1.0f + 0x1p-23f, 1.0, 4.0, 4, false, &ratio));
  EXPECT_FALSE(withinSumBound(1.0f + 0x1p-19f, 1.0, 4.0, 4, false, &ratio));
  EXPECT_FALSE(withinSumBound(INFINITY, 1.0, 4.0, 4, false, &ratio));
  EXPECT_TRUE(withinSumBound(INFINITY, 1.0, 1e39, 4, false, &ratio));  // partial sums may overflow
  EXPECT_FALSE(withinSumBound(0.0f, NAN, 4.0, 4, false, &ratio));
}

}  // namespace
}  // namespace dtl::codegen::testing
