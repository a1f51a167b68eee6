// state.json: what the trainer writes reads back, and what it reads is checked.
#include "runtime/exec/train_state.h"

#include <gtest/gtest.h>

namespace dtl::rt {
namespace {

TrainStateExpect expectFor(const TrainState& s) {
  TrainStateExpect e;
  e.step = s.step;
  e.model = s.model;
  e.seed = s.seed;
  e.samples = 1000;
  e.global_batch = 8;
  return e;
}

TEST(TrainState, RoundTrips) {
  TrainState s;
  s.step = 12;
  s.epoch = 1;
  s.step_in_epoch = 3;
  s.seed = 7;
  s.model = "Net \"v2\"";
  s.global_batch = 16;
  s.world = 2;
  TrainState back;
  std::string err;
  ASSERT_TRUE(parseTrainState(trainStateJson(s), expectFor(s), back, err)) << err;
  EXPECT_EQ(back.step_in_epoch, 3);
  EXPECT_EQ(back.model, s.model);
  EXPECT_EQ(back.global_batch, 16);
  EXPECT_EQ(back.world, 2);
}

// A step skipped for a non-finite gradient is recorded (Adam's step count is
// step − skipped_steps), and left out when there is none, as older files are.
TEST(TrainState, SkippedStepsRoundTripAndAreChecked) {
  TrainState s;
  s.step = 12;
  s.seed = 7;
  s.model = "Net";
  s.global_batch = 8;
  s.skipped_steps = 2;
  TrainState back;
  std::string err;
  ASSERT_TRUE(parseTrainState(trainStateJson(s), expectFor(s), back, err)) << err;
  EXPECT_EQ(back.skipped_steps, 2);
  s.skipped_steps = 0;
  EXPECT_EQ(trainStateJson(s).find("skipped_steps"), std::string::npos);
  s.skipped_steps = 13;
  EXPECT_FALSE(parseTrainState(trainStateJson(s), expectFor(s), back, err));
  EXPECT_EQ(err, "\"skipped_steps\" is 13, more than the 12 steps taken");
}

// An older checkpoint's state has no global_batch (read as 0, "not recorded");
// writing that state again must give a file that reads back, not "global_batch": 0.
// Found by fuzz/fuzz_train_state.cc (fuzz/regressions/train_state/crash-no-global-batch-written-as-0.json).
TEST(TrainState, UnrecordedGlobalBatchIsLeftOutWhenWritten) {
  const std::string old = R"({"step": 0, "epoch": 0, "step_in_epoch": 0, "seed": 0, "model": "Net"})";
  TrainState s;
  s.model = "Net";
  std::string err;
  ASSERT_TRUE(parseTrainState(old, expectFor(s), s, err)) << err;
  EXPECT_EQ(s.global_batch, 0);
  std::string json = trainStateJson(s);
  EXPECT_EQ(json.find("global_batch"), std::string::npos) << json;
  TrainState back;
  ASSERT_TRUE(parseTrainState(json, expectFor(s), back, err)) << err << "\n" << json;
  EXPECT_EQ(back.global_batch, 0);
}

TEST(TrainState, RefusesAWrittenZeroGlobalBatch) {
  TrainState s;
  s.model = "Net";
  TrainState back;
  std::string err;
  EXPECT_FALSE(parseTrainState(R"({"step":0,"epoch":0,"step_in_epoch":0,"seed":0,"model":"Net","global_batch":0})",
                               expectFor(s), back, err));
  EXPECT_EQ(err, "\"global_batch\" is 0; it must be an integer from 1");
}

}  // namespace
}  // namespace dtl::rt
