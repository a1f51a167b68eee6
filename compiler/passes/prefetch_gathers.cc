// 1. Find the gathers of stored pieces (flat all-gathers not of an update)
//    and each one's first reader and layer key (the slice indices above it).
// 2. Per pass, sort by first reader and cut into layer groups.
// 3. Give each gather its start: after the first reader of the group k
//    before (prefetch), else right before its own first reader.
#include "compiler/passes/prefetch_gathers.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "core/placement.h"

namespace dtl::passes {

namespace {

struct Gather {
  int id, first_reader;
  std::string layer;
};

// "0.3": the copy indices of the slices a gathered value was cut from.
std::string layerKey(const ir::Graph& g, int v) {
  std::string key;
  for (; g[v].op == ir::Op::Slice; v = g[v].inputs[0]) key = std::to_string(g[v].index) + "." + key;
  return key;
}

void schedulePass(ir::Graph& g, std::vector<Gather> gathers, int prefetch) {
  std::sort(gathers.begin(), gathers.end(), [](const Gather& a, const Gather& b) { return a.first_reader < b.first_reader; });
  std::vector<int> group_start;  // per layer group: its first gather's first reader
  std::vector<int> group_of(gathers.size());
  for (size_t i = 0; i < gathers.size(); ++i) {
    if (i == 0 || gathers[i].layer != gathers[i - 1].layer) group_start.push_back(gathers[i].first_reader);
    group_of[i] = static_cast<int>(group_start.size()) - 1;
  }
  for (size_t i = 0; i < gathers.size(); ++i) {
    const int j = group_of[i];
    const int after = prefetch > 0 && j >= prefetch ? group_start[static_cast<size_t>(j - prefetch)]
                                                    : gathers[i].first_reader - 1;
    g.start_after[gathers[i].id] = after;  // the planner runs the slice it gathers (a view) when it starts
  }
}

}  // namespace

void prefetchGathers(ir::Graph& g, int prefetch) {
  constexpr int kNone = std::numeric_limits<int>::max();
  std::vector<int> first(g.nodes.size(), kNone);
  for (const ir::Node& n : g.nodes)
    for (int x : n.inputs) first[static_cast<size_t>(x)] = std::min(first[static_cast<size_t>(x)], n.id);
  std::vector<Gather> forward, backward;
  for (const ir::Node& n : g.nodes) {
    if (n.op != ir::Op::AllGather || !ir::gathersStoredPieces(n, g[n.inputs[0]]) || first[static_cast<size_t>(n.id)] == kNone)
      continue;
    Gather gather{n.id, first[static_cast<size_t>(n.id)], layerKey(g, n.inputs[0])};
    (gather.first_reader < g.forward_end ? forward : backward).push_back(gather);
  }
  schedulePass(g, forward, prefetch);
  schedulePass(g, backward, prefetch);
}

}  // namespace dtl::passes
