// Rank 0's progress line,
// `step 120/2000  loss 0.4123  5,310 samples/s  12.1 ms/step  lr 0.001  grad 0.532  3.21 GFLOP/s  MFU 21%  ETA 2m41s`:
// on a terminal one line rewritten in place ('\r', then erase to the end of
// the line); otherwise plain lines ending in '\n'. The rates are the current
// ones, over a window of the last steps (RateWindow), and so is the ETA.
// Formats only; the caller prints and decides how often.
#pragma once

#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace dtl::rt::io {

// Throughput over the last `steps` steps, or fewer when they span more than
// `seconds` (at least one step): wall time between step ends, so what runs
// between steps (evaluation, checkpoints) counts, as it does for the ETA.
class RateWindow {
 public:
  explicit RateWindow(size_t steps = 20, double seconds = 10) : steps_(steps), seconds_(seconds) {}
  void start(double t);  // the time the first step began
  // A step ended at `t` having processed these amounts (samples, tokens, FLOPs).
  void add(double t, double samples, double tokens, double flops);
  // Per second over the window; 0 before a step ended.
  double samplesPerSecond() const { return rate(&Point::samples); }
  double tokensPerSecond() const { return rate(&Point::tokens); }
  double flopsPerSecond() const { return rate(&Point::flops); }
  double secondsPerStep() const;  // NaN before a step ended

 private:
  struct Point {
    double t = 0, samples = 0, tokens = 0, flops = 0;  // running totals at a step's end
  };
  double rate(double Point::*field) const;
  size_t steps_;
  double seconds_;
  std::deque<Point> points_;
};

// What one step's line and metrics line say.
struct StepView {
  int64_t step = 0;
  double loss = 0, lr = 0, step_s = 0;
  double grad_norm = NAN;        // NaN: not measured
  double samples_per_s = 0;
  double tokens_per_s = -1;      // < 0: the inputs have no sequence dim
  double flops_per_s = -1;       // < 0: not counted
  double mfu = NAN;              // flops_per_s / the measured GEMM rate; NaN: unknown
  double eta_s = NAN;            // NaN: unknown (no total)
  double elapsed_s = 0;          // since the loop began
};

// The end of a run: the summary block's contents.
struct RunSummary {
  int64_t steps = 0;       // optimiser steps this run took
  double wall_s = 0;       // the loop's wall time
  double samples_per_s = 0;  // over the whole run
  // The evaluations: the last, and the one with the lowest loss (name, value pairs, loss first).
  int64_t final_eval_step = -1, best_eval_step = -1;
  std::vector<std::pair<std::string, double>> final_eval, best_eval;
  std::string checkpoint;  // the last checkpoint written, or ""
  std::string metrics;     // the metrics file
  std::vector<int64_t> peak_rss_bytes;  // each rank's peak resident memory, by rank; < 0 unknown
  // Sums over the steps of their wall time and its parts (RunLog::Step);
  // no steps: no line.
  struct Parts {
    int64_t steps = 0;
    double step_s = 0, batch_s = 0, compute_s = 0, guard_s = 0, update_s = 0;
  } parts;
};

class Progress {
 public:
  using Clock = std::function<double()>;  // seconds, monotonic
  static double steadySeconds();

  // total_steps <= 0: unknown (no "/total", no ETA). gemm_flops_per_s: the
  // machine's measured GEMM rate for the ranks' cores (0: no MFU); raised to
  // the job's own matrix FLOP/s when a window runs faster (step()).
  Progress(int64_t total_steps, bool is_tty, double gemm_flops_per_s = 0, Clock clock = steadySeconds);

  // The loop starts now (the window's first time).
  void begin();
  // A step ended now: what its lines say. `samples`, `tokens` (0: no
  // sequence dim) and `flops` (0: not counted) are the step's, for the whole job.
  StepView step(int64_t step, double loss, double lr, double grad_norm, double step_s, double samples, double tokens,
                double flops);
  // The line for a step, ready to print as is.
  std::string line(const StepView& v);
  // What to print when the run ends: "\n" on a terminal once a line was shown, else "".
  std::string finish() const;
  // "eval after step 468: loss 0.4212, accuracy 0.8518": each value as
  // formatLoss shows it (the metrics file keeps every digit).
  static std::string evalLine(int64_t step, const std::vector<std::pair<std::string, double>>& values);
  // "[ckpt] step 200 → runs/x/step-00000200 (12.3 MiB, 0.04 s)"
  static std::string checkpointLine(int64_t step, const std::string& path, int64_t bytes, double seconds);
  // The block printed at the end of a run (lines ending in '\n').
  static std::string summary(const RunSummary& s);

  // Pieces, exposed for tests: "0.4123", "5,310" / "12.5", "2m41s",
  // "12.1 ms" / "1.23 s", "3.21 GFLOP/s", "12.3 MiB", "0.001" / "0.532".
  static std::string formatLoss(double loss);
  static std::string formatRate(double per_s);
  static std::string formatDuration(double seconds);
  static std::string formatSeconds(double seconds);
  static std::string formatFlops(double flops_per_s);
  static std::string formatBytes(double bytes);
  static std::string formatNumber(double v);

 private:
  int64_t total_;
  bool tty_;
  double gemm_;
  Clock clock_;
  bool shown_ = false;
  double begin_ = 0;
  RateWindow window_;
};

}  // namespace dtl::rt::io
