// `dtlc run --verify K`.
//
// 1. Refuse what cannot be compared (--resume, --steps, --metrics,
//    --max-restarts, a layout of one rank) and compile the layout as `dtlc
//    run` does, so a spec it refuses is refused the same way.
// 2. The one-process reference: every mesh axis at 1 and `train.batch` at the
//    layout's global batch G (frontend.cc: globalBatch()), the spec's
//    accumulate A. When that plan does not fit this machine, the smallest k
//    dividing G whose micro-batch G/k fits, with accumulate A·k: the trainer
//    averages the micro-batches' mean losses and gradients, so the step sees
//    the same samples and the same mean — as long as its micro-batches cut the
//    epoch where the layout's do (else refuse with the planned memory).
// 3. Run both as child `dtlc run` jobs of this binary with --steps K,
//    --metrics in a temporary folder and --no-checkpoints; their stdout goes
//    to a log there (shown when a job fails), their stderr passes through.
// 4. Compare the two metrics files' losses step by step.
#include "tools/dtlc/verify.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "compiler/driver/frontend.h"
#include "runtime/data/loader.h"
#include "runtime/launch/rank_process.h"
#include "tools/dtlc/compile_spec.h"
#include "tools/dtlc/memory_check.h"
#include "tools/dtlc/run_command.h"

namespace dtl::cli {

double relativeDifference(double layout, double reference) {
  double d = std::fabs(layout - reference);
  return reference == 0 ? d : d / std::fabs(reference);
}

LossComparison compareLosses(const std::vector<StepLosses>& steps, double tolerance) {
  LossComparison c;
  for (const StepLosses& s : steps) {
    double r = relativeDifference(s.layout, s.reference);
    if (std::isnan(r)) r = INFINITY;
    if (c.largest_at == 0 || r > c.largest) {
      c.largest = r;
      c.largest_at = s.step;
    }
    if (c.first_over == 0 && r > tolerance) {
      c.first_over = s.step;
      c.over = s;
    }
  }
  return c;
}

std::vector<std::pair<int64_t, double>> readStepLosses(const std::string& path) {
  std::vector<std::pair<int64_t, double>> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    size_t step = line.find("\"step\": "), loss = line.find("\"loss\": ");
    if (step == std::string::npos || loss == std::string::npos) continue;
    out.emplace_back(std::strtoll(line.c_str() + step + 8, nullptr, 10), std::strtod(line.c_str() + loss + 8, nullptr));
  }
  return out;
}

