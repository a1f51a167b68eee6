// The fusion pass. Rules, in the order they are applied:
//
// 1. Fusable nodes. A node of the training schedule is fusable when the
//    region IR (region.h) computes exactly it, over its local shape, in its
//    dim order:
//    - Unary (every fn of region.h), Binary (arithmetic on f32; a comparison
//      gives Bool), Reduce sum|mean|max over one name, ReduceTo that removes
//      one name (with FuseRules::several_name_sums, on by default, one or
//      more: a sum over each in turn, a bias's gradient over batch and seq), Softmax and LogSoftmax (region.h's max → sub → exp →
//      sum → div|log chain), UnaryGrad (region.h's unaryGrad: one node, f'
//      as one formula), SoftmaxGrad and LogSoftmaxGrad, Normalize,
//      RmsNormalize and their *Grad over one name (region.h's composites, the
//      reference's formulas in f32 with eps an f32 constant);
//    - whose operands are f32 (a Bool or i32 value is never read inside a
//      region: a comparison is always a region output) and whose result's
//      shape, as the region IR derives it (broadcast by name, the reduced dim
//      dropped), is the node's own shape, names in the same order.
//    With FuseRules::transcendentals false (not `--kernels jit`'s rule), the
//    transcendental Unary fns, Softmax, LogSoftmax and LogSoftmaxGrad are not
//    fusable either; with FuseRules::libm_gradients false, neither is the
//    UnaryGrad of a fn whose derivative calls exp, erf or tanh (region.h's
//    gradNeedsLibm). `--kernels jit` fuses both. Everything else runs as it does today:
//    contractions, embeddings, attention, dropout, cross-entropy, MaxGrad and
//    the other *Grad kinds, collectives, views (Slice, Reshape, LocalSlice,
//    Result), casts, inputs and parameters; a node of several results
//    (ir::Node::results) never is.
// 2. Folded nodes. A Const f32 scalar read by a fused node is a constant of
//    that node's region (it is a region member when every reader is in that
//    region). An Align is *folded* — its readers read its operand, which the
//    region IR broadcasts and permutes by name — when it is not read by the
//    caller (loss, metrics, gradients) and every reader is fusable with the
//    Align folded (a fixpoint: unfolding one Align can make its readers
//    unfusable). A folded Align is a member of its first reader's region.
// 3. Regions grow along producer → consumer edges only, in schedule order:
//    a fusable node joins the regions of its fused operands (merging them)
//    when every value the merged region reads from outside is ready (its
//    producer has run, or its communication group has been waited for)
//    before the merged region's first node; else it joins the latest of
//    those regions for which that holds; else it joins the latest region
//    that reads one of its operands, where that holds (so the operand is
//    read once: a LayerNorm's gradient, its gain's and the bias's gradient
//    read the same dy); else it starts a region of its own (always sound:
//    its operands precede it). The region runs where its first
//    node runs, so it never needs a value computed later.
// 4. A member is a region output when a node outside the region reads it,
//    the caller reads it, or nothing reads it; a value from outside is a
//    region input. A region of one node is still a kernel.
// 5. Recomputed norms. A region that reads a Normalize or RmsNormalize of
//    another region, and reads (or computes) that norm's input too,
//    computes the norm again instead of reading it (Fused::recomputed): a
//    LayerNorm's gradient region reads x for its own formula, so its gain's
//    gradient needs no stored x̂, and a norm only such regions read is no
//    output of its own region (rule 4 does not count them). The same f32
//    formula twice: the forward's and the gradient's x̂ agree to rounding.
// 0. Before these, the planner hands a Linear's bias add (and, where the
//    target's GEMM computes it as we do, the activation after it) to its
//    contraction as an epilogue (fold_epilogues.cc, FuseRules::epilogues):
//    those nodes run no instruction, are ready where the contraction runs,
//    and are never fused; a region reads the epilogue's result as an input.
#include "compiler/codegen/fuse_regions.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

namespace dtl::codegen {

namespace {

using ir::Node;
using ir::Op;

class Fuser {
 public:
  Fuser(const prog::Program& p, const prog::Schedule& s, const FuseRules& rules)
      : p_(p), s_(s), rules_(rules), n_(p.nodes.size()) {}

