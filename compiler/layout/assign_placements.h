// The layout pass: gives every value of the training graph a placement on
// each mesh axis — Replicate, Shard(dim), Partial(sum) or Partial(max) — and inserts a
// collective wherever a consumer needs another placement than its producer
// gives (language.md §9). Data parallelism is not special-cased: `split
// batch over dp` shards the inputs, the loss's mean over `batch` makes the
// loss and every parameter gradient Partial, and the optimiser's need for
// a Replicate gradient inserts the all-reduce.
#pragma once

#include <string>
#include <vector>

#include "core/graph.h"
#include "core/placement.h"

namespace dtl::layout {

struct SplitRule {
  std::string dim, axis;
  std::string where;  // "spec.dtl:47:3": the rule's source, for the plan
};

// `zero = 1..3`: the optimiser's step runs on a flat shard (core/placement.h)
// of each parameter over `axis` (the data-parallel one): its gradient is
// reduce-scattered into the piece and its state is held in pieces; at
// levels 1 and 2 the updated pieces are all-gathered; at level 3 the
// parameter itself is stored in pieces and gathered before the forward
// pass reads it and again before the backward pass does.
struct ZeroRule {
  int level = 0;
  std::string axis;
  std::string where;  // "spec.dtl:30:3": the setting, for the plan
};

// Rewrites `g` in place (nodes renumbered; collectives inserted). Errors
// (a layout this version cannot run) are returned as messages.
std::vector<std::string> assignPlacements(ir::Graph& g, const std::vector<MeshAxis>& mesh,
                                          const std::vector<SplitRule>& rules, Layout& out,
                                          const ZeroRule& zero = {});

}  // namespace dtl::layout
