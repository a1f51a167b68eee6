// The command line: help, usage errors and exit statuses.
#include <gtest/gtest.h>

#include "tools/dtlc/cli.h"

namespace dtl {
namespace {

int run(const std::vector<std::string>& args, std::string& out, std::string& err) {
  out.clear();
  err.clear();
  return cli::runCli(args, out, err);
}

TEST(Cli, HelpDescribesEveryFlag) {
  std::string out, err;
  EXPECT_EQ(run({"--help"}, out, err), 0);
  EXPECT_NE(out.find("check SPEC"), std::string::npos);
  EXPECT_EQ(run({"check", "--help"}, out, err), 0);
  for (const char* flag : {"--format", "--world", "--set", "--emit", "--help", "layout (the graph laid out"})
    EXPECT_NE(out.find(flag), std::string::npos) << flag;
  EXPECT_EQ(run({"plan", "--help"}, out, err), 0);
  EXPECT_NE(out.find("--device-memory SIZE"), std::string::npos) << out;
  EXPECT_EQ(run({"run", "--help"}, out, err), 0);
  for (const char* flag : {"--ignore-memory-check", "--no-checkpoints", "--verify K", "--verify-tolerance X"})
    EXPECT_NE(out.find(flag), std::string::npos) << flag;
  EXPECT_EQ(run({"generate", "--help"}, out, err), 0);
  for (const char* flag : {"--checkpoint DIR", "--prompt TEXT", "--tokens N", "--temperature T", "--top-k K",
                           "--seed S", "--set KEY=VALUE", "--kernels fast|reference", "--dump-logits FILE", "--help"})
    EXPECT_NE(out.find(flag), std::string::npos) << flag;
  EXPECT_EQ(run({"export", "--help"}, out, err), 0);
  for (const char* flag : {"--spec SPEC", "--format torch", "--out FILE", "--set KEY=VALUE", "--help"})
    EXPECT_NE(out.find(flag), std::string::npos) << flag;
  EXPECT_EQ(run({"report", "--help"}, out, err), 0);
  for (const char* flag : {"-o, --out FILE", "--metrics FILE", "--spec SPEC", "--world N", "--set KEY=VALUE", "--help"})
    EXPECT_NE(out.find(flag), std::string::npos) << flag;
  EXPECT_EQ(run({"plan", "--help"}, out, err), 0);
  EXPECT_NE(out.find("--format text|json|dot|svg"), std::string::npos) << out;
}

// Usage errors of generate and export, before anything is compiled or loaded.
TEST(Cli, GenerateAndExportUsageErrors) {
  std::string out, err;
  EXPECT_EQ(run({"generate", "x.dtl", "--prompt", "a"}, out, err), 2);
  EXPECT_EQ(err.substr(0, err.find('\n')),
            "dtlc generate: --checkpoint DIR is required: the checkpoint folder to generate from");
  EXPECT_EQ(run({"generate", "x.dtl", "--checkpoint", "ck", "--top-k", "-2", "--prompt", "a"}, out, err), 2);
  EXPECT_EQ(err.substr(0, err.find('\n')), "dtlc generate: --top-k expects a number of bytes from 0, got '-2'");
  EXPECT_EQ(run({"export", "ck", "--format", "onnx"}, out, err), 2);
  EXPECT_EQ(err.substr(0, err.find('\n')), "dtlc export: --format is torch, got 'onnx'");
  EXPECT_EQ(run({"export", "ck", "--format", "torch", "--out", "m.safetensors"}, out, err), 2);
  EXPECT_EQ(err.substr(0, err.find('\n')),
            "dtlc export: --spec SPEC is required: the spec the checkpoint was trained from");
}

TEST(Cli, VerifyUsageErrorsExitTwo) {
  std::string out, err;
  EXPECT_EQ(run({"run", "x.dtl", "--verify", "0"}, out, err), 2);
  EXPECT_EQ(err, "dtlc run: --verify expects a positive number of steps, got '0'\n");
  EXPECT_EQ(run({"run", "x.dtl", "--verify=1.5"}, out, err), 2);
  EXPECT_EQ(err, "dtlc run: --verify expects a positive number of steps, got '1.5'\n");
  EXPECT_EQ(run({"run", "x.dtl", "--verify", "3", "--verify-tolerance", "nan"}, out, err), 2);
  EXPECT_EQ(err, "dtlc run: --verify-tolerance expects a relative tolerance from 0, e.g. 1e-5, got 'nan'\n");
  EXPECT_EQ(run({"run", "x.dtl", "--verify-tolerance", "1e-3"}, out, err), 2);
  EXPECT_EQ(err, "dtlc run: --verify-tolerance is the tolerance of --verify K; give --verify too\n");
  EXPECT_EQ(run({"run", "x.dtl", "--verify", "3", "--nproc", "2", "--resume", "ck"}, out, err), 2);
  EXPECT_EQ(err.substr(0, 70), "dtlc run: --verify does not take --resume: both runs start from the sp");
  EXPECT_EQ(run({"run", "x.dtl", "--verify", "3"}, out, err), 2);
  EXPECT_EQ(err, "dtlc run: --verify compares a layout on several ranks with one process, and this job is one "
                 "process; give --nproc N (or --nnodes K)\n");
}

TEST(Cli, UsageErrorsExitTwo) {
  std::string out, err;
  EXPECT_EQ(run({}, out, err), 2);
  EXPECT_EQ(run({"frobnicate"}, out, err), 2);
  EXPECT_NE(err.find("unknown command 'frobnicate'"), std::string::npos);
  EXPECT_EQ(run({"check"}, out, err), 2);
  EXPECT_EQ(err.substr(0, 30), "dtlc check: no SPEC given\nusag");
  EXPECT_EQ(run({"check", "x.dtl", "--bogus"}, out, err), 2);
  EXPECT_EQ(err, "dtlc check: unknown option '--bogus' (see dtlc check --help)\n");
  EXPECT_EQ(run({"check", "x.dtl", "--world", "zero"}, out, err), 2);
  EXPECT_EQ(run({"check", "x.dtl", "--format=yaml"}, out, err), 2);
  EXPECT_EQ(err, "dtlc check: --format is text or json, got 'yaml'\n");
  EXPECT_EQ(run({"check", "/nonexistent/spec.dtl"}, out, err), 2);
  EXPECT_EQ(err, "dtlc check: cannot read '/nonexistent/spec.dtl': no such file\n");
  EXPECT_EQ(run({"check", "/tmp"}, out, err), 2);
}

}  // namespace
}  // namespace dtl
