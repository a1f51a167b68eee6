// `dtlc run` end to end, in-process: training lowers the loss, resume is bit
// for bit, and every bad input stops with a message naming the culprit and
// leaves no partial checkpoint.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/io/checkpoint_store.h"
#include "tools/dtlc/cli.h"
#include "tools/dtlc/run_folder.h"

namespace dtl {
namespace {

namespace fs = std::filesystem;

class Run : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dtl_run_" + std::to_string(::getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // Checkpoint folders are relative to the working folder: run in dir_.
    cwd_ = fs::current_path();
    fs::current_path(dir_);
  }
  void TearDown() override {
    fs::current_path(cwd_);
    fs::remove_all(dir_);
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path(name), std::ios::binary) << text; }

  // A .npy file (v1.0) of float32 or int32 values with the given shape.
  void npy(const std::string& name, const std::string& descr, const std::vector<int64_t>& shape, const void* data,
           size_t bytes) const {
    std::string dims;
    for (int64_t d : shape) dims += std::to_string(d) + ", ";
    std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
    while ((10 + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    std::string out = "\x93NUMPY\x01";
    out += '\0';
    uint16_t len = static_cast<uint16_t>(header.size());
    out += static_cast<char>(len & 0xff);
    out += static_cast<char>(len >> 8);
    out += header;
    out.append(static_cast<const char*>(data), bytes);
    write(name, out);
  }

  // 64 samples of 6 features with 3 classes the features determine.
  void dataset() const {
    std::vector<float> x(64 * 6);
    std::vector<int32_t> y(64);
    for (int i = 0; i < 64; ++i) {
      for (int j = 0; j < 6; ++j) x[i * 6 + j] = std::sin(0.37f * static_cast<float>(i * 6 + j + 1));
      y[i] = x[i * 6] > 0.3f ? 2 : x[i * 6] > -0.3f ? 1 : 0;
    }
    npy("x.npy", "<f4", {64, 6}, x.data(), x.size() * 4);
    npy("y.npy", "<i4", {64}, y.data(), y.size() * 4);
  }

  std::string spec(const std::string& train_extra, const std::string& optimizer = "adamw(lr = 1e-2)",
                   const std::string& act = "tanh") const {
    return "model M {\n  dim f = 6, h = 8, c = 3\n  input x : f32[batch, f]\n  input y : i32[batch]\n"
           "  l1 = Linear(f, h)\n  l2 = Linear(h, c)\n  logits = l2(" + act + "(l1(x)))\n"
           "  loss = cross_entropy(logits, y, over = c)\n"
           "  metric accuracy = mean(cast(argmax(logits, over = c) == y, f32))\n}\n"
           "data {\n  train { x = npy(\"x.npy\"); y = npy(\"y.npy\") }\n  eval { x = npy(\"x.npy\"); y = npy(\"y.npy\") }\n"
           "  shuffle = true\n}\n"
           "train {\n  batch = 8\n  steps = 20\n  optimizer = " + optimizer + "\n  seed = 7\n" + train_extra + "}\n";
  }

  int run(std::vector<std::string> args, std::string* err_out = nullptr) {
    std::string out, err;
    args.insert(args.begin(), "run");
    int rc = cli::runCli(args, out, err);
    if (err_out) *err_out = err;
    return rc;
  }

  std::vector<double> losses(const std::string& metrics, const char* key = "\"loss\": ") const {
    std::vector<double> out;
    std::ifstream in(path(metrics));
    std::string line;
    while (std::getline(in, line)) {
      size_t p = line.find(key);
      if (p != std::string::npos) out.push_back(std::strtod(line.c_str() + p + std::strlen(key), nullptr));
    }
    return out;
  }

  fs::path dir_, cwd_;
};

TEST_F(Run, TrainingLowersTheLossAndWritesMetrics) {
  dataset();
  write("s.dtl", spec("  eval every 10 steps\n"));
  std::string err;
  ASSERT_EQ(run({path("s.dtl"), "--metrics", path("m.jsonl")}, &err), 0) << err;
  std::vector<double> l = losses("m.jsonl");
  ASSERT_EQ(l.size(), 20u);
  EXPECT_LT(l.back(), l.front() * 0.8);
  std::ifstream in(path("m.jsonl"));
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first.rfind("{\"step\": 1, \"epoch\": 0, \"loss\": ", 0), 0u) << first;
  EXPECT_EQ(losses("m.jsonl", "\"eval_accuracy\": ").size(), 2u);
}

