// Progress line formatting: fixed decimals for the loss, thousands separators
// for throughput, SI prefixes for FLOP/s, the two largest units for the ETA;
// rates over a window of recent steps.
#include "runtime/io/progress.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace dtl::rt::io {

void RateWindow::start(double t) {
  points_.clear();
  points_.push_back(Point{t, 0, 0, 0});
}

void RateWindow::add(double t, double samples, double tokens, double flops) {
  Point p = points_.empty() ? Point{t, 0, 0, 0} : points_.back();
  if (points_.empty()) points_.push_back(p);
  p.t = t;
  p.samples += samples;
  p.tokens += tokens;
  p.flops += flops;
  points_.push_back(p);
  // Keep `steps` steps (steps + 1 points), fewer when older than `seconds`, never under one step.
  while (points_.size() > steps_ + 1 || (points_.size() > 2 && t - points_[1].t >= seconds_)) points_.pop_front();
}

double RateWindow::rate(double Point::*field) const {
  if (points_.size() < 2) return 0;
  const double dt = points_.back().t - points_.front().t;
  return dt > 0 ? (points_.back().*field - points_.front().*field) / dt : 0;
}

double RateWindow::secondsPerStep() const {
  if (points_.size() < 2) return NAN;
  return (points_.back().t - points_.front().t) / static_cast<double>(points_.size() - 1);
}

double Progress::steadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Progress::Progress(int64_t total_steps, bool is_tty, double gemm_flops_per_s, Clock clock)
    : total_(total_steps), tty_(is_tty), gemm_(gemm_flops_per_s), clock_(std::move(clock)) {}

std::string Progress::formatLoss(double loss) {
  if (std::isnan(loss)) return "nan";
  if (std::isinf(loss)) return loss > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, loss != 0 && std::fabs(loss) < 1e-3 ? "%.3e" : "%.4f", loss);
  return buf;
}

std::string Progress::formatRate(double r) {
  if (!std::isfinite(r) || r < 0) return "--";
  char buf[48];
  if (r < 99.95) {  // what "%.1f" shows below 100.0
    std::snprintf(buf, sizeof buf, "%.1f", r);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.0f", r);
  std::string digits = buf, out;
  for (size_t k = 0; k < digits.size(); ++k) {
    if (k > 0 && (digits.size() - k) % 3 == 0) out += ',';
    out += digits[k];
  }
  return out;
}

std::string Progress::formatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--";
  if (seconds > 1e9) return ">30y";
  auto s = static_cast<int64_t>(std::llround(seconds));
  char buf[48];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  else if (s < 86400)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  else
    std::snprintf(buf, sizeof buf, "%lldd%02lldh", static_cast<long long>(s / 86400),
                  static_cast<long long>(s % 86400 / 3600));
  return buf;
}

std::string Progress::formatSeconds(double s) {
  if (!std::isfinite(s) || s < 0) return "--";
  char buf[48];
  const double ms = s * 1e3;
  if (ms < 999.5)
    std::snprintf(buf, sizeof buf, ms < 9.995 ? "%.2f ms" : ms < 99.95 ? "%.1f ms" : "%.0f ms", ms);
  else if (s < 60)
    std::snprintf(buf, sizeof buf, "%.2f s", s);
  else
    return formatDuration(s);
  return buf;
}

namespace {

// "3.21 G" for 3.21e9: three significant digits and an SI prefix.
std::string si(double v) {
  static const char* const prefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  size_t p = 0;
  while (v >= 999.5 && p + 1 < sizeof prefixes / sizeof *prefixes) v /= 1000, ++p;
  char buf[48];
  std::snprintf(buf, sizeof buf, v < 9.995 ? "%.2f %s" : v < 99.95 ? "%.1f %s" : "%.0f %s", v, prefixes[p]);
  return buf;
}

}  // namespace

std::string Progress::formatFlops(double f) {
  if (!std::isfinite(f) || f < 0) return "--";
  return si(f) + "FLOP/s";
}

std::string Progress::formatBytes(double b) {
  if (!std::isfinite(b) || b < 0) return "--";
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  size_t u = 0;
  while (b >= 1023.95 && u + 1 < sizeof units / sizeof *units) b /= 1024, ++u;
  char buf[48];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return buf;
}

