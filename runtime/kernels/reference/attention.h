// Scaled dot-product attention over the sequence dim, and its gradient.
#pragma once

#include "runtime/kernels/reference/tensor.h"

namespace dtl::rt::ref {

// q [..., seq_q, heads, head_dim], k and v [..., seq_k, heads, head_dim]: the
// last three dims are positional; all dims but seq agree between q and k, and
// k and v have one shape. out [q's shape] = softmax_j(q·k / sqrt(head_dim)) · v.
// causal masks key j > query i (top-left aligned, as PyTorch's
// scaled_dot_product_attention with is_causal, also when seq_q ≠ seq_k).
// A query with no key to attend to (seq_k = 0) gives 0.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal);

// The Attention node's results: out, and lse [..., seq_q, heads] (q's dtype): each query row's
// log-sum-exp of its visible scaled scores, log Σ_j exp(q_i·k_j / sqrt(head_dim)). A row with no key
// (seq_k = 0) has lse −inf; a row whose scores are all −inf (its out is NaN, as torch's) has lse NaN.
struct AttentionResults {
  Tensor out, lse;
};
AttentionResults attentionResults(const Tensor& q, const Tensor& k, const Tensor& v, bool causal);

// The AttentionGrad node's results. Recomputed from q, k, v and dy alone (the node's out and lse
// inputs are the fast kernel's shortcut; the oracle does not trust them).
struct AttentionGrads {
  Tensor dq, dk, dv;
};
AttentionGrads attentionBackward(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                 const Tensor& dy);

}  // namespace dtl::rt::ref
