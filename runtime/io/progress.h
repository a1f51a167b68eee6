// Rank 0's progress line, `step 120/2000  loss 0.4123  5,310 samples/s  ETA 2m41s`:
// on a terminal one line rewritten in place ('\r', then erase to the end of the
// line); otherwise plain lines ending in '\n'. Formats only; the caller prints
// and decides how often. The ETA extrapolates from the first call's step and time.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace dtl::rt::io {

class Progress {
 public:
  using Clock = std::function<double()>;  // seconds, monotonic
  static double steadySeconds();

  // total_steps <= 0: unknown (no "/total", no ETA).
  Progress(int64_t total_steps, bool is_tty, Clock clock = steadySeconds);

  // The line for `step` (optimiser steps done), ready to print as is.
  std::string line(int64_t step, double loss, double samples_per_s);
  // What to print when the run ends: "\n" on a terminal once a line was shown, else "".
  std::string finish() const;
  // "eval after step 468: loss 0.4212, accuracy 0.8518": each value as
  // formatLoss shows it (the metrics file keeps every digit).
  static std::string evalLine(int64_t step, const std::vector<std::pair<std::string, double>>& values);

  // Pieces, exposed for tests: "0.4123", "5,310" / "12.5", "2m41s".
  static std::string formatLoss(double loss);
  static std::string formatRate(double samples_per_s);
  static std::string formatDuration(double seconds);

 private:
  int64_t total_;
  bool tty_;
  Clock clock_;
  bool started_ = false;
  int64_t start_step_ = 0;
  double start_time_ = 0;
};

}  // namespace dtl::rt::io
