// --verify's comparison: relative differences, the largest and the first
// step over the tolerance, and the step losses read from a metrics file.
#include "tools/dtlc/verify.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

namespace dtl::cli {
namespace {

TEST(Verify, RelativeDifferenceIsToTheReference) {
  EXPECT_NEAR(relativeDifference(1.1, 1.0), 0.1, 1e-12);
  EXPECT_DOUBLE_EQ(relativeDifference(-2.0, -4.0), 0.5);
  EXPECT_EQ(relativeDifference(0.25, 0.0), 0.25);  // absolute where the reference is 0
  EXPECT_EQ(relativeDifference(3.0, 3.0), 0.0);
}

TEST(Verify, LargestAndFirstOverTheTolerance) {
  std::vector<StepLosses> steps = {{1, 2.0, 2.0}, {2, 2.0004, 2.0}, {3, 1.0, 1.001}, {4, 1.0, 1.0}};
  LossComparison c = compareLosses(steps, 1e-4);
  EXPECT_EQ(c.largest_at, 3);
  EXPECT_NEAR(c.largest, 0.001 / 1.001, 1e-12);
  EXPECT_EQ(c.first_over, 2);
  EXPECT_EQ(c.over.layout, 2.0004);
  EXPECT_EQ(c.over.reference, 2.0);
  c = compareLosses(steps, 1e-2);
  EXPECT_EQ(c.first_over, 0);
  EXPECT_EQ(c.largest_at, 3);
  // Identical runs: the largest difference is 0, at the first step.
  c = compareLosses({{1, 2.0, 2.0}, {2, 1.5, 1.5}}, 0);
  EXPECT_EQ(c.largest, 0);
  EXPECT_EQ(c.largest_at, 1);
  EXPECT_EQ(c.first_over, 0);
  // A NaN on one side is over any tolerance.
  c = compareLosses({{1, NAN, 2.0}}, 1e300);
  EXPECT_EQ(c.first_over, 1);
}

TEST(Verify, ReadsStepLossesAndPassesOverEvaluations) {
  std::string path = ::testing::TempDir() + "verify_test_metrics.jsonl";
  {
    std::ofstream f(path);
    f << "{\"step\": 1, \"epoch\": 0, \"loss\": 1.3862943611198906, \"lr\": 0.1, \"samples_per_s\": 5310.2}\n"
      << "{\"step\": 1, \"epoch\": 0, \"eval_loss\": 1.2, \"eval_accuracy\": 0.5}\n"
      << "{\"step\": 2, \"epoch\": 0, \"loss\": 1.25e-07, \"lr\": 0.1, \"samples_per_s\": 5310.2}\n";
  }
  auto losses = readStepLosses(path);
  ASSERT_EQ(losses.size(), 2u);
  EXPECT_EQ(losses[0].first, 1);
  EXPECT_EQ(losses[0].second, 1.3862943611198906);
  EXPECT_EQ(losses[1].first, 2);
  EXPECT_EQ(losses[1].second, 1.25e-07);
  std::remove(path.c_str());
  EXPECT_TRUE(readStepLosses(path).empty());
}

}  // namespace
}  // namespace dtl::cli
