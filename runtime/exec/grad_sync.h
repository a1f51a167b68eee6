// What happens to a step's gradients between the backward passes and the
// optimiser, across ranks: global-norm clipping over gradients held in
// pieces, and the once-per-step reduction of accumulated gradients
// (PyTorch's no_sync). Every rank of the axes involved calls these in the
// same order.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/program.h"
#include "runtime/comm/communicator.h"
#include "runtime/exec/train_param.h"

namespace dtl::rt {

// Clips the step gradients to `max_norm` (optim::clipGradNormFrom): a split
// gradient's norm is the root of its pieces' summed squares (one all-reduce
// per set of axes it is split on), a replicated one's is taken once, as one
// process takes it — without splits, PyTorch's result to the bit.
// `total_norm` (if given) gets the global norm before clipping; with
// max_norm <= 0 that norm is all it does (the gradients are left as they are).
// `local_norms` (if given): each param's local gradient norm, already
// measured (StepGuard::localNorms), instead of another pass over them.
comm::Status clipOverPieces(std::vector<Param>& params, double max_norm,
                            const std::map<std::string, comm::Communicator*>& comms, double* total_norm = nullptr,
                            const std::vector<float>* local_norms = nullptr);

// With accumulation the gradients the program reduces in buckets are
// reduced once per step: each micro-batch keeps its partial sums (the
// executor's defer_buckets), the trainer adds them up, then all-reduces the
// sums — the reductions and what follows them (a stacked gradient's
// gather, a slice) are linear, so this is the same gradient for 1/k of the
// traffic. Which parameters' gradients come through a bucket, per axis:
std::map<std::string, std::vector<size_t>> bucketReducedParams(const prog::Program& program,
                                                               const std::vector<Param>& params);

// ZeRO level 1 with accumulation: its reduce-scatter buckets add up the
// step's micro-batches in their blocks and scatter once, on the last one
// (RunContext::scatter_add, scatter_defer). Per parameter: whether its
// gradient comes through such a bucket.
std::vector<bool> scatterReducedParams(const prog::Program& program, const std::vector<Param>& params);

// The once-per-step reduction: one flat all-reduce per axis of the
// accumulated gradients.
comm::Status reduceAccumulated(std::vector<Param>& params, const std::map<std::string, std::vector<size_t>>& by_axis,
                               const std::map<std::string, comm::Communicator*>& comms);

}  // namespace dtl::rt