  Fusion run() {
    positions();
    readersAndCallers();
    fusability();
    group();
    return build();
  }

 private:
  const Node& node(int id) const { return p_.nodes[static_cast<size_t>(id)]; }

  // The index of the training schedule's instruction after which a value is ready.
  void positions() {
    ready_.assign(n_, INT_MAX);
    run_at_.assign(n_, INT_MAX);
    const auto& instrs = s_.instrs;
    for (size_t i = 0; i < instrs.size(); ++i) {
      const prog::Instr& in = instrs[i];
      if (in.kind == prog::Instr::Run) {
        ready_[static_cast<size_t>(in.id)] = run_at_[static_cast<size_t>(in.id)] = static_cast<int>(i);
        for (const ir::PostOp& o : p_[in.id].epilogue)  // a node's epilogue: ready with it, never fused
          ready_[static_cast<size_t>(o.node)] = static_cast<int>(i);
      } else if (in.kind == prog::Instr::Wait) {
        for (int m : p_.groups[static_cast<size_t>(in.id)].members) ready_[static_cast<size_t>(m)] = static_cast<int>(i);
      }
    }
  }

  void readersAndCallers() {
    readers_.assign(n_, {});
    for (const Node& n : p_.nodes)
      for (int x : n.inputs)
        if (readers_[static_cast<size_t>(x)].empty() || readers_[static_cast<size_t>(x)].back() != n.id)
          readers_[static_cast<size_t>(x)].push_back(n.id);
    caller_.assign(n_, false);
    if (p_.loss >= 0) caller_[static_cast<size_t>(p_.loss)] = true;
    for (const auto& [name, id] : p_.metrics) caller_[static_cast<size_t>(id)] = true;
    for (const auto& [path, id] : p_.grads) caller_[static_cast<size_t>(id)] = true;
    for (int id : p_.outputs) caller_[static_cast<size_t>(id)] = true;
  }

  bool isConst(int id) const {
    const Node& n = node(id);
    return n.op == Op::Const && n.dtype == DType::F32 && n.shape.scalar();
  }
  // What a fused reader reads for operand `x`: through folded Aligns.
  int source(int x) const {
    while (folded_[static_cast<size_t>(x)]) x = node(x).inputs[0];
    return x;
  }
  // The shape the region IR gives operand x, and whether it is f32.
  const Shape& regionShape(int x) const { return node(source(x)).shape; }
  bool f32(int x) const { return node(source(x)).dtype == DType::F32; }

  static bool transcendental(UnaryFn fn) {
    switch (fn) {
      case UnaryFn::Exp: case UnaryFn::Log: case UnaryFn::Tanh: case UnaryFn::Sigmoid:
      case UnaryFn::Silu: case UnaryFn::Gelu: case UnaryFn::GeluTanh: return true;
      default: return false;
    }
  }

  // Whether `to` is `from` with one or more dims removed, the rest in order.
  static bool removesDims(const Shape& from, const Shape& to) {
    if (to.dims.size() >= from.dims.size()) return false;
    size_t k = 0;
    for (const Dim& d : from.dims)
      if (k < to.dims.size() && d == to.dims[k]) ++k;
    return k == to.dims.size();
  }

  static std::optional<std::string> removedDim(const Shape& from, const Shape& to) {
    if (from.dims.size() != to.dims.size() + 1) return std::nullopt;
    for (size_t i = 0; i < from.dims.size(); ++i) {
      Shape rest = from;
      rest.dims.erase(rest.dims.begin() + static_cast<long>(i));
      if (rest == to) return from.dims[i].name;
    }
    return std::nullopt;
  }

