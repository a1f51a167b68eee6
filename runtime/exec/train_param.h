// A parameter as the trainer holds it: this rank's piece of the value, its
// gradient accumulator and optimiser state (trainer.cc, grad_sync.cc).
#pragma once

#include <vector>

#include "runtime/exec/param_shards.h"
#include "runtime/exec/trainer.h"
#include "runtime/optim/optimizer.h"

namespace dtl::rt {

struct Param {
  const ParamSpec* spec;
  ShardOf shard;              // the piece of spec->shape this rank holds
  // The piece the optimiser updates: the update node's placement — `shard`,
  // or with ZeRO a flat piece of it over the data-parallel axis. The
  // gradient and the optimiser state are of this piece.
  ShardOf piece;
  std::vector<float> value;   // this rank's piece (local shape)
  std::vector<float> grad;  // accumulated over micro-batches
  // This step's gradient: `grad`, or with one micro-batch the executor's own
  // memory when it could not be written into `grad` (a reduced gradient is
  // a view of its bucket): the optimiser reads it there, uncopied.
  float* step_grad = nullptr;
  optim::ParamState state;
  bool updated = false;  // the program has an update of it (so, after step 1, optimiser state)
};

}  // namespace dtl::rt
