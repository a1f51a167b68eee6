// The test hook DTL_FAULT (runtime/exec/fault_hook.h): what it parses, what
// it refuses, and which rank, step and restart a fault applies to. The
// faults themselves are driven through `dtlc run` by
// tests/e2e/collective_timeout.sh and tests/e2e/restarts.sh.
#include "runtime/exec/fault_hook.h"

#include <gtest/gtest.h>

namespace dtl::rt {
namespace {

TEST(FaultHook, ParsesKindsAndKeys) {
  std::vector<Fault> f;
  std::string err;
  ASSERT_TRUE(parseFaults("stop:rank=1:step=3,kill:step=5:restart=2,kill", f, err)) << err;
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].kind, "stop");
  EXPECT_EQ(f[0].args, (std::map<std::string, int64_t>{{"rank", 1}, {"step", 3}}));
  EXPECT_EQ(f[1].kind, "kill");
  EXPECT_EQ(f[1].args, (std::map<std::string, int64_t>{{"step", 5}, {"restart", 2}}));
  EXPECT_TRUE(f[2].args.empty());
}

TEST(FaultHook, RefusesWhatItDoesNotKnow) {
  std::vector<Fault> f;
  std::string err;
  EXPECT_FALSE(parseFaults("pause:rank=1", f, err));
  EXPECT_EQ(err, "DTL_FAULT: unknown fault `pause` in `pause:rank=1` (stop, kill)");
  EXPECT_FALSE(parseFaults("stop:ranks=1", f, err));
  EXPECT_EQ(err, "DTL_FAULT: `ranks=1` in `stop:ranks=1` is not rank=N, step=N or restart=N");
  for (const char* bad : {"stop:rank=", "stop:rank=x", "stop:rank=1x", "stop:rank=-1", "stop:rank", "stop,,kill", ""})
    EXPECT_FALSE(parseFaults(bad, f, err)) << bad;
}

TEST(FaultHook, AppliesToItsRankStepAndRestartOnly) {
  std::vector<Fault> f;
  std::string err;
  ASSERT_TRUE(parseFaults("kill:rank=1:step=3:restart=0,stop:step=7", f, err)) << err;
  const FaultHook rank1(f, 1, 0), rank0(f, 0, 0), restarted(f, 1, 1);
  EXPECT_TRUE(rank1.due("kill", 3));
  EXPECT_FALSE(rank1.due("kill", 4));
  EXPECT_FALSE(rank1.due("stop", 3));
  EXPECT_FALSE(rank0.due("kill", 3));
  EXPECT_FALSE(restarted.due("kill", 3));  // only in the generation it names
  for (const FaultHook* h : {&rank1, &rank0, &restarted}) EXPECT_TRUE(h->due("stop", 7));  // every rank, every restart
  EXPECT_FALSE(FaultHook().any());
}

}  // namespace
}  // namespace dtl::rt