  // Rule 1, with the current folded Aligns.
  bool computes(const Node& n) const {
    if (run_at_[static_cast<size_t>(n.id)] == INT_MAX || !n.results.empty()) return false;
    for (int x : n.inputs)
      if (!f32(x)) return false;
    switch (n.op) {
      case Op::Unary: {
        auto fn = parseUnaryFn(n.fn);
        if (fn && !rules_.transcendentals && transcendental(*fn)) return false;
        return n.dtype == DType::F32 && n.inputs.size() == 1 && fn && regionShape(n.inputs[0]) == n.shape;
      }
      case Op::Binary: {
        auto fn = parseBinaryFn(n.fn);
        if (!fn || n.inputs.size() != 2) return false;
        if (n.dtype != (isComparison(*fn) ? DType::Bool : DType::F32)) return false;
        auto s = broadcastShapes(regionShape(n.inputs[0]), regionShape(n.inputs[1]));
        return s && *s == n.shape;
      }
      case Op::Reduce: {
        if (n.dtype != DType::F32 || n.inputs.size() != 1 || n.names.size() != 1 || !parseReduceFn(n.fn)) return false;
        auto dim = removedDim(regionShape(n.inputs[0]), n.shape);
        return dim && *dim == n.names[0];
      }
      case Op::ReduceTo:
        return n.dtype == DType::F32 && n.inputs.size() == 1 &&
               (rules_.several_name_sums ? removesDims(regionShape(n.inputs[0]), n.shape)
                                         : removedDim(regionShape(n.inputs[0]), n.shape).has_value());
      case Op::Softmax:
      case Op::LogSoftmax:
        return rules_.transcendentals && n.dtype == DType::F32 && n.inputs.size() == 1 && n.names.size() == 1 &&
               regionShape(n.inputs[0]) == n.shape && n.shape.has(n.names[0]);
      case Op::UnaryGrad: {
        auto fn = parseUnaryFn(n.fn);
        if (!fn || (!rules_.libm_gradients && gradNeedsLibm(*fn)) || n.inputs.size() != 2) return false;
        auto s = broadcastShapes(regionShape(n.inputs[0]), regionShape(n.inputs[1]));
        return n.dtype == DType::F32 && s && *s == n.shape;
      }
      case Op::LogSoftmaxGrad:
        if (!rules_.transcendentals) return false;
        [[fallthrough]];
      case Op::SoftmaxGrad:
      case Op::NormalizeGrad:
      case Op::RmsNormalizeGrad:  // (y or x, dy) over one name, both of the node's shape
        return n.dtype == DType::F32 && n.inputs.size() == 2 && n.names.size() == 1 && n.shape.has(n.names[0]) &&
               regionShape(n.inputs[0]) == n.shape && regionShape(n.inputs[1]) == n.shape;
      case Op::Normalize:
      case Op::RmsNormalize:
        return n.dtype == DType::F32 && n.inputs.size() == 1 && n.names.size() == 1 && n.shape.has(n.names[0]) &&
               regionShape(n.inputs[0]) == n.shape;
      default:
        return false;
    }
  }

  // Rules 1 and 2: the fixpoint of folded Aligns.
  void fusability() {
    folded_.assign(n_, false);
    for (const Node& n : p_.nodes)
      folded_[static_cast<size_t>(n.id)] = n.op == Op::Align && n.inputs.size() == 1 && n.dtype == DType::F32 &&
                                           !caller_[static_cast<size_t>(n.id)] &&
                                           !readers_[static_cast<size_t>(n.id)].empty() &&
                                           run_at_[static_cast<size_t>(n.id)] != INT_MAX;
    for (bool changed = true; changed;) {
      changed = false;
      fusable_.assign(n_, false);
      for (const Node& n : p_.nodes) fusable_[static_cast<size_t>(n.id)] = !folded_[static_cast<size_t>(n.id)] && computes(n);
      for (const Node& n : p_.nodes) {
        if (!folded_[static_cast<size_t>(n.id)]) continue;
        for (int r : readers_[static_cast<size_t>(n.id)])
          if (!fusable_[static_cast<size_t>(r)] && !folded_[static_cast<size_t>(r)]) {
            folded_[static_cast<size_t>(n.id)] = false;
            changed = true;
            break;
          }
      }
    }
  }

  // Operands of a fused node that are values (not constants), through folded Aligns.
  std::vector<int> valueOperands(int v) const {
    std::vector<int> out;
    for (int x : node(v).inputs) {
      int s = source(x);
      if (!isConst(s)) out.push_back(s);
    }
    return out;
  }

  // Whether members (sorted by schedule) read nothing from outside that is
  // ready only at or after the first member runs.
  bool sound(const std::vector<int>& members) const {
    std::set<int> in(members.begin(), members.end());
    int first = INT_MAX;
    for (int m : members) first = std::min(first, run_at_[static_cast<size_t>(m)]);
    for (int m : members)
      for (int x : valueOperands(m))
        if (!in.count(x) && ready_[static_cast<size_t>(x)] >= first) return false;
    return true;
  }

