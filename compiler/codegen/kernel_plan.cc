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
  // 3. output phases, one per distinct shape (dims and order), in order of first output
  std::vector<PlanPhase> outputs;
  std::vector<int> output_phase(nodes.size(), -1);  // per elementwise output node
  for (const RegionOutput& o : r.outputs()) {
    if (r.node(o.node).kind == Kind::Reduce) continue;
    const Shape& s = r.node(o.node).shape;
    size_t i = 0;
    while (i < outputs.size() && outputs[i].space != s) ++i;
    if (i == outputs.size()) outputs.push_back({s, -1, {}, {}});
    output_phase[static_cast<size_t>(o.node)] = static_cast<int>(i);
    for (int b : stores_of[static_cast<size_t>(o.node)])
      if (std::find(outputs[i].stores.begin(), outputs[i].stores.end(), b) == outputs[i].stores.end())
        outputs[i].stores.push_back(b);
  }
  // 2 and 3 in order: reductions in node order, an output phase moved up to
  // just before a reduction that reads one of its outputs when every
  // reduction the phase needs is done by then.
  std::vector<std::vector<int>> needs(nodes.size());  // per node: the reductions its value reads
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
  std::vector<bool> placed(outputs.size(), false), reduced(nodes.size(), false);
  auto ready = [&](size_t i) {
    for (const RegionOutput& o : r.outputs())
      if (output_phase[static_cast<size_t>(o.node)] == static_cast<int>(i))
        for (int red : needs[static_cast<size_t>(o.node)])
          if (!reduced[static_cast<size_t>(red)]) return false;
    return true;
  };
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (nodes[k].kind != Kind::Reduce) continue;
    PlanPhase phase{nodes[k].shape, static_cast<int>(k), stores_of[k], {}};
    int x = nodes[k].a, i = output_phase[static_cast<size_t>(x)];
    Kind xk = nodes[static_cast<size_t>(x)].kind;
    bool computed = xk != Kind::Input && xk != Kind::Const;  // an input's own buffer is read anyway
    if (computed && i >= 0 && (placed[static_cast<size_t>(i)] || ready(static_cast<size_t>(i)))) {
      if (!placed[static_cast<size_t>(i)]) p.phases.push_back(outputs[static_cast<size_t>(i)]);
      placed[static_cast<size_t>(i)] = true;
      phase.loads.push_back(x);
      p.home[static_cast<size_t>(x)] = stores_of[static_cast<size_t>(x)].front();
    }
    p.phases.push_back(phase);
    reduced[k] = true;
  }
  for (size_t i = 0; i < outputs.size(); ++i)
    if (!placed[i]) p.phases.push_back(outputs[i]);
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
