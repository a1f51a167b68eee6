// The optimisers of language.md section 8 -- sgd, adam, adamw -- with exactly
// PyTorch 1.13's single-tensor update rules (foreach=False) and defaults, applied
// as one fused f32 pass per tensor that rounds like PyTorch's CPU kernels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/optim_step.h"

namespace dtl::rt::optim {

// Hyperparameters; the defaults are PyTorch's (AdamW's weight_decay default of
// 0.01 is the compiler's business: here 0 means none for every optimiser).
struct OptimizerConfig {
  std::string name;  // "sgd", "adam" or "adamw"
  double lr = 0;     // base rate; each step's rate is passed to update()
  double momentum = 0, dampening = 0, weight_decay = 0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  bool nesterov = false;
};

// Per-tensor optimiser state, n floats each or empty before the first step.
// sgd: a = "momentum_buffer" (only with momentum); adam/adamw: a = "exp_avg",
// b = "exp_avg_sq".
struct ParamState {
  std::vector<float> a, b;
};

// Checkpoint names of the state vectors this optimiser uses, in a, b order.
std::vector<std::string> stateNames(const OptimizerConfig& c);

// One optimiser; stateless itself, so one instance serves every tensor.
//
// Rounding: every scalar PyTorch computes as a Python float (1 - beta1,
// lr / bias_correction1, sqrt(bias_correction2), 1 - lr * weight_decay, ...) is
// computed here in double the same way and rounded once to f32; every tensor op
// is f32, and where PyTorch's AVX2/CUDA kernels compute a*b + c as one fused
// multiply-add (add with alpha, addcmul) so does this, via std::fma. Results are
// bitwise equal to PyTorch 1.13 on an AVX2 CPU (tests/unit/optim_test.cc).
class Optimizer {
 public:
  // Throws std::invalid_argument for an unknown name or a value PyTorch rejects.
  explicit Optimizer(OptimizerConfig c);

  const OptimizerConfig& config() const { return config_; }

  // One fused pass per tensor: updates param[0, n) in place from grad.
  // `step` counts from 1 (Adam's bias correction); `lr` is this step's
  // scheduled rate. State vectors are created on first use (PyTorch's lazy
  // init: the momentum buffer starts as a copy of the first d_p, Adam's moments
  // as zeros); non-empty state of the wrong size throws std::invalid_argument.
  void update(float* param, const float* grad, int64_t n, ParamState& state, int64_t step,
              double lr) const;

  // update() in its three parts, for runners that update many tensors in one
  // launch (runtime/jit: the generated multi-tensor kernel), so they create
  // state, pick the loop and compute the scalars exactly as update() does.
  // The state of an n-element tensor, created on first use; true when it was
  // just created and the step is sgd momentum's first (Variant::first).
  // Throws std::invalid_argument as update() does.
  bool prepareState(ParamState& state, int64_t n) const;
  optim_step::Variant variant(bool first) const;
  // This step's f32 scalars (Python floats rounded once); throws for an
  // adam/adamw step < 1.
  optim_step::Scalars scalars(int64_t step, double lr) const;
  // The hand-written loop of `v` over one chunk (what update() runs).
  static void runLoop(const optim_step::Variant& v, const optim_step::Scalars& s, const optim_step::Chunk& c);

 private:
  OptimizerConfig config_;
};

}  // namespace dtl::rt::optim