  // Rule 3's last resort: the latest region that reads a value `v` reads
  // (from outside it), when joining it is sound: the value is read once.
  int sibling(int v) const {
    const std::vector<int> mine = valueOperands(v);
    for (int r = static_cast<int>(members_.size()); r-- > 0;) {
      const std::vector<int>& m = members_[static_cast<size_t>(r)];
      bool shares = false;
      for (int w : m)
        for (int x : valueOperands(w))
          shares = shares || (region_of_[static_cast<size_t>(x)] != r && std::find(mine.begin(), mine.end(), x) != mine.end());
      if (!shares) continue;
      std::vector<int> with = m;
      with.push_back(v);
      if (sound(with)) return r;
    }
    return -1;
  }

  // Rule 3.
  void group() {
    region_of_.assign(n_, -1);
    std::vector<int> order;
    for (const Node& n : p_.nodes)
      if (fusable_[static_cast<size_t>(n.id)]) order.push_back(n.id);
    std::sort(order.begin(), order.end(),
              [&](int a, int b) { return run_at_[static_cast<size_t>(a)] < run_at_[static_cast<size_t>(b)]; });
    for (int v : order) {
      std::vector<int> cands;
      for (int x : valueOperands(v)) {
        int r = region_of_[static_cast<size_t>(x)];
        if (r >= 0 && std::find(cands.begin(), cands.end(), r) == cands.end()) cands.push_back(r);
      }
      std::sort(cands.begin(), cands.end());
      auto with = [&](const std::vector<int>& rs) {
        std::vector<int> m = {v};
        for (int r : rs) m.insert(m.end(), members_[static_cast<size_t>(r)].begin(), members_[static_cast<size_t>(r)].end());
        return m;
      };
      int target = -1;
      if (!cands.empty() && sound(with(cands))) {
        target = cands[0];
        for (size_t i = 1; i < cands.size(); ++i) {  // merge into the earliest
          for (int m : members_[static_cast<size_t>(cands[i])]) region_of_[static_cast<size_t>(m)] = target;
          auto& dst = members_[static_cast<size_t>(target)];
          dst.insert(dst.end(), members_[static_cast<size_t>(cands[i])].begin(), members_[static_cast<size_t>(cands[i])].end());
          members_[static_cast<size_t>(cands[i])].clear();
        }
      } else {
        for (auto it = cands.rbegin(); it != cands.rend() && target < 0; ++it)
          if (sound(with({*it}))) target = *it;
      }
      if (target < 0) target = sibling(v);
      if (target < 0) {
        target = static_cast<int>(members_.size());
        members_.emplace_back();
      }
      members_[static_cast<size_t>(target)].push_back(v);
      region_of_[static_cast<size_t>(v)] = target;
    }
  }

  // Rule 5: the norms region k computes again instead of reading.
  std::set<int> recomputedIn(const std::vector<int>& members, int k) const {
    std::set<int> reads;  // values the region reads or computes
    for (int m : members) {
      reads.insert(m);
      for (int x : valueOperands(m)) reads.insert(x);
    }
    std::set<int> out;
    for (int m : members)
      for (int x : valueOperands(m)) {
        const Node& n = node(x);
        const int home = region_of_[static_cast<size_t>(x)];
        if ((n.op == Op::Normalize || n.op == Op::RmsNormalize) && home >= 0 && home != k &&
            !folded_[static_cast<size_t>(n.inputs[0])] && reads.count(n.inputs[0]))
          out.insert(x);
      }
    return out;
  }

