// Memory traffic of a rank's training step outside the matrix products: what
// the fusion pass exists to cut. Issue 11 asks that it be counted, not
// guessed: each kernel that is not a contraction reads its operands and
// writes its result once (node by node, as the fast backend runs them); a
// fused region reads its inputs once and writes its outputs once. Views
// (reshapes, leading-dim slices, a result of several: Storage::Alias),
// feeds and collectives move no kernel bytes here (collectives are the
// plan's business). Attention counts its operands and results only, not the
// score tiles inside it; an embedding the rows it gathers, not its table. A
// contraction's epilogue (fold_epilogues.h) counts the operands it adds (a
// bias), its output being the GEMM's; node by node, the nodes it absorbed
// count as the kernels they were.
// A contraction that adds its product into a base (kind
// "contract_accumulate") counts the base its GEMM reads.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/program.h"

namespace dtl::codegen {

struct StepTraffic {
  int64_t node_by_node = 0;  // bytes, every non-contraction node of the training schedule run alone
  int64_t fused = 0;         // the same as the program runs it: each fused region one kernel
  int64_t kernels_node_by_node = 0, kernels_fused = 0;  // kernel launches per step, either way
  int64_t update = 0;        // the optimiser update schedule's bytes (the same either way)
  int64_t contraction_flops = 0;  // 2·M·N·K of every contraction of the training schedule
  // The fused bytes by what moves them: "regions", or the op of a kernel that
  // runs unfused (where the next cut must come from).
  std::map<std::string, int64_t> fused_by_kind;
};

// `p` planned with or without fused regions (PlanOptions::fuse); without,
// `fused` equals `node_by_node`. `state_per_param`: optimiser state tensors
// read and written per parameter (sgd 0, sgd with momentum 1, adam/adamw 2).
StepTraffic stepTraffic(const prog::Program& p, int state_per_param);

// Two lines for `--emit=fused`: "# non-GEMM traffic per training step: …" and
// where the fused bytes go, largest first.
std::string printTraffic(const StepTraffic& t);

}  // namespace dtl::codegen
