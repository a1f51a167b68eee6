// planKernel: buffers and phases of a region (the steps are in kernel_plan.h).
#include "compiler/codegen/kernel_plan.h"

#include <algorithm>
#include <set>

namespace dtl::codegen {

namespace {

using Nodes = std::vector<RegionNode>;

std::vector<std::vector<int>> consumersOf(const Nodes& nodes) {
  std::vector<std::vector<int>> cons(nodes.size());
  for (size_t k = 0; k < nodes.size(); ++k)
    for (int x : {nodes[k].a, nodes[k].b, nodes[k].c})
      if (x >= 0 && (cons[static_cast<size_t>(x)].empty() || cons[static_cast<size_t>(x)].back() != static_cast<int>(k)))
        cons[static_cast<size_t>(x)].push_back(static_cast<int>(k));
  return cons;
}

// Per node: whether a value that reads it (transitively) has dim `d`.
// Consumers come after their operands, so one backward pass.
std::vector<bool> readByDim(const Nodes& nodes, const std::vector<std::vector<int>>& cons, const std::string& d) {
  std::vector<bool> by(nodes.size(), false);
  for (size_t k = nodes.size(); k-- > 0;)
    for (int c : cons[k]) by[k] = by[k] || nodes[static_cast<size_t>(c)].shape.has(d) || by[static_cast<size_t>(c)];
  return by;
}

// Step 5's deferred sums over `d` (kernel_plan.h). inner[k]: a Sum whose only
// consumer is a Sum, so that one's chain folds through it.
std::vector<FoldedSum> foldedSums(const Region& r, const std::vector<std::vector<int>>& cons, const std::string& d,
                                  std::vector<bool>* skip) {
  const Nodes& nodes = r.nodes();
  std::vector<bool> output(nodes.size(), false), inner(nodes.size(), false);
  for (const RegionOutput& o : r.outputs()) output[static_cast<size_t>(o.node)] = true;
  auto isSum = [&](int k) { return nodes[static_cast<size_t>(k)].kind == Kind::Reduce && nodes[static_cast<size_t>(k)].reduce == ReduceFn::Sum; };
  for (size_t k = 0; k < nodes.size(); ++k)
    inner[k] = isSum(static_cast<int>(k)) && cons[k].size() == 1 && isSum(cons[k][0]);
  std::vector<FoldedSum> folded;
  std::vector<bool> deferred(nodes.size(), false);
  const std::vector<bool> read_by_d = readByDim(nodes, cons, d);
  for (size_t k = 0; k < nodes.size(); ++k) {
    const RegionNode& n = nodes[k];
    if (n.kind != Kind::Reduce || n.reduce == ReduceFn::Max || (inner[k] && !output[k])) continue;
    FoldedSum f{static_cast<int>(k), n.a, {n.dim}, -1};
    while (inner[static_cast<size_t>(f.operand)]) {
      f.dims.insert(f.dims.begin(), nodes[static_cast<size_t>(f.operand)].dim);
      f.operand = nodes[static_cast<size_t>(f.operand)].a;
    }
    const Shape& x = nodes[static_cast<size_t>(f.operand)].shape;
    if (x.rank() == 0 || x.dims[0].name != d || std::find(f.dims.begin(), f.dims.end(), d) == f.dims.end()) continue;
    if (read_by_d[k]) continue;
    deferred[k] = true;
    folded.push_back(std::move(f));
  }
  // An inner Sum is computed only as an output, or where its chain's last Sum is not deferred.
  skip->assign(nodes.size(), false);
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (!inner[k] || output[k]) continue;
    size_t top = static_cast<size_t>(cons[k][0]);
    while (inner[top] && !output[top]) top = static_cast<size_t>(cons[top][0]);
    (*skip)[k] = deferred[top];
  }
  return folded;
}

// Rows per chunk from the region's nodes alone: about kChunkWork node
// evaluations, so a region and its probe (more outputs) cut the same chunks.
int64_t chunkRows(const Nodes& nodes, const Dim& split) {
  if (split.size <= 0) return 1;
  int64_t per_row = 0;
  for (const RegionNode& n : nodes)
    if (n.kind != Kind::Input && n.kind != Kind::Const && n.shape.has(split.name))
      per_row += n.shape.elements().value_or(0) / split.size;
  return std::max<int64_t>((kChunkWork + std::max<int64_t>(per_row, 1) - 1) / std::max<int64_t>(per_row, 1), 1);
}

PlanPhase makePhase(const Shape& space, int reduction, std::vector<int> stores = {}, std::vector<int> loads = {}) {
  PlanPhase p;
  p.space = space;
  p.reduction = reduction;
  p.stores = std::move(stores);
  p.loads = std::move(loads);
  return p;
}

// The plan with the sums over `defer` deferred ("": none).
KernelPlan planWith(const Region& r, const std::string& defer) {
  KernelPlan p;
  const auto& nodes = r.nodes();
  const auto cons = consumersOf(nodes);
  std::vector<bool> skip(nodes.size(), false), deferred(nodes.size(), false), late(nodes.size(), false);
  if (!defer.empty()) p.folded = foldedSums(r, cons, defer, &skip);
  for (const FoldedSum& f : p.folded) deferred[static_cast<size_t>(f.node)] = true;
  // late: reads a deferred sum, so computed in the tail
  for (size_t k = 0; k < nodes.size(); ++k)  // a deferred sum reads its chain's operand, never late
    for (int x : {nodes[k].a, nodes[k].b, nodes[k].c})
      if (x >= 0 && (deferred[static_cast<size_t>(x)] || late[static_cast<size_t>(x)]) && !skip[k] && !deferred[k])
        late[k] = true;
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
  // probe (every node an output) sum in the same order. A deferred sum needs
  // none: it adds its operand where that is evaluated anyway.
  std::vector<bool> stored(nodes.size(), false);
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (nodes[k].kind != Kind::Reduce || skip[k] || deferred[k] || late[k]) continue;
    const size_t x = static_cast<size_t>(nodes[k].a);
    if (nodes[x].kind == Kind::Input || nodes[x].kind == Kind::Const || nodes[x].kind == Kind::Reduce) continue;
    for (int red : needs[x]) stored[x] = stored[x] || nodes[static_cast<size_t>(red)].shape.has(nodes[k].dim);
  }
  for (size_t k = 0; k < nodes.size(); ++k) {
    bool reduction = nodes[k].kind == Kind::Reduce && !skip[k];
    if ((!reduction && !stored[k]) || p.home[k] >= 0) continue;
    int id = static_cast<int>(k);
    p.home[k] = stores_of[k].empty() || reduction ? addBuffer(PlanBuffer::Role::Scratch, id, "scratch%" + std::to_string(k))
                                                  : stores_of[k].front();
    if (reduction || stores_of[k].empty()) stores_of[k].push_back(p.home[k]);
  }
  // 4's chunks (needed for the partials' shapes), then the partials
  const RegionNode* lead = nullptr;
  for (const FoldedSum& f : p.folded) lead = &nodes[static_cast<size_t>(f.operand)];
  if (lead) {
    p.chunk_rows = chunkRows(nodes, lead->shape.dims[0]);
    p.chunks = (lead->shape.dims[0].size + p.chunk_rows - 1) / p.chunk_rows;
  }
  for (FoldedSum& f : p.folded) {
    Shape s = r.node(f.node).shape;
    s.dims.insert(s.dims.begin(), Dim{kChunkDim, p.chunks});
    p.buffers.push_back({PlanBuffer::Role::Scratch, f.node, "partial%" + std::to_string(f.node), s, DType::F32});
    f.partial = static_cast<int>(p.buffers.size()) - 1;
  }
  p.scratch = static_cast<int>(p.buffers.size()) - p.inputs - p.outputs;
  // 2. reduction phases, in node order, each after the phase that stores its operand if it is stored
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (nodes[k].kind != Kind::Reduce || skip[k] || deferred[k] || late[k]) continue;
    PlanPhase phase = makePhase(nodes[k].shape, static_cast<int>(k), stores_of[k]);
    const size_t x = static_cast<size_t>(nodes[k].a);
    if (stored[x]) {
      if (std::none_of(p.phases.begin(), p.phases.end(), [&](const PlanPhase& q) { return q.stores == stores_of[x]; }))
        p.phases.push_back(makePhase(nodes[x].shape, -1, stores_of[x]));
      phase.loads.push_back(static_cast<int>(x));
    }
    p.phases.push_back(phase);
  }
  // 3. output phases, one per distinct shape (dims and order), in order of first output
  auto outputPhases = [&](bool tail) {
    size_t first = p.phases.size();
    for (const RegionOutput& o : r.outputs()) {
      const size_t id = static_cast<size_t>(o.node);
      if (r.node(o.node).kind == Kind::Reduce || stored[id] || late[id] != tail) continue;
      const Shape& s = r.node(o.node).shape;
      PlanPhase* phase = nullptr;
      for (size_t i = first; i < p.phases.size(); ++i)
        if (p.phases[i].space == s) phase = &p.phases[i];
      if (!phase) {
        p.phases.push_back(makePhase(s, -1));
        p.phases.back().tail = tail;
        phase = &p.phases.back();
      }
      for (int b : stores_of[id])
        if (std::find(phase->stores.begin(), phase->stores.end(), b) == phase->stores.end()) phase->stores.push_back(b);
    }
  };
  outputPhases(false);
  // 5. each deferred sum's operand adds into its partial where it is evaluated
  // (after every phase that computes a reduction it reads: not in a stored
  // operand's phase that runs before a reduction the operand needs)
  std::vector<size_t> phase_of(nodes.size(), 0);
  for (size_t i = 0; i < p.phases.size(); ++i)
    if (p.phases[i].reduction >= 0) phase_of[static_cast<size_t>(p.phases[i].reduction)] = i;
  // An operand that is itself a reduction is read from its scratch, so not
  // before its own phase (which `needs`, listing the reductions a value
  // reads, leaves out for a reduction's own).
  for (const FoldedSum& f : p.folded) {
    const size_t operand = static_cast<size_t>(f.operand);
    const Shape& x = nodes[operand].shape;
    const std::vector<int>& reads = needs[operand];
    const bool reduced = nodes[operand].kind == Kind::Reduce;
    auto it = std::find_if(p.phases.begin(), p.phases.end(), [&](const PlanPhase& q) {
      const size_t i = static_cast<size_t>(&q - p.phases.data());
      return q.space == x && (q.reduction == -1 || q.reduction == f.operand) && (!reduced || phase_of[operand] <= i) &&
             std::all_of(reads.begin(), reads.end(), [&](int red) { return phase_of[static_cast<size_t>(red)] < i; });
    });
    if (it == p.phases.end()) it = p.phases.insert(p.phases.end(), makePhase(x, -1));
    it->partials.push_back(f.node);
  }
  for (size_t k = 0; k < nodes.size(); ++k) {  // the tail: combines, then what reads them
    if (nodes[k].kind != Kind::Reduce || skip[k] || !(deferred[k] || late[k])) continue;
    p.phases.push_back(makePhase(nodes[k].shape, static_cast<int>(k), stores_of[k]));
    p.phases.back().combine = deferred[k];
    p.phases.back().tail = true;
  }
  outputPhases(true);
  // 4. the split
  bool split = !p.phases.empty() && !p.phases.front().tail;
  for (const PlanPhase& phase : p.phases)
    split = split && (phase.tail || (phase.space.rank() > 0 && phase.space.dims[0] == p.phases[0].space.dims[0]));
  if (split) {
    p.split = p.phases[0].space.dims[0].name;
    p.rows = p.phases[0].space.dims[0].size;
    if (!lead) {
      p.chunk_rows = chunkRows(nodes, p.phases[0].space.dims[0]);
      p.chunks = (p.rows + p.chunk_rows - 1) / p.chunk_rows;
    }
  }
  return p;
}

}  // namespace

// Deferral first, even where the plain plan splits (a region of the sum
// alone splits over the kept dims, summing strided along the leading one): a
// region and its probe, whose plain plans differ, then sum in the same order.
KernelPlan planKernel(const Region& r) {
  std::set<std::string> tried;
  for (const RegionNode& n : r.nodes()) {  // a leading dim that some sum removes
    if (n.kind != Kind::Reduce || tried.count(n.dim)) continue;
    tried.insert(n.dim);
    KernelPlan p = planWith(r, n.dim);
    if (!p.folded.empty() && p.split == n.dim) return p;
  }
  return planWith(r, "");
}

}  // namespace dtl::codegen