  // Rule 4, and the folded constants and Aligns; regions renumbered by their first node.
  Fusion build() {
    Fusion f;
    f.region_of.assign(n_, -1);
    std::vector<std::vector<int>> regions;
    for (auto& m : members_)
      if (!m.empty()) {
        std::sort(m.begin(), m.end(),
                  [&](int a, int b) { return run_at_[static_cast<size_t>(a)] < run_at_[static_cast<size_t>(b)]; });
        regions.push_back(m);
      }
    std::sort(regions.begin(), regions.end(), [&](const std::vector<int>& a, const std::vector<int>& b) {
      return run_at_[static_cast<size_t>(a[0])] < run_at_[static_cast<size_t>(b[0])];
    });
    for (size_t k = 0; k < regions.size(); ++k)
      for (int m : regions[k]) f.region_of[static_cast<size_t>(m)] = static_cast<int>(k);
    std::vector<std::set<int>> recomputed(regions.size());
    for (size_t k = 0; k < regions.size(); ++k)
      recomputed[k] = recomputedIn(regions[k], region_of_[static_cast<size_t>(regions[k][0])]);
    // The region a folded node belongs to: its only readers' (constants), its first reader's (Aligns).
    std::vector<std::vector<int>> extra(regions.size());
    for (const Node& n : p_.nodes) {
      const auto& rd = readers_[static_cast<size_t>(n.id)];
      if (rd.empty() || caller_[static_cast<size_t>(n.id)]) continue;
      auto regionOfReader = [&](int r) {
        while (folded_[static_cast<size_t>(r)]) {
          // an Align of an Align: the outer one's first reader
          const auto& rr = readers_[static_cast<size_t>(r)];
          r = rr.front();
        }
        return f.region_of[static_cast<size_t>(r)];
      };
      if (folded_[static_cast<size_t>(n.id)]) {
        extra[static_cast<size_t>(regionOfReader(rd.front()))].push_back(n.id);
      } else if (isConst(n.id)) {
        int k = regionOfReader(rd.front());
        bool all = k >= 0;
        for (int r : rd) all = all && regionOfReader(r) == k;
        if (all) extra[static_cast<size_t>(k)].push_back(n.id);
      }
    }
    for (size_t k = 0; k < regions.size(); ++k) {
      FusedRegion fr;
      std::set<int> in(regions[k].begin(), regions[k].end());
      fr.members.nodes = regions[k];
      // Its own folded nodes, and every folded Align it reads through (one
      // folded into another region's reader too).
      std::set<int> folded(extra[k].begin(), extra[k].end());
      for (int v : regions[k])
        for (int x : node(v).inputs)
          for (; folded_[static_cast<size_t>(x)]; x = node(x).inputs[0]) folded.insert(x);
      fr.members.folded.assign(folded.begin(), folded.end());
      for (int v : regions[k]) {
        bool out = caller_[static_cast<size_t>(v)] || readers_[static_cast<size_t>(v)].empty();
        for (int r : readers_[static_cast<size_t>(v)]) {
          const int kr = f.region_of[static_cast<size_t>(r)];
          const bool recomputes = !folded_[static_cast<size_t>(r)] && kr >= 0 && recomputed[static_cast<size_t>(kr)].count(v);
          out = out || (!readsInside(r, in) && !recomputes);
        }
        if (out) fr.members.outputs.push_back(v);
      }
      fr.members.recomputed.assign(recomputed[k].begin(), recomputed[k].end());
      fr.region = buildRegion(p_, fr.members, "region" + std::to_string(k));
      fr.inputs = fr.members.inputs;
      fr.outputs = fr.members.outputs;
      fr.nodes = regions[k];
      for (int e : extra[k]) {
        fr.nodes.push_back(e);
        f.region_of[static_cast<size_t>(e)] = static_cast<int>(k);
      }
      std::sort(fr.nodes.begin(), fr.nodes.end());
      f.regions.push_back(std::move(fr));
    }
    return f;
  }

  // Whether reader r (maybe a folded Align) reads only inside the region.
  bool readsInside(int r, const std::set<int>& in) const {
    if (!folded_[static_cast<size_t>(r)]) return in.count(r) > 0;
    for (int rr : readers_[static_cast<size_t>(r)])
      if (!readsInside(rr, in)) return false;
    return true;
  }

  const prog::Program& p_;
  const prog::Schedule& s_;
  const FuseRules rules_;
  const size_t n_;
  std::vector<int> ready_, run_at_;
  std::vector<std::vector<int>> readers_;
  std::vector<bool> caller_, folded_, fusable_;
  std::vector<int> region_of_;
  std::vector<std::vector<int>> members_;
};

std::string ids(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "%" : ", %") + std::to_string(x);
  return s.empty() ? "-" : s;
}

}  // namespace

