// Reverse-mode autodiff on the training graph: appends the backward pass
// (one vector-Jacobian product per forward node that needs a gradient) and
// then one `update` node per parameter. A parameter used twice (a tied
// embedding) or sliced per stacked copy accumulates every contribution.
#pragma once

#include "core/graph.h"

namespace dtl::ir {

// Appends gradient nodes for d(loss)/d(param) and fills g.grads.
void appendBackward(Graph& g);
// Appends one Update node per parameter (after every gradient exists).
void appendUpdates(Graph& g);

}  // namespace dtl::ir