TEST_F(Run, ResumeReproducesTheUninterruptedRunBitForBit) {
  dataset();
  write("s.dtl", spec("  checkpoint \"ck\" every 5 steps keep 2\n"));
  std::string err;
  ASSERT_EQ(run({path("s.dtl"), "--metrics", path("full.jsonl")}, &err), 0) << err;
  fs::remove_all(path("ck"));
  // Interrupted after 10 steps (the schedule is constant, so the total does
  // not change the rate), then resumed to 20. 10 steps cross an epoch of 8.
  ASSERT_EQ(run({path("s.dtl"), "--steps", "10", "--metrics", path("part.jsonl")}, &err), 0) << err;
  ASSERT_EQ(run({path("s.dtl"), "--resume", path("ck"), "--metrics", path("part.jsonl")}, &err), 0) << err;
  std::vector<double> full = losses("full.jsonl"), part = losses("part.jsonl");
  ASSERT_EQ(full.size(), 20u);
  ASSERT_EQ(part.size(), 20u);
  for (size_t i = 0; i < 20; ++i) EXPECT_EQ(full[i], part[i]) << "step " << i + 1;
  // keep 2: only the two newest checkpoints remain.
  int n = 0;
  for (const auto& e : fs::directory_iterator(path("ck"))) n += e.path().filename().string().rfind("step-", 0) == 0;
  EXPECT_EQ(n, 2);
}

// A checkpoint records its global batch; a run with another one (other ranks
// or another per-rank batch) continues at the same sample of the epoch.
TEST_F(Run, ResumeWithAnotherGlobalBatchContinuesAtTheSameSample) {
  dataset();
  write("s.dtl", spec("  checkpoint \"ck\" every 3 steps\n"));
  std::string err;
  ASSERT_EQ(run({path("s.dtl"), "--steps", "3"}, &err), 0) << err;  // 24 of the epoch's 64 samples
  // Batch 4: 24 samples are 6 batches, so 10 more end the epoch (step 13);
  // step 14 is the first of epoch 1.
  ASSERT_EQ(run({path("s.dtl"), "--set", "train.batch=4", "--steps", "14", "--resume", path("ck"), "--metrics",
                 path("m.jsonl")}, &err), 0) << err;
  std::vector<double> epochs = losses("m.jsonl", "\"epoch\": ");
  ASSERT_EQ(epochs.size(), 12u);  // steps 4-14 and the final evaluation
  EXPECT_EQ(epochs[9], 0) << "step 13";
  EXPECT_EQ(epochs[10], 1) << "step 14";
  // Batch 5 cannot continue after 24 samples.
  fs::remove_all(path("ck"));
  ASSERT_EQ(run({path("s.dtl"), "--steps", "3"}, &err), 0) << err;
  EXPECT_EQ(run({path("s.dtl"), "--set", "train.batch=5", "--resume", path("ck")}, &err), 1);
  EXPECT_NE(err.find("global batch of 8 and stopped after 24 samples of epoch 0, which is not a whole number of this "
                     "run's optimiser steps of 5 samples"), std::string::npos) << err;
  EXPECT_NE(err.find("hint: choose `batch`"), std::string::npos) << err;
}

// An epoch-long run resumed with another batch trains to the end of its
// epochs in the new units: 32 of 64 samples done at batch 8 (4 steps), 8
// steps of batch 4 remain (steps 5-12), and the epoch ends (evaluation) at 12.
TEST_F(Run, ResumeWithAnotherBatchEndsWithTheEpoch) {
  dataset();
  std::string s = spec("  checkpoint \"ck\" every 4 steps\n  eval every 1 epoch\n");
  s.replace(s.find("steps = 20"), 10, "epochs = 1");
  write("e.dtl", s);
  std::string err;
  ASSERT_EQ(run({path("e.dtl"), "--steps", "4"}, &err), 0) << err;
  ASSERT_EQ(run({path("e.dtl"), "--set", "train.batch=4", "--resume", path("ck"), "--metrics", path("m.jsonl")}, &err),
            0) << err;
  std::vector<double> steps = losses("m.jsonl", "{\"step\": ");  // 8 steps, then the evaluation
  ASSERT_EQ(losses("m.jsonl").size(), 8u);
  ASSERT_EQ(steps.size(), 9u);
  EXPECT_EQ(steps.front(), 5);
  EXPECT_EQ(steps[7], 12);
  EXPECT_EQ(losses("m.jsonl", "\"eval_accuracy\": ").size(), 1u);
  for (double e : losses("m.jsonl", "\"epoch\": ")) EXPECT_EQ(e, 0);
}

