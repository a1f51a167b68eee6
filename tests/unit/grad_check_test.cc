// Finite-difference checks of every differentiable reference kernel: for the
// scalar L = Σ out · r with a fixed random r, each backward's gradient must
// match central differences (h = 1e-6) to a relative 1e-6. Inputs use odd
// sizes and size-1 dims; relu/abs/max inputs stay away from their kinks.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "runtime/kernels/reference/kernels.h"

namespace dtl::rt::ref {
namespace {

using Inputs = std::vector<Tensor>;
using Forward = std::function<Tensor(const Inputs&)>;
// The gradient of every input listed in `wrt`, in that order, given dy.
using Backward = std::function<Inputs(const Inputs&, const Tensor& dy)>;

// Deterministic across standard libraries (std distributions are not).
struct Rng {
  uint64_t state;
  double uniform(double lo, double hi) { return lo + (hi - lo) * (splitmix64(state++) >> 11) * 0x1.0p-53; }
};

Shape S(std::vector<Dim> d) { return Shape{std::move(d)}; }

Tensor random(Shape s, Rng& rng, double lo = -2, double hi = 2) {
  Tensor t = Tensor::zeros(std::move(s));
  for (double& v : t.f) v = rng.uniform(lo, hi);
  return t;
}

// |x| in [0.1, 2] with a random sign: at least 0.1 from a kink at 0.
Tensor awayFromZero(Shape s, Rng& rng) {
  Tensor t = random(std::move(s), rng, 0.1, 2);
  for (double& v : t.f) v *= rng.uniform(-1, 1) < 0 ? -1 : 1;
  return t;
}

// Distinct values at least 0.05 apart in shuffled order, so max is unique.
Tensor distinct(Shape s, Rng& rng) {
  Tensor t = Tensor::zeros(std::move(s));
  for (size_t k = 0; k < t.f.size(); ++k) t.f[k] = 0.05 * static_cast<double>(k) - 1;
  for (size_t k = t.f.size(); k > 1; --k) std::swap(t.f[k - 1], t.f[static_cast<size_t>(rng.uniform(0, 1) * k)]);
  return t;
}

double objective(const Tensor& out, const Tensor& r) {
  double l = 0;
  for (size_t k = 0; k < out.f.size(); ++k) l += out.f[k] * r.f[k];
  return l;
}

void gradCheck(const Forward& f, const Backward& b, Inputs in, std::vector<size_t> wrt) {
  Rng rng{99};
  Tensor r = random(f(in).shape, rng, -1, 1);
  Inputs grads = b(in, r);  // dL/dout = r
  ASSERT_EQ(grads.size(), wrt.size());
  const double h = 1e-6;
  for (size_t g = 0; g < wrt.size(); ++g) {
    Tensor& x = in[wrt[g]];
    ASSERT_EQ(grads[g].shape, x.shape) << "input " << wrt[g];
    ASSERT_GT(x.numel(), 0);
    for (size_t k = 0; k < x.f.size(); ++k) {
      double keep = x.f[k];
      x.f[k] = keep + h;
      double up = objective(f(in), r);
      x.f[k] = keep - h;
      double down = objective(f(in), r);
      x.f[k] = keep;
      double numeric = (up - down) / (2 * h), analytic = grads[g].f[k];
      double tol = 1e-6 * std::max({1.0, std::fabs(numeric), std::fabs(analytic)});
      ASSERT_NEAR(analytic, numeric, tol) << "input " << wrt[g] << " element " << k << " of " << x.shape.str();
    }
  }
}

const Dim A{"a", 3}, B{"b", 5}, C{"c", 7}, One{"one", 1};

// silu's forward paired with tanh's backward: the harness must object.
void checkMismatchedGradient() {
  Rng rng{3};
  gradCheck([](const Inputs& in) { return unary(Unary::Silu, in[0]); },
            [](const Inputs& in, const Tensor& dy) { return Inputs{unaryBackward(Unary::Tanh, in[0], dy)}; },
            {random(S({A}), rng)}, {0});
}

TEST(GradCheck, HarnessRejectsAWrongGradient) {
  EXPECT_FATAL_FAILURE(checkMismatchedGradient(), "element 0 of [a=3]");
}

TEST(GradCheck, Unary) {
  for (Unary op : kAllUnary) {
    SCOPED_TRACE(unaryName(op));
    Rng rng{static_cast<uint64_t>(op)};
    Shape s = S({A, One, B});
    Tensor x = op == Unary::Relu || op == Unary::Abs ? awayFromZero(s, rng)
               : op == Unary::Log || op == Unary::Sqrt || op == Unary::Rsqrt ? random(s, rng, 0.5, 2)
                                                                             : random(s, rng);
    gradCheck([op](const Inputs& in) { return unary(op, in[0]); },
              [op](const Inputs& in, const Tensor& dy) { return Inputs{unaryBackward(op, in[0], dy)}; }, {x}, {0});
  }
}

TEST(GradCheck, BinaryWithBroadcasting) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {S({A, B}), S({B})}, {S({B}), S({A, B})}, {S({A, One}), S({C})}, {S({B, A}), S({A, B})}, {S({}), S({A})}};
  for (Binary op : {Binary::Add, Binary::Sub, Binary::Mul, Binary::Div})
    for (const auto& [sa, sb] : shapes) {
      SCOPED_TRACE(std::string(binaryName(op)) + " " + sa.str() + " " + sb.str());
      Rng rng{7};
      Tensor a = random(sa, rng), b = op == Binary::Div ? awayFromZero(sb, rng) : random(sb, rng);
      gradCheck([op](const Inputs& in) { return binary(op, in[0], in[1]); },
                [op](const Inputs& in, const Tensor& dy) {
                  BinaryGrads g = binaryBackward(op, in[0], in[1], dy);
                  return Inputs{g.da, g.db};
                },
                {a, b}, {0, 1});
    }
}

