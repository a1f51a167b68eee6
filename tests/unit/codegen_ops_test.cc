// The x86 JIT, op class by op class, against the reference kernels
// (codegen_check.h), with NaN, ±inf, ±0 and denormals in every input; and the
// values PyTorch 1.13 gives for the non-finite cases a user would notice.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "runtime/kernels/reference/normalize.h"
#include "runtime/kernels/reference/softmax.h"
#include "tests/unit/codegen_check.h"

namespace dtl::codegen::testing {
namespace {

namespace ref = dtl::rt::ref;

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

TEST_F(CodegenOps, EachUnaryGradWithinItsBound) {
  // x: every edge value; dy: ordinary values, then the specials too, then one scalar dy broadcast
  std::mt19937_64 rng(13);
  for (UnaryFn fn : kAllUnaryFns) {
    Region r(std::string("grad_") + fnName(fn));
    int x = r.input("x", kRows);  // inputs in statements of their own: their order is the kernel's
    r.output("dx", r.unaryGrad(fn, x, r.input("dy", kRows)));
    checkRegion(r, {edgeValues(21), randomValues(21, rng, 0.0)}, &stats_);
    checkRegion(r, {edgeValues(21), randomValues(21, rng, 0.3)}, &stats_);
    Region b(std::string("grad_scalar_dy_") + fnName(fn));
    int bx = b.input("x", kRows);
    b.output("dx", b.unaryGrad(fn, bx, b.input("dy", Shape{})));
    checkRegion(b, {edgeValues(21), {-3.5f}}, &stats_);
  }
}

TEST_F(CodegenOps, ReluGradSelectsAsTorch) {
  Region r("relu_grad");
  int x = r.input("x", Shape{{{"i", 5}}});
  r.output("dx", r.unaryGrad(UnaryFn::Relu, x, r.input("dy", Shape{{{"i", 5}}})));
  std::vector<Values> y = checkRegion(r, {{NAN, -0.0f, 2.0f, -1.0f, 1e-45f}, {3.0f, NAN, NAN, NAN, 4.0f}}, &stats_);
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(y[0][0], 3.0f);  // dy where x is NaN (torch's threshold_backward)
  EXPECT_EQ(y[0][1], 0.0f);  // 0 at x ≤ 0, even for a NaN dy
  EXPECT_TRUE(std::isnan(y[0][2]));
  EXPECT_EQ(y[0][3], 0.0f);
  EXPECT_EQ(y[0][4], 4.0f);
}

TEST_F(CodegenOps, SelectBroadcastsItsThreeOperands) {
  Region r("select");
  int x = r.input("x", kRows);
  int cap = r.input("cap", Shape{{{"hidden", 7}}});
  int over = r.binary(BinaryFn::Gt, x, cap);
  r.output("y", r.select(over, cap, x));  // min(x, cap), NaN x kept
  r.output("over", over);
  r.output("z", r.select(over, r.constant(0.0f), r.constant(-1.0f)));
  Values xs = edgeValues(21);
  Values caps = {0.0f, 1.0f, INFINITY, -INFINITY, NAN, -0.0f, 100.0f};
  std::vector<Values> y = checkRegion(r, {xs, caps}, &stats_);
  ASSERT_EQ(y.size(), 3u);
  for (int i = 0; i < 21; ++i) {
    float c = caps[static_cast<size_t>(i % 7)], v = xs[static_cast<size_t>(i)];
    float want = v > c ? c : v;
    EXPECT_TRUE(std::memcmp(&y[0][i], &want, 4) == 0 || (std::isnan(want) && std::isnan(y[0][i]))) << i;
    EXPECT_EQ(y[2][i], v > c ? 0.0f : -1.0f) << i;
  }
}

// The composites' formulas against the reference kernel of the graph node
// each one stands for (checkRegion checks their ops one by one; this checks
// they are the node's formula): ordinary values, within 1e-5 of the largest
// magnitude of the result or of `floor` (a softmax's gradient cancels to
// about u·|dy| where the softmax is one-hot).
void expectNear(const Values& y, const ref::Tensor& want, double floor, const std::string& what) {
  ASSERT_EQ(y.size(), want.f.size()) << what;
  double scale = floor;
  for (double v : want.f) scale = std::max(scale, std::fabs(v));
  for (size_t k = 0; k < y.size(); ++k)
    ASSERT_NEAR(y[k], want.f[k], 1e-5 * scale + 1e-30) << what << " element " << k;
}

TEST_F(CodegenOps, GradientsAndNormsAreTheReferenceKernels) {
  std::mt19937_64 rng(17);
  const Shape s{{{"batch", 3}, {"hidden", 33}}};
  auto tensor = [&](const Values& v) { return ref::Tensor::fromValues(s, std::vector<double>(v.begin(), v.end())); };
  for (int which = 0; which < 6; ++which) {
    Region r("composite" + std::to_string(which));
    int x = r.input("x", s), dy = r.input("dy", s);
    const float eps = 1e-5f;
    Values xv = randomValues(99, rng, 0.0), dyv = randomValues(99, rng, 0.0);
    ref::Tensor want;
    switch (which) {
      case 0:
        r.output("dx", r.softmaxGrad(x, dy, "hidden"));
        xv = runJit([&] { Region f("f"); f.output("y", f.softmax(f.input("x", s), "hidden")); return f; }(), {xv})[0];
        want = ref::softmaxBackward(tensor(xv), tensor(dyv), "hidden");
        break;
      case 1:
        r.output("dx", r.logSoftmaxGrad(x, dy, "hidden"));
        xv = runJit([&] { Region f("f"); f.output("y", f.logSoftmax(f.input("x", s), "hidden")); return f; }(), {xv})[0];
        want = ref::logSoftmaxBackward(tensor(xv), tensor(dyv), "hidden");
        break;
      case 2:
        r.output("y", r.normalize(x, "hidden", eps));
        want = ref::normalize(tensor(xv), {"hidden"}, eps);
        break;
      case 3:
        r.output("y", r.rmsNormalize(x, "hidden", eps));
        want = ref::rmsNormalize(tensor(xv), {"hidden"}, eps);
        break;
      case 4:
        r.output("dx", r.normalizeGrad(x, dy, "hidden", eps));
        want = ref::normalizeBackward(tensor(xv), {"hidden"}, eps, tensor(dyv));
        break;
      default:
        r.output("dx", r.rmsNormalizeGrad(x, dy, "hidden", eps));
        want = ref::rmsNormalizeBackward(tensor(xv), {"hidden"}, eps, tensor(dyv));
        break;
    }
    std::vector<Values> y = checkRegion(r, {xv, dyv}, &stats_);  // a normalization leaves dy unread
    ASSERT_EQ(y.size(), 1u) << r.name();
    double floor = 0;
    if (which < 2)
      for (float v : dyv) floor = std::max(floor, static_cast<double>(std::fabs(v)));
    expectNear(y[0], want, floor, printRegion(r));
  }
}

TEST_F(CodegenOps, AReductionOfAStoredOutputAsTheReference) {
  // codegen_region_test's plan: the batch sum loads dx; its values are the reference's
  Region r("norm_grad_bias");
  const Shape s{{{"batch", 5}, {"d", 33}}};
  int x = r.input("x", s);
  int dy = r.input("dy", s);
  int dx = r.normalizeGrad(x, dy, "d", 1e-5f);
  r.output("dx", dx);
  r.output("db", r.reduce(ReduceFn::Sum, dx, "batch"));
  std::mt19937_64 rng(23);
  checkRegion(r, {randomValues(165, rng), randomValues(165, rng)}, &stats_);
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
