// grad_sync.h: clipping over pieces and the no_sync reduction.
#include "runtime/exec/grad_sync.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "runtime/optim/clip.h"

namespace dtl::rt {

comm::Status clipOverPieces(std::vector<Param>& params, double max_norm,
                            const std::map<std::string, comm::Communicator*>& comms, double* total_norm,
                            const std::vector<float>* local_norms) {
  if (local_norms && local_norms->size() != params.size()) local_norms = nullptr;
  std::vector<std::pair<float*, int64_t>> grads;
  std::vector<float> norms;
  std::map<std::string, std::vector<size_t>> by_axes;  // the axes a gradient is split on → its params
  for (size_t i = 0; i < params.size(); ++i) {
    Param& p = params[i];
    grads.emplace_back(p.step_grad, static_cast<int64_t>(p.grad.size()));
    norms.push_back(local_norms ? (*local_norms)[i] : optim::normTwo(p.step_grad, static_cast<int64_t>(p.grad.size())));
    if (!p.piece.sharded()) continue;
    std::string axes;
    for (size_t a = 0; a < p.piece.placement.size(); ++a)
      if (p.piece.placement[a].kind == layout::Placement::Shard && p.piece.mesh[a].size > 1) axes += p.piece.mesh[a].name + " ";
    by_axes[axes].push_back(i);
  }
  for (const auto& [axes, members] : by_axes) {
    std::vector<float> squares;
    for (size_t i : members) squares.push_back(norms[i] * norms[i]);
    comm::Status s = sumOverShards(squares, params[members[0]].piece, comms);
    if (!s.ok) return s;
    for (size_t k = 0; k < members.size(); ++k) norms[members[k]] = std::sqrt(squares[k]);
  }
  double total = 0;
  if (max_norm > 0)
    total = optim::clipGradNormFrom(grads, norms, max_norm);
  else if (!norms.empty())
    total = optim::normTwo(norms.data(), static_cast<int64_t>(norms.size()));
  if (total_norm) *total_norm = total;
  return {};
}

std::map<std::string, std::vector<size_t>> bucketReducedParams(const prog::Program& g, const std::vector<Param>& params) {
  std::vector<std::vector<int>> readers(g.nodes.size());
  for (const ir::Node& n : g.nodes)
    for (int x : n.inputs) readers[static_cast<size_t>(x)].push_back(n.id);
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < params.size(); ++i) index[params[i].spec->path] = i;
  std::map<std::string, std::set<size_t>> by_axis;
  for (const prog::Group& grp : g.groups) {
    if (grp.bucket < 0 || grp.op != ir::Op::AllReduce) continue;  // ZeRO's scatters sum in the program
    std::vector<int> todo(grp.members.begin(), grp.members.end());
    while (!todo.empty()) {  // a member's readers, through the gathers of stacked copies, to its update
      const int v = todo.back();
      todo.pop_back();
      for (int r : readers[static_cast<size_t>(v)]) {
        const ir::Node& n = g[r];
        if (n.op == ir::Op::Update && index.count(n.name)) by_axis[grp.axis].insert(index[n.name]);
        if (n.op == ir::Op::SliceGrad) todo.push_back(r);
      }
    }
  }
  std::map<std::string, std::vector<size_t>> out;
  for (const auto& [axis, members] : by_axis) out[axis].assign(members.begin(), members.end());
  return out;
}

std::vector<bool> scatterReducedParams(const prog::Program& g, const std::vector<Param>& params) {
  std::vector<bool> scattered_node(g.nodes.size(), false);
  for (const prog::Group& grp : g.groups)
    if (grp.bucket >= 0 && grp.op == ir::Op::ReduceScatter)
      for (int m : grp.members) scattered_node[static_cast<size_t>(m)] = true;
  // Through the gathers of stacked copies' pieces.
  for (const ir::Node& n : g.nodes) {
    if (n.op != ir::Op::SliceGrad) continue;
    bool all = !n.inputs.empty();
    for (int x : n.inputs) all = all && scattered_node[static_cast<size_t>(x)];
    scattered_node[static_cast<size_t>(n.id)] = all;
  }
  std::map<std::string, int> grad_of(g.grads.begin(), g.grads.end());
  std::vector<bool> out(params.size(), false);
  for (size_t i = 0; i < params.size(); ++i) {
    auto it = grad_of.find(params[i].spec->path);
    out[i] = it != grad_of.end() && scattered_node[static_cast<size_t>(it->second)];
  }
  return out;
}

comm::Status reduceAccumulated(std::vector<Param>& params, const std::map<std::string, std::vector<size_t>>& by_axis,
                               const std::map<std::string, comm::Communicator*>& comms) {
  for (const auto& [axis, members] : by_axis) {
    auto c = comms.find(axis);
    if (c == comms.end() || !c->second) continue;  // a one-rank axis
    std::vector<float> flat;
    for (size_t i : members) flat.insert(flat.end(), params[i].grad.begin(), params[i].grad.end());
    comm::Status st = c->second->allReduce(flat.data(), static_cast<int64_t>(flat.size()))->wait();
    if (!st.ok) return {false, "over `" + axis + "`: " + st.message};
    size_t at = 0;
    for (size_t i : members) {
      std::copy(flat.begin() + static_cast<std::ptrdiff_t>(at),
                flat.begin() + static_cast<std::ptrdiff_t>(at + params[i].grad.size()), params[i].grad.begin());
      at += params[i].grad.size();
    }
  }
  return {};
}

}  // namespace dtl::rt
