// The epilogue rule. A Contract C of the schedule takes the nodes after it as
// its epilogue (Node::epilogue), computed by its own kernel, when:
// 1. C is f32, of one result, stored in a buffer slot, and read by exactly
//    one node and not by the caller (loss, metrics, gradients, outputs);
// 2. that node is `add(C, bias)` (either order) of C's shape, stored in a
//    slot, where bias is f32, names exactly C's N names (those C has from
//    its second operand) of size > 1, in C's order — a per-column vector, a
//    Linear's bias — and is a parameter or a view of one (the caller's
//    memory, ready before anything runs, in every schedule);
// 3. optionally, when the add is read by exactly one node and not by the
//    caller, that node is a Unary whose fn the target's GEMM runs with our
//    numerics (EpilogueRules::activations; relu on x86, see below), of the
//    add's shape and stored in a slot. An intermediate the chain would have
//    to write for another reader (a pre-activation a gelu's gradient reads)
//    stops the chain before it: that node stays a node (or a region's).
// The absorbed nodes become views of C's storage, which holds the last
// one's value; C reads the bias as its input 2. The chain's values are
// those of the nodes: C rounded to f32, plus the bias in f32, then the
// activation, so the post-ops must be exactly those operations.
//
// Why relu on x86 is ours, not oneDNN's: oneDNN 2.6's eltwise relu (alpha 0,
// the `relu_zero_ns` path of its JIT injector) is vmaxps(x, 0), which gives
// 0 for a NaN (and clip, clip_v2 and a binary max post-op do the same), where
// our relu is `x <= 0 ? 0 : x` and keeps the NaN; a relu with alpha ≠ 0 keeps
// it but maps −inf to −inf·alpha (epilogue_backend_test pins oneDNN's
// behaviour). So the fast backend runs the GEMM (with the bias post-op) over
// panels of C's rows and applies its own relu to each panel right after,
// while the panel is in cache (runtime/kernels/fast/epilogue.cc): relu reads
// and writes no memory of its own. gelu and tanh are not given to the GEMM:
// their pre-activation is read by their gradients in training anyway.
#include "compiler/codegen/fold_epilogues.h"

#include <algorithm>
#include <climits>
#include <set>

namespace dtl::codegen {

namespace {

using ir::Node;
using ir::Op;
using prog::Storage;

class EpilogueFolder {
 public:
  EpilogueFolder(prog::Program& p, const prog::Schedule& s, const EpilogueRules& rules) : p_(p), s_(s), rules_(rules) {
    const size_t n = p.nodes.size();
    readers_.assign(n, {});
    for (const Node& x : p.nodes)
      for (int in : x.inputs) {
        auto& r = readers_[static_cast<size_t>(in)];
        if (std::find(r.begin(), r.end(), x.id) == r.end()) r.push_back(x.id);
      }
    caller_.assign(n, false);
    if (p.loss >= 0) caller_[static_cast<size_t>(p.loss)] = true;
    for (const auto& [name, id] : p.metrics) caller_[static_cast<size_t>(id)] = true;
    for (const auto& [path, id] : p.grads) caller_[static_cast<size_t>(id)] = true;
    for (int id : p.outputs) caller_[static_cast<size_t>(id)] = true;
    runs_.assign(n, false);
    for (const prog::Instr& in : s.instrs)
      if (in.kind == prog::Instr::Run) runs_[static_cast<size_t>(in.id)] = true;
  }

  int run() {
    int folded = 0;
    if (!rules_.bias) return 0;
    for (Node& c : p_.nodes) folded += fold(c);
    return folded;
  }

 private:
  const Node& node(int id) const { return p_.nodes[static_cast<size_t>(id)]; }
  bool slotted(int id) const { return runs_[static_cast<size_t>(id)] && s_.storage[static_cast<size_t>(id)].kind == Storage::Slot; }
  // The single reader of `id`, when the caller does not read it either; else -1.
  int onlyReader(int id) const {
    const auto& r = readers_[static_cast<size_t>(id)];
    return r.size() == 1 && !caller_[static_cast<size_t>(id)] ? r[0] : -1;
  }
  // The caller's memory: a parameter, or a view of one.
  bool fromParameter(int id) const {
    while (s_.storage[static_cast<size_t>(id)].kind == Storage::Alias) id = s_.storage[static_cast<size_t>(id)].index;
    return s_.storage[static_cast<size_t>(id)].kind == Storage::Param;
  }