// Two parameters with one gradient value (x @ (a + b)): clipping scales it
// once, as two micro-batches of half the batch (which copy) do.
TEST_F(Run, ClippingSharedGradientsScalesEachOnce) {
  dataset();
  std::string s = spec("  clip = 0.01\n", "sgd(lr = 0.5)");
  s.replace(s.find("  l1 = Linear(f, h)"), std::string("  l1 = Linear(f, h)").size(),
            "  param a : [f, c] init normal(std = 0.5)\n  param b : [f, c] init normal(std = 0.5)");
  s.replace(s.find("  l2 = Linear(h, c)\n"), std::string("  l2 = Linear(h, c)\n").size(), "");
  s.replace(s.find("l2(tanh(l1(x)))"), std::string("l2(tanh(l1(x)))").size(), "x @ (a + b)");
  write("s.dtl", s);
  std::string err;
  ASSERT_EQ(run({path("s.dtl"), "--steps", "5", "--metrics", path("one.jsonl")}, &err), 0) << err;
  ASSERT_EQ(run({path("s.dtl"), "--steps", "5", "--set", "train.batch=4", "--set", "train.accumulate=2", "--metrics",
                 path("two.jsonl"), "--out", "two"}, &err), 0) << err;
  std::vector<double> one = losses("one.jsonl"), two = losses("two.jsonl");
  ASSERT_EQ(one.size(), 5u);
  ASSERT_EQ(two.size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_NEAR(one[i], two[i], 1e-5 * std::fabs(one[i])) << "step " << i + 1;
}

// keep 1, a checkpoint every step: the checkpoint saved just before the
// loss became NaN must not have rotated out the one before it. That older one
// is named as the last good checkpoint and is the latest again; the one that
// led to the NaN is set aside.
TEST_F(Run, NanLossStopsNamingTheStepAndKeepsTheLastGoodCheckpoint) {
  dataset();
  write("s.dtl", spec("  checkpoint \"ck\" every 1 step keep 1\n", "sgd(lr = 1e10)", "relu"));
  std::string err;
  EXPECT_EQ(run({path("s.dtl")}, &err), 1);
  size_t at = err.find(": the loss is ");
  ASSERT_NE(at, std::string::npos) << err;
  int64_t step = std::strtoll(err.c_str() + err.rfind("step ", at) + 5, nullptr, 10);
  ASSERT_GE(step, 3) << err;  // steps 1 and 2 were finite: two checkpoints were saved before the NaN
  char prev[32], good[32];
  std::snprintf(prev, sizeof prev, "step-%08lld", static_cast<long long>(step - 1));
  std::snprintf(good, sizeof good, "step-%08lld", static_cast<long long>(step - 2));
  EXPECT_NE(err.find(std::string("the checkpoint saved just before (") + prev + ") led to it and was set aside as ck/diverged-" + prev),
            std::string::npos)
      << err;
  EXPECT_NE(err.find(std::string("the last good checkpoint is ck/") + good + " (--resume ck continues from it)"),
            std::string::npos)
      << err;
  std::ifstream index(path("ck/index.json"));
  std::stringstream text;
  text << index.rdbuf();
  EXPECT_NE(text.str().find(std::string("\"latest\": \"") + good + "\""), std::string::npos) << text.str();
  EXPECT_TRUE(fs::exists(path("ck/") + good + "/params.safetensors"));
  for (const auto& e : fs::directory_iterator(path("ck")))
    EXPECT_NE(e.path().filename().string().rfind(".tmp", 0), 0u) << e.path();
}

TEST_F(Run, OutOfRangeLabelNamesTheStepAndTheLabel) {
  std::vector<float> x(64 * 6, 0.5f);
  std::vector<int32_t> y(64, 1);
  y[13] = 7;
  npy("x.npy", "<f4", {64, 6}, x.data(), x.size() * 4);
  npy("y.npy", "<i4", {64}, y.data(), y.size() * 4);
  write("s.dtl", spec("", "sgd(lr = 0.1)").replace(spec("", "sgd(lr = 0.1)").find("  shuffle = true"), 16, "  shuffle = false"));
  std::string err;
  EXPECT_EQ(run({path("s.dtl")}, &err), 1);
  EXPECT_NE(err.find("step 2: "), std::string::npos) << err;
  EXPECT_NE(err.find("label 7"), std::string::npos) << err;
}

TEST_F(Run, InitLoadsByPathAndRejectsMismatches) {
  dataset();
  write("s.dtl", spec("  checkpoint \"ck\" every 20 steps\n"));
  std::string err;
  ASSERT_EQ(run({path("s.dtl"), "--steps", "1"}, &err), 0) << err;
  std::string params = path("ck/step-00000001/params.safetensors");
  ASSERT_TRUE(fs::exists(params));
  EXPECT_EQ(run({path("s.dtl"), "--steps", "1", "--init", params, "--out", "init"}, &err), 0) << err;
  // A model with another hidden size: every mis-shaped tensor is named.
  EXPECT_EQ(run({path("s.dtl"), "--steps", "1", "--set", "model.h=9", "--init", params, "--out", "h9"}, &err), 1);
  EXPECT_NE(err.find("tensor `l1.weight` is F32[6, 8] but parameter `l1.weight` is F32[f=6, h=9]"), std::string::npos)
      << err;
  // A truncated file.
  std::string bytes;
  {
    std::ifstream in(params, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    bytes = ss.str();
  }
  write("cut.safetensors", bytes.substr(0, bytes.size() - 10));
  EXPECT_EQ(run({path("s.dtl"), "--steps", "1", "--init", path("cut.safetensors"), "--out", "cut"}, &err), 1);
  EXPECT_NE(err.find("cut.safetensors"), std::string::npos) << err;
  // A flipped bit in a checkpoint's tensor: its checksum names it.
  bytes.back() = static_cast<char>(bytes.back() ^ 0x20);
  write("flipped.safetensors", bytes);
  EXPECT_EQ(run({path("s.dtl"), "--steps", "1", "--init", path("flipped.safetensors"), "--out", "flipped"}, &err), 1);
  EXPECT_NE(err.find(path("flipped.safetensors") + ": tensor `l2.bias` does not match its checksum"), std::string::npos)
      << err;
}

TEST_F(Run, CorruptDataFileIsNamed) {
  dataset();
  std::string bytes;
  {
    std::ifstream in(path("x.npy"), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    bytes = ss.str();
  }
  write("s.dtl", spec(""));
  write("x.npy", bytes.substr(0, bytes.size() - 100));
  std::string err;
  EXPECT_EQ(run({path("s.dtl")}, &err), 1);
  EXPECT_NE(err.find("x.npy"), std::string::npos) << err;
}

// One bit flipped in the newest checkpoint: --resume names it and the tensor,
// and continues from the older one (the step after it comes next).
TEST_F(Run, ResumePassesOverACorruptCheckpoint) {
  dataset();
  write("s.dtl", spec("  checkpoint \"ck\" every 5 steps keep 2\n"));
  std::string err;
  ASSERT_EQ(run({path("s.dtl"), "--steps", "10"}, &err), 0) << err;
  std::string file = path("ck/step-00000010/params.safetensors");
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-3, std::ios::end);
    char c = 0;
    f.get(c);
    f.seekp(-3, std::ios::end);
    f.put(static_cast<char>(c ^ 0x40));  // an exponent bit of l2.bias's last value
  }
  ::testing::internal::CaptureStderr();
  int rc = run({path("s.dtl"), "--resume", path("ck"), "--metrics", path("m.jsonl")}, &err);
  std::string warnings = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(rc, 0) << err;
  EXPECT_NE(warnings.find("warning: --resume " + path("ck") + ": passed over step-00000010: " + file +
                          ": tensor `l2.bias` does not match its checksum"),
            std::string::npos)
      << warnings;
  EXPECT_NE(warnings.find("resuming from step-00000005 instead, the newest checkpoint that verifies"),
            std::string::npos)
      << warnings;
  std::ifstream in(path("m.jsonl"));
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first.rfind("{\"step\": 6, ", 0), 0u) << first;
}

