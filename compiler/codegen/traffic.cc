// traffic.h: bytes in and out of the step's non-contraction kernels.
#include "compiler/codegen/traffic.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <vector>

namespace dtl::codegen {

namespace {

using ir::Node;
using ir::Op;

int64_t bytesOf(const Node& n) {
  const std::optional<int64_t> e = n.shape.elements();
  return e ? *e * dtypeBytes(n.dtype) : 0;
}

// 2·M·N·K: every name of either operand is an M, N or K extent exactly once.
int64_t contractionFlops(const prog::Program& p, const Node& n) {
  std::set<std::string> seen;
  int64_t product = 1;
  for (int x : {n.inputs.at(0), n.inputs.at(1)})  // not a base it adds into (its names are M and N)
    for (const Dim& d : p[x].shape.dims)
      if (seen.insert(d.name).second) product *= d.size;
  return 2 * product;
}

// A node that runs a kernel of its own when not fused (not a feed, a view,
// a collective or a contraction).
bool isKernel(const prog::Program& p, const Node& n) {
  if (n.op == Op::Input || n.op == Op::Param || n.op == Op::Contract || n.op == Op::Update) return false;
  if (ir::isConversion(n.op) && n.op != Op::LocalSlice) return false;
  // A view aliases its own operand; a value computed into a consumer's
  // storage (a stacked gradient's block) is still a kernel's work.
  const prog::Storage& s = p.train.storage[static_cast<size_t>(n.id)];
  return !(s.kind == prog::Storage::Alias && !n.inputs.empty() && s.index == n.inputs[0]);
}

// Whether `x` was computed straight into value `into`'s storage (a stacked
// copy's gradient in its block of the stack, a dense gradient a scatter adds to).
bool computedInto(const prog::Program& p, int x, int into) {
  const prog::Storage& s = p.train.storage[static_cast<size_t>(x)];
  return s.kind == prog::Storage::Alias && s.index == into;
}

int64_t nodeBytes(const prog::Program& p, const Node& n) {
  // An embedding reads the ids and the rows it gathers, not the whole table.
  if (n.op == Op::Embed) return bytesOf(p[n.inputs.at(1)]) + 2 * bytesOf(n);
  // Added into a dense gradient in place: the ids, dy, and the rows it
  // reads and writes back (at most one per dy row).
  if (n.op == Op::EmbedGrad && n.inputs.size() == 3 && computedInto(p, n.inputs[2], n.id))
    return bytesOf(p[n.inputs[0]]) + 3 * bytesOf(p[n.inputs[1]]);
  // The stack of a repeat's gradients: a copy computed in its block moves nothing here.
  if (n.op == Op::SliceGrad) {
    int64_t b = bytesOf(n);  // the blocks no copy covers are zeroed
    for (int x : n.inputs) {
      b -= bytesOf(p[x]);
      if (!computedInto(p, x, n.id)) b += 2 * bytesOf(p[x]);  // read, written into its block
    }
    return b;
  }
  int64_t b = bytesOf(n);
  for (const ir::Result& r : n.results) b += r.shape.elements().value_or(0) * dtypeBytes(r.dtype);  // attention's
  for (int x : n.inputs) b += bytesOf(p[x]);
  return b;
}

// A contraction that adds its product into a base (the
// accumulate-into-contraction pass): the GEMM's write is the GEMM's, but its
// epilogue reads the base, non-GEMM bytes. A base not computed in place is
// first copied into the contraction's storage (read and written).
int64_t accumulateBytes(const prog::Program& p, const Node& n) {
  const int base = ir::accumulationBase(n);
  return bytesOf(p[base]) * (computedInto(p, base, n.id) ? 1 : 3);
}

int64_t regionBytes(const prog::Program& p, const prog::Fused& r) {
  int64_t b = 0;
  for (int x : r.inputs) b += bytesOf(p[x]);
  for (int x : r.outputs) b += bytesOf(p[x]);
  return b;
}

}  // namespace

StepTraffic stepTraffic(const prog::Program& p, int state_per_param) {
  StepTraffic t;
  for (const prog::Instr& in : p.train.instrs) {
    if (in.kind == prog::Instr::Fused) {
      const prog::Fused& r = p.fused[static_cast<size_t>(in.id)];
      for (const std::vector<int>* members : {&r.nodes, &r.folded})  // folded: its constants and broadcasts
        for (int id : *members)
          if (isKernel(p, p[id])) t.node_by_node += nodeBytes(p, p[id]), ++t.kernels_node_by_node;
      t.fused += regionBytes(p, r);
      t.fused_by_kind["regions"] += regionBytes(p, r);
      ++t.kernels_fused;
      continue;
    }
    if (in.kind != prog::Instr::Run) continue;
    const Node& n = p[in.id];
    if (n.op == Op::Contract) t.contraction_flops += contractionFlops(p, n);
    if (!n.epilogue.empty()) {
      // Its epilogue's nodes would each be a kernel; run by the node's own,
      // they add only the operands they read (a bias) and the outputs they
      // write into their own storage (a gelu beside its pre-activation, a
      // cross-entropy's gradient): the rest is the GEMM's (or the node's) own.
      int64_t operands = 0;
      for (const ir::PostOp& o : n.epilogue) {
        t.node_by_node += nodeBytes(p, p[o.node]), ++t.kernels_node_by_node;
        // (A contraction's; another node's kernel counts every input it reads already.)
        if (o.operand >= 0 && n.op == Op::Contract) operands += bytesOf(p[n.inputs.at(static_cast<size_t>(o.operand))]);
        if (o.own) operands += bytesOf(p[o.node]);
      }
      t.fused += operands;
      t.fused_by_kind["epilogues"] += operands;
    }
    if (n.op == Op::Contract && ir::accumulationBase(n) >= 0) {
      const int64_t b = accumulateBytes(p, n);
      t.node_by_node += b, t.fused += b;
      t.fused_by_kind["contract_accumulate"] += b;
    }
    if (!isKernel(p, n)) continue;
    const int64_t b = nodeBytes(p, n);
    t.node_by_node += b, t.fused += b;
    t.fused_by_kind[ir::opName(n.op)] += b;
    ++t.kernels_node_by_node, ++t.kernels_fused;
  }
  for (const prog::Instr& in : p.update.instrs) {
    if (in.kind != prog::Instr::Run || p[in.id].op != Op::Update) continue;
    // reads the parameter, its gradient and each state tensor; writes the parameter and each state tensor
    t.update += bytesOf(p[p[in.id].inputs.at(0)]) * (3 + 2 * state_per_param);
  }
  return t;
}

template <class Mib>
std::string byKind(const StepTraffic& t, Mib mib) {
  std::vector<std::pair<int64_t, std::string>> kinds;
  for (const auto& [kind, b] : t.fused_by_kind) kinds.emplace_back(-b, kind);
  std::sort(kinds.begin(), kinds.end());
  std::string out = "# fused traffic by kernel:";
  for (size_t k = 0; k < kinds.size(); ++k) out += (k ? ", " : " ") + kinds[k].second + " " + mib(-kinds[k].first);
  return out + "\n";
}

std::string printTraffic(const StepTraffic& t) {
  auto mib = [](int64_t b) {
    char s[32];
    std::snprintf(s, sizeof s, "%.1f MiB", static_cast<double>(b) / (1024.0 * 1024.0));
    return std::string(s);
  };
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.2f",
                t.node_by_node > 0 ? static_cast<double>(t.fused) / static_cast<double>(t.node_by_node) : 1.0);
  return "# non-GEMM traffic per training step (bytes read + written by kernels other than contractions): node by node " +
         mib(t.node_by_node) + " in " + std::to_string(t.kernels_node_by_node) + " kernels, fused " + mib(t.fused) +
         " in " + std::to_string(t.kernels_fused) + " kernels (" + ratio + "x); optimiser update " + mib(t.update) +
         "; contractions " + std::to_string(t.contraction_flops / 1000000) + " MFLOP\n" + byKind(t, mib);
}

}  // namespace dtl::codegen