namespace {

std::string formatNumber(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// "mesh dp = 2" (every axis, resolved).
std::string meshText(const sema::Spec& spec) {
  std::string s;
  for (const sema::MeshAxisSpec& a : spec.parallel.mesh)
    s += (s.empty() ? "mesh " : ", ") + a.name + " = " + std::to_string(a.size);
  return s;
}

// The samples of the train split an epoch holds, or -1 when unknown.
int64_t trainSamples(const sema::Spec& spec) {
  int64_t files = -1;
  bool unknown = false;
  for (const sema::DataSplit& s : spec.data.splits) {
    if (s.name != "train") continue;
    for (const sema::DataField& f : s.fields) {
      if (f.source == "synthetic") continue;
      if (f.samples < 0) unknown = true;
      files = f.samples;
    }
  }
  if (unknown) return -1;
  return files >= 0 ? files : rt::data::kSyntheticSamples;
}

// The one-process job's batch, accumulation and why.
struct Reference {
  int64_t batch = 0, accumulate = 1;
  std::string note;  // "" or why it accumulates
  std::vector<std::string> sets;
};

std::vector<std::string> referenceSets(const RunFlags& f, const sema::Spec& layout, int64_t batch, int64_t accumulate) {
  std::vector<std::string> sets = f.sets;
  for (const sema::MeshAxisSpec& a : layout.parallel.mesh) sets.push_back("parallel.mesh." + a.name + "=1");
  sets.push_back("train.batch=" + std::to_string(batch));
  if (accumulate != layout.train.accumulate) sets.push_back("train.accumulate=" + std::to_string(accumulate));
  return sets;
}

// Step 2 of the file comment: 0 with `ref` filled in, else the exit status.
int planReference(const RunFlags& f, const driver::Frontend& lay, Reference& ref, std::string& err) {
  const int64_t global = lay.globalBatch(), acc = lay.spec().train.accumulate;
  driver::Frontend whole;
  ref = {global, acc, "", referenceSets(f, lay.spec(), global, acc)};
  if (int rc = compileForRun(whole, f.spec, ref.sets, 1, err); rc != 0) return rc;
  std::string no;
  if (f.ignore_memory || checkRunMemory(whole, 1, f.kernels, no) == 0) return 0;
  // Micro-batches of global / k, accumulated k times as often — not with
  // dropout: each micro-batch draws its own masks, so the reference would
  // drop other elements than the layout.
  bool dropout = false;
  for (const ir::Node& n : lay.graph().nodes) dropout |= n.op == ir::Op::Dropout;
  if (dropout) {
    err += "dtlc run: --verify: the one-process run at the global batch " + std::to_string(global) +
           " does not fit, and with dropout smaller micro-batches would draw other masks: " + no.substr(no.find(": ") + 2);
    return 1;
  }
  const int64_t samples = trainSamples(lay.spec());
  const int64_t layout_micro = samples > 0 ? samples / global : 0;  // the layout's micro-batches per epoch
  for (int64_t k = 2; k <= global; ++k) {
    if (global % k != 0) continue;
    // The reference must cut the epoch where the layout does, or stay in the first.
    bool same_epochs = samples > 0 && (samples / (global / k) == k * layout_micro || f.verify * acc <= layout_micro);
    if (!same_epochs) continue;
    driver::Frontend part;
    std::vector<std::string> sets = referenceSets(f, lay.spec(), global / k, acc * k);
    std::string part_err;
    if (compileForRun(part, f.spec, sets, 1, part_err) != 0) continue;
    std::string part_no;
    if (checkRunMemory(part, 1, f.kernels, part_no) != 0) continue;
    ref = {global / k, acc * k, "batch " + std::to_string(global) + " does not fit this machine's memory", sets};
    return 0;
  }
  err += "dtlc run: --verify: the one-process run at the global batch " + std::to_string(global) +
         " does not fit, and no smaller micro-batch with train.accumulate gives the same steps: " +
         no.substr(no.find(": ") + 2);
  return 1;
}

// Runs `dtlc ARGS…`, its stdout into `log`, its stderr through; SIGINT and
// SIGTERM are passed on to it. Returns its exit status (128 + a signal).
int runJob(const std::string& exe, const std::vector<std::string>& args, const std::string& log, std::string& err) {
  rt::launch::SignalCatcher signals;
  if (!signals.install(err)) return 1;
  std::vector<std::string> argv = {exe};
  argv.insert(argv.end(), args.begin(), args.end());
  rt::launch::Child child;
  if (!rt::launch::spawnChild({exe, argv, rt::launch::childEnvironment({}), true}, child, err)) return 1;
  FILE* log_file = std::fopen(log.c_str(), "w");
  int log_fd = log_file ? fileno(log_file) : -1;
  while (!child.exited || child.out_fd >= 0 || child.err_fd >= 0) {
    std::vector<pollfd> fds = {{signals.fd(), POLLIN, 0}};
    for (int fd : {child.out_fd, child.err_fd})
      if (fd >= 0) fds.push_back({fd, POLLIN, 0});
    ::poll(fds.data(), fds.size(), 100);
    for (int sig; (sig = signals.take()) != 0;)
      if (!child.exited) ::kill(-child.pid, sig);
    if (child.out_fd >= 0) rt::launch::relayLines(child.out_fd, child.out_partial, log_fd, "");
    if (child.err_fd >= 0) rt::launch::relayLines(child.err_fd, child.err_partial, 2, "");
    if (!child.exited && ::waitpid(child.pid, &child.wait_status, WNOHANG) == child.pid) child.exited = true;
  }
  if (log_file) std::fclose(log_file);
  int st = child.wait_status;
  return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
}

void progress(const std::string& line) {
  std::fprintf(stdout, "verify: %s\n", line.c_str());
  std::fflush(stdout);
}

}  // namespace

int verifyCommand(const RunFlags& f, std::string& out, std::string& err) {
  // 1. What cannot be compared.
  const char* refused =
      !f.resume.empty()     ? "--verify does not take --resume: both runs start from the spec's initial weights (or "
                              "--init FILE); verify before the long job, or --init from a checkpoint's "
                              "params.safetensors"
      : f.steps > 0         ? "--verify does not take --steps: --verify K trains K steps"
      : !f.metrics.empty()  ? "--verify does not take --metrics: it keeps its runs' metrics in a temporary folder"
      : !f.out.empty()      ? "--verify does not take --out: its runs write their run folders in a temporary folder"
      : f.max_restarts > 0  ? "--verify does not take --max-restarts: its runs write no checkpoints to restart from"
      : f.nproc * f.nnodes == 1 ? "--verify compares a layout on several ranks with one process, and this job is "
                                  "one process; give --nproc N (or --nnodes K)"
                            : nullptr;
  if (refused) {
    err += std::string("dtlc run: ") + refused + "\n";
    return 2;
  }
  std::string exe, what;
  if (!dtlcExecutable(exe, what)) {
    err += "dtlc run: --verify starts jobs of the dtlc binary; this process is " + what + "\n";
    return 2;
  }
  const int64_t world = f.nproc * f.nnodes;
  driver::Frontend lay;
  if (int rc = compileForRun(lay, f.spec, f.sets, world, err); rc != 0) return rc;
  if (!f.ignore_memory)
    if (int rc = checkRunMemory(lay, f.nproc, f.kernels, err); rc != 0) return rc;
  // 2. The reference (node 0 runs it; the other nodes run their part of the layout).
  Reference ref;
  if (f.node_rank == 0)
    if (int rc = planReference(f, lay, ref, err); rc != 0) return rc;

  // 3. Both jobs, in a temporary folder.
  std::string tmpl = (std::getenv("TMPDIR") ? std::string(std::getenv("TMPDIR")) : std::string("/tmp")) +
                     "/dtl-verify-XXXXXX";
  if (!::mkdtemp(tmpl.data())) {
    err += "dtlc run: --verify: cannot create a temporary folder " + tmpl + ": " + std::strerror(errno) + "\n";
    return 1;
  }
  const std::string dir = tmpl;
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{dir};
  const std::string ranks = std::to_string(world) + " ranks" +
                            (f.nnodes > 1 ? " on " + std::to_string(f.nnodes) + " nodes" : "") + " (" +
                            meshText(lay.spec()) + ")";
  const std::string steps = std::to_string(f.verify) + " step" + (f.verify == 1 ? "" : "s");
  const std::string one = "1 process at batch " + std::to_string(ref.batch) +
                          (ref.accumulate > 1 ? ", accumulate " + std::to_string(ref.accumulate) : "") +
                          (ref.note.empty() ? "" : " (" + ref.note + ")");
  auto job = [&](const std::string& name, RunFlags j, const std::string& what) {
    j.steps = f.verify;
    j.metrics = dir + "/" + name + ".jsonl";
    j.out = dir + "/" + name;  // its run folder: not the spec's, which a job may be using
    j.no_checkpoints = true;
    const std::string log = dir + "/" + name + ".out";
    int rc = runJob(exe, runArgs(j), log, err);
    if (rc != 0) {
      std::ifstream in(log);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::string how = rc > 128 ? "was stopped by " + rt::launch::signalName(rc - 128)
                                 : "failed (exit status " + std::to_string(rc) + ")";
      err += text + "dtlc run: --verify: the run on " + what + " " + how + "; nothing was compared\n";
    }
    return rc;
  };
  progress((f.node_rank == 0 ? "1 of 2: " : "") + steps + " on " + ranks);
  if (int rc = job("layout", f, ranks); rc != 0) return rc;
  if (f.node_rank != 0) {
    out += "verify: node " + std::to_string(f.node_rank) + " ran its part of the layout; node 0 compares\n";
    return 0;
  }
  progress("2 of 2: " + steps + " on " + one);
  RunFlags single;
  single.spec = f.spec;
  single.sets = ref.sets;
  single.init = f.init;
  single.kernels = f.kernels;
  single.ignore_memory = f.ignore_memory;
  if (int rc = job("reference", single, "1 process"); rc != 0) return rc;

  // 4. The comparison.
  auto a = readStepLosses(dir + "/layout.jsonl"), b = readStepLosses(dir + "/reference.jsonl");
  std::vector<StepLosses> both;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (a[i].first != b[i].first) break;
    both.push_back({a[i].first, a[i].second, b[i].second});
  }
  if (static_cast<int64_t>(both.size()) != f.verify) {
    err += "dtlc run: --verify: expected the losses of " + steps + " from both runs, got " +
           std::to_string(a.size()) + " on " + std::to_string(world) + " ranks and " + std::to_string(b.size()) +
           " on 1 process\n";
    return 1;
  }
  LossComparison c = compareLosses(both, f.verify_tolerance);
  const std::string tol = formatNumber("%.3g", f.verify_tolerance);
  const std::string found = c.largest == 0 ? "the losses are equal at every step"
                                            : "largest relative loss difference " + formatNumber("%.2g", c.largest) +
                                                  " at step " + std::to_string(c.largest_at);
  out += "verify: " + steps + " on " + ranks + " against " + one + ": " + found + " (tolerance " + tol + "): " +
         (c.first_over ? "FAILED" : "ok") + "\n";
  if (c.first_over == 0) return 0;
  err += "dtlc run: --verify: step " + std::to_string(c.first_over) + " is the first over the tolerance " + tol +
         ": loss " + formatNumber("%.10g", c.over.layout) + " on " + std::to_string(world) + " ranks, " +
         formatNumber("%.10g", c.over.reference) + " on 1 process (relative difference " +
         formatNumber("%.2g", relativeDifference(c.over.layout, c.over.reference)) + ")\n";
  return 1;
}

}  // namespace dtl::cli
