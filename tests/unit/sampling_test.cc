// sampleToken: greedy at temperature 0, top-k as nanoGPT's (ties with the
// k-th kept), draws that follow the softmax, and the same tokens for a seed.
#include "tools/dtlc/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

namespace dtl::cli {
namespace {

TEST(Sampling, GreedyTakesTheFirstLargestAndDrawsNothing) {
  const std::vector<float> l = {0.5f, 2.0f, -1.0f, 2.0f};
  std::mt19937_64 rng(7), untouched(7);
  EXPECT_EQ(sampleToken(l.data(), 4, {0.0, 0}, rng), 1);
  EXPECT_EQ(rng(), untouched());
}

TEST(Sampling, ANanLogitIsRefused) {
  const std::vector<float> l = {0.5f, NAN, 1.0f};
  std::mt19937_64 rng(1);
  EXPECT_EQ(sampleToken(l.data(), 3, {1.0, 0}, rng), -1);
  EXPECT_EQ(sampleToken(l.data(), 3, {0.0, 0}, rng), -1);
}

TEST(Sampling, TopKKeepsTheKLargestAndTiesWithTheKth) {
  const std::vector<float> l = {1.0f, 3.0f, 2.5f, 0.0f, 3.0f};
  std::mt19937_64 rng(3);
  std::set<int64_t> seen;
  for (int i = 0; i < 2000; ++i) seen.insert(sampleToken(l.data(), 5, {5.0, 2}, rng));
  EXPECT_EQ(seen, (std::set<int64_t>{1, 4}));  // the two 3.0s; 2.5 is out even at temperature 5
  seen.clear();
  for (int i = 0; i < 2000; ++i) seen.insert(sampleToken(l.data(), 5, {5.0, 3}, rng));
  EXPECT_EQ(seen, (std::set<int64_t>{1, 2, 4}));
}

TEST(Sampling, DrawsFollowTheSoftmaxOfLogitsOverTemperature) {
  const std::vector<float> l = {0.0f, std::log(3.0f), -30.0f};
  for (double t : {1.0, 2.0}) {
    std::mt19937_64 rng(11);
    int counts[3] = {0, 0, 0};
    const int n = 40000;
    for (int i = 0; i < n; ++i) ++counts[sampleToken(l.data(), 3, {t, 0}, rng)];
    const double p1 = std::pow(3.0, 1 / t) / (1 + std::pow(3.0, 1 / t));  // 0.75 at T = 1, 0.634 at T = 2
    EXPECT_NEAR(counts[1] / double(n), p1, 0.01) << "temperature " << t;
    EXPECT_LT(counts[2], 5) << "temperature " << t;
  }
}

TEST(Sampling, ASeedGivesTheSameTokens) {
  std::vector<float> l(256);
  for (size_t i = 0; i < l.size(); ++i) l[i] = static_cast<float>(std::sin(i * 0.37) * 2);
  auto draw = [&](uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<int64_t> out;
    for (int i = 0; i < 50; ++i) out.push_back(sampleToken(l.data(), 256, {0.9, 40}, rng));
    return out;
  };
  EXPECT_EQ(draw(5), draw(5));
  EXPECT_NE(draw(5), draw(6));
}

TEST(Sampling, Uniform01IsTheTop53Bits) {
  std::mt19937_64 a(9), b(9);
  EXPECT_EQ(uniform01(a), static_cast<double>(b() >> 11) / 9007199254740992.0);
}

}  // namespace
}  // namespace dtl::cli
