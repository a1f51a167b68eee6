// The three schedules of schedule.h, in double.
#include "runtime/optim/schedule.h"

#include <cmath>
#include <numbers>
#include <stdexcept>

namespace dtl::rt::optim {

double scheduledLr(const ScheduleConfig& s, double base_lr, int64_t step, int64_t total_steps) {
  const bool constant = s.name == "constant", linear = s.name == "linear", cosine = s.name == "cosine";
  if (!constant && !linear && !cosine) throw std::invalid_argument("schedule: unknown schedule '" + s.name + "'");
  if (step < 1) throw std::invalid_argument("schedule: step counts from 1, got " + std::to_string(step));
  if (total_steps < 1) throw std::invalid_argument("schedule: total_steps must be at least 1");
  if (!(s.warmup >= 0) || !std::isfinite(s.warmup))
    throw std::invalid_argument("schedule: warmup must be a finite number >= 0");

  const double w = s.warmup, st = static_cast<double>(step), t = static_cast<double>(total_steps);
  if (st <= w) return base_lr * st / w;
  if (constant) return base_lr;
  if (step >= total_steps) return s.min_lr;
  const double span = t - w;  // > 0 here: w < step < total_steps
  if (linear) return s.min_lr + (base_lr - s.min_lr) * ((t - st) / span);
  return s.min_lr + (base_lr - s.min_lr) * (0.5 * (1.0 + std::cos(std::numbers::pi * ((st - w) / span))));
}

}  // namespace dtl::rt::optim
