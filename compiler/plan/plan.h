// The communication plan of one optimiser step (`dtlc plan`): every
// collective with its op, axis, dtype, bytes, bucket, the tensors in it, the
// point of the backward pass where it starts and the layout rule that caused
// it; memory per rank; bytes each rank sends (ring formula). Text, JSON, DOT.
#pragma once

#include <string>
#include <vector>

#include "compiler/layout/assign_placements.h"
#include "compiler/sema/spec.h"
#include "core/graph.h"
#include "core/program.h"

namespace dtl::plan {

// Per rank, from the rank's program: parameters and gradients of the local
// shapes, the optimiser's state, the executor's buffer slots (activations,
// inputs, the backward pass's values; the larger of the training and the
// evaluation schedule's use of each) and the communication groups' buffers
// (gradient buckets).
struct Memory {
  int64_t parameters = 0, gradients = 0, optimizer_state = 0, peak_activations = 0, communication = 0;
  // Saturates at INT64_MAX (a plan that large fits nowhere).
  int64_t total() const {
    int64_t t = 0;
    for (int64_t part : {parameters, gradients, optimizer_state, peak_activations, communication})
      if (__builtin_add_overflow(t, part, &t)) return INT64_MAX;
    return t;
  }
};

Memory memoryPerRank(const prog::Program& p, const sema::Spec& spec);
// The "memory per rank" lines of the text plan (a heading, then one indented
// line per part and the total); `dtlc run` and `plan --device-memory` print
// them when the plan does not fit.
std::string memoryText(const Memory& m);

// One collective (a bucket, or a single one) of rank 0's program.
struct Collective {
  std::string op, axis, dtype, after, why, rule;
  int64_t bytes = 0;  // one rank's (local shapes)
  bool max = false;   // an all-reduce of the largest: every rank's values are gathered
  int bucket = -1;
  // Once per optimiser step rather than per micro-batch: gradient buckets
  // with accumulation (no_sync; ZeRO-1's scatters) and the optimiser step's
  // gathers of updated pieces.
  bool per_step = false;
  std::vector<std::string> tensors;
  int start = 0;
  int number = 0;  // its place in the list, from 1 (prog::collectiveNumbers: what errors name it by)
};

// In the order they start (numbered by prog::collectiveNumbers); `zero` is
// the spec's `parallel.zero`.
std::vector<Collective> collectives(const ir::Graph& g, const prog::Program& p, int64_t zero);
// Bytes one rank sends for one run of `c` on an axis of `ranks` (ring:
// all-reduce 2(n−1)/n of its bytes, all-gather and reduce-scatter (n−1)/n
// of the whole; a max all-reduce gathers every rank's values).
double sent(const Collective& c, int64_t ranks);

// `p` is rank 0's program of the laid-out graph `g`.
std::string planText(const ir::Graph& g, const layout::Layout& l, const prog::Program& p, const sema::Spec& spec);
std::string planJson(const ir::Graph& g, const layout::Layout& l, const prog::Program& p, const sema::Spec& spec);
std::string planDot(const ir::Graph& g, const layout::Layout& l, const prog::Program& p, const sema::Spec& spec);

}  // namespace dtl::plan
