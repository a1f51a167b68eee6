// The optimiser step of many tensors in one call: what the executor hands a
// multi-tensor runner (runtime/jit's generated kernel, `--kernels jit`, the
// way apex's multi_tensor_apply works) instead of calling Optimizer::update
// once per tensor. Implemented where the kernel generator is linked, so the
// executor stays free of LLVM.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/optim/optimizer.h"

namespace dtl::rt::optim {

struct TensorStep {
  std::string name;  // for errors: the parameter's path
  float* param = nullptr;
  const float* grad = nullptr;
  int64_t n = 0;
  ParamState* state = nullptr;
};

class MultiTensorUpdate {
 public:
  virtual ~MultiTensorUpdate() = default;
  // Updates every tensor as opt.update(param, grad, n, *state, step, lr)
  // would, bit for bit, on up to `threads` threads (the result does not
  // depend on how many). "" or why it could not (a state of the wrong size,
  // a bad step: Optimizer's messages; nothing of the step is applied then).
  virtual std::string run(const Optimizer& opt, const std::vector<TensorStep>& tensors, int64_t step, double lr,
                          int threads) = 0;
};

}  // namespace dtl::rt::optim
