// Before placement: a cross-entropy whose class dim a rule splits (`split
// vocab over tp`) is rewritten into the pieces Megatron-LM's vocab-parallel
// loss is made of, so the logits are never gathered. Per row, with the
// classes split over ranks:
//   m   = max over classes (each rank's, then the largest: an all-reduce of [rows])
//   lse = log Σ exp(logits − m) + m   (the sum all-reduced over [rows])
//   p   = the label's logit (the rank holding it gives it, the others 0: all-reduced)
//   loss = mean over rows of (lse − p)
// and its gradient dy/N · (exp(logits − lse) − one-hot(label)), each rank
// computing its classes' part. Other cross-entropies are left as they are.
#pragma once

#include <string>
#include <vector>

#include "compiler/layout/assign_placements.h"
#include "core/graph.h"

namespace dtl::layout {

ir::Graph splitCrossEntropy(const ir::Graph& g, const std::vector<SplitRule>& rules);

}  // namespace dtl::layout