TEST(GradCheck, Contract) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {S({A, B}), S({B, C})},                        // matmul
      {S({A, B, One}), S({One, C, B})},              // two shared names, b's order differs
      {S({C, A}), S({A, C})},                        // full contraction to a scalar
      {S({A, B, C}), S({B})}};                       // matrix-vector in the middle
  for (const auto& [sa, sb] : shapes) {
    SCOPED_TRACE(sa.str() + " @ " + sb.str());
    Rng rng{11};
    gradCheck([](const Inputs& in) { return contract(in[0], in[1]); },
              [](const Inputs& in, const Tensor& dy) {
                ContractGrads g = contractBackward(in[0], in[1], dy);
                return Inputs{g.da, g.db};
              },
              {random(sa, rng), random(sb, rng)}, {0, 1});
  }
}

TEST(GradCheck, Reductions) {
  for (const Names& over : {Names{"a", "c"}, Names{"b"}, Names{}}) {
    SCOPED_TRACE(std::to_string(over.size()) + " names");
    Rng rng{13};
    Tensor x = random(S({A, B, One, C}), rng);
    gradCheck([&](const Inputs& in) { return reduceSum(in[0], over); },
              [&](const Inputs& in, const Tensor& dy) { return Inputs{reduceSumBackward(in[0].shape, over, dy)}; },
              {x}, {0});
    gradCheck([&](const Inputs& in) { return reduceMean(in[0], over); },
              [&](const Inputs& in, const Tensor& dy) { return Inputs{reduceMeanBackward(in[0].shape, over, dy)}; },
              {x}, {0});
    gradCheck([&](const Inputs& in) { return reduceMax(in[0], over); },
              [&](const Inputs& in, const Tensor& dy) { return Inputs{reduceMaxBackward(in[0], over, dy)}; },
              {distinct(x.shape, rng)}, {0});
  }
}

TEST(GradCheck, SoftmaxAndLogSoftmax) {
  for (const char* over : {"a", "b", "one"}) {
    SCOPED_TRACE(over);
    Rng rng{17};
    Tensor x = random(S({A, B, One}), rng, -3, 3);
    gradCheck([&](const Inputs& in) { return softmax(in[0], over); },
              [&](const Inputs& in, const Tensor& dy) { return Inputs{softmaxBackward(softmax(in[0], over), dy, over)}; },
              {x}, {0});
    gradCheck([&](const Inputs& in) { return logSoftmax(in[0], over); },
              [&](const Inputs& in, const Tensor& dy) {
                return Inputs{logSoftmaxBackward(logSoftmax(in[0], over), dy, over)};
              },
              {x}, {0});
  }
}

