// The multi-tensor optimiser update (compiler/codegen/emit_update.h) for the
// GPU check: every variant over a few steps, its inputs and what `fast`'s
// hand-written loop (rt::optim::Optimizer::runLoop) makes of them, bit for
// bit the generated kernel's promise on x86 (tests/unit/optim_jit_test.cc)
// and here on the GPU.
#pragma once

#include <string>
#include <vector>

#include "core/optim_step.h"

namespace dtl::codegen::testing {

// One table row's vectors: param and grad, and the state a, b where the
// variant has them (empty otherwise).
struct UpdateChunk {
  std::vector<float> param, grad, a, b;
};

struct UpdateCase {
  std::string name;
  optim_step::Variant variant;
  optim_step::Scalars scalars;
  std::vector<UpdateChunk> in, want;  // want: param, a, b after the loop
};

// Sgd (plain, weight decay, momentum and its first step, dampening,
// nesterov), adam (with and without L2) and adamw, three steps each over
// tensors of 0, 1, 7, 33, 1000 and 4097 elements cut into chunks of at most
// 1000, NaN, ±inf and subnormals among the values; and adam, adamw and sgd
// momentum on first moments that are subnormal (the loops' special path).
std::vector<UpdateCase> updateCases();

}  // namespace dtl::codegen::testing
