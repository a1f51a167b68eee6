// 1. Collect the all-reduces that feed an optimiser update (directly, or as
//    one copy of a stacked parameter's gradient), with the node that
//    produced their input (the gradient).
// 2. Sort by that producer's position: the backward pass's order.
// 3. Fill buckets per axis up to the cap; each bucket starts after its last
//    member's producer (or, without overlap, after the last backward node).
#include "compiler/passes/bucket_gradients.h"

#include <algorithm>
#include <map>

namespace dtl::passes {

void bucketGradients(ir::Graph& g, int64_t cap_bytes, bool overlap) {
  // What reaches an update directly, or through the gathers of a stacked
  // parameter's copies (each copy reduced on its own).
  std::vector<bool> feeds_update(g.nodes.size(), false);
  for (size_t k = g.nodes.size(); k-- > 0;) {
    const ir::Node& n = g.nodes[k];
    if (n.op == ir::Op::Update || (n.op == ir::Op::SliceGrad && feeds_update[k]))
      for (int in : n.inputs) feeds_update[static_cast<size_t>(in)] = true;
  }
  // The end of the backward pass: its last node that is not a reduction, an
  // update, or the gather of reduced copies.
  int last_backward = 0;
  std::vector<bool> reduced(g.nodes.size(), false);  // an all-reduce, or a gather of reduced values
  for (const ir::Node& n : g.nodes) {
    bool gathers = n.op == ir::Op::SliceGrad && !n.inputs.empty();
    for (int in : n.inputs) gathers = gathers && reduced[static_cast<size_t>(in)];
    reduced[static_cast<size_t>(n.id)] = n.op == ir::Op::AllReduce || gathers;
    if (!reduced[static_cast<size_t>(n.id)] && n.op != ir::Op::Update) last_backward = n.id;
  }
  struct Item {
    int node, producer;
    int64_t bytes;
    std::string axis;
  };
  std::vector<Item> items;
  for (const ir::Node& n : g.nodes) {
    if (n.op != ir::Op::AllReduce || !feeds_update[static_cast<size_t>(n.id)]) continue;
    int64_t bytes = n.shape.elements().value_or(0) * dtypeBytes(n.dtype);
    items.push_back({n.id, n.inputs[0], bytes, n.name});
  }
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.producer < b.producer; });
  std::map<std::string, int> open;  // axis → index of its filling bucket
  g.buckets.clear();
  for (const Item& it : items) {
    auto o = open.find(it.axis);
    bool fits = o != open.end() && g.buckets[static_cast<size_t>(o->second)].bytes + it.bytes <= cap_bytes;
    if (!fits) {
      ir::Bucket b;
      b.id = static_cast<int>(g.buckets.size());
      b.axis = it.axis;
      g.buckets.push_back(b);
      open[it.axis] = b.id;
    }
    ir::Bucket& b = g.buckets[static_cast<size_t>(open[it.axis])];
    b.members.push_back(it.node);
    b.bytes += it.bytes;
    b.start_after = overlap ? std::max(b.start_after, it.producer) : last_backward;
    g.nodes[static_cast<size_t>(it.node)].index = b.id;
    if (it.bytes >= cap_bytes) open.erase(it.axis);  // an oversized tensor stands alone
  }
}

}  // namespace dtl::passes
