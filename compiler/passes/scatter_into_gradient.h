// The scatter-into pass: an embedding table that also has a dense gradient
// (a tied output projection, `logits = h @ wte.table`) gets its gradient as
// `add(dense, embed_grad(ids, dy))`: the embed_grad zero-fills the whole
// table to scatter a few rows, and the add reads two whole tables to write a
// third — GPT-2's [50257, 768] table makes that ~600 MiB of memory traffic
// a step for a few hundred rows of change. The pass turns the add into
// `embed_grad(ids, dy, dense)`, which adds the selected rows into the dense
// gradient (in place: the program planner computes the dense gradient into
// the node's storage), with the same numbers (ref::embedBackwardInto). The
// unfused embed_grad is then read by nothing, and the planner leaves it out.
// Runs on the laid-out graph (the add's operands placed alike, so the node
// keeps the add's placement and no collective changes), or on one process's
// graph, which is not laid out (`layout` null).
#pragma once

#include "core/graph.h"
#include "core/placement.h"

namespace dtl::passes {

// Returns how many adds it rewrote.
int scatterIntoGradient(ir::Graph& g, const layout::Layout* layout);

}  // namespace dtl::passes
