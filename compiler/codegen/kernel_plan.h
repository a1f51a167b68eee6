// How a region becomes loop nests, before any target is chosen: its buffers
// (the kernel's arguments) and its phases. Both targets (emit_llvm.h) follow
// this plan; a caller reads it to know what to pass and how much scratch.
//
// 1. Buffers, in argument order: every input (f32), every output (f32, or
//    one byte per Bool), then one f32 scratch buffer per reduction that is
//    not an output and per stored operand (below) that is not an output. Each is dense row-major in its node's shape order.
// 2. One phase per reduction, in node order (a reduction may read earlier
//    ones): over the points of its result shape, a loop along the reduced dim
//    evaluates the operand's elementwise expression and accumulates.
// 3. One phase per distinct output shape (outputs of equal shapes share one
//    loop nest, so their common inputs are read once): every point evaluates
//    the elementwise expressions, reading inputs and reduction buffers.
// Elementwise nodes are never stored except as outputs: they are recomputed
// where needed (a region is small; a reduction's result is the only thing
// worth keeping) — but where a reduction's operand reads another reduction
// that keeps the dim this one reduces (a layer norm's gradient, over d,
// summed over the batch for a bias), recomputing it would redo that whole
// chain for every step of the reduction, along a strided dim: the operand is
// stored first (in its output buffer, else a scratch buffer) by a phase of
// its own just before the reduction's, which loads it. This depends on the
// region's structure only, not on which nodes are outputs, so a region and
// the oracle's probe of it (every node an output) sum in the same order.
// 4. The split: when every phase's space starts with the same dim (never a
//    reduced one: a reduction's space is its result's), rows of that dim are
//    independent — each point reads and writes only its own row of what the
//    kernel stores — so the x86 kernel takes a range of rows and callers may
//    run disjoint ranges on different threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/codegen/region.h"

namespace dtl::codegen {

struct PlanBuffer {
  enum class Role { Input, Output, Scratch };
  Role role = Role::Input;
  int node = -1;
  std::string name;  // the input's or output's name; "scratch%N" for node N
  Shape shape;
  DType dtype = DType::F32;
  int64_t elements() const { return shape.elements().value_or(0); }
  int64_t bytes() const { return elements() * (dtype == DType::Bool ? 1 : 4); }
};

struct PlanPhase {
  Shape space;              // the points the phase visits, row-major (last dim fastest)
  int reduction = -1;       // the reduce node this phase computes, or -1 (an output phase)
  std::vector<int> stores;  // buffer indices written at each point
  std::vector<int> loads;   // a reduction's stored operand, loaded from its buffer (written by the phase before)
};

struct KernelPlan {
  std::vector<PlanBuffer> buffers;
  std::vector<int> home;  // per node: the buffer a consumer loads it from (an elementwise node: only
                          // in a phase that lists it in `loads`), or -1 (recomputed)
  std::vector<PlanPhase> phases;
  int inputs = 0, outputs = 0, scratch = 0;  // buffer counts by role
  std::string split;  // the dim every phase's outermost loop runs over, or "" (no split)
  int64_t rows = 1;   // its size (1 without a split)
};

KernelPlan planKernel(const Region& r);

}  // namespace dtl::codegen
