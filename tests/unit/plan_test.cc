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
// at their source (here the --set that gave them), never silently planned
// as something else.
TEST(Plan, SettingsNotBuiltYetAreRefusedAtTheirSet) {
  for (const auto& [set, text] : std::vector<std::pair<std::string, std::string>>{
           {"parallel.reduce_dtype=bf16",
            "--set parallel.reduce_dtype:1:1: error: `reduce_dtype = bf16` (gradients on the wire) is not built yet\n"
            "  bf16\n"
            "  ^~~~\n"
            "hint: remove it (or --set parallel.reduce_dtype=f32) to reduce in f32\n"},
           {"train.precision=bf16",
            "--set train.precision:1:1: error: `precision = bf16` (mixed precision) is not built yet\n"
            "  bf16\n"
            "  ^~~~\n"
            "hint: remove it (or --set train.precision=f32) to train in f32\n"},
           {"parallel.recompute=l1",
            "--set parallel.recompute:1:1: error: `recompute = l1` (activation recomputation) is not built yet\n"
            "  l1\n"
            "  ^~\n"
            "hint: remove it to keep every activation\n"}}) {
    int rc = 0;
    EXPECT_EQ(plan({"--set", set}, &rc), text + "1 error generated.\n") << set;
    EXPECT_EQ(rc, 1) << set;
  }
}

std::string inPlanDir(std::vector<std::string> args, int* status) {
  std::string out, err;
  char cwd[4096];
  EXPECT_NE(getcwd(cwd, sizeof cwd), nullptr);
  EXPECT_EQ(chdir(kDir.c_str()), 0);
  *status = cli::runCli(args, out, err);
  EXPECT_EQ(chdir(cwd), 0);
  return *status == 0 ? err + out : err;
}

// unbuilt.dtl has every split rule and setting this build cannot run: each is
// refused once, at its line, and nothing per tensor follows (the layout never
// runs). The text is the one docs/plan.md shows.
const std::string kUnbuilt =
    "unbuilt.dtl:18:3: error: `precision = bf16` (mixed precision) is not built yet\n"
    "    precision = bf16\n"
    "    ^~~~~~~~~\n"
    "hint: remove it (or --set train.precision=f32) to train in f32\n"
    "unbuilt.dtl:25:3: error: `split layers over pp` is not built yet (pipeline stages over the `repeat` dim)\n"
    "    split layers over pp\n"
    "    ^~~~~~~~~~~~~~~~~~~~\n"
    "hint: remove this rule to keep every layer on every rank\n"
    "unbuilt.dtl:26:3: error: `pipeline = 1f1b(…)` (a pipeline schedule) is not built yet\n"
    "    pipeline     = 1f1b(microbatches = 2)\n"
    "    ^~~~~~~~\n"
    "hint: remove it and `split layers over pp` to train without pipeline stages\n"
    "unbuilt.dtl:28:3: error: `reduce_dtype = bf16` (gradients on the wire) is not built yet\n"
    "    reduce_dtype = bf16\n"
    "    ^~~~~~~~~~~~\n"
    "hint: remove it (or --set parallel.reduce_dtype=f32) to reduce in f32\n"
    "unbuilt.dtl:29:3: error: `recompute = blocks` (activation recomputation) is not built yet\n"
    "    recompute    = blocks\n"
    "    ^~~~~~~~~\n"
    "hint: remove it to keep every activation\n"
    "5 errors generated.\n";

// "error:" → "warning:", and the summary counts warnings.
std::string asWarnings(std::string text) {
  for (size_t at = 0; (at = text.find(": error: ", at)) != std::string::npos;) text.replace(at, 9, ": warning: ");
  size_t sum = text.rfind("5 errors generated.");
  text.replace(sum, std::string::npos, "5 warnings generated.\n");
  return text;
}

