// The test hook DTL_FAULT (runtime/exec/fault_hook.h): what parses, what is
// refused and why, and which rank, step and restart a fault applies to. The
// faults themselves are driven through `dtlc run` by tests/e2e/
// collective_timeout.sh, restarts.sh, nonfinite_grads.sh and replica_divergence.sh.
#include "runtime/exec/fault_hook.h"

#include <gtest/gtest.h>

namespace dtl::rt {
namespace {

TEST(FaultHook, ParsesSeveralFaults) {
  std::vector<Fault> f;
  std::string err;
  ASSERT_TRUE(parseFaults("nan_grad:rank=1:step=5:tensor=l1.weight,flip_bit:step=3,kill:step=5:restart=2,kill",
                          knownFaults(), f, err))
      << err;
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[0].kind, "nan_grad");
  EXPECT_EQ(f[0].integer("rank", 0), 1);
  EXPECT_EQ(f[0].text("tensor"), "l1.weight");
  EXPECT_EQ(f[1].integer("rank", -7), -7);  // absent: the fallback
  EXPECT_EQ(f[2].kind, "kill");
  EXPECT_EQ(f[2].args, (std::map<std::string, std::string>{{"step", "5"}, {"restart", "2"}}));
  EXPECT_TRUE(f[3].args.empty());
  ASSERT_TRUE(parseFaults("", knownFaults(), f, err));
  EXPECT_TRUE(f.empty());
}

TEST(FaultHook, RefusesWhatItCannotDo) {
  std::vector<Fault> f;
  std::string err;
  EXPECT_FALSE(parseFaults("pause:rank=1", knownFaults(), f, err));
  EXPECT_EQ(err, "DTL_FAULT: unknown fault `pause` in `pause:rank=1` (known: stop, kill, nan_grad, flip_bit)");
  EXPECT_FALSE(parseFaults("stop:ranks=1", knownFaults(), f, err));
  EXPECT_NE(err.find("`stop` takes key=value with keys rank, step, restart"), std::string::npos) << err;
  EXPECT_FALSE(parseFaults("nan_grad:rank=one", knownFaults(), f, err));
  EXPECT_NE(err.find("`rank` must be an integer"), std::string::npos) << err;
  EXPECT_FALSE(parseFaults("stop:tensor=x", knownFaults(), f, err));  // stop takes no tensor
  for (const char* bad : {"stop:rank=", "stop:rank=x", "stop:rank=1x", "stop:rank=-1", "stop:rank", "stop,,kill",
                          "nan_grad:step=1,"})
    EXPECT_FALSE(parseFaults(bad, knownFaults(), f, err)) << bad;
}

TEST(FaultHook, AppliesToItsRankStepAndRestartOnly) {
  std::vector<Fault> f;
  std::string err;
  ASSERT_TRUE(parseFaults("kill:rank=1:step=3:restart=0,stop:step=7,nan_grad:rank=1:step=5", knownFaults(), f, err))
      << err;
  const FaultHook rank1(f, 1, 0), rank0(f, 0, 0), restarted(f, 1, 1);
  EXPECT_TRUE(rank1.due("kill", 3));
  EXPECT_FALSE(rank1.due("kill", 4));
  EXPECT_FALSE(rank1.due("stop", 3));
  EXPECT_FALSE(rank0.due("kill", 3));
  EXPECT_FALSE(restarted.due("kill", 3));  // only in the generation it names
  for (const FaultHook* h : {&rank1, &rank0, &restarted}) EXPECT_TRUE(h->due("stop", 7));  // every rank, every restart
  EXPECT_FALSE(FaultHook().any());
  EXPECT_EQ(faultsAt(f, "nan_grad", 1, 5, 0).size(), 1u);
  EXPECT_EQ(faultsAt(f, "nan_grad", 1, 5, 3).size(), 1u);  // no restart key: every generation
  EXPECT_TRUE(faultsAt(f, "nan_grad", 0, 5, 0).empty());
  EXPECT_TRUE(faultsAt(f, "nan_grad", 1, 4, 0).empty());
}

}  // namespace
}  // namespace dtl::rt
