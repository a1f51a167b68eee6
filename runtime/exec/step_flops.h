// The matrix-multiply FLOPs of one training micro-batch on this rank, counted
// from its program: what `dtlc run` divides by time for the achieved FLOP/s
// and MFU (docs/running.md, "What you see").
#pragma once

#include "core/program.h"

namespace dtl::rt {

// Over the nodes the `train` schedule runs (forward and backward): every
// contraction 2·M·N·K (2 × the product of the sizes of every name of its
// operands, shared ones once), every attention its two [seq, seq] products,
// 4·(lead·heads)·seq_q·seq_k·head_dim, and every attention gradient its four
// (twice that). The scores the gradient recomputes, elementwise work and the
// optimiser are not counted (as MFU conventionally counts only the model's
// matmuls).
double trainMatmulFlops(const prog::Program& p);

}  // namespace dtl::rt
