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
// 5. Sums over the split dim (a bias gradient: Σ over batch of relu'(…), or
//    over batch and seq, a chain of Sum nodes) would leave a phase whose space
//    lacks that dim, so the region would run on one thread, and the summed
//    value would be evaluated twice (in the output phase and, strided, in the
//    sum's). Such a sum is *deferred*: with its chain of Sums folded (an inner
//    Sum whose only consumer is the next one is not computed unless it is an
//    output), it is one sum of the chain's operand x over a set of dims that
//    holds x's leading dim D. The phase whose space is x's shape (the output
//    phase that stores x, else one of its own) adds x at each point into a
//    per-chunk partial buffer [chunk, result]: the rows of D are cut into
//    chunks fixed by the region's structure alone (chunk_rows, from its
//    nodes' sizes: never the thread count nor which nodes are outputs), each
//    chunk's partial summed in the nest's row-major order. After all chunks,
//    the *tail* phases (unsplit, run once) combine the partials in chunk
//    order into the sum's buffer, then compute whatever reads it. So x is
//    evaluated once, contiguously, the region splits over D, and results are
//    bitwise the same on any number of threads. Folding the chain (rather
//    than partials of the first sum, [chunk, seq, d] for batch then seq)
//    keeps the partials small ([chunk, d]) where D's rows are few and large
//    (a GPT's batch): their bytes would otherwise match the output's. Only
//    when no value downstream of the sum has D (a batch norm's would: it is
//    left as it was, unsplit), and Sum or Mean (a Mean alone, not chained).
//    The oracle checks a folded sum against x over all its dims (γₙ·Σ|x| with
//    n their product): `folded` says which.
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
  std::vector<int> partials;  // deferred sums (nodes) whose operand this phase adds into their partials
  bool combine = false;       // `reduction` is deferred: this phase sums its partials in chunk order
  bool tail = false;          // runs once, unsplit, after every chunk's rows
};

// A deferred sum: its chain folded into one sum of `operand` over `dims`.
struct FoldedSum {
  int node = -1, operand = -1;
  std::vector<std::string> dims;  // in the order of the chain (the node's own dim last)
  int partial = -1;               // its partial buffer: [chunk, node's shape]
};

struct KernelPlan {
  std::vector<PlanBuffer> buffers;
  std::vector<int> home;  // per node: the buffer a consumer loads it from (an elementwise node: only
                          // in a phase that lists it in `loads`), or -1 (recomputed)
  std::vector<PlanPhase> phases;
  int inputs = 0, outputs = 0, scratch = 0;  // buffer counts by role
  std::string split;  // the dim every phase's outermost loop runs over, or "" (no split)
  int64_t rows = 1;   // its size (1 without a split)
  // Chunks of rows: fixed by the region; a row range a caller runs starts at
  // a chunk's first row when there are partials (each call starts its chunks' sums).
  int64_t chunk_rows = 1, chunks = 1;
  std::vector<FoldedSum> folded;  // the deferred sums, in node order
  bool hasTail() const { return !phases.empty() && phases.back().tail; }
  const FoldedSum* foldedSum(int node) const {
    for (const FoldedSum& f : folded)
      if (f.node == node) return &f;
    return nullptr;
  }
};

// The chunk's coordinate name in a partial buffer's shape.
inline constexpr const char* kChunkDim = "%chunk";
// About how many node evaluations one chunk of rows holds.
inline constexpr int64_t kChunkWork = 1 << 15;

KernelPlan planKernel(const Region& r);

}  // namespace dtl::codegen
