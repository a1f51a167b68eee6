// StepGuard::agree measures each gradient's 2-norm while it checks the step
// is finite, and clipping takes those norms instead of reading the gradients
// again: the same bits as clipping's own pass (the grad_norm metric and the
// clipped gradients), a gradient whose squares overflow (finite elements, an
// infinite norm) still finite, a NaN still caught, and no norms handed on
// when agree did not measure them all.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "runtime/exec/grad_sync.h"
#include "runtime/exec/step_guard.h"
#include "runtime/optim/clip.h"

namespace dtl::rt {
namespace {

struct Model {
  std::vector<ParamSpec> specs;
  std::vector<Param> params;
  explicit Model(const std::vector<int64_t>& sizes, uint32_t seed = 7) {
    specs.resize(sizes.size());
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 3.0f);
    for (size_t i = 0; i < sizes.size(); ++i) {
      specs[i].path = "p" + std::to_string(i);
      Param p{&specs[i], {}, {}, {}, {}, nullptr, {}, true};
      p.grad.resize(static_cast<size_t>(sizes[i]));
      for (float& g : p.grad) g = d(rng);
      params.push_back(std::move(p));
    }
    for (Param& p : params) p.step_grad = p.grad.data();
  }
};

bool sameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// The guard's norms are each gradient's own normTwo, bit for bit.
void expectNormsAreNormTwo(const StepGuard& guard, const std::vector<Param>& params) {
  ASSERT_NE(guard.localNorms(), nullptr);
  for (size_t i = 0; i < params.size(); ++i) {
    const float want = optim::normTwo(params[i].grad.data(), static_cast<int64_t>(params[i].grad.size()));
    EXPECT_EQ(std::memcmp(&(*guard.localNorms())[i], &want, 4), 0) << i;
  }
}

TEST(StepGuard, ClippingFromTheGuardsNormsIsClippingsOwnBits) {
  for (double clip : {0.0, 1.0}) {
    Model guarded({1000, 37, 1, 4096}), plain({1000, 37, 1, 4096});
    TrainConfig c;
    c.clip = clip;
    StepGuard guard(c);
    StepVerdict v;
    std::string err;
    ASSERT_TRUE(guard.agree(1, 0.5, guarded.params, v, err)) << err;
    expectNormsAreNormTwo(guard, plain.params);
    double with = 0, without = 0;
    ASSERT_TRUE(clipOverPieces(guarded.params, clip, {}, &with, guard.localNorms()).ok);
    ASSERT_TRUE(clipOverPieces(plain.params, clip, {}, &without).ok);
    EXPECT_TRUE(sameBits(with, without)) << with << " vs " << without;
    for (size_t i = 0; i < plain.params.size(); ++i)
      EXPECT_EQ(guarded.params[i].grad, plain.params[i].grad) << "clip " << clip << ", param " << i;
  }
}

// On several threads each parameter's norm is still one normTwo pass (the
// bits), whichever thread took it, and the first non-finite gradient in the
// parameters' order is the one named.
TEST(StepGuard, NormsOnThreadsAreEachParametersOwnBits) {
  Model m({300000, 5, 200000, 1, 70000, 150000});
  TrainConfig c;
  c.threads = 3;
  c.on_nonfinite = "skip";
  StepGuard guard(c);
  StepVerdict v;
  std::string err;
  ASSERT_TRUE(guard.agree(1, 0.5, m.params, v, err)) << err;
  expectNormsAreNormTwo(guard, m.params);
  // p1 (5 elements) comes first in the parameters' order, last among the
  // largest-first threads' pieces: it is the one named.
  m.params[2].grad[0] = std::numeric_limits<float>::infinity();
  m.params[1].grad[4] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(guard.agree(2, 0.5, m.params, v, err)) << err;
  EXPECT_TRUE(v.skip);
  EXPECT_EQ(guard.localNorms(), nullptr);
  TrainConfig stop = c;
  stop.on_nonfinite = "stop";
  StepGuard stopping(stop);
  EXPECT_FALSE(stopping.agree(3, 0.5, m.params, v, err));
  EXPECT_NE(err.find("`p1`"), std::string::npos) << err;
  EXPECT_EQ(err.find("`p2`"), std::string::npos) << err;
}

TEST(StepGuard, AFiniteGradientWhoseSquaresOverflowIsFinite) {
  Model m({64, 8});
  m.params[1].grad[3] = 3e20f;  // its square is inf in f32, the element is finite
  TrainConfig c;
  StepGuard guard(c);
  StepVerdict v;
  std::string err;
  EXPECT_TRUE(guard.agree(1, 0.5, m.params, v, err)) << err;
  EXPECT_FALSE(v.nonfinite);
  EXPECT_FALSE(v.skip);
  ASSERT_NE(guard.localNorms(), nullptr);
  EXPECT_TRUE(std::isinf((*guard.localNorms())[1]));
}

TEST(StepGuard, NonFiniteGradientsAndLossesHandOnNoNorms) {
  TrainConfig c;
  c.on_nonfinite = "skip";
  for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) {
    Model m({64, 8, 5});
    m.params[1].grad[7] = bad;
    StepGuard guard(c);
    StepVerdict v;
    std::string err;
    EXPECT_TRUE(guard.agree(1, 0.5, m.params, v, err)) << err;
    EXPECT_TRUE(v.skip) << bad;
    EXPECT_EQ(guard.localNorms(), nullptr) << bad;
  }
  Model m({64});
  StepGuard guard(c);
  StepVerdict v;
  std::string err;
  ASSERT_TRUE(guard.agree(1, 0.5, m.params, v, err));
  ASSERT_NE(guard.localNorms(), nullptr);
  EXPECT_TRUE(guard.agree(2, std::nan(""), m.params, v, err));  // a non-finite loss: the gradients are not read
  EXPECT_TRUE(v.skip);
  EXPECT_EQ(guard.localNorms(), nullptr) << "the previous step's norms are not handed on";
}

}  // namespace
}  // namespace dtl::rt
