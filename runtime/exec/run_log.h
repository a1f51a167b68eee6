// What rank 0 tells about a run while it trains: the progress or log lines,
// the metrics files (the run folder's metrics.jsonl and --metrics FILE), the
// `[ckpt]` lines and the summary at the end (docs/running.md, "What you
// see", "Metrics"). Every rank holds one; only the lead writes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/exec/trainer.h"
#include "runtime/io/metrics_writer.h"
#include "runtime/io/progress.h"

namespace dtl::rt {

class RunLog {
 public:
  RunLog(const TrainConfig& c, bool lead, bool tty) : c_(c), lead_(lead), tty_(tty) {}

  // Before the loop: opens the metrics files (appending when resumed) and
  // measures the machine's GEMM rate. `total`: the last step.
  bool open(int64_t total, bool resumed, std::string& err);

  struct Step {
    int64_t step = 0, epoch = 0;
    double loss = 0, lr = 0, grad_norm = 0, step_s = 0, comm_wait_s = 0;
    // Parts of step_s: taking the batches from the loader, the forward and
    // backward (comm_wait_s included), the step guard's checks, the update.
    double batch_s = 0, compute_s = 0, guard_s = 0, update_s = 0;
    double gather_wait_s = -1;  // < 0: not a zero = 3 run
    int64_t skipped_steps = -1;  // < 0: not an `on_nonfinite = skip` run
  };
  // After each step: its metrics line, and its progress line when `show`
  // (the loss shown is the mean over the steps since the previous line).
  bool step(const Step& s, bool show, std::string& err);
  // An evaluation's line and metrics line; remembered for the summary.
  bool eval(int64_t step, int64_t epoch, const std::vector<std::pair<std::string, double>>& values, std::string& err);
  void checkpoint(int64_t step, const std::string& path, int64_t bytes, double seconds);
  // The summary block, after the last step.
  void finish(int64_t steps);

 private:
  bool write(const std::vector<std::pair<std::string, double>>& fields,
             const std::vector<std::pair<std::string, int64_t>>& ints, std::string& err);

  const TrainConfig& c_;
  bool lead_, tty_;
  std::unique_ptr<io::Progress> progress_;
  // The run folder's metrics.jsonl and --metrics FILE, each with the flag that names it in errors.
  std::vector<std::pair<std::unique_ptr<io::MetricsWriter>, std::string>> metrics_;
  double step_samples_ = 0, step_tokens_ = 0, step_flops_ = 0;
  double window_loss_ = 0;
  int64_t window_steps_ = 0;
  io::RunSummary summary_;
};

}  // namespace dtl::rt
