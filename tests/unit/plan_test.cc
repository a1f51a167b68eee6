// `dtlc plan` against golden files, and the properties a user relies on:
// data parallelism's collectives come from the layout rules, buckets follow
// the backward pass, and the ring formula gives the bytes sent.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "tools/dtlc/cli.h"

namespace dtl {
namespace {

const std::string kDir = std::string(DTL_SOURCE_DIR) + "/tests/golden/plan";

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string plan(std::vector<std::string> extra, int* status = nullptr) {
  std::string out, err;
  std::vector<std::string> args = {"plan", "mlp_dp.dtl", "--world", "4"};
  args.insert(args.end(), extra.begin(), extra.end());
  char cwd[4096];
  EXPECT_NE(getcwd(cwd, sizeof cwd), nullptr);
  EXPECT_EQ(chdir(kDir.c_str()), 0);
  int rc = cli::runCli(args, out, err);
  EXPECT_EQ(chdir(cwd), 0);
  if (status) *status = rc;
  return rc == 0 ? out : err;
}

TEST(Plan, TextJsonAndDotMatchTheGoldens) {
  EXPECT_EQ(plan({}), slurp(kDir + "/mlp_dp.txt"));
  EXPECT_EQ(plan({"--format", "json"}), slurp(kDir + "/mlp_dp.json"));
  EXPECT_EQ(plan({"--format", "dot"}), slurp(kDir + "/mlp_dp.dot"));
  EXPECT_EQ(plan({"--set", "parallel.overlap=false"}), slurp(kDir + "/mlp_dp_no_overlap.txt"));
}

TEST(Plan, BucketsStartWhenTheirLastGradientExists) {
  std::string overlap = plan({});
  // l1.bias's gradient comes before l1.weight's: with overlap the first
  // bucket does not wait for the end of the backward pass.
  EXPECT_NE(overlap.find("bucket 0 (3 tensors)\n    starts after the gradient of l1.bias"), std::string::npos) << overlap;
  std::string late = plan({"--set", "parallel.overlap=false"});
  EXPECT_NE(late.find("bucket 0 (3 tensors)\n    starts after the gradient of l1.weight"), std::string::npos) << late;
}

TEST(Plan, OneRankSendsNothing) {
  std::string out = plan({"--world", "1"});
  EXPECT_NE(out.find("bytes sent per rank per step: 0 B"), std::string::npos) << out;
}

// Settings the language has but this build cannot run are refused by name,
// never silently planned as something else.
TEST(Plan, SettingsNotBuiltYetAreRefused) {
  for (const auto& [set, name] : std::vector<std::pair<std::string, std::string>>{
           {"parallel.zero=1", "`zero = 1`"},
           {"parallel.reduce_dtype=bf16", "`reduce_dtype = bf16`"},
           {"train.precision=bf16", "`precision = bf16`"}}) {
    int rc = 0;
    std::string err = plan({"--set", set}, &rc);
    EXPECT_EQ(rc, 1) << set;
    EXPECT_NE(err.find("dtlc plan: " + name), std::string::npos) << err;
    EXPECT_NE(err.find("is not built yet"), std::string::npos) << err;
  }
}

TEST(Plan, AutoNeedsAWorld) {
  std::string out, err;
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
  ASSERT_EQ(chdir(kDir.c_str()), 0);
  int rc = cli::runCli({"plan", "mlp_dp.dtl"}, out, err);
  ASSERT_EQ(chdir(cwd), 0);
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(err, "dtlc plan: the mesh has `dp = auto`; give the world size: --world N\n");
}

}  // namespace
}  // namespace dtl
