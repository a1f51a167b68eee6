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
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (nodes[k].kind != Kind::Reduce || p.home[k] >= 0) continue;
    int id = static_cast<int>(k);
    p.home[k] = addBuffer(PlanBuffer::Role::Scratch, id, "scratch%" + std::to_string(k));
    stores_of[k].push_back(p.home[k]);
  }
  p.scratch = static_cast<int>(p.buffers.size()) - p.inputs - p.outputs;
  // 2. reduction phases, in node order
  for (size_t k = 0; k < nodes.size(); ++k)
    if (nodes[k].kind == Kind::Reduce) p.phases.push_back({nodes[k].shape, static_cast<int>(k), stores_of[k]});
  // 3. output phases, one per distinct shape (dims and order), in order of first output
  size_t first_output_phase = p.phases.size();
  for (const RegionOutput& o : r.outputs()) {
    if (r.node(o.node).kind == Kind::Reduce) continue;
    const Shape& s = r.node(o.node).shape;
    PlanPhase* phase = nullptr;
    for (size_t i = first_output_phase; i < p.phases.size(); ++i)
      if (p.phases[i].space == s) phase = &p.phases[i];
    if (!phase) {
      p.phases.push_back({s, -1, {}});
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
