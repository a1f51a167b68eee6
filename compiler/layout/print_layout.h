// The laid-out training graph as text (`dtlc check --emit=layout`): every
// node with its placement on each mesh axis, the collectives the layout pass
// inserted, and the gradient buckets. The `%N` ids are the ones `dtlc plan`
// names, so a plan's "starts after … (%28)" can be looked up here.
#pragma once

#include <string>

#include "compiler/layout/assign_placements.h"
#include "core/graph.h"

namespace dtl::layout {

std::string printLayout(const ir::Graph& g, const Layout& l);

}  // namespace dtl::layout