TEST(Plan, EveryRuleAndSettingNotBuiltIsRefusedOnceAtItsSource) {
  int rc = 0;
  EXPECT_EQ(inPlanDir({"plan", "unbuilt.dtl", "--world", "8"}, &rc), kUnbuilt);
  EXPECT_EQ(rc, 1);
  // --emit=layout would print that wrong layout: refused the same way.
  EXPECT_EQ(inPlanDir({"check", "unbuilt.dtl", "--world", "8", "--emit=layout"}, &rc), kUnbuilt);
  EXPECT_EQ(rc, 1);
}

TEST(Plan, CheckWarnsWhatPlanRefuses) {
  int rc = 0;
  std::string err = inPlanDir({"check", "unbuilt.dtl", "--world", "8"}, &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(err.substr(0, err.find("model TinyGpt")), asWarnings(kUnbuilt)) << err;
}

// `dtlc run` refuses before any rank starts: with --nproc the launching
// process compiles the spec first (this test binary could not start ranks,
// so reaching the launcher would be exit 2).
TEST(Plan, RunRefusesWhatIsNotBuiltBeforeStartingRanks) {
  int rc = 0;
  EXPECT_EQ(inPlanDir({"run", "unbuilt.dtl", "--nproc", "8"}, &rc), kUnbuilt);
  EXPECT_EQ(rc, 1);
}

// Tensor parallelism plans and is not refused: each rank holds its pieces
// (tensor_parallel_test checks the numbers), and the plan shows the tp
// all-reduces with the rule that caused them.
TEST(Plan, TensorParallelismPlansWithItsRules) {
  std::string spec = slurp(kDir + "/unbuilt.dtl");
  spec = spec.substr(0, spec.find("parallel {"));
  spec.replace(spec.find("  precision = bf16\n"), 19, "");
  spec += "parallel {\n  mesh dp = auto, tp = 2\n  split batch over dp\n  split heads over tp\n}\n";
  std::string path = testing::TempDir() + "/tp.dtl";
  std::ofstream(path) << spec;
  std::string out, err;
  EXPECT_EQ(cli::runCli({"plan", path, "--world", "4"}, out, err), 0) << err;
  EXPECT_EQ(err, "");
  EXPECT_NE(out.find("all_reduce over tp"), std::string::npos) << out;
  EXPECT_NE(out.find("rule: split heads over tp (" + path + ":22:3)"), std::string::npos) << out;
}

// A `split` of the batch is data parallelism and runs: no refusal.
TEST(Plan, SplittingTheBatchIsNotRefused) {
  int rc = 0;
  inPlanDir({"check", "mlp_dp.dtl", "--world", "4"}, &rc);
  EXPECT_EQ(rc, 0);
  std::string out = plan({}, &rc);
  EXPECT_EQ(rc, 0) << out;
}

// --device-memory: the plan for a target machine; one rank needs 14.3 KiB.
TEST(Plan, DeviceMemoryRefusesAPlanThatDoesNotFit) {
  int rc = 0;
  EXPECT_EQ(plan({"--device-memory", "8 KiB"}, &rc),
            "dtlc plan: the plan needs 14.3 KiB per rank, more than the 8.0 KiB of --device-memory\n"
            "memory per rank\n"
            "  parameters        2.6 KiB\n"
            "  gradients         2.6 KiB\n"
            "  optimizer state   2.6 KiB\n"
            "  peak activations  3.7 KiB\n"
            "  comm buffers      2.6 KiB\n"
            "  total             14.3 KiB\n"
            "hint: lower train.batch or the model's dims, or plan for a device with more memory\n");
  EXPECT_EQ(rc, 1);
  // 14,604 bytes exactly (docs/plan.md's JSON "total").
  for (const char* fits : {"24 GiB", "24GiB", "512 MiB", "14604", "15KiB"}) {
    EXPECT_EQ(plan({"--device-memory", fits}, &rc), slurp(kDir + "/mlp_dp.txt")) << fits;
    EXPECT_EQ(rc, 0) << fits;
  }
  EXPECT_EQ(plan({"--device-memory", "14603"}, &rc).substr(0, 40), "dtlc plan: the plan needs 14.3 KiB per r");
  EXPECT_EQ(rc, 1);
  EXPECT_EQ(plan({"--device-memory", "lots"}, &rc), "dtlc plan: --device-memory expects a size such as '24 GiB', got 'lots'\n");
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(plan({"--device-memory", "24 GiBs"}, &rc), "dtlc plan: --device-memory expects a size such as '24 GiB', got '24 GiBs'\n");
  EXPECT_EQ(plan({"--device-memory", "0"}, &rc), "dtlc plan: --device-memory expects a size such as '24 GiB', got '0'\n");
  EXPECT_EQ(rc, 2);
}

// A dim no tensor can have is a located error at the dim (its --set here),
// in check as in plan: never std::bad_alloc.
TEST(Plan, ImpossibleSizesAreLocatedErrors) {
  const std::string text =
      "--set model.h:1:1: error: `l1.weight` [f=16, h=100000000000000] would hold 16 × 100,000,000,000,000 f32 = "
      "6,400,000,000,000,000 bytes (5.7 PiB), more than the 1.0 PiB a tensor may hold\n"
      "  100000000000000\n"
      "  ^~~~~~~~~~~~~~~\n"
      "hint: `h = 100,000,000,000,000` is far larger than a tensor's dim can be; check its value\n"
      "1 error generated.\n";
  int rc = 0;
  EXPECT_EQ(plan({"--set", "model.h=100000000000000"}, &rc), text);
  EXPECT_EQ(rc, 1);
  EXPECT_EQ(inPlanDir({"check", "mlp_dp.dtl", "--set", "model.h=100000000000000"}, &rc), text);
  EXPECT_EQ(rc, 1);
  // `batch` is train.batch's: blamed at the --set that gave it.
  EXPECT_EQ(inPlanDir({"check", "mlp_dp.dtl", "--set", "train.batch=100000000000000"}, &rc),
            "--set train.batch:1:1: error: `x` [batch=100000000000000, f=16] would hold 100,000,000,000,000 × 16 f32 = "
            "6,400,000,000,000,000 bytes (5.7 PiB), more than the 1.0 PiB a tensor may hold\n"
            "  100000000000000\n"
            "  ^~~~~~~~~~~~~~~\n"
            "hint: `batch = 100,000,000,000,000` is far larger than a tensor's dim can be; check its value\n"
            "1 error generated.\n");
  // Past 64 bits: the same place, no overflow anywhere.
  std::string huge = plan({"--set", "model.h=3000000000000000000"}, &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_EQ(huge.substr(0, huge.find('\n')),
            "--set model.h:1:1: error: `l1.weight` [f=16, h=3000000000000000000] would hold 16 × "
            "3,000,000,000,000,000,000 f32 = more bytes than fit in 64 bits, more than the 1.0 PiB a tensor may hold");
}

// The `%N` a plan names are nodes of `dtlc check --emit=layout`: the gradient
// a bucket starts after is all-reduced there, and the optimiser updates that
// parameter with the result.
TEST(Plan, PlanIdsAreTheNodesOfEmitLayout) {
  int rc = 0;
  std::string p = plan({});
  std::string layout = inPlanDir({"check", "mlp_dp.dtl", "--world", "4", "--emit=layout"}, &rc);
  ASSERT_EQ(rc, 0) << layout;
  int checked = 0;
  for (size_t at = 0; (at = p.find("starts after the gradient of ", at)) != std::string::npos; ++at) {
    size_t name = at + 29, open = p.find(" (%", name), close = p.find(')', open);
    std::string param = p.substr(name, open - name), id = p.substr(open + 2, close - open - 2);
    // "  %29 = all_reduce(%28) {dp} : …", then "update(%k, %29) {l1.bias}".
    size_t reduce = layout.find(" = all_reduce(" + id + ")");
    ASSERT_NE(reduce, std::string::npos) << id << "\n" << layout;
    size_t line = layout.rfind("\n  %", reduce) + 3;
    std::string reduced = layout.substr(line, reduce - line);
    EXPECT_NE(layout.find(", " + reduced + ") {" + param + "}"), std::string::npos) << param << " " << reduced << "\n" << layout;
    // The bucket line lists the same all-reduce and starts after the same node.
    EXPECT_NE(layout.find("starts after " + id + ":"), std::string::npos) << layout;
    ++checked;
  }
  EXPECT_EQ(checked, 2) << p;
  // The same ids in rank 0's program: the bucket starts right after the gradient it waits for.
  std::string program = inPlanDir({"check", "mlp_dp.dtl", "--world", "4", "--emit=program"}, &rc);
  ASSERT_EQ(rc, 0) << program;
  EXPECT_EQ(program, slurp(kDir + "/mlp_dp.program"));
  for (const char* id : {"%28", "%29"}) {
    size_t run = program.find("\n  run   " + std::string(id) + " = ");
    ASSERT_NE(run, std::string::npos) << id << "\n" << program;
    size_t next = program.find('\n', run + 1) + 1;
    EXPECT_EQ(program.substr(next, 14), "  start group ") << id << "\n" << program;
  }
}

// Without a train block nothing says how to train: refused, not defaulted.
TEST(Plan, RunRefusesASpecWithoutTrainBlock) {
  std::string spec = slurp(kDir + "/mlp_dp.dtl");
  size_t from = spec.find("\ntrain {") + 1, to = spec.find("}\n", from) + 2;
  std::string path = testing::TempDir() + "/no_train.dtl";
  std::ofstream(path) << spec.substr(0, from) + spec.substr(to);
  std::string out, err;
  EXPECT_EQ(cli::runCli({"run", path}, out, err), 1);
  EXPECT_EQ(err, "dtlc run: " + path +
                     " has no `train` block, so nothing says how to train it (batch, optimizer, epochs or steps); add "
                     "one, e.g. `train { batch = 32  optimizer = adamw(lr = 1e-3)  epochs = 1 }`\n");
  EXPECT_EQ(cli::runCli({"run", path, "--nproc", "2"}, out, err), 1);
}

// `dtlc run` compares the plan with the memory this machine has left before
// any rank starts: a plan of petabytes is refused with its breakdown (and,
// with --nproc, before the launcher, which this test binary cannot use).
TEST(Plan, RunRefusesAPlanLargerThanThisMachine) {
  for (std::vector<std::string> extra : {std::vector<std::string>{}, {"--nproc", "2"}}) {
    // h = 2^42: l1.weight [16, h] alone is 256 TiB (under the 1 PiB a tensor may hold); parameters 21 × 2^44 B.
    std::vector<std::string> args = {"run", "mlp_dp.dtl", "--set", "model.h=4398046511104"};
    args.insert(args.end(), extra.begin(), extra.end());
    int rc = 0;
    std::string err = inPlanDir(args, &rc);
    EXPECT_EQ(rc, 1) << err;
    std::string first = err.substr(0, err.find('\n'));
    // One rank has no gradient buckets; two hold them (comm buffers: the gradients again).
    EXPECT_EQ(first.rfind(extra.empty() ? "dtlc run: the plan needs 1.5 PiB per rank, more than the "
                                        : "dtlc run: the plan needs 1.7 PiB per rank × 2 ranks on this machine = 3.4 PiB, more than the ",
                          0),
              0u)
        << err;
    EXPECT_NE(err.find("\nmemory per rank\n  parameters        336.0 TiB\n"), std::string::npos) << err;
    EXPECT_NE(err.find("\nhint: lower train.batch or the model's dims, or start fewer ranks on this machine; "
                       "--ignore-memory-check starts it anyway\n"),
              std::string::npos)
        << err;
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
