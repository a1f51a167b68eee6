// The pre-fusion attention kernels (attention_unfused.cc), a reference point for attention_bench.
#pragma once

#include <string>

#include "runtime/kernels/fast/kernels.h"

namespace dtl::rt::fast {

// y = attention(q, k, v); scratch s.c holds P [seq_q, seq_k].
std::string attentionUnfused(const TensorView& q, const TensorView& k, const TensorView& v, bool causal, TensorView& y,
                             Scratch& s);
// which: 0 = dq, 1 = dk, 2 = dv; scratch s.c and s.d hold P and dP [seq_q, seq_k].
std::string attentionGradUnfused(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& dy,
                                 bool causal, int which, TensorView& dx, Scratch& s);

}  // namespace dtl::rt::fast
