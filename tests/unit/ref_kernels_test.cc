// Tests for runtime/kernels/reference: small cases per primitive with values
// worked out by hand (or by a plain loop beside the expectation), the name
// order rules, broadcasting, size-1 and zero-size dims, causal masking, the
// rounding of casts, and the full messages of the errors user data can cause.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>

#include "runtime/kernels/reference/kernels.h"

namespace dtl::rt::ref {
namespace {

Shape S(std::vector<Dim> d) { return Shape{std::move(d)}; }
Tensor F(std::vector<Dim> d, std::vector<double> v) { return Tensor::fromValues(S(std::move(d)), std::move(v)); }
Tensor I(std::vector<Dim> d, std::vector<int64_t> v, DType t = DType::I32) {
  return Tensor::fromInts(S(std::move(d)), std::move(v), t);
}
void expectValues(const Tensor& t, const std::vector<double>& v, double tol = 1e-12) {
  ASSERT_EQ(t.f.size(), v.size()) << t.shape.str();
  for (size_t k = 0; k < v.size(); ++k) EXPECT_NEAR(t.f[k], v[k], tol) << "element " << k << " of " << t.shape.str();
}

const Dim A2{"a", 2}, B3{"b", 3}, C2{"c", 2}, One{"one", 1}, Z0{"z", 0};

TEST(RefTensor, AlignToTransposesAndBroadcastsByName) {
  Tensor x = F({A2, B3}, {1, 2, 3, 4, 5, 6});
  Tensor t = alignTo(x, S({B3, A2}));
  EXPECT_EQ(t.shape.names(), "[b, a]");
  expectValues(t, {1, 4, 2, 5, 3, 6});
  expectValues(alignTo(F({B3}, {1, 2, 3}), S({A2, B3})), {1, 2, 3, 1, 2, 3});
  expectValues(sumTo(x, S({B3})), {5, 7, 9});
  expectValues(sumTo(x, S({})), {21});
  EXPECT_EQ(alignTo(F({A2, Z0}, {}), S({Z0, B3, A2})).numel(), 0);
  EXPECT_EQ(positionStr(S({A2, B3}), 5), "(a 1, b 2)");
  EXPECT_EQ(x.at({1, 0}), 4);
}

TEST(RefUnary, ValuesAgainstClosedForms) {
  auto at = [](Unary op, double x) { return unary(op, Tensor::scalar(x)).f[0]; };
  EXPECT_EQ(at(Unary::Relu, -1), 0);
  EXPECT_EQ(at(Unary::Relu, 2), 2);
  EXPECT_NEAR(at(Unary::Gelu, 1), 0.8413447460685429, 1e-15);  // Φ(1)
  EXPECT_NEAR(at(Unary::Gelu, -1), -0.15865525393145707, 1e-15);
  EXPECT_NEAR(at(Unary::GeluTanh, 1), 0.5 * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * 1.044715)), 1e-15);
  EXPECT_NEAR(at(Unary::Silu, 1), 1 / (1 + std::exp(-1.0)), 1e-15);
  EXPECT_NEAR(at(Unary::Sigmoid, 2), 0.8807970779778823, 1e-15);
  EXPECT_NEAR(at(Unary::Tanh, 0.5), 0.46211715726000974, 1e-15);
  EXPECT_NEAR(at(Unary::Exp, 1), std::numbers::e, 1e-15);
  EXPECT_NEAR(at(Unary::Log, std::numbers::e), 1, 1e-15);
  EXPECT_EQ(at(Unary::Sqrt, 4), 2);
  EXPECT_EQ(at(Unary::Rsqrt, 4), 0.5);
  EXPECT_EQ(at(Unary::Neg, 3), -3);
  EXPECT_EQ(at(Unary::Abs, -3), 3);
  EXPECT_TRUE(std::isnan(at(Unary::Log, -1)));
}

