// A contraction's epilogue: the bias add (and, where the GEMM library's
// numerics are ours, an activation) after a Linear's product, run by the
// GEMM itself (oneDNN matmul post-ops on x86; cuBLASLt epilogues later)
// instead of by a region that reads the product back. The rule is at the top
// of fold_epilogues.cc; the program planner applies it before the fusion pass
// when a program is planned for fused kernels (`--kernels jit`).
#pragma once

#include <vector>

#include "compiler/codegen/region.h"
#include "core/program.h"

namespace dtl::codegen {

// What a target's GEMM library runs as post-ops with the numerics of the
// nodes they replace (a fixed rule per target, never a timing).
struct EpilogueRules {
  bool bias = false;  // add(C, bias) with bias a vector over C's N names: exact (one f32 add)
  // Activations after the bias. On x86 relu, run by our own select on each
  // panel of C as the GEMM finishes it (oneDNN 2.6's relu post-op is
  // max(x, 0), which turns a NaN into 0); no gelu/tanh, whose post-ops are
  // not checked against our bounds (fold_epilogues.cc).
  std::vector<UnaryFn> activations;
  // Activations after the bias whose input other nodes read too (a gelu's
  // gradient reads its pre-activation): computed from each panel of C into
  // the activation's own storage, C keeping the pre-activation (PostOp::own).
  // On x86 the fast backend's vectorised unary loop, the unary node's bits.
  std::vector<UnaryFn> kept_input_activations;
  // A cross-entropy whose gradient has a constant dy (the loss's seed)
  // computes that gradient too, from the logits rows it has just read: one
  // read of the logits instead of two, the two nodes' bits.
  bool cross_entropy_grad = false;
};

// The rules on schedule `s` (the training schedule, which reads every value
// the evaluation schedule does): each contraction they pick gets
// Node::epilogue and the bias as its input 2, each cross-entropy its
// gradient's post-op and dy as its input 2. Returns how many they picked.
int foldEpilogues(prog::Program& p, const prog::Schedule& s, const EpilogueRules& rules);

// A schedule of a program whose nodes have epilogues: the nodes they
// absorbed run no instruction of their own and are views of the node's
// storage (which holds the epilogue's result), or keep their own storage
// (PostOp::own), written by the node's kernel. An operand an epilogue reads
// (a cross-entropy's constant dy) runs before the node.
void applyEpilogues(const prog::Program& p, prog::Schedule& s);

}  // namespace dtl::codegen
