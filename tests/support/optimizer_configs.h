// Optimizer settings and values the optimiser tests share: one config
// builder, every variant optimizer.cc has, and random values with the
// specials (NaN, ±inf, ±0, subnormals, ±FLT_MAX) now and then.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "runtime/optim/optimizer.h"

namespace dtl::testing {

inline rt::optim::OptimizerConfig optimizerConfig(const std::string& name, double lr, double momentum = 0,
                                                  double dampening = 0, double wd = 0, bool nesterov = false) {
  rt::optim::OptimizerConfig c;
  c.name = name;
  c.lr = lr;
  c.momentum = momentum;
  c.dampening = dampening;
  c.weight_decay = wd;
  c.nesterov = nesterov;
  return c;
}

// Every variant optimizer.cc has: sgd with and without weight decay,
// momentum (its first step included), dampening, nesterov; adam with and
// without L2; adamw with and without decay.
inline std::vector<rt::optim::OptimizerConfig> everyOptimizerConfig() {
  return {optimizerConfig("sgd", 0.1),
          optimizerConfig("sgd", 0.1, 0, 0, 0.01),
          optimizerConfig("sgd", 0.05, 0.9),
          optimizerConfig("sgd", 0.05, 0.9, 0.25, 0.01),
          optimizerConfig("sgd", 0.05, 0.9, 0, 0, true),
          optimizerConfig("sgd", 0.05, 0.8, 0, 0.02, true),
          optimizerConfig("adam", 1e-3),
          optimizerConfig("adam", 1e-3, 0, 0, 0.05),
          optimizerConfig("adamw", 3e-4),
          optimizerConfig("adamw", 3e-4, 0, 0, 0.1)};
}

// Settings that push the update's arithmetic to its edges (with subnormal
// moments, NaN and ±inf in the tests that use them): L2 and decoupled decay,
// a huge learning rate, momentum above 1, dampening, nesterov.
inline std::vector<rt::optim::OptimizerConfig> extremeOptimizerConfigs() {
  return {optimizerConfig("adam", 1e-3),           optimizerConfig("adam", 1e-3, 0, 0, 0.05),
          optimizerConfig("adamw", 3e-4, 0, 0, 0.1), optimizerConfig("adamw", 50),
          optimizerConfig("sgd", 0.05, 0.9),        optimizerConfig("sgd", 0.05, 0.9, 0.25, 0.01),
          optimizerConfig("sgd", 1e6, 1.5),         optimizerConfig("sgd", 0.05, 0.9, 0, 0, true)};
}

inline float specialValue(std::mt19937_64& rng) {
  const float inf = std::numeric_limits<float>::infinity();
  const float v[] = {std::nanf(""), inf, -inf, 0.0f, -0.0f, 1e-40f, -3e-39f, FLT_MAX, -FLT_MAX, 1e30f, 1e-30f};
  return v[rng() % (sizeof v / sizeof v[0])];
}

// normal(0, 1), with `specials` one in 16 a specialValue.
inline std::vector<float> optimizerValues(int64_t n, std::mt19937_64& rng, bool specials) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = specials && rng() % 16 == 0 ? specialValue(rng) : normal(rng);
  return x;
}

}  // namespace dtl::testing
