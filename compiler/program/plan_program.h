// The program planner: the laid-out training graph and one rank's mesh
// coordinates → that rank's program (core/program.h). It decides, once and
// before anything runs, what the executor used to work out while running:
// local shapes, which values are views, which gradients are computed
// straight into their bucket or their stack, where each communication
// group starts and is waited for, and a buffer slot for every other value
// from liveness. `dtlc plan` reads the same program's memory.
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/codegen/fuse_regions.h"
#include "core/graph.h"
#include "core/placement.h"
#include "core/program.h"

namespace dtl::program {

struct PlanOptions {
  // Cut the training and evaluation schedules into fused regions
  // (compiler/codegen/fuse_regions.h), each run as one kernel: Program::fused
  // (`--kernels jit`). A member that is not a region output gets no storage.
  bool fuse = false;
  // The fusion pass's rules (FuseRules in compiler/codegen/fuse_regions.h):
  // `--kernels jit` fuses the transcendentals (vectorised through libmvec,
  // compiler/codegen/vector_math.h); false leaves them to the fast kernels.
  bool fuse_transcendentals = true;
  // The gradients whose derivative calls exp, erf or tanh (gelu gelu_tanh
  // silu tanh sigmoid exp): the generator computes them in f32 over the same
  // vector calls (FuseRules::libm_gradients), so `--kernels jit` fuses them;
  // false leaves them to the fast kernels.
  bool fuse_libm_gradients = true;
  // A Linear's bias add runs as its contraction's epilogue
  // (compiler/codegen/fold_epilogues.h: oneDNN matmul post-ops), and these
  // activations after it: on x86 relu, which the fast backend applies with
  // its own select to each panel of C right after the GEMM wrote it
  // (runtime/kernels/fast/epilogue.cc), not as oneDNN's post-op.
  bool fuse_epilogues = true;
  std::vector<codegen::UnaryFn> epilogue_activations = {codegen::UnaryFn::Relu};
  // Activations after a Linear's bias whose pre-activation their gradient
  // reads: computed from each panel of C into their own storage by the fast
  // backend's unary loop (EpilogueRules::kept_input_activations).
  std::vector<codegen::UnaryFn> epilogue_kept_input_activations = {
      codegen::UnaryFn::Gelu, codegen::UnaryFn::GeluTanh, codegen::UnaryFn::Silu, codegen::UnaryFn::Tanh,
      codegen::UnaryFn::Sigmoid};
  // A cross-entropy computes its gradient from the logits it reads
  // (EpilogueRules::cross_entropy_grad).
  bool fuse_cross_entropy_grad = true;
  codegen::FuseRules fuseRules() const {
    codegen::FuseRules r;
    r.transcendentals = fuse_transcendentals;
    r.libm_gradients = fuse_libm_gradients;
    r.epilogues.bias = fuse_epilogues;
    r.epilogues.activations = epilogue_activations;
    r.epilogues.kept_input_activations = epilogue_kept_input_activations;  // after a bias: only with `bias`
    r.epilogues.cross_entropy_grad = fuse_cross_entropy_grad;
    return r;
  }
};

prog::Program planProgram(const ir::Graph& g, const layout::Layout& layout, const std::vector<int64_t>& coords,
                          const PlanOptions& options = {});

// The one-rank program of a graph that was not laid out (tests, tools).
prog::Program planProgram(const ir::Graph& g);

}  // namespace dtl::program