TEST(GradCheck, NormalizeAndRmsNormalize) {
  for (const Names& over : {Names{"c"}, Names{"a", "c"}}) {
    Rng rng{19};
    Tensor x = random(S({A, B, C}), rng);
    gradCheck([&](const Inputs& in) { return normalize(in[0], over, 1e-5); },
              [&](const Inputs& in, const Tensor& dy) { return Inputs{normalizeBackward(in[0], over, 1e-5, dy)}; },
              {x}, {0});
    gradCheck([&](const Inputs& in) { return rmsNormalize(in[0], over, 1e-6); },
              [&](const Inputs& in, const Tensor& dy) { return Inputs{rmsNormalizeBackward(in[0], over, 1e-6, dy)}; },
              {x}, {0});
  }
}

TEST(GradCheck, EmbedWithRepeatedIds) {
  Rng rng{23};
  Tensor table = random(S({Dim{"vocab", 7}, B, One}), rng);
  Tensor ids = Tensor::fromInts(S({A, Dim{"s", 5}}), {0, 6, 3, 3, 1, 6, 6, 2, 0, 4, 5, 1, 3, 0, 6});
  gradCheck(
      [](const Inputs& in) {
        Tensor out;
        EXPECT_TRUE(embed(in[0], in[1], &out).ok);
        return out;
      },
      [](const Inputs& in, const Tensor& dy) {
        Tensor dtable;
        EXPECT_TRUE(embedBackward(in[0].shape, in[1], dy, &dtable).ok);
        return Inputs{dtable};
      },
      {table, ids}, {0});
}

TEST(GradCheck, Attention) {
  const Dim batch{"batch", 2}, heads{"heads", 3}, hd{"hd", 5};
  for (int64_t sk : {5, 3, 7, 1})
    for (bool causal : {false, true}) {
      SCOPED_TRACE("seq_k " + std::to_string(sk) + (causal ? " causal" : ""));
      Rng rng{static_cast<uint64_t>(29 + sk)};
      Tensor q = random(S({batch, Dim{"seq", 5}, heads, hd}), rng);
      Tensor k = random(S({batch, Dim{"kseq", sk}, heads, hd}), rng), v = random(k.shape, rng);
      gradCheck([causal](const Inputs& in) { return attention(in[0], in[1], in[2], causal); },
                [causal](const Inputs& in, const Tensor& dy) {
                  AttentionGrads g = attentionBackward(in[0], in[1], in[2], causal, dy);
                  return Inputs{g.dq, g.dk, g.dv};
                },
                {q, k, v}, {0, 1, 2});
    }
}

TEST(GradCheck, CrossEntropyWithLabelsInAnotherOrder) {
  Rng rng{31};
  Tensor logits = random(S({A, C, B}), rng, -3, 3);                                         // [a, classes, b]
  Tensor labels = Tensor::fromInts(S({B, A}), {0, 6, 3, 2, 1, 5, 6, 0, 4, 2, 3, 3, 1, 0, 5});  // [b, a]
  gradCheck(
      [&](const Inputs& in) {
        Tensor loss;
        EXPECT_TRUE(crossEntropy(in[0], labels, "c", &loss).ok);
        return loss;
      },
      [&](const Inputs& in, const Tensor& dy) {
        Tensor d;
        EXPECT_TRUE(crossEntropyBackward(in[0], labels, "c", dy, &d).ok);
        return Inputs{d};
      },
      {logits}, {0});
}

TEST(GradCheck, DropoutUsesTheForwardMask) {
  Rng rng{37};
  gradCheck([](const Inputs& in) { return dropout(in[0], 0.3, 1234, true); },
            [](const Inputs&, const Tensor& dy) { return Inputs{dropoutBackward(dy, 0.3, 1234, true)}; },
            {random(S({A, B, C}), rng)}, {0});
}

TEST(GradCheck, ReshapesPassGradientsThroughTheInverse) {
  Rng rng{41};
  const Dim d{"d", 15};
  gradCheck([&](const Inputs& in) { return splitDim(in[0], "d", A, B); },
            [&](const Inputs&, const Tensor& dy) { return Inputs{mergeDims(dy, "a", "b", d)}; },
            {random(S({C, d, One}), rng)}, {0});
  gradCheck([&](const Inputs& in) { return mergeDims(in[0], "a", "b", d); },
            [&](const Inputs&, const Tensor& dy) { return Inputs{splitDim(dy, "d", A, B)}; },
            {random(S({C, A, B}), rng)}, {0});
}

}  // namespace
}  // namespace dtl::rt::ref