// A state.json whose checksum holds but whose fields are wrong (crafted, or
// written by a broken build) stops the resume naming the field: no abort.
TEST_F(Run, ResumeValidatesEveryStateField) {
  dataset();
  write("s.dtl", spec("  checkpoint \"ck\" every 5 steps\n"));
  std::string err;
  ASSERT_EQ(run({path("s.dtl"), "--steps", "5"}, &err), 0) << err;
  rt::io::CheckpointContents c;
  ASSERT_TRUE(rt::io::CheckpointStore::loadLatest(path("ck"), c).ok);
  const std::string good = c.state_json;
  auto resumeWith = [&](const std::string& from, const std::string& to) {
    size_t at = good.find(from);
    EXPECT_NE(at, std::string::npos) << good;
    c.state_json = good.substr(0, at) + to + good.substr(at + from.size());
    EXPECT_TRUE(rt::io::CheckpointStore(path("ck"), 0).save(c).ok);
    int rc = run({path("s.dtl"), "--resume", path("ck")}, &err);
    EXPECT_EQ(rc, 1) << c.state_json;
    return err;
  };
  const std::string prefix = "dtlc run: --resume " + path("ck") + ": step-00000005/state.json: ";
  EXPECT_EQ(resumeWith("\"epoch\":0", "\"epoch\":-5"),
            prefix + "\"epoch\" is -5; it must be an integer from 0\n");
  EXPECT_EQ(resumeWith("\"step_in_epoch\":5", "\"step_in_epoch\":\"5\""),
            prefix + "\"step_in_epoch\" is not an integer; it must be an integer from 0\n");
  EXPECT_EQ(resumeWith("\"step_in_epoch\":5", "\"step_in_epoch\":900"),
            prefix + "\"step_in_epoch\" is 900, but an epoch of the 64 training samples holds 8 global batches of 8\n");
  EXPECT_EQ(resumeWith("\"step\":5", "\"step\":4"), prefix + "\"step\" is 4 but the checkpoint is of step 5\n");
  EXPECT_EQ(resumeWith("\"model\":\"M\"", "\"model\":\"N\""),
            prefix + "the checkpoint is of model `N`, this spec trains `M`\n");
  EXPECT_EQ(resumeWith("\"seed\":7", "\"seed\":8"),
            prefix + "the checkpoint's run had seed 8, this spec has 7 (another data order: the run would not "
                     "continue)\nhint: --set train.seed=8 continues it\n");
  EXPECT_EQ(resumeWith("\"global_batch\":8", "\"global_batch\":0"),
            prefix + "\"global_batch\" is 0; it must be an integer from 1\n");
  EXPECT_EQ(resumeWith("\"world\":1", "\"world\":1,\"cursor\":3"),
            prefix + "unknown field \"cursor\" (this build writes step, epoch, step_in_epoch, seed, model, "
                     "global_batch, world, skipped_steps)\n");
  EXPECT_EQ(resumeWith(",\"seed\":7", ""), prefix + "\"seed\" is missing\n");
}

