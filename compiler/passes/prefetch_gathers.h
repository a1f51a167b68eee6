// The prefetching pass (ZeRO-3, FSDP's forward and backward prefetch):
// decides when each gather of a parameter's pieces starts. The gathers of
// one pass (forward or backward) are taken in the order of their first
// reader and grouped by layer (the copy of a stacked parameter they
// gather; unstacked parameters side by side form one group). With
// `prefetch` = k, layer j's gathers start when layer j − k starts computing
// (its first gather's first reader has run), so the gathers overlap the
// layers before them and about k + 1 layers' parameters are whole at once;
// with k = 0 each gather starts right before its first reader. Either way a
// backward gather never starts in the forward pass, where it would keep the
// parameter whole from its forward to its backward use.
#pragma once

#include "core/graph.h"

namespace dtl::passes {

void prefetchGathers(ir::Graph& g, int prefetch);

}  // namespace dtl::passes