Fusion fuseRegions(const prog::Program& p, const prog::Schedule& s, const FuseRules& rules) {
  return Fuser(p, s, rules).run();
}

Fusion fuseRegions(const prog::Program& p) { return fuseRegions(p, p.train); }

Fusion plannedFusion(const prog::Program& p) {
  Fusion f;
  f.region_of.assign(p.nodes.size(), -1);
  for (const prog::Instr& in : p.train.instrs) {
    if (in.kind != prog::Instr::Fused) continue;
    FusedRegion fr;
    fr.members = p.fused[static_cast<size_t>(in.id)];
    fr.region = buildRegion(p, fr.members, "region" + std::to_string(f.regions.size()));
    std::set<int> nodes(fr.members.nodes.begin(), fr.members.nodes.end());
    nodes.insert(fr.members.folded.begin(), fr.members.folded.end());
    fr.nodes.assign(nodes.begin(), nodes.end());
    fr.inputs = fr.members.inputs;
    fr.outputs = fr.members.outputs;
    for (int v : fr.nodes) f.region_of[static_cast<size_t>(v)] = static_cast<int>(f.regions.size());
    f.regions.push_back(std::move(fr));
  }
  return f;
}

// The members in the order they ran; an operand is looked through when it
// is a folded Align, a constant when it is a scalar f32 Const, a member's
// value when computed before, else a new input.
Region buildRegion(const prog::Program& p, prog::Fused& f, const std::string& name) {
  Region r(name);
  const std::set<int> folded(f.folded.begin(), f.folded.end());
  std::map<int, int> value;  // program node → region node
  f.inputs.clear();
  std::function<int(int)> get = [&](int x) {
    while (folded.count(x) && p[x].op == Op::Align) x = p[x].inputs[0];
    auto it = value.find(x);
    if (it != value.end()) return it->second;
    const Node& n = p[x];
    int id;
    if (std::find(f.recomputed.begin(), f.recomputed.end(), x) != f.recomputed.end()) {
      const float eps = static_cast<float>(n.scalar);
      id = n.op == Op::Normalize ? r.normalize(get(n.inputs[0]), n.names[0], eps)
                                 : r.rmsNormalize(get(n.inputs[0]), n.names[0], eps);
    } else if (n.op == Op::Const && n.dtype == DType::F32 && n.shape.scalar()) {
      id = r.constant(static_cast<float>(n.scalar));
    } else {
      if (std::find(f.nodes.begin(), f.nodes.end(), x) != f.nodes.end())
        throw std::logic_error("fusion: a member read before it is computed");
      id = r.input("in" + std::to_string(f.inputs.size()), n.shape);
      f.inputs.push_back(x);
    }
    value[x] = id;
    return id;
  };
  auto removed = [](const Shape& from, const Shape& to) {
    for (const Dim& d : from.dims)
      if (!to.has(d.name)) return d.name;
    throw std::logic_error("fusion: a sum that removes no dim");
  };
  for (int v : f.nodes) {
    const Node& n = p[v];
    int id = -1;
    switch (n.op) {
      case Op::Unary: id = r.unary(*parseUnaryFn(n.fn), get(n.inputs[0])); break;
      case Op::Binary: {
        int a = get(n.inputs[0]), b = get(n.inputs[1]);
        id = r.binary(*parseBinaryFn(n.fn), a, b);
        break;
      }
      case Op::Reduce: id = r.reduce(*parseReduceFn(n.fn), get(n.inputs[0]), n.names[0]); break;
      case Op::ReduceTo: {  // a sum over each removed dim in turn (a bias's gradient: batch, then seq)
        id = get(n.inputs[0]);
        while (r.node(id).shape.dims.size() > n.shape.dims.size()) id = r.reduce(ReduceFn::Sum, id, removed(r.node(id).shape, n.shape));
        break;
      }
      case Op::Softmax: id = r.softmax(get(n.inputs[0]), n.names[0]); break;
      case Op::LogSoftmax: id = r.logSoftmax(get(n.inputs[0]), n.names[0]); break;
      case Op::UnaryGrad: {
        int x = get(n.inputs[0]), dy = get(n.inputs[1]);
        id = r.unaryGrad(*parseUnaryFn(n.fn), x, dy);
        break;
      }
      case Op::SoftmaxGrad:
      case Op::LogSoftmaxGrad:
      case Op::NormalizeGrad:
      case Op::RmsNormalizeGrad: {
        int x = get(n.inputs[0]), dy = get(n.inputs[1]);
        const std::string& dim = n.names[0];
        float eps = static_cast<float>(n.scalar);
        id = n.op == Op::SoftmaxGrad      ? r.softmaxGrad(x, dy, dim)
             : n.op == Op::LogSoftmaxGrad ? r.logSoftmaxGrad(x, dy, dim)
             : n.op == Op::NormalizeGrad  ? r.normalizeGrad(x, dy, dim, eps)
                                          : r.rmsNormalizeGrad(x, dy, dim, eps);
        break;
      }
      case Op::Normalize: id = r.normalize(get(n.inputs[0]), n.names[0], static_cast<float>(n.scalar)); break;
      case Op::RmsNormalize: id = r.rmsNormalize(get(n.inputs[0]), n.names[0], static_cast<float>(n.scalar)); break;
      default: throw std::logic_error("fusion: an unfusable node in a region");
    }
    if (r.node(id).shape != n.shape) throw std::logic_error("fusion: a region shape differs from its node's");
    value[v] = id;
  }
  for (size_t k = 0; k < f.outputs.size(); ++k) r.output("out" + std::to_string(k), value.at(f.outputs[k]));
  std::string bad = r.validate();
  if (!bad.empty()) throw std::logic_error("fusion: " + name + ": " + bad);
  return r;
}