std::string Progress::formatNumber(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string Progress::evalLine(int64_t step, const std::vector<std::pair<std::string, double>>& values) {
  std::string text = "eval after step " + std::to_string(step) + ":";
  for (size_t i = 0; i < values.size(); ++i)
    text += (i ? ", " : " ") + values[i].first + " " + formatLoss(values[i].second);
  return text;
}

std::string Progress::checkpointLine(int64_t step, const std::string& path, int64_t bytes, double seconds) {
  return "[ckpt] step " + std::to_string(step) + " \u2192 " + path + " (" + formatBytes(static_cast<double>(bytes)) +
         ", " + formatSeconds(seconds) + ")";
}

void Progress::begin() {
  begin_ = clock_();
  window_.start(begin_);
}

StepView Progress::step(int64_t step, double loss, double lr, double grad_norm, double step_s, double samples,
                        double tokens, double flops) {
  const double now = clock_();
  window_.add(now, samples, tokens, flops);
  StepView v;
  v.step = step;
  v.loss = loss;
  v.lr = lr;
  v.grad_norm = grad_norm;
  v.step_s = step_s;
  v.samples_per_s = window_.samplesPerSecond();
  if (tokens > 0) v.tokens_per_s = window_.tokensPerSecond();
  if (flops > 0) v.flops_per_s = window_.flopsPerSecond();
  if (flops > 0 && gemm_ > 0) {
    // The start-up probe is a lower bound of what the cores can do, taken in
    // 50 ms; a window whose matrix FLOPs ran faster shows a higher one (the
    // probe caught a slow moment of a shared machine): MFU is against the
    // best of them, so it never reads over 100 %.
    gemm_ = std::max(gemm_, v.flops_per_s);
    v.mfu = v.flops_per_s / gemm_;
  }
  if (total_ > 0) v.eta_s = step >= total_ ? 0 : window_.secondsPerStep() * static_cast<double>(total_ - step);
  v.elapsed_s = now - begin_;
  return v;
}

std::string Progress::line(const StepView& v) {
  shown_ = true;
  std::string text = "step " + std::to_string(v.step);
  if (total_ > 0) text += "/" + std::to_string(total_);
  text += "  loss " + formatLoss(v.loss) + "  " + formatRate(v.samples_per_s) + " samples/s";
  if (v.tokens_per_s >= 0) text += "  " + formatRate(v.tokens_per_s) + " tokens/s";
  text += "  " + formatSeconds(v.step_s) + "/step  lr " + formatNumber(v.lr);
  if (!std::isnan(v.grad_norm)) text += "  grad " + formatNumber(v.grad_norm);
  if (v.flops_per_s >= 0) text += "  " + formatFlops(v.flops_per_s);
  if (!std::isnan(v.mfu)) {
    char buf[32];
    if (v.mfu < 0.0005)
      std::snprintf(buf, sizeof buf, "<0.1%%");
    else
      std::snprintf(buf, sizeof buf, v.mfu < 0.0995 ? "%.1f%%" : "%.0f%%", v.mfu * 100);
    text += std::string("  MFU ") + buf;
  }
  if (total_ > 0) text += "  ETA " + formatDuration(v.eta_s);
  return tty_ ? "\r" + text + "\x1b[K" : text + "\n";
}

std::string Progress::finish() const { return tty_ && shown_ ? "\n" : ""; }

std::string Progress::summary(const RunSummary& s) {
  std::string text = "done: " + std::to_string(s.steps) + (s.steps == 1 ? " step" : " steps") + " in " +
                     formatDuration(s.wall_s) + " (" + formatRate(s.samples_per_s) + " samples/s)\n";
  auto evals = [](const std::vector<std::pair<std::string, double>>& values) {
    std::string out;
    for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + values[i].first + " " + formatLoss(values[i].second);
    return out;
  };
  if (s.parts.steps > 0) {
    // Where a step's time went, as the mean over the steps (what the
    // progress line's ms/step does not show: the loader, the checks and the
    // update beside the forward and backward).
    const RunSummary::Parts& p = s.parts;
    const double n = static_cast<double>(p.steps);
    const double rest = std::max(0.0, p.step_s - p.batch_s - p.compute_s - p.guard_s - p.update_s);
    text += "  a step, mean of " + std::to_string(p.steps) + ": " + formatSeconds(p.step_s / n) + " = forward+backward " +
            formatSeconds(p.compute_s / n) + ", update " + formatSeconds(p.update_s / n) + ", batch " +
            formatSeconds(p.batch_s / n) + ", checks " + formatSeconds(p.guard_s / n) + ", other " +
            formatSeconds(rest / n) + "\n";
  }
  if (s.final_eval_step >= 0)
    text += "  final eval: " + evals(s.final_eval) + " (after step " + std::to_string(s.final_eval_step) + ")\n";
  if (s.best_eval_step >= 0)
    text += "  best eval (lowest loss): " + evals(s.best_eval) + " (after step " + std::to_string(s.best_eval_step) +
            ")\n";
  text += "  checkpoint: " + (s.checkpoint.empty() ? std::string("none written") : s.checkpoint) + "\n";
  if (!s.metrics.empty()) text += "  metrics: " + s.metrics + "\n";
  const std::vector<int64_t>& peak = s.peak_rss_bytes;
  auto mem = [](int64_t b) { return b < 0 ? std::string("unknown") : formatBytes(static_cast<double>(b)); };
  if (peak.size() == 1) {
    text += "  peak memory: " + mem(peak[0]) + "\n";
  } else if (peak.size() <= 8 && !peak.empty()) {
    text += "  peak memory per rank:";
    for (size_t r = 0; r < peak.size(); ++r) text += (r ? ", " : " ") + std::to_string(r) + ": " + mem(peak[r]);
    text += "\n";
  } else if (!peak.empty()) {  // many ranks: the extremes
    size_t lo = 0, hi = 0;
    for (size_t r = 0; r < peak.size(); ++r) {
      if (peak[r] >= 0 && (peak[lo] < 0 || peak[r] < peak[lo])) lo = r;
      if (peak[r] > peak[hi]) hi = r;
    }
    text += "  peak memory per rank: " + mem(peak[lo]) + " (rank " + std::to_string(lo) + ") to " + mem(peak[hi]) +
            " (rank " + std::to_string(hi) + ") over " + std::to_string(peak.size()) + " ranks\n";
  }
  return text;
}

}  // namespace dtl::rt::io
