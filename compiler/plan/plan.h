// The communication plan of one optimiser step (`dtlc plan`): every
// collective with its op, axis, dtype, bytes, bucket, the tensors in it, the
// point of the backward pass where it starts and the layout rule that caused
// it; memory per rank; bytes each rank sends (ring formula). Text, JSON, DOT.
#pragma once

#include <string>

#include "compiler/layout/assign_placements.h"
#include "compiler/sema/spec.h"
#include "core/graph.h"

namespace dtl::plan {

struct Memory {
  int64_t parameters = 0, gradients = 0, optimizer_state = 0, peak_activations = 0;
  int64_t total() const { return parameters + gradients + optimizer_state + peak_activations; }
};

Memory memoryPerRank(const ir::Graph& g, const sema::Spec& spec);

std::string planText(const ir::Graph& g, const layout::Layout& l, const sema::Spec& spec);
std::string planJson(const ir::Graph& g, const layout::Layout& l, const sema::Spec& spec);
std::string planDot(const ir::Graph& g, const layout::Layout& l, const sema::Spec& spec);

}  // namespace dtl::plan
