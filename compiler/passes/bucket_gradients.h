// The bucketing pass: groups the gradient all-reduces of one axis into
// buckets of at most `cap` bytes in the order the backward pass produces the
// gradients (PyTorch DDP's reverse-order buckets); a tensor larger than the
// cap is a bucket of its own. With overlap, a bucket starts as soon as its
// last gradient exists, so communication runs under the rest of the
// backward pass; without, every bucket starts after the backward pass.
#pragma once

#include <cstdint>

#include "core/graph.h"

namespace dtl::passes {

// `keep_scatter_sums` (zero = 1): reduce-scatter buckets keep their blocks
// for the whole step (Bucket::keeps_sum).
void bucketGradients(ir::Graph& g, int64_t cap_bytes, bool overlap, bool keep_scatter_sums = false);

}  // namespace dtl::passes