  static std::vector<std::string> bigNames(const Shape& s, const Shape* only_in = nullptr) {
    std::vector<std::string> out;
    for (const Dim& d : s.dims)
      if (d.size != 1 && (!only_in || only_in->has(d.name))) out.push_back(d.name);
    return out;
  }

  // Rule 2's bias: a vector over C's N names, in C's order.
  bool perColumn(const Node& c, const Node& bias) const {
    if (bias.dtype != DType::F32 || !bias.results.empty()) return false;
    const Shape& b = node(c.inputs[1]).shape;
    const Shape& a = node(c.inputs[0]).shape;
    for (const Dim& d : bias.shape.dims)
      if (!c.shape.has(d.name) || a.has(d.name) || c.shape.dims[static_cast<size_t>(c.shape.find(d.name))].size != d.size)
        return false;
    std::vector<std::string> n_names;
    for (const Dim& d : c.shape.dims)
      if (d.size != 1 && b.has(d.name) && !a.has(d.name)) n_names.push_back(d.name);
    return !n_names.empty() && bigNames(bias.shape) == n_names;
  }

  int fold(Node& c) {
    if (c.op != Op::Contract || c.inputs.size() != 2 || !c.epilogue.empty() || !c.results.empty() ||
        c.dtype != DType::F32 || !slotted(c.id))
      return 0;
    const int a = onlyReader(c.id);  // rule 1
    if (a < 0) return 0;
    const Node& add = node(a);
    if (add.op != Op::Binary || add.fn != "add" || add.inputs.size() != 2 || add.dtype != DType::F32 ||
        add.shape != c.shape || !slotted(a))
      return 0;
    const int which = add.inputs[0] == c.id ? 1 : 0;  // the bias's operand
    const int bias = add.inputs[static_cast<size_t>(which)];
    if (add.inputs[static_cast<size_t>(1 - which)] != c.id || bias == c.id || !perColumn(c, node(bias)) ||
        !fromParameter(bias))
      return 0;
    std::vector<ir::PostOp> ops = {{Op::Binary, "add", 2, a}};
    const int u = onlyReader(a);  // rule 3
    if (u >= 0) {
      const Node& act = node(u);
      auto fn = parseUnaryFn(act.fn);
      if (act.op == Op::Unary && fn && act.inputs.size() == 1 && act.dtype == DType::F32 && act.shape == add.shape &&
          slotted(u) && std::find(rules_.activations.begin(), rules_.activations.end(), *fn) != rules_.activations.end())
        ops.push_back({Op::Unary, act.fn, -1, u});
    }
    c.inputs.push_back(bias);
    c.epilogue = std::move(ops);
    return 1;
  }

  prog::Program& p_;
  const prog::Schedule& s_;
  const EpilogueRules& rules_;
  std::vector<std::vector<int>> readers_;
  std::vector<bool> caller_, runs_;
};

}  // namespace

int foldEpilogues(prog::Program& p, const prog::Schedule& s, const EpilogueRules& rules) {
  return EpilogueFolder(p, s, rules).run();
}

void applyEpilogues(const prog::Program& p, prog::Schedule& s) {
  std::vector<int> owner(p.nodes.size(), -1);  // absorbed node → its contraction
  for (const prog::Instr& in : s.instrs)
    if (in.kind == prog::Instr::Run)
      for (const ir::PostOp& o : p[in.id].epilogue) owner[static_cast<size_t>(o.node)] = in.id;
  std::vector<prog::Instr> kept;
  for (const prog::Instr& in : s.instrs)
    if (in.kind != prog::Instr::Run || owner[static_cast<size_t>(in.id)] < 0) kept.push_back(in);
  s.instrs = std::move(kept);
  for (size_t v = 0; v < owner.size(); ++v)
    if (owner[v] >= 0) s.storage[v] = Storage{Storage::Alias, owner[v], 0};
}

}  // namespace dtl::codegen
