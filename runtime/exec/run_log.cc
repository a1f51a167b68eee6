// RunLog: the step's sizes (samples, tokens, matmul FLOPs of the whole job)
// are fixed by the program, so they are computed once; the rates come from
// io::Progress's window.
#include "runtime/exec/run_log.h"

#include <sys/resource.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "runtime/exec/step_flops.h"
#include "runtime/kernels/fast/gemm_rate.h"

namespace dtl::rt {

bool RunLog::open(int64_t total, bool resumed, std::string& err) {
  if (!lead_) return true;
  int64_t ranks = 1;
  for (int64_t a : c_.mesh) ranks *= a;
  // Every rank runs its own piece of the step; rank 0's program stands for each.
  step_samples_ = static_cast<double>(c_.batch * c_.accumulate * c_.world);
  step_tokens_ = step_samples_ * static_cast<double>(c_.tokens_per_sample);
  step_flops_ = trainMatmulFlops(*c_.program) * static_cast<double>(c_.accumulate * ranks);
  const double gemm = step_flops_ > 0 ? fast::measuredGemmRate(c_.threads) * static_cast<double>(ranks) : 0;
  progress_ = std::make_unique<io::Progress>(total, tty_, gemm);
  std::vector<std::pair<std::string, std::string>> files;  // path, what names it
  if (!c_.run_dir.empty()) files.emplace_back(c_.run_dir + "/metrics.jsonl", "metrics");
  if (!c_.metrics_file.empty()) files.emplace_back(c_.metrics_file, "--metrics");
  for (const auto& [path, flag] : files) {
    std::error_code ec;  // --metrics naming the run folder's file: written once
    if (!metrics_.empty() && std::filesystem::equivalent(path, files.front().first, ec)) continue;
    auto w = std::make_unique<io::MetricsWriter>();
    io::Status s = w->open(path, resumed);
    if (!s.ok) {
      err += flag + ": " + s.message + "\n";
      return false;
    }
    metrics_.emplace_back(std::move(w), flag);
  }
  summary_.metrics = files.empty() ? "" : files.front().first;
  progress_->begin();
  return true;
}

// A line that cannot be written (a full disk) stops the run: a run must not
// go on without the record it was asked to keep.
bool RunLog::write(const std::vector<std::pair<std::string, double>>& fields,
                   const std::vector<std::pair<std::string, int64_t>>& ints, std::string& err) {
  for (auto& [w, flag] : metrics_) {
    w->write(fields, ints);
    if (!w->status().ok) {
      err += flag + ": " + w->status().message + "\n";
      return false;
    }
  }
  return true;
}

bool RunLog::step(const Step& s, bool show, std::string& err) {
  if (!lead_) return true;
  io::StepView v = progress_->step(s.step, s.loss, s.lr, s.grad_norm, s.step_s, step_samples_, step_tokens_, step_flops_);
  std::vector<std::pair<std::string, double>> fields = {{"loss", s.loss}, {"lr", s.lr}, {"samples_per_s", v.samples_per_s}};
  if (v.tokens_per_s >= 0) fields.emplace_back("tokens_per_s", v.tokens_per_s);
  fields.insert(fields.end(), {{"step_s", s.step_s},
                               {"comm_wait_s", s.comm_wait_s},
                               {"batch_s", s.batch_s},
                               {"compute_s", s.compute_s},
                               {"guard_s", s.guard_s},
                               {"update_s", s.update_s}});
  if (s.gather_wait_s >= 0) fields.emplace_back("gather_wait_s", s.gather_wait_s);
  fields.emplace_back("grad_norm", s.grad_norm);
  if (v.flops_per_s >= 0) fields.emplace_back("flops_per_s", v.flops_per_s);
  if (!std::isnan(v.mfu)) fields.emplace_back("mfu", v.mfu);
  if (!std::isnan(v.eta_s)) fields.emplace_back("eta_s", v.eta_s);
  fields.emplace_back("elapsed_s", v.elapsed_s);
  std::vector<std::pair<std::string, int64_t>> ints = {{"step", s.step}, {"epoch", s.epoch}};
  if (s.skipped_steps >= 0) ints.emplace_back("skipped_steps", s.skipped_steps);
  if (!write(fields, ints, err)) return false;
  // A skipped step's loss is not finite (on_nonfinite = skip): the line shows the others' mean.
  if (std::isfinite(s.loss)) {
    window_loss_ += s.loss;
    ++window_steps_;
  }
  if (show) {
    v.loss = window_steps_ > 0 ? window_loss_ / static_cast<double>(window_steps_) : s.loss;
    std::fputs(progress_->line(v).c_str(), stdout);
    std::fflush(stdout);
    window_loss_ = 0;
    window_steps_ = 0;
  }
  summary_.wall_s = v.elapsed_s;
  io::RunSummary::Parts& parts = summary_.parts;
  ++parts.steps;
  parts.step_s += s.step_s;
  parts.batch_s += s.batch_s;
  parts.compute_s += s.compute_s;
  parts.guard_s += s.guard_s;
  parts.update_s += s.update_s;
  return true;
}

bool RunLog::eval(int64_t step, int64_t epoch, const std::vector<std::pair<std::string, double>>& values,
                  std::string& err) {
  if (!lead_) return true;
  std::vector<std::pair<std::string, double>> fields;
  for (const auto& [name, value] : values) fields.emplace_back("eval_" + name, value);
  if (!write(fields, {{"step", step}, {"epoch", epoch}}, err)) return false;
  const std::string line = io::Progress::evalLine(step, values);
  std::fputs((tty_ ? "\n" + line + "\n" : line + "\n").c_str(), stdout);
  std::fflush(stdout);
  summary_.final_eval = values;
  summary_.final_eval_step = step;
  // values[0] is the loss; NaN never counts as the best.
  if (!values.empty() && !std::isnan(values[0].second) &&
      (summary_.best_eval_step < 0 || values[0].second < summary_.best_eval[0].second)) {
    summary_.best_eval = values;
    summary_.best_eval_step = step;
  }
  return true;
}

void RunLog::checkpoint(int64_t step, const std::string& path, int64_t bytes, double seconds) {
  if (!lead_) return;
  const std::string line = io::Progress::checkpointLine(step, path, bytes, seconds);
  std::fputs((tty_ ? "\n" + line + "\n" : line + "\n").c_str(), stdout);
  std::fflush(stdout);
  summary_.checkpoint = path;
}

void RunLog::finish(int64_t steps) {
  rusage u{};
  const int64_t peak = ::getrusage(RUSAGE_SELF, &u) == 0 ? static_cast<int64_t>(u.ru_maxrss) * 1024 : -1;
  // Every rank takes part: each tells rank 0 its peak.
  summary_.peak_rss_bytes = c_.peak_memory ? c_.peak_memory(peak) : std::vector<int64_t>{peak};
  if (!lead_ || !progress_) return;
  std::fputs(progress_->finish().c_str(), stdout);
  summary_.steps = steps;
  summary_.samples_per_s = summary_.wall_s > 0 ? static_cast<double>(steps) * step_samples_ / summary_.wall_s : 0;
  std::fputs(io::Progress::summary(summary_).c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace dtl::rt