std::string printFusion(const prog::Program& p, const Fusion& f) {
  size_t fused = 0;
  for (const FusedRegion& r : f.regions) fused += r.nodes.size();
  std::string out = "# " + std::to_string(f.regions.size()) + " regions fusing " + std::to_string(fused) + " of " +
                    std::to_string(p.nodes.size()) + " program nodes; the rest run unfused\n";
  // The nodes that run others as their epilogue (fold_epilogues.h): those nodes are in no region.
  std::string epilogues;
  int contractions = 0, others = 0;
  for (const Node& n : p.nodes) {
    if (n.epilogue.empty()) continue;
    ++(n.op == ir::Op::Contract ? contractions : others);
    epilogues += (epilogues.empty() ? " %" : ", %") + std::to_string(n.id) + " (";
    for (size_t k = 0; k < n.epilogue.size(); ++k) epilogues += (k ? ", " : "") + ir::printPostOp(n, n.epilogue[k]);
    epilogues += ")";
  }
  if (contractions + others > 0)
    out += "# " + std::to_string(contractions) + (contractions == 1 ? " contraction" : " contractions") +
           (others ? " and " + std::to_string(others) + " other node" + (others == 1 ? "" : "s") : std::string()) +
           (contractions + others == 1 ? " runs" : " run") + " an epilogue:" + epilogues + "\n";
  for (size_t k = 0; k < f.regions.size(); ++k) {
    const FusedRegion& r = f.regions[k];
    char hash[17];
    std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(regionHash(r.region)));
    out += "\nregion" + std::to_string(k) + ": " + std::to_string(r.nodes.size()) +
           (r.nodes.size() == 1 ? " node" : " nodes") + " (" + ids(r.nodes) + ")  hash " + hash + "\n";
    for (size_t i = 0; i < r.inputs.size(); ++i) {
      const Node& n = p[r.inputs[i]];
      out += "  in" + std::to_string(i) + " = %" + std::to_string(n.id) + " " + ir::opName(n.op) + " : " + n.shape.str() + "\n";
    }
    for (size_t i = 0; i < r.outputs.size(); ++i) {
      const Node& n = p[r.outputs[i]];
      out += "  out" + std::to_string(i) + " = %" + std::to_string(n.id) + " " + ir::opName(n.op) +
             (n.fn.empty() ? "" : " " + n.fn) + " : " + n.shape.str() + "\n";
    }
    std::string body = printRegion(r.region);
    body = body.substr(body.find('\n') + 1);  // the region's name line is the header above
    out += body;
  }
  return out;
}

}  // namespace dtl::codegen
