// DTL_FAULT's syntax (fault_hook.h): what parses, what is refused and why,
// and which faults are due on a rank at a step.
#include "runtime/exec/fault_hook.h"

#include <gtest/gtest.h>

namespace dtl::rt {
namespace {

const std::vector<FaultKind> kKinds = {{"nan_grad", {"rank", "step"}, {"tensor"}}, {"flip_bit", {"rank", "step"}, {}}};

TEST(FaultHook, ParsesSeveralFaults) {
  std::vector<Fault> f;
  std::string err;
  ASSERT_TRUE(parseFaults("nan_grad:rank=1:step=5:tensor=l1.weight,flip_bit:step=3", kKinds, f, err)) << err;
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].kind, "nan_grad");
  EXPECT_EQ(f[0].integer("rank", 0), 1);
  EXPECT_EQ(f[0].text("tensor"), "l1.weight");
  EXPECT_EQ(f[1].integer("rank", 0), 0);  // absent: the fallback
  EXPECT_EQ(faultsAt(f, "nan_grad", 1, 5).size(), 1u);
  EXPECT_TRUE(faultsAt(f, "nan_grad", 0, 5).empty());
  EXPECT_TRUE(faultsAt(f, "nan_grad", 1, 4).empty());
  EXPECT_EQ(faultsAt(f, "flip_bit", 0, 3).size(), 1u);
  ASSERT_TRUE(parseFaults("", kKinds, f, err));
  EXPECT_TRUE(f.empty());
}

TEST(FaultHook, RefusesWhatItCannotDo) {
  std::vector<Fault> f;
  std::string err;
  EXPECT_FALSE(parseFaults("nan_grads:rank=1", kKinds, f, err));
  EXPECT_EQ(err, "DTL_FAULT: unknown fault `nan_grads` in `nan_grads:rank=1` (known: nan_grad, flip_bit)");
  EXPECT_FALSE(parseFaults("nan_grad:rank=one", kKinds, f, err));
  EXPECT_EQ(err, "DTL_FAULT: `rank=one` in `nan_grad:rank=one`: `rank` must be an integer");
  EXPECT_FALSE(parseFaults("flip_bit:tensor=x", kKinds, f, err));
  EXPECT_EQ(err, "DTL_FAULT: `tensor=x` in `flip_bit:tensor=x`: `flip_bit` takes key=value with keys rank, step");
  EXPECT_FALSE(parseFaults("nan_grad:step", kKinds, f, err));
  EXPECT_FALSE(parseFaults("nan_grad:step=1,", kKinds, f, err));  // an empty fault after the comma
}

}  // namespace
}  // namespace dtl::rt
