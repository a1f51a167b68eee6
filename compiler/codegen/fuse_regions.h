// The fusion pass: a rank's program (core/program.h, local shapes) → fused
// regions (region.h), each one kernel for the generator (emit_llvm.h). The
// rules are at the top of fuse_regions.cc. The program planner applies them
// when a program is planned for fused kernels (Program::fused, `--kernels
// jit`); `dtlc check --emit=fused|llvm|ptx` prints them.
#pragma once

#include <string>
#include <vector>

#include "compiler/codegen/fold_epilogues.h"
#include "compiler/codegen/region.h"
#include "core/program.h"

namespace dtl::codegen {

struct FusedRegion {
  Region region;            // inputs "in0", "in1", …; outputs "out0", … (so equal kernels hash equal)
  std::vector<int> nodes;   // program node ids the region computes, in program order (folded
                            // constants and broadcasts included)
  std::vector<int> inputs;  // program node id read by each region input, in the region's input order
  std::vector<int> outputs; // program node id written by each region output, in output order
  prog::Fused members;      // as the program stores it (Program::fused): computed members in run order
};

struct Fusion {
  std::vector<FusedRegion> regions;  // in the order their first node runs
  std::vector<int> region_of;        // per program node: its region, or -1 (runs as it does today)
};

// Which op classes may be fused: a fixed rule per target, never a timing.
struct FuseRules {
  // Unary exp log tanh sigmoid silu gelu gelu_tanh, Softmax and LogSoftmax.
  // The generator evaluates them as the fast backend does (f32 formulas over
  // libmvec's vector functions, emit_llvm.h and vector_math.h), so `--kernels
  // jit` fuses them; false leaves them to the backend's own kernels.
  bool transcendentals = true;
  // The UnaryGrad of gelu, gelu_tanh, silu, tanh, sigmoid and exp, whose
  // derivative calls exp, erf or tanh. The generator computes them as the
  // fast backend does (its f32 formulas over the same libmvec calls as the
  // forward: emit_llvm.cc, Emitter::derivativeF32 and expGrad), so `--kernels
  // jit` fuses them (PlanOptions::fuse_libm_gradients); false leaves them to
  // the backend's own kernels.
  bool libm_gradients = true;
  // Which nodes after a contraction its GEMM runs as an epilogue
  // (fold_epilogues.h), applied by the program planner before the regions
  // are cut: they leave the regions. Off unless a planner asks.
  EpilogueRules epilogues;
  // A ReduceTo that removes several names (a bias's or a gain's gradient,
  // summed over batch and seq) in a region: it cuts the step's non-GEMM
  // bytes (char GPT 0.63 -> 0.51 of node by node, the GPT-2 step 0.67 ->
  // 0.57). The kernel plan folds such a chain of sums into per-chunk
  // partials added where the summed value is computed (kernel_plan.h, step
  // 5), so the region still splits over its leading dim (docs/compiler.md).
  bool several_name_sums = true;
};

// The regions of schedule `s` of the program (the training schedule's by default).
Fusion fuseRegions(const prog::Program& p, const prog::Schedule& s, const FuseRules& rules = {});
Fusion fuseRegions(const prog::Program& p);

// The regions of a program planned with PlanOptions::fuse, in the order the
// training schedule runs them (what `dtlc check --emit=fused` prints).
Fusion plannedFusion(const prog::Program& p);

// A region of the program rebuilt from its members (`f.nodes`, `f.folded`,
// `f.outputs`); sets `f.inputs` to the values it reads, in input order. The
// fusion pass builds its regions with it, and the executor's kernels are
// compiled from what it gives for Program::fused.
Region buildRegion(const prog::Program& p, prog::Fused& f, const std::string& name);

// `dtlc check --emit=fused`: every region with its program nodes (%N), how
// many it fuses, its inputs and outputs, and the region's own text.
std::string printFusion(const prog::Program& p, const Fusion& f);

}  // namespace dtl::codegen