TEST(RefUnary, DerivativesAtKnownPoints) {
  auto d = [](Unary op, double x) { return unaryBackward(op, Tensor::scalar(x), Tensor::scalar(2)).f[0] / 2; };
  EXPECT_EQ(d(Unary::Relu, 0), 0);  // PyTorch's choice at the kink
  EXPECT_EQ(d(Unary::Abs, 0), 0);
  EXPECT_EQ(d(Unary::Abs, -2), -1);
  EXPECT_EQ(d(Unary::Gelu, 0), 0.5);
  EXPECT_EQ(d(Unary::GeluTanh, 0), 0.5);
  EXPECT_EQ(d(Unary::Silu, 0), 0.5);
  EXPECT_EQ(d(Unary::Sigmoid, 0), 0.25);
  EXPECT_EQ(d(Unary::Tanh, 0), 1);
  EXPECT_EQ(d(Unary::Log, 2), 0.5);
  EXPECT_EQ(d(Unary::Sqrt, 4), 0.25);
  EXPECT_EQ(d(Unary::Rsqrt, 1), -0.5);
  EXPECT_EQ(d(Unary::Neg, 7), -1);
}

TEST(RefUnary, NamesRoundTripAndIntegersWrap) {
  for (Unary op : kAllUnary) EXPECT_EQ(parseUnary(unaryName(op)), op);
  EXPECT_FALSE(parseUnary("softplus"));
  Tensor x = I({Dim{"n", 3}}, {std::numeric_limits<int32_t>::min(), -5, 7});
  EXPECT_EQ(unary(Unary::Neg, x).i, (std::vector<int64_t>{std::numeric_limits<int32_t>::min(), 5, -7}));
  EXPECT_EQ(unary(Unary::Abs, x).i, (std::vector<int64_t>{std::numeric_limits<int32_t>::min(), 5, 7}));
  EXPECT_EQ(unary(Unary::Neg, I({Dim{"n", 2}}, {5, 0}, DType::U8)).i, (std::vector<int64_t>{251, 0}));
}

