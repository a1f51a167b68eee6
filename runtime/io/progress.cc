// Progress line formatting: fixed decimals for the loss, thousands separators
// for throughput, and the two largest units for the ETA.
#include "runtime/io/progress.h"

#include <chrono>
#include <cmath>
#include <cstdio>

namespace dtl::rt::io {

double Progress::steadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Progress::Progress(int64_t total_steps, bool is_tty, Clock clock)
    : total_(total_steps), tty_(is_tty), clock_(std::move(clock)) {}

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

std::string Progress::evalLine(int64_t step, const std::vector<std::pair<std::string, double>>& values) {
  std::string text = "eval after step " + std::to_string(step) + ":";
  for (size_t i = 0; i < values.size(); ++i)
    text += (i ? ", " : " ") + values[i].first + " " + formatLoss(values[i].second);
  return text;
}

std::string Progress::line(int64_t step, double loss, double samples_per_s) {
  double now = clock_();
  if (!started_) {
    started_ = true;
    start_step_ = step;
    start_time_ = now;
  }
  std::string text = "step " + std::to_string(step);
  if (total_ > 0) text += "/" + std::to_string(total_);
  text += "  loss " + formatLoss(loss) + "  " + formatRate(samples_per_s) + " samples/s";
  if (total_ > 0) {
    std::string eta = "--";
    if (step >= total_)
      eta = "0s";
    else if (step > start_step_ && now > start_time_)
      eta = formatDuration((now - start_time_) / static_cast<double>(step - start_step_) *
                           static_cast<double>(total_ - step));
    text += "  ETA " + eta;
  }
  return tty_ ? "\r" + text + "\x1b[K" : text + "\n";
}

std::string Progress::finish() const { return tty_ && started_ ? "\n" : ""; }

}  // namespace dtl::rt::io
