// planKernel: buffers and phases of a region (the steps are in kernel_plan.h).
#include "compiler/codegen/kernel_plan.h"

#include <algorithm>

namespace dtl::codegen {

KernelPlan planKernel(const Region& r) {
  KernelPlan p;
  const auto& nodes = r.nodes();
  p.home.assign(nodes.size(), -1);
  auto addBuffer = [&](PlanBuffer::Role role, int node, std::string name) {
    p.buffers.push_back({role, node, std::move(name), r.node(node).shape, r.node(node).dtype});
    return static_cast<int>(p.buffers.size()) - 1;
  };
  // 1. buffers
  for (int id : r.inputs()) p.home[static_cast<size_t>(id)] = addBuffer(PlanBuffer::Role::Input, id, r.node(id).name);
  p.inputs = static_cast<int>(p.buffers.size());
  std::vector<std::vector<int>> stores_of(nodes.size());
  for (const RegionOutput& o : r.outputs()) {
    int b = addBuffer(PlanBuffer::Role::Output, o.node, o.name);
    stores_of[static_cast<size_t>(o.node)].push_back(b);
    if (r.node(o.node).kind == Kind::Reduce && p.home[static_cast<size_t>(o.node)] < 0)
      p.home[static_cast<size_t>(o.node)] = b;
  }
  p.outputs = static_cast<int>(p.buffers.size()) - p.inputs;
  // Per node: the reductions its value reads (through elementwise nodes).
  std::vector<std::vector<int>> needs(nodes.size());
  for (size_t k = 0; k < nodes.size(); ++k) {
    const RegionNode& n = nodes[k];
    if (n.kind == Kind::Reduce) continue;
    for (int x : {n.a, n.b, n.c}) {
      if (x < 0) continue;
      auto& v = needs[k];
      if (nodes[static_cast<size_t>(x)].kind == Kind::Reduce) v.push_back(x);
      v.insert(v.end(), needs[static_cast<size_t>(x)].begin(), needs[static_cast<size_t>(x)].end());
    }
    std::sort(needs[k].begin(), needs[k].end());
    needs[k].erase(std::unique(needs[k].begin(), needs[k].end()), needs[k].end());
  }
  // A reduction's operand to store first: an elementwise value that reads a
  // reduction keeping the dim this one reduces. Decided by the region's
  // structure alone, never by which nodes are outputs, so a region and its
  // probe (every node an output) sum in the same order.
  std::vector<bool> stored(nodes.size(), false);
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (nodes[k].kind != Kind::Reduce) continue;
    const size_t x = static_cast<size_t>(nodes[k].a);
    if (nodes[x].kind == Kind::Input || nodes[x].kind == Kind::Const || nodes[x].kind == Kind::Reduce) continue;
    for (int red : needs[x]) stored[x] = stored[x] || nodes[static_cast<size_t>(red)].shape.has(nodes[k].dim);
  }
  for (size_t k = 0; k < nodes.size(); ++k) {
    bool reduction = nodes[k].kind == Kind::Reduce;
    if ((!reduction && !stored[k]) || p.home[k] >= 0) continue;
    int id = static_cast<int>(k);
    p.home[k] = stores_of[k].empty() || reduction ? addBuffer(PlanBuffer::Role::Scratch, id, "scratch%" + std::to_string(k))
                                                  : stores_of[k].front();
    if (reduction || stores_of[k].empty()) stores_of[k].push_back(p.home[k]);
  }
  p.scratch = static_cast<int>(p.buffers.size()) - p.inputs - p.outputs;
  // 2. reduction phases, in node order, each after the phase that stores its operand if it is stored
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (nodes[k].kind != Kind::Reduce) continue;
    PlanPhase phase{nodes[k].shape, static_cast<int>(k), stores_of[k], {}};
    const size_t x = static_cast<size_t>(nodes[k].a);
    if (stored[x]) {
      if (std::none_of(p.phases.begin(), p.phases.end(), [&](const PlanPhase& q) { return q.stores == stores_of[x]; }))
        p.phases.push_back({nodes[x].shape, -1, stores_of[x], {}});
      phase.loads.push_back(static_cast<int>(x));
    }
    p.phases.push_back(phase);
  }
  // 3. output phases, one per distinct shape (dims and order), in order of first output
  size_t first_output_phase = p.phases.size();
  for (const RegionOutput& o : r.outputs()) {
    if (r.node(o.node).kind == Kind::Reduce || stored[static_cast<size_t>(o.node)]) continue;
    const Shape& s = r.node(o.node).shape;
    PlanPhase* phase = nullptr;
    for (size_t i = first_output_phase; i < p.phases.size(); ++i)
      if (p.phases[i].space == s) phase = &p.phases[i];
    if (!phase) {
      p.phases.push_back({s, -1, {}, {}});
      phase = &p.phases.back();
    }
    for (int b : stores_of[static_cast<size_t>(o.node)])
      if (std::find(phase->stores.begin(), phase->stores.end(), b) == phase->stores.end()) phase->stores.push_back(b);
  }
  // 4. the split
  bool split = !p.phases.empty();
  for (const PlanPhase& phase : p.phases)
    split = split && phase.space.rank() > 0 && phase.space.dims[0] == p.phases[0].space.dims[0];
  if (split) {
    p.split = p.phases[0].space.dims[0].name;
    p.rows = p.phases[0].space.dims[0].size;
  }
  return p;
}

}  // namespace dtl::codegen