TEST_F(Run, MetricsThatCannotBeWrittenStopTheRun) {
  dataset();
  write("s.dtl", spec(""));
  std::string err;
  EXPECT_EQ(run({path("s.dtl"), "--metrics", "/dev/full"}, &err), 1);
  EXPECT_EQ(err, "dtlc run: --metrics: /dev/full: cannot write a metrics line: No space left on device\n");
}

// Another job holds the checkpoint folder (its lock file names it): this run
// stops before step 1, naming the holder, instead of destroying its checkpoints.
TEST_F(Run, ASecondJobOnTheCheckpointFolderIsRefused) {
  dataset();
  write("s.dtl", spec("  checkpoint \"ck\" every 5 steps\n"));
  fs::create_directories(path("ck"));
  int fd = ::open(path("ck/.lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  const std::string holder = "pid 4242 on host elsewhere, started 2026-12-01 09:00:00 UTC";
  ASSERT_EQ(::write(fd, holder.data(), holder.size()), static_cast<ssize_t>(holder.size()));
  std::string err;
  int rc = run({path("s.dtl")}, &err);
  ::close(fd);
  EXPECT_EQ(rc, 1);
  EXPECT_EQ(err, "dtlc run: checkpoint folder ck: in use by another job (" + holder +
                     "); two jobs writing checkpoints into one folder would destroy each other's\n"
                     "hint: wait for that job to finish, or give this run another `checkpoint` folder\n");
  EXPECT_FALSE(fs::exists(path("ck/index.json")));
  ASSERT_EQ(run({path("s.dtl")}, &err), 0) << err;  // released: the folder is free again
}

TEST_F(Run, UsageErrors) {
  std::string err;
  EXPECT_EQ(run({}, &err), 2);
  EXPECT_EQ(run({"x.dtl", "--steps", "0"}, &err), 2);
  EXPECT_EQ(err, "dtlc run: --steps expects a positive number of steps, got '0'\n");
  EXPECT_EQ(run({"x.dtl", "--nproc", "0"}, &err), 2);
  // The launching process checks the spec before it starts ranks.
  EXPECT_EQ(run({"x.dtl", "--nproc", "2"}, &err), 2);
  EXPECT_EQ(err, "dtlc run: cannot read 'x.dtl': no such file\n");
  // Launching ranks needs the dtlc binary itself, never a test binary.
  dataset();
  write("s.dtl", spec(""));
  EXPECT_EQ(run({path("s.dtl"), "--nproc", "2"}, &err), 2);
  EXPECT_NE(err.find("--nproc starts ranks of the dtlc binary"), std::string::npos) << err;
  EXPECT_EQ(run({"x.dtl", "--kernels", "gpu"}, &err), 2);
  EXPECT_EQ(run({"x.dtl", "--backend", "mpi"}, &err), 2);
  EXPECT_EQ(err, "dtlc run: --backend is auto, shm or gloo, got 'mpi'\n");
  EXPECT_EQ(run({"x.dtl", "--node-rank", "-1"}, &err), 2);
  EXPECT_EQ(err, "dtlc run: --node-rank expects this node's number, from 0, got '-1'\n");
  EXPECT_EQ(run({"x.dtl", "--nnodes", "0"}, &err), 2);
  EXPECT_EQ(run({"x.dtl", "--max-restarts", "x"}, &err), 2);
  EXPECT_EQ(run({"x.dtl", "--collective-timeout", "0"}, &err), 2);
  EXPECT_EQ(err, "dtlc run: --collective-timeout expects a positive number of seconds, got '0'\n");
}

// Which folder a run writes (running.md, "Run folders"): --out, else the
// folder --resume names (a step-N in it resumes that checkpoint), else the
// spec's checkpoint folder, else runs/<spec file stem>.
TEST(RunFolder, WhichFolder) {
  auto folder = [](std::vector<std::string> args, const std::string& spec_checkpoint = "") {
    cli::RunFlags f;
    args.insert(args.begin(), {"run", "specs/line.dtl"});
    EXPECT_EQ(cli::parseRun(args, f), "");
    return cli::resolveRunFolder(f, spec_checkpoint);
  };
  EXPECT_EQ(folder({}).dir, "runs/line");
  EXPECT_EQ(folder({}, "ck/").dir, "ck");
  EXPECT_EQ(folder({"--out", "o/"}, "ck").dir, "o");
  cli::RunFolder r = folder({"--resume", "runs/x"}, "ck");
  EXPECT_EQ(r.dir, "runs/x");
  EXPECT_EQ(r.resume_dir, "runs/x");
  EXPECT_EQ(r.resume_checkpoint, "");
  r = folder({"--resume", "runs/x/step-00000002/"});
  EXPECT_EQ(r.dir, "runs/x");
  EXPECT_EQ(r.resume_dir, "runs/x");
  EXPECT_EQ(r.resume_checkpoint, "step-00000002");
  r = folder({"--resume", "runs/x/step-00000002", "--out", "y"});
  EXPECT_EQ(r.dir, "y");
  EXPECT_EQ(r.resume_dir, "runs/x");
  EXPECT_EQ(folder({"--resume", "step-00000003"}).resume_dir, ".");
}

// A folder holds a run when it has checkpoints or metrics lines; the spec
// and plan alone (a run that stopped before step 1) do not count.
TEST_F(Run, ATakenRunFolderIsRefusedUnlessResumed) {
  cli::RunFolder f;
  f.dir = "r";
  EXPECT_EQ(cli::refuseTakenFolder(f), "");  // no folder yet
  fs::create_directories("r");
  write("r/spec.dtl", "model");
  write("r/metrics.jsonl", "");
  EXPECT_EQ(cli::refuseTakenFolder(f), "");
  write("r/metrics.jsonl", "{\"step\": 1}\n");
  EXPECT_EQ(cli::refuseTakenFolder(f),
            "run folder r already holds a run (metrics.jsonl)\n"
            "hint: --resume r continues it; --out DIR starts a new run in another folder (or remove r)");
  fs::create_directories("r/step-00000001");
  EXPECT_NE(cli::refuseTakenFolder(f).find("(metrics.jsonl, step-00000001)"), std::string::npos);
  f.resume_dir = "./r/";
  EXPECT_EQ(cli::refuseTakenFolder(f), "");  // resumed into the same folder
}

}  // namespace
}  // namespace dtl
