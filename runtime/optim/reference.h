// The double-precision oracle for runtime/optim: the same update rules, clipping
// and norms computed in double with no intermediate rounding to f32. Tests bound
// the fast f32 path's error against it; nothing trains with it.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/optim/optimizer.h"

namespace dtl::rt::optim::ref {

struct RefState {
  std::vector<double> a, b;  // as ParamState
};

// Optimizer::update in exact-as-written double arithmetic (same lazy init,
// same option semantics). Throws std::invalid_argument as Optimizer does.
void update(const OptimizerConfig& c, double* param, const double* grad, int64_t n, RefState& state,
            int64_t step, double lr);

// clipGradNorm in double: sqrt of the sum of all squares, coef = max_norm /
// (total + 1e-6), applied when below 1. Returns the total norm.
double clipGradNorm(const std::vector<std::pair<double*, int64_t>>& grads, double max_norm);

}  // namespace dtl::rt::optim::ref
