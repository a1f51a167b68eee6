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

struct AttentionGrads {
  Tensor dq, dk, dv;
};
AttentionGrads attentionBackward(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                 const Tensor& dy);

}  // namespace dtl::rt::ref
