// The accumulate-into-contraction pass: the backward pass sums the
// gradients of a value read several times with `add` nodes, and most of
// those summands are products (a LayerNorm input's gradient is dq·Wqᵀ +
// dk·Wkᵀ + dv·Wvᵀ, then + the residual's). Each such add reads two whole
// tensors and writes a third, where a GEMM can add its product into the
// value it is summed with (sgemm with beta = 1: C = A·B + C). The pass
// turns `add(x, contract(a, b))` (either order) into one
// `contract(a, b, x)`: base + a·b, computed into base's storage by the
// program planner (in place, like the scatter-into pass's dense gradient).
// A chain c1 + c2 + c3 collapses: c3 accumulates into c2's accumulation
// into c1. The unfused contraction is then read by nothing, and the planner
// leaves it out.
//
// It fires only where the planner can compute base in place: a backward
// value of the add's shape (same names, same order: no broadcast, no
// permute), f32, read by nothing but the add and not kept by the caller,
// one that a kernel computes (not a view, a feed or a collective); and the
// product read by nothing but the add. On the laid-out graph the three
// values must be placed alike on every axis (a partial sum plus a partial
// sum is the partial sum of the add), so no collective changes; one
// process's graph has no layout (`layout` null).
#pragma once

#include "core/graph.h"
#include "core/placement.h"

namespace dtl::passes {

// Returns how many adds it rewrote.
int accumulateIntoContraction(ir::Graph& g, const layout::Layout* layout);

}  // namespace dtl::passes
