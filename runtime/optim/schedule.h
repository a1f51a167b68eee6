// Learning-rate schedules of language.md section 8: constant, linear and cosine,
// each with an optional linear warm-up from 0. Steps count from 1.
#pragma once

#include <cstdint>
#include <string>

namespace dtl::rt::optim {

struct ScheduleConfig {
  std::string name;  // "constant", "linear" or "cosine"
  double warmup = 0;  // w, in steps
  double min_lr = 0;  // the rate at the last step (linear, cosine; constant ignores it)
};

// The rate of step s (1-based) out of T = total_steps, for base rate b:
//
//   warm-up (every schedule), 0 < s <= w:   b * s / w     (s = w gives b)
//   constant, s > w:                        b
//   linear,   w < s < T:                    m + (b - m) * (T - s) / (T - w)
//   cosine,   w < s < T:                    m + (b - m) * 0.5 * (1 + cos(pi * (s - w) / (T - w)))
//   linear, cosine, s >= T (and s > w):     m                      (m = min_lr)
//
// So the warm-up's first step already trains (b / w), the decay starts from b
// at step w and reaches exactly m at step T. With w = 0 the decay starts from
// b at step 0. Warm-up wins where w >= T. Throws std::invalid_argument for an
// unknown name, s < 1, T < 1, or a negative or non-finite warm-up.
double scheduledLr(const ScheduleConfig& s, double base_lr, int64_t step, int64_t total_steps);

}  // namespace dtl::rt::optim
