// 1. Collect the gradient reductions that feed an optimiser update
//    (directly, or as one copy of a stacked parameter's gradient): all-reduces,
//    and with ZeRO reduce-scatters into flat pieces, with the node that
//    produced their input (the gradient).
// 2. Sort by that producer's position: the backward pass's order.
// 3. Fill buckets per axis and kind up to the cap; each bucket starts after
//    its last member's producer (or, without overlap, after the last
//    backward node).
#include "compiler/passes/bucket_gradients.h"

#include <algorithm>
#include <map>

#include "core/placement.h"

namespace dtl::passes {

namespace {

bool reducesGradient(const ir::Node& n) {
  return n.op == ir::Op::AllReduce ||
         (n.op == ir::Op::ReduceScatter && !n.names.empty() && layout::Placement::isFlat(n.names[0]));
}

}  // namespace

void bucketGradients(ir::Graph& g, int64_t cap_bytes, bool overlap, bool keep_scatter_sums) {
  // What reaches an update directly, or through the gathers of a stacked
  // parameter's copies (each copy reduced on its own).
  std::vector<bool> feeds_update(g.nodes.size(), false);
  for (size_t k = g.nodes.size(); k-- > 0;) {
    const ir::Node& n = g.nodes[k];
    if (n.op == ir::Op::Update || (n.op == ir::Op::SliceGrad && feeds_update[k]))
      for (int in : n.inputs) feeds_update[static_cast<size_t>(in)] = true;
  }
  // The end of the backward pass: its last node that is not a reduction, the
  // gather of reduced copies, or part of the optimiser step.
  int last_backward = 0;
  std::vector<bool> reduced(g.nodes.size(), false);  // a reduction, or a gather of reduced values
  const std::vector<bool> step = ir::optimiserStep(g);
  for (const ir::Node& n : g.nodes) {
    bool gathers = n.op == ir::Op::SliceGrad && !n.inputs.empty();
    for (int in : n.inputs) gathers = gathers && reduced[static_cast<size_t>(in)];
    reduced[static_cast<size_t>(n.id)] = reducesGradient(n) || gathers;
    if (!reduced[static_cast<size_t>(n.id)] && !step[static_cast<size_t>(n.id)]) last_backward = n.id;
  }
  struct Item {
    int node, producer;
    int64_t bytes;
    std::string axis;
    ir::Op op;
  };
  std::vector<Item> items;
  for (const ir::Node& n : g.nodes) {
    if (!reducesGradient(n) || !feeds_update[static_cast<size_t>(n.id)]) continue;
    int64_t bytes = n.shape.elements().value_or(0) * dtypeBytes(n.dtype);
    items.push_back({n.id, n.inputs[0], bytes, n.name, n.op});
  }
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.producer < b.producer; });
  std::map<std::pair<std::string, ir::Op>, int> open;  // (axis, kind) → index of its filling bucket
  g.buckets.clear();
  for (const Item& it : items) {
    const std::pair<std::string, ir::Op> key{it.axis, it.op};
    auto o = open.find(key);
    bool fits = o != open.end() && g.buckets[static_cast<size_t>(o->second)].bytes + it.bytes <= cap_bytes;
    if (!fits) {
      ir::Bucket b;
      b.id = static_cast<int>(g.buckets.size());
      b.axis = it.axis;
      b.op = it.op;
      b.keeps_sum = keep_scatter_sums && it.op == ir::Op::ReduceScatter;
      g.buckets.push_back(b);
      open[key] = b.id;
    }
    ir::Bucket& b = g.buckets[static_cast<size_t>(open[key])];
    b.members.push_back(it.node);
    b.bytes += it.bytes;
    b.start_after = overlap ? std::max(b.start_after, it.producer) : last_backward;
    g.nodes[static_cast<size_t>(it.node)].index = b.id;
    if (it.bytes >= cap_bytes) open.erase(key);  // an oversized tensor stands alone
  }
}

}  // namespace dtl::passes
