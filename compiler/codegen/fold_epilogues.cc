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
//    stops the chain before it: that node stays a node (or a region's);
// 3b. else (the add is read by others too — a gelu's gradient reads its
//    pre-activation — or its one reader is not an in-place activation),
//    the one reader that is a Unary whose fn the target computes from a
//    panel of C (EpilogueRules::kept_input_activations), of the add's shape
//    and stored in a slot, is computed into its own storage (PostOp::own)
//    while C keeps the add's value: the activation's region, which read the
//    pre-activation back and wrote its result, goes.
// The absorbed nodes become views of C's storage, which holds the last
// in-place one's value; C reads the bias as its input 2. The chain's values
// are those of the nodes: C rounded to f32, plus the bias in f32, then the
// activation, so the post-ops must be exactly those operations.
//
// 4. A CrossEntropy X, stored in a slot, whose gradient G (CrossEntropyGrad
//    of X's logits, labels and classes, stored in a slot) has a dy that is a
//    scalar f32 Const (the loss's seed, or its mean's factor) takes G as its
//    epilogue (EpilogueRules::cross_entropy_grad): X's kernel writes G's own
//    storage from each logits row it has just read, so the logits are read
//    once, not twice, and G's bits are the node's. X reads dy as its input
//    2; the constant runs before X. The evaluation schedule computes no G:
//    there X's kernel computes the loss alone.
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
    for (Node& c : p_.nodes) folded += (rules_.bias ? fold(c) : 0) + (rules_.cross_entropy_grad ? foldGradient(c) : 0);
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
    if (u >= 0 && activation(add, u, rules_.activations)) {
      ops.push_back({Op::Unary, node(u).fn, -1, u});
    } else {  // rule 3b
      int kept = -1, candidates = 0;
      for (int r : readers_[static_cast<size_t>(a)])
        if (activation(add, r, rules_.kept_input_activations)) kept = r, ++candidates;
      if (candidates == 1) ops.push_back({Op::Unary, node(kept).fn, -1, kept, /*own=*/true});
    }
    c.inputs.push_back(bias);
    c.epilogue = std::move(ops);
    return 1;
  }

  // Node `u` is a Unary of `x`, of x's shape, stored in a slot, whose fn is one of `fns`.
  bool activation(const Node& x, int u, const std::vector<UnaryFn>& fns) const {
    const Node& act = node(u);
    auto fn = parseUnaryFn(act.fn);
    return act.op == Op::Unary && fn && act.inputs.size() == 1 && act.inputs[0] == x.id && act.dtype == DType::F32 &&
           act.shape == x.shape && slotted(u) && std::find(fns.begin(), fns.end(), *fn) != fns.end();
  }

  // Rule 4: a cross-entropy computes its gradient.
  int foldGradient(Node& x) {
    if (x.op != Op::CrossEntropy || x.inputs.size() != 2 || !x.epilogue.empty() || !x.results.empty() ||
        x.names.size() != 1 || !slotted(x.id))
      return 0;
    for (int g : readers_[static_cast<size_t>(x.inputs[0])]) {
      const Node& grad = node(g);
      if (grad.op != Op::CrossEntropyGrad || grad.inputs.size() != 3 || grad.inputs[0] != x.inputs[0] ||
          grad.inputs[1] != x.inputs[1] || grad.names != x.names || grad.dtype != DType::F32 ||
          grad.shape != node(x.inputs[0]).shape || !grad.results.empty() || !slotted(g) || taken_.count(g))
        continue;
      const Node& dy = node(grad.inputs[2]);
      if (dy.op != Op::Const || dy.dtype != DType::F32 || dy.shape.elements().value_or(0) != 1 || !runs_[static_cast<size_t>(dy.id)])
        continue;
      x.inputs.push_back(dy.id);
      x.epilogue = {{Op::CrossEntropyGrad, "", 2, g, /*own=*/true}};
      taken_.insert(g);  // a second cross-entropy of the same logits (a metric) computes it no more
      return 1;
    }
    return 0;
  }

  prog::Program& p_;
  const prog::Schedule& s_;
  const EpilogueRules& rules_;
  std::vector<std::vector<int>> readers_;
  std::vector<bool> caller_, runs_;
  std::set<int> taken_;  // gradients a cross-entropy computes
};

}  // namespace

int foldEpilogues(prog::Program& p, const prog::Schedule& s, const EpilogueRules& rules) {
  return EpilogueFolder(p, s, rules).run();
}

void applyEpilogues(const prog::Program& p, prog::Schedule& s) {
  const size_t n = p.nodes.size();
  std::vector<int> owner(n, -1);  // absorbed node → the node that computes it
  std::vector<bool> own(n, false);
  for (const prog::Instr& in : s.instrs)
    if (in.kind == prog::Instr::Run)
      for (const ir::PostOp& o : p[in.id].epilogue) {
        owner[static_cast<size_t>(o.node)] = in.id;
        own[static_cast<size_t>(o.node)] = o.own;
      }
  // Each node with an epilogue, preceded by the constants it reads that the
  // schedule ran after it, or not at all.
  std::vector<prog::Instr> kept;
  std::vector<bool> done(n, false);
  for (size_t k = 0; k < s.instrs.size(); ++k) {
    const prog::Instr& in = s.instrs[k];
    if (in.kind != prog::Instr::Run) {
      kept.push_back(in);
      continue;
    }
    if (owner[static_cast<size_t>(in.id)] >= 0 || done[static_cast<size_t>(in.id)]) continue;
    for (const ir::PostOp& o : p[in.id].epilogue) {
      const int x = o.operand < 0 ? -1 : p[in.id].inputs.at(static_cast<size_t>(o.operand));
      if (x < 0 || p[x].op != Op::Const || done[static_cast<size_t>(x)]) continue;
      // Later in the schedule, or not in it at all (evaluation, which computes no gradient, has no dy).
      if (s.storage[static_cast<size_t>(x)].kind == Storage::None) s.storage[static_cast<size_t>(x)] = Storage{Storage::Slot, -1, 0};
      kept.push_back(prog::Instr{prog::Instr::Run, x, {}});
      done[static_cast<size_t>(x)] = true;
    }
    kept.push_back(in);
    done[static_cast<size_t>(in.id)] = true;
  }
  s.instrs = std::move(kept);
  for (size_t v = 0; v < n; ++v)
    if (owner[v] >= 0 && !own[v]) s.storage[v] = Storage{Storage::Alias, owner[v], 0};
}

}  // namespace dtl::codegen