TEST(RefBinary, ResultOrderFollowsTheLargerOperandElseLeftThenRight) {
  const Dim H{"h", 3}, Bt{"batch", 2};
  EXPECT_EQ(broadcastShape(S({Bt, H}), S({H})).names(), "[batch, h]");
  EXPECT_EQ(broadcastShape(S({H}), S({Bt, H})).names(), "[batch, h]");
  EXPECT_EQ(broadcastShape(S({H, Bt}), S({Bt, H})).names(), "[h, batch]");  // equal sets: left's order
  EXPECT_EQ(broadcastShape(S({A2, C2}), S({C2, B3})).names(), "[a, c, b]");
  Tensor y = binary(Binary::Sub, F({H}, {10, 20, 30}), F({Bt, H}, {1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(y.shape.names(), "[batch, h]");
  expectValues(y, {9, 18, 27, 6, 15, 24});
}

TEST(RefBinary, DisjointNamesFormAnOuterGrid) {
  Tensor a = F({A2, C2}, {1, 2, 3, 4}), b = F({C2, B3}, {1, 10, 100, 2, 20, 200});
  Tensor y = binary(Binary::Mul, a, b);  // [a, c, b]
  ASSERT_EQ(y.shape, S({A2, C2, B3}));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t k = 0; k < 3; ++k) EXPECT_EQ(y.at({i, j, k}), a.at({i, j}) * b.at({j, k}));
}

TEST(RefBinary, ScalarsSizeOneDimsAndZeroSizeDims) {
  expectValues(binary(Binary::Div, F({One, B3}, {3, 6, 9}), Tensor::scalar(3)), {1, 2, 3});
  Tensor z = binary(Binary::Add, F({Z0, B3}, {}), F({B3}, {1, 2, 3}));
  EXPECT_EQ(z.shape, S({Z0, B3}));
  EXPECT_EQ(z.numel(), 0);
}

TEST(RefBinary, ComparisonsGiveBools) {
  Tensor a = F({B3}, {1, 2, NAN}), b = F({B3}, {2, 2, NAN});
  EXPECT_EQ(binary(Binary::Lt, a, b).dtype, DType::Bool);
  EXPECT_EQ(binary(Binary::Lt, a, b).i, (std::vector<int64_t>{1, 0, 0}));
  EXPECT_EQ(binary(Binary::Le, a, b).i, (std::vector<int64_t>{1, 1, 0}));
  EXPECT_EQ(binary(Binary::Eq, a, b).i, (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(binary(Binary::Ne, a, b).i, (std::vector<int64_t>{1, 0, 1}));  // NaN ≠ NaN
  EXPECT_EQ(binary(Binary::Gt, b, a).i, (std::vector<int64_t>{1, 0, 0}));
  EXPECT_EQ(binary(Binary::Ge, I({B3}, {1, 5, -2}), I({B3}, {1, 4, 0})).i, (std::vector<int64_t>{1, 1, 0}));
}

TEST(RefBinary, IntegerArithmeticWrapsAndTruncates) {
  Tensor a = I({Dim{"n", 4}}, {7, -7, 5, std::numeric_limits<int32_t>::max()});
  Tensor b = I({Dim{"n", 4}}, {2, 2, 0, 1});
  EXPECT_EQ(binary(Binary::Div, a, b).i, (std::vector<int64_t>{3, -3, 0, std::numeric_limits<int32_t>::max()}));
  EXPECT_EQ(binary(Binary::Add, a, b).i[3], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(binary(Binary::Mul, I({One}, {200}, DType::U8), I({One}, {2}, DType::U8)).i[0], 144);
}

TEST(RefBinary, BackwardSumsOverBroadcastNames) {
  Tensor a = F({A2, B3}, {1, 2, 3, 4, 5, 6}), b = F({B3}, {1, 2, 4});
  Tensor dy = F({A2, B3}, {1, 1, 1, 1, 1, 1});
  BinaryGrads g = binaryBackward(Binary::Mul, a, b, dy);
  expectValues(g.da, {1, 2, 4, 1, 2, 4});
  expectValues(g.db, {5, 7, 9});
  g = binaryBackward(Binary::Div, a, b, dy);
  expectValues(g.db, {-5, -7.0 / 4, -9.0 / 16});  // −Σ_a a / b²
  g = binaryBackward(Binary::Sub, b, a, dy);
  EXPECT_EQ(g.da.shape, S({B3}));
  expectValues(g.da, {2, 2, 2});
  expectValues(g.db, {-1, -1, -1, -1, -1, -1});
}

TEST(RefContract, MatmulKeepsLeftRestThenRightRest) {
  const Dim D{"d", 3}, O{"out", 2};
  Tensor x = F({A2, D}, {1, 2, 3, 4, 5, 6}), w = F({D, O}, {1, 0, 0, 1, 1, 1});
  Tensor y = contract(x, w);
  EXPECT_EQ(y.shape.names(), "[a, out]");
  expectValues(y, {4, 5, 10, 11});
  ContractGrads g = contractBackward(x, w, F({A2, O}, {1, 0, 0, 1}));
  expectValues(g.da, {1, 0, 1, 0, 1, 1});  // dy @ wᵀ
  expectValues(g.db, {1, 4, 2, 5, 3, 6});  // xᵀ @ dy
}

TEST(RefContract, TwoSharedNamesInDifferentOrders) {
  const Dim I3{"i", 3}, J5{"j", 5}, K2{"k", 2}, L3{"l", 3};
  Tensor a = Tensor::zeros(S({I3, J5, K2})), b = Tensor::zeros(S({K2, L3, J5}));
  for (size_t n = 0; n < a.f.size(); ++n) a.f[n] = std::sin(1.0 + n);
  for (size_t n = 0; n < b.f.size(); ++n) b.f[n] = std::cos(2.0 * n);
  Tensor y = contract(a, b);
  ASSERT_EQ(y.shape, S({I3, L3}));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t l = 0; l < 3; ++l) {
      double want = 0;
      for (int64_t j = 0; j < 5; ++j)
        for (int64_t k = 0; k < 2; ++k) want += a.at({i, j, k}) * b.at({k, l, j});
      EXPECT_NEAR(y.at({i, l}), want, 1e-12);
    }
  ContractGrads g = contractBackward(a, b, Tensor::fromValues(y.shape, std::vector<double>(9, 1.0)));
  EXPECT_EQ(g.da.shape, a.shape);
  EXPECT_EQ(g.db.shape, b.shape);
}

TEST(RefContract, FullContractionOuterProductAndEmptySharedDim) {
  expectValues(contract(F({B3}, {1, 2, 3}), F({B3}, {4, 5, 6})), {32});
  expectValues(contract(F({A2}, {1, 2}), F({B3}, {1, 2, 3})), {1, 2, 3, 2, 4, 6});
  Tensor y = contract(F({A2, Z0}, {}), F({Z0, B3}, {}));
  EXPECT_EQ(y.shape, S({A2, B3}));
  expectValues(y, {0, 0, 0, 0, 0, 0});
}

TEST(RefReduce, SumMeanMaxOverNames) {
  Tensor x = F({A2, B3, C2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  Tensor s = reduceSum(x, {"c", "a"});
  EXPECT_EQ(s.shape, S({B3}));
  expectValues(s, {1 + 2 + 7 + 8, 3 + 4 + 9 + 10, 5 + 6 + 11 + 12});
  expectValues(reduceMean(x, {"b"}), {3, 4, 9, 10});  // [a, c]: (1+3+5)/3, (2+4+6)/3, …
  expectValues(reduceSum(x, {}), {78});
  expectValues(reduceMax(x, {"a", "b"}), {11, 12});
  expectValues(reduceMeanBackward(x.shape, {"b"}, F({A2, C2}, {3, 6, 9, 12})),
               {1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4});
  expectValues(reduceSumBackward(x.shape, {}, Tensor::scalar(2)), std::vector<double>(12, 2));
}

TEST(RefReduce, MaxAndArgmaxPickTheFirstOfTies) {
  Tensor x = F({A2, B3}, {1, 5, 5, 7, 7, 7});
  expectValues(reduceMaxBackward(x, {"b"}, F({A2}, {10, 20})), {0, 10, 0, 20, 0, 0});
  EXPECT_EQ(argmax(x, "b").i, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(argmax(x, "b").dtype, DType::I32);
  EXPECT_EQ(argmax(x, "a", DType::I64).i, (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(argmax(I({B3}, {-1, 4, 4}), "b").i, (std::vector<int64_t>{1}));
  Tensor n = F({B3}, {1, NAN, 3});  // NaN propagates, as PyTorch
  EXPECT_TRUE(std::isnan(reduceMax(n, {}).f[0]));
  EXPECT_EQ(argmax(n, "b").i[0], 1);
}

TEST(RefReduce, IntegersAndZeroSizeExtents) {
  EXPECT_EQ(reduceSum(I({B3}, {200, 100, 1}, DType::U8), {}).i[0], 45);  // 301 mod 256
  EXPECT_EQ(reduceMax(I({B3}, {-3, 9, 2}, DType::I64), {}).i[0], 9);
  Tensor e = F({A2, Z0}, {});
  expectValues(reduceSum(e, {"z"}), {0, 0});
  EXPECT_TRUE(std::isnan(reduceMean(e, {"z"}).f[0]));
}

TEST(RefSoftmax, ValuesStabilityAndSizeOne) {
  Tensor x = F({B3}, {1, 2, 3});
  expectValues(softmax(x, "b"), {0.09003057317038046, 0.24472847105479767, 0.6652409557748219}, 1e-15);
  expectValues(logSoftmax(x, "b"), {-2.40760596444438, -1.4076059644443801, -0.4076059644443803}, 1e-14);
  expectValues(softmax(F({B3}, {1001, 1002, 1003}), "b"), softmax(x, "b").f, 1e-15);
  expectValues(softmax(F({A2, One}, {5, -5}), "one"), {1, 1});
  Tensor y = softmax(F({A2, C2}, {0, 0, 0, std::log(3.0)}), "a");  // along the slower dim
  expectValues(y, {0.5, 0.25, 0.5, 0.75}, 1e-15);
}

TEST(RefNormalize, LayerNormAndRmsNorm) {
  double r = 1 / std::sqrt(2.0 / 3);
  expectValues(normalize(F({B3}, {1, 2, 3}), {"b"}, 0), {-r, 0, r});
  expectValues(normalize(F({A2, C2}, {1, 2, 3, 5}), {"a"}, 1), {-1 / std::sqrt(2.0), -1.5 / std::sqrt(3.25),
                                                                1 / std::sqrt(2.0), 1.5 / std::sqrt(3.25)});
  expectValues(rmsNormalize(F({C2}, {3, 4}), {"c"}, 0), {3 * std::sqrt(2.0) / 5, 4 * std::sqrt(2.0) / 5});
  expectValues(rmsNormalize(F({One}, {2}), {"one"}, 5), {2.0 / 3});
  // A constant lane has zero variance: the result is 0, not NaN, while eps > 0.
  expectValues(normalize(F({B3}, {4, 4, 4}), {"b"}, 1e-5), {0, 0, 0});
}

TEST(RefEmbed, GathersRowsAndScatterAddsGradients) {
  Tensor table = F({Dim{"vocab", 3}, C2}, {0, 1, 10, 11, 20, 21});
  Tensor ids = I({A2, Dim{"s", 2}}, {2, 0, 2, 1});
  Tensor out;
  ASSERT_TRUE(embed(table, ids, &out).ok);
  EXPECT_EQ(out.shape.names(), "[a, s, c]");
  expectValues(out, {20, 21, 0, 1, 20, 21, 10, 11});
  Tensor dtable;
  ASSERT_TRUE(embedBackward(table.shape, ids, F({A2, Dim{"s", 2}, C2}, {1, 2, 3, 4, 5, 6, 7, 8}), &dtable).ok);
  expectValues(dtable, {3, 4, 7, 8, 6, 8});  // id 2 appears twice: its rows add
}

TEST(RefEmbed, IdsOutOfRangeAreErrorsNamingPositionAndValue) {
  Tensor table = F({Dim{"vocab", 3}, C2}, {0, 1, 2, 3, 4, 5}), out;
  Status st = embed(table, I({A2, Dim{"s", 2}}, {0, 1, 2, 3}), &out);
  EXPECT_FALSE(st.ok);
  EXPECT_EQ(st.message, "embed: id 3 at (a 1, s 1) is out of range for a table of vocab 3; ids must be in [0, 3)");
  st = embed(table, I({B3}, {0, -1, 0}, DType::I64), &out);
  EXPECT_EQ(st.message, "embed: id -1 at (b 1) is out of range for a table of vocab 3; ids must be in [0, 3)");
  Tensor dt;
  EXPECT_FALSE(embedBackward(table.shape, I({One}, {7}), F({One, C2}, {1, 1}), &dt).ok);
}

// One head, head_dim 1 (scale 1): q = [1, 1], k = [0, ln 3] give the
// probabilities [1/4, 3/4] for every unmasked row.
TEST(RefAttention, HandComputedWithAndWithoutCausalMask) {
  const Dim Sq{"seq", 2}, H{"heads", 1}, D{"hd", 1};
  Tensor q = F({Sq, H, D}, {1, 1}), k = F({Sq, H, D}, {0, std::log(3.0)}), v = F({Sq, H, D}, {4, 8});
  expectValues(attention(q, k, v, false), {7, 7}, 1e-14);
  expectValues(attention(q, k, v, true), {4, 7}, 1e-14);  // query 0 sees key 0 only
  AttentionGrads g = attentionBackward(q, k, v, true, F({Sq, H, D}, {1, 1}));
  expectValues(g.dv, {1.25, 0.75}, 1e-14);
  // dq_i = Σ_j P_ij (v_j − out_i) k_j and dk_j = Σ_i P_ij (v_j − out_i) q_i, with dy = 1.
  expectValues(g.dq, {0, 0.75 * std::log(3.0)}, 1e-14);
  expectValues(g.dk, {-0.75, 0.75}, 1e-14);
}

TEST(RefAttention, MatchesAPlainLoopWithLongerKeysAndHeadsScaled) {
  const Dim Sq{"seq", 3}, Sk{"kseq", 5}, H{"heads", 2}, D{"hd", 4}, Bt{"batch", 1};
  Tensor q = Tensor::zeros(S({Bt, Sq, H, D})), k = Tensor::zeros(S({Bt, Sk, H, D}));
  for (size_t n = 0; n < q.f.size(); ++n) q.f[n] = std::sin(0.7 * n);
  for (size_t n = 0; n < k.f.size(); ++n) k.f[n] = std::cos(0.3 * n);
  Tensor v = k;
  for (double& x : v.f) x = x * x - 0.2;
  for (bool causal : {false, true}) {
    Tensor y = attention(q, k, v, causal);
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t i = 0; i < 3; ++i) {
        std::vector<double> w(5, 0.0);
        double total = 0;
        for (int64_t j = 0; j < 5; ++j) {
          if (causal && j > i) continue;
          double s = 0;
          for (int64_t d = 0; d < 4; ++d) s += q.at({0, i, h, d}) * k.at({0, j, h, d});
          total += w[j] = std::exp(s / 2);  // 1/sqrt(4)
        }
        for (int64_t d = 0; d < 4; ++d) {
          double want = 0;
          for (int64_t j = 0; j < 5; ++j) want += w[j] / total * v.at({0, j, h, d});
          EXPECT_NEAR(y.at({0, i, h, d}), want, 1e-12) << "causal " << causal << " h " << h << " i " << i;
        }
      }
  }
  Tensor none = Tensor::zeros(S({Bt, Dim{"kseq", 0}, H, D}));
  EXPECT_EQ(attention(q, none, none, true).f, std::vector<double>(24, 0.0));
}

TEST(RefCrossEntropy, MeanOfNegativeLogLikelihoodAndItsGradient) {
  Tensor logits = F({A2, B3}, {1, 2, 3, 1, 2, 3}), labels = I({A2}, {2, 0}), loss;
  ASSERT_TRUE(crossEntropy(logits, labels, "b", &loss).ok);
  EXPECT_EQ(loss.shape, S({}));
  EXPECT_NEAR(loss.f[0], (0.4076059644443803 + 2.40760596444438) / 2, 1e-14);
  Tensor d;
  ASSERT_TRUE(crossEntropyBackward(logits, labels, "b", Tensor::scalar(1), &d).ok);
  const double p0 = 0.09003057317038046, p1 = 0.24472847105479767, p2 = 0.6652409557748219;
  expectValues(d, {p0 / 2, p1 / 2, (p2 - 1) / 2, (p0 - 1) / 2, p1 / 2, p2 / 2}, 1e-15);
}

TEST(RefCrossEntropy, LabelsAlignByNameAndBadLabelsAreErrors) {
  // logits [b, classes=c, a]; labels [a, b]: label(a, b) picks class along c.
  Tensor logits = Tensor::zeros(S({B3, C2, A2})), loss;
  logits.f[logits.flatIndex({2, 1, 0})] = 100;  // (b 2, a 0) strongly predicts class 1
  Tensor labels = I({A2, B3}, {0, 0, 1, 0, 0, 0});
  ASSERT_TRUE(crossEntropy(logits, labels, "c", &loss).ok);
  EXPECT_NEAR(loss.f[0], 5 * std::log(2.0) / 6, 1e-12);
  Status st = crossEntropy(logits, I({A2, B3}, {0, 0, 1, 0, 2, 0}), "c", &loss);
  EXPECT_FALSE(st.ok);
  EXPECT_EQ(st.message, "cross_entropy: label 2 at (a 1, b 1) is out of range for c 2; labels must be in [0, 2)");
  st = crossEntropyBackward(logits, I({A2, B3}, {0, -4, 0, 0, 0, 0}), "c", Tensor::scalar(1), &loss);
  EXPECT_EQ(st.message, "cross_entropy: label -4 at (a 0, b 1) is out of range for c 2; labels must be in [0, 2)");
}

TEST(RefReshape, SplitMergeRenameKeepTheData) {
  Tensor x = F({Dim{"d", 6}, One}, {0, 1, 2, 3, 4, 5});
  Tensor s = splitDim(x, "d", A2, B3);
  EXPECT_EQ(s.shape, S({A2, B3, One}));
  EXPECT_EQ(s.f, x.f);
  EXPECT_EQ(s.at({1, 0, 0}), 3);
  Tensor m = mergeDims(s, "a", "b", Dim{"d", 6});
  EXPECT_EQ(m.shape, x.shape);
  EXPECT_EQ(renameDim(x, "one", "u").shape.names(), "[d, u]");
}

TEST(RefCast, TruncationWrappingAndBools) {
  Tensor x = F({Dim{"n", 5}}, {-1.7, 2.9, 300, -1, NAN});
  EXPECT_EQ(cast(x, DType::I32).i, (std::vector<int64_t>{-1, 2, 300, -1, 0}));
  EXPECT_EQ(cast(x, DType::U8).i, (std::vector<int64_t>{255, 2, 44, 255, 0}));
  EXPECT_EQ(cast(x, DType::Bool).i, (std::vector<int64_t>{1, 1, 1, 1, 1}));
  expectValues(cast(I({B3}, {1, 0, 1}, DType::Bool), DType::F32), {1, 0, 1});
  EXPECT_EQ(cast(I({B3}, {0, 5, -2}), DType::Bool).i, (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(cast(I({One}, {70000}, DType::I64), DType::U16).i[0], 70000 - 65536);
}

TEST(RefCast, FloatRoundingToNearestEven) {
  auto bf = [](double v) { return roundToFloat(v, DType::BF16); };
  auto h = [](double v) { return roundToFloat(v, DType::F16); };
  EXPECT_EQ(bf(1 + std::ldexp(1, -8)), 1);                                 // tie → even
  EXPECT_EQ(bf(1 + 3 * std::ldexp(1, -8)), 1 + std::ldexp(1, -6));        // tie → even (up)
  EXPECT_EQ(bf(1 + std::ldexp(1, -8) + std::ldexp(1, -30)), 1 + std::ldexp(1, -7));  // past the tie
  EXPECT_EQ(h(65519), 65504);
  EXPECT_EQ(h(65520), INFINITY);
  EXPECT_EQ(h(-1e6), -INFINITY);
  EXPECT_EQ(h(std::ldexp(1, -25)), 0);                       // half the smallest subnormal → even (0)
  EXPECT_EQ(h(3 * std::ldexp(1, -26)), std::ldexp(1, -24));  // 0.75 of it rounds up
  EXPECT_EQ(h(1.0 / 3), 0.333251953125);
  uint64_t state = 5;
  for (int n = 0; n < 2000; ++n) {
    double v = std::ldexp(static_cast<double>(splitmix64(state++) >> 11) * 0x1.0p-53 - 0.5, n % 80 - 40);
    EXPECT_EQ(roundToFloat(v, DType::F32), static_cast<double>(static_cast<float>(v))) << v;
    float fv = static_cast<float>(v);  // a float's bf16 rounding, by bit arithmetic
    uint32_t bits;
    std::memcpy(&bits, &fv, 4);
    bits = (bits + 0x7fff + ((bits >> 16) & 1)) & 0xffff0000u;
    float want;
    std::memcpy(&want, &bits, 4);
    EXPECT_EQ(bf(fv), want) << fv;
  }
  expectValues(cast(F({One}, {1.0 / 3}), DType::BF16), {0.333984375});
}

TEST(RefArange, CountsFromZero) {
  Tensor r = arange(Dim{"n", 4});
  EXPECT_EQ(r.dtype, DType::I32);
  EXPECT_EQ(r.shape, S({Dim{"n", 4}}));
  EXPECT_EQ(r.i, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(arange(Z0).numel(), 0);
}

TEST(RefDropout, DeterministicMaskWithTheRightRateAndScale) {
  EXPECT_EQ(splitmix64(0), 0xe220a8397b1dcdafULL);  // the published first output for seed 0
  Tensor x = Tensor::fromValues(S({Dim{"n", 20000}}), std::vector<double>(20000, 1.0));
  EXPECT_EQ(dropout(x, 0.3, 7, false).f, x.f);
  Tensor y = dropout(x, 0.25, 7, true);
  int kept = 0;
  for (size_t k = 0; k < y.f.size(); ++k) {
    ASSERT_TRUE(y.f[k] == 0 || y.f[k] == 1 / 0.75);
    kept += y.f[k] != 0;
    ASSERT_EQ(y.f[k] != 0, dropoutKeep(7, k, 0.25));
  }
  EXPECT_NEAR(kept / 20000.0, 0.75, 0.01);  // ±3.3σ
  EXPECT_EQ(dropout(x, 0.25, 7, true).f, y.f);
  EXPECT_NE(dropout(x, 0.25, 8, true).f, y.f);
  EXPECT_EQ(dropoutBackward(x, 0.25, 7, true).f, y.f);
  EXPECT_EQ(dropout(x, 0, 7, true).f, x.f);
}

TEST(RefInvariants, ShapeMismatchAborts) {
  EXPECT_DEATH(binary(Binary::Add, F({B3}, {1, 2, 3}), F({Dim{"b", 2}}, {1, 2})),
               "reference kernel invariant failed");
}

}  // namespace
}  // namespace dtl::rt::ref
