// Memory traffic of a rank's training step outside the matrix products: what
// the fusion pass exists to cut. Issue 11 asks that it be counted, not
// guessed: each kernel that is not a contraction reads its operands and
// writes its result once (node by node, as the fast backend runs them); a
// fused region reads its inputs once and writes its outputs once. Views
// (reshapes, leading-dim slices: Storage::Alias), feeds and collectives move
// no kernel bytes here (collectives are the plan's business). Attention
// counts its operands and result only, not the score scratch inside it; an
// embedding the rows it gathers, not its whole table.
#pragma once

#include <cstdint>
#include <string>

#include "compiler/codegen/fuse_regions.h"
#include "core/program.h"

namespace dtl::codegen {

struct StepTraffic {
  int64_t node_by_node = 0;  // bytes, every non-contraction node of the training schedule run alone
  int64_t fused = 0;         // the same with the fusion's regions run as one kernel each
  int64_t kernels_node_by_node = 0, kernels_fused = 0;  // kernel launches per step, either way
  int64_t update = 0;        // the optimiser update schedule's bytes (the same either way)
  int64_t contraction_flops = 0;  // 2·M·N·K of every contraction of the training schedule
};

// `p` planned node by node (PlanOptions::fuse off), `f` its fusion (fuseRegions).
// `state_per_param`: optimiser state tensors read and written per parameter
// (sgd 0, sgd with momentum 1, adam/adamw 2).
StepTraffic stepTraffic(const prog::Program& p, const Fusion& f, int state_per_param);

// One line for `--emit=fused`: "# non-GEMM traffic per step: …".
std::string printTraffic(const StepTraffic& t);

}  // namespace dtl::codegen
