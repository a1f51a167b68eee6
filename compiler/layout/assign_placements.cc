// The layout pass.
//
// 1. Seeds: a parameter with a dim named by `split D over A` is Shard(D) on
//    A, an input only when D is its leading (sample) dim — the loader reads
//    whole samples; everything else starts Replicate.
// 2. Nodes are visited in order (the backward and optimiser follow the
//    forward, so one pass covers the training graph). Per axis:
//    - a Partial input of an op that is not linear in it is all-reduced, or
//      reduce-scattered into a dim a rule splits over the axis;
//    - a Shard(D) input where the op needs all of D (softmax over D, …) is
//      all-gathered; of two dims split over the axis the first rule's is
//      kept, the other exchanged for it (all-to-all) or gathered;
//    - otherwise a sharded D the output keeps stays Shard(D), and a sharded
//      D the op sums away (contraction, reduction, the loss's mean) makes
//      the output Partial (a max: Partial(max)).
// 3. The graph's shapes are global. Means over a sharded dim: each rank's
//    kernel averages its local slice, scaled by local/global size so the
//    partial values sum to the global mean (a mean's gradient is already 1/global
//    count: the graph's sizes are global).
// 4. The optimiser needs gradients placed like their parameters; the loss
//    and metrics are read as global values: conversions are inserted there.
//    A stacked parameter's gradient is reduced copy by copy, before it is
//    gathered, so each layer's reduction overlaps the layers still to come.
// 5. ZeRO (`zero`): on its axis the update runs on a flat piece of each
//    parameter (each layer's copy cut on its own): the gradient is
//    reduce-scattered (copy by copy) into it; a replicated parameter gives
//    its piece by a local slice and gets the updated pieces back by an
//    all-gather (levels 1, 2); at level 3 the parameter is seeded as that
//    piece, and every reader but a layer's slice gets it all-gathered — one
//    gather shared by the forward pass's readers, one by the backward's.
#include "compiler/layout/assign_placements.h"

#include "compiler/layout/split_cross_entropy.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace dtl::layout {

namespace {

using ir::Node;
using ir::Op;

class Pass {
 public:
  // `reduce_early`: values of `in` reduced as soon as they are made when they
  // are partial sums (see assignPlacements).
  Pass(const ir::Graph& in, const std::vector<MeshAxis>& mesh, const std::vector<SplitRule>& rules,
       const std::set<int>& reduce_early, const ZeroRule& zero)
      : in_(in), mesh_(mesh), reduce_early_(reduce_early), zero_(zero) {
    for (const SplitRule& r : rules) {
      for (size_t a = 0; a < mesh.size(); ++a)
        if (mesh[a].name == r.axis) split_[r.dim] = {a, r.where};
      priority_[r.dim] = static_cast<int>(priority_.size());  // the spec's order: the first rule wins
    }
    for (size_t a = 0; a < mesh.size(); ++a)
      if (zero.level > 0 && mesh[a].name == zero.axis) zero_axis_ = static_cast<int>(a);
    findStackUpdates();
    findStackDepths();
  }

  std::vector<std::string> run(ir::Graph& out, Layout& layout) {
    map_.assign(in_.nodes.size(), -1);
    for (const Node& n : in_.nodes) visit(n);
    out_.forward_end = map_[static_cast<size_t>(std::max(0, in_.forward_end - 1))] + 1;
    // 4. What the trainer reads must be global.
    out_.loss = in_.loss >= 0 ? replicate(map_[in_.loss], "the loss is reported as the global mean") : -1;
    for (const auto& [name, id] : in_.metrics)
      out_.metrics.emplace_back(name, replicate(map_[id], "metrics are global means"));
    layout.mesh = mesh_;
    layout.of = place_;
    out = std::move(out_);
    return errors_;
  }

  // Values of the input graph that are partial sums on some axis and read
  // by more than one node: where reducing early can replace several
  // reductions downstream by one. Valid after run().
  std::vector<int> partialForks() const {
    std::vector<int> readers(in_.nodes.size(), 0), out;
    for (const Node& n : in_.nodes)
      for (int x : n.inputs) ++readers[static_cast<size_t>(x)];
    for (const Node& n : in_.nodes) {
      if (readers[static_cast<size_t>(n.id)] < 2 || reduce_early_.count(n.id)) continue;
      const Pl& p = place_[static_cast<size_t>(map_[static_cast<size_t>(n.id)])];
      for (const Placement& q : p)
        if (q.kind == Placement::Partial) {
          out.push_back(n.id);
          break;
        }
    }
    return out;
  }

 private:
  using Pl = std::vector<Placement>;

  Pl replicated() const { return Pl(mesh_.size()); }

  int add(Node n, Pl p) {
    int id = out_.add(std::move(n));
    place_.push_back(std::move(p));
    return id;
  }

  // A collective converting `id` on axis `a` to Replicate.
  // `into`: a partial sum is reduce-scattered into Shard(into) rather than
  // all-reduced (sequence parallelism: half the bytes, each rank keeps its
  // part of the sequence).
  int convert(int id, size_t a, const std::string& why, const std::string& into = {}) {
    const Shape& src = out_.nodes[static_cast<size_t>(id)].shape;
    Placement p = place_[static_cast<size_t>(id)][a];
    // On an axis of one rank every placement is the whole value: nothing to send.
    if (p.kind == Placement::Replicate || mesh_[a].size == 1) return id;
    const bool scatter = !into.empty() && p.kind == Placement::Partial && !p.max && holds(src, into);
    // Shard(D) → Shard(into): an all-to-all, 1/n of a gather's bytes.
    const bool exchange = !into.empty() && p.kind == Placement::Shard && p.dim != into && src.has(into) &&
                          !p.flat() && !Placement::isFlat(into);
    const std::string target = scatter || exchange ? into : "";
    // One conversion per value, axis and target, however many consumers need
    // it (the loss and its gradient both read the gathered logits).
    auto done = converted_.find({id, a, target});
    if (done != converted_.end()) return done->second;
    const Op op = scatter ? Op::ReduceScatter : exchange ? Op::AllToAll : p.kind == Placement::Partial ? Op::AllReduce : Op::AllGather;
    std::vector<std::string> names;
    if (p.kind == Placement::Shard) names = {p.dim};
    if (p.kind == Placement::Partial && p.max) names = {"max"};
    if (scatter) names = {into};
    if (exchange) names = {p.dim, into};
    const std::string where = ruleWhere(p.kind == Placement::Shard ? p.dim : partialOrigin(id, a));
    return converted_[{id, a, target}] =
               conversion(op, id, a, names, why, where, target.empty() ? Placement{} : Placement{Placement::Shard, into});
  }

  // A conversion node of `id` on axis `a` to placement `to` there. Shapes
  // are global: it changes the placement, not the shape.
  int conversion(Op op, int id, size_t a, std::vector<std::string> names, std::string why, std::string where, Placement to) {
    const Node& src = out_.nodes[static_cast<size_t>(id)];
    Node c;
    c.op = op;
    c.shape = src.shape;
    c.dtype = src.dtype;
    c.inputs = {id};
    c.name = mesh_[a].name;
    c.names = std::move(names);
    c.fn = std::move(why);
    c.where = std::move(where);
    Pl pl = place_[static_cast<size_t>(id)];
    pl[a] = std::move(to);
    return add(std::move(c), std::move(pl));
  }

  // The dim a partial sum on axis `a` is best reduce-scattered into for a
  // consumer that needs it reduced: one of its dims a rule splits over `a`
  // (the first rule's), unless the consumer needs that dim whole or holds
  // another dim split over `a` (then it is all-reduced: "").
  std::string scatterDim(int id, size_t a, const Node& n, const std::set<std::string>& whole) const {
    std::string best;
    for (const Dim& d : out_.nodes[static_cast<size_t>(id)].shape.dims) {
      auto it = split_.find(d.name);
      if (it == split_.end() || it->second.first != a || whole.count(d.name) || !n.shape.has(d.name)) continue;
      if (best.empty() || priority_.at(d.name) < priority_.at(best)) best = d.name;
    }
    if (best.empty()) return "";
    for (int x : n.inputs) {
      const Placement& q = place_[static_cast<size_t>(x)][a];
      if (q.kind == Placement::Shard && q.dim != best) return "";
    }
    return best;
  }

  // Replicate → Shard(dim) on axis `a`: a local slice, no communication;
  // one per value, axis and dim however many consumers need it.
  int localSlice(int id, size_t a, const std::string& dim, const std::string& why = {}) {
    auto key = std::make_tuple(id, a, dim);
    auto done = sliced_.find(key);
    if (done != sliced_.end()) return done->second;
    return sliced_[key] = conversion(Op::LocalSlice, id, a, {dim},
                                     why.empty() ? "a replicated operand meets a value sharded along `" + dim + "`" : why,
                                     ruleWhere(dim), Placement{Placement::Shard, dim});
  }

  // The update each stacked gradient's gather leads to: a slice_grad whose
  // only reader is the optimiser's update (or another such slice_grad).
  void findStackUpdates() {
    std::vector<int> readers(in_.nodes.size(), 0);
    for (const Node& c : in_.nodes)
      for (int x : c.inputs) ++readers[static_cast<size_t>(x)];
    stack_update_.assign(in_.nodes.size(), -1);
    for (size_t k = in_.nodes.size(); k-- > 0;) {
      const Node& c = in_.nodes[k];
      int update = c.op == Op::Update ? c.id : c.op == Op::SliceGrad ? stack_update_[k] : -1;
      if (update < 0) continue;
      for (size_t i = c.op == Op::Update ? 1 : 0; i < c.inputs.size(); ++i) {
        const int x = c.inputs[i];
        if (in_[x].op == Op::SliceGrad && readers[static_cast<size_t>(x)] == 1) stack_update_[static_cast<size_t>(x)] = update;
      }
    }
  }

  // A stacked parameter's gradient gathers each copy's (layer's) gradient.
  // Where the optimiser needs it replicated, each copy's partial sum is
  // reduced before the gather rather than the whole stack after it: the same
  // bytes, but every layer's reduction can start as soon as its backward
  // pass is done instead of waiting for the last layer's.
  void reduceCopiesFirst(const Node& old, Node& n) {
    const int update = stack_update_[static_cast<size_t>(old.id)];
    if (update < 0) return;
    const Node& u = in_[update];
    const Pl param = place_[static_cast<size_t>(map_[static_cast<size_t>(u.inputs[0])])];
    for (size_t a = 0; a < mesh_.size(); ++a) {
      if (static_cast<int>(a) == zero_axis_ && zeroCuts(param)) {
        const std::string flat = flatOf(u.inputs[0]);
        for (int& x : n.inputs) x = toPiece(x, a, flat, "the optimiser updates this rank's piece of " + u.name + "; each layer is reduce-scattered when its backward pass is done");
        continue;
      }
      if (param[a].kind != Placement::Replicate) continue;
      for (int& x : n.inputs)
        if (place_[static_cast<size_t>(x)][a].kind == Placement::Partial)
          x = convert(x, a, "the optimiser updates " + u.name + " on every rank; each layer is reduced when its backward pass is done");
    }
  }

  // How many leading dims of each parameter are stacked copies (`repeat`):
  // the dims a layer's Slice peels off.
  void findStackDepths() {
    std::vector<std::pair<int, int>> root(in_.nodes.size(), {-1, 0});  // node → (its parameter, depth)
    stack_depth_.assign(in_.nodes.size(), 0);
    for (const Node& n : in_.nodes) {
      if (n.op == Op::Param) root[static_cast<size_t>(n.id)] = {n.id, 0};
      if (n.op != Op::Slice || n.names.empty()) continue;
      const auto [param, depth] = root[static_cast<size_t>(n.inputs[0])];
      if (param < 0 || in_[n.inputs[0]].shape.find(n.names[0]) != 0) continue;
      root[static_cast<size_t>(n.id)] = {param, depth + 1};
      stack_depth_[static_cast<size_t>(param)] = std::max(stack_depth_[static_cast<size_t>(param)], depth + 1);
    }
  }

  // The flat dim ZeRO cuts parameter `param` (an input-graph id) along: all
  // but its stacked dims.
  std::string flatOf(int param) const {
    return flatDim(in_[param].shape, static_cast<size_t>(stack_depth_[static_cast<size_t>(param)]));
  }

  // Value `id` as this rank's flat piece on axis `a`: a partial sum
  // reduce-scattered into it, a replicated value sliced; a value split
  // along a named dim is gathered first.
  int toPiece(int id, size_t a, const std::string& flat, const std::string& why) {
    Placement p = place_[static_cast<size_t>(id)][a];
    if (p.kind == Placement::Shard && p.dim == flat) return id;
    if (p.kind == Placement::Shard || p.max) id = convert(id, a, why);
    p = place_[static_cast<size_t>(id)][a];
    if (p.kind == Placement::Partial) return convert(id, a, why, flat);
    return localSlice(id, a, flat);
  }

  // ZeRO-3: a parameter's flat pieces whole again on axis `a`, for the
  // forward pass's readers or the backward pass's: one gather per pass, so
  // the gathered value lives only while its pass uses it.
  int gatherPieces(int id, size_t a, bool backward) {
    const std::string phase = backward ? "#backward" : "#forward";
    auto done = converted_.find({id, a, phase});
    if (done != converted_.end()) return done->second;
    const std::string flat = place_[static_cast<size_t>(id)][a].dim;
    return converted_[{id, a, phase}] =
               conversion(Op::AllGather, id, a, {flat},
                          std::string("zero = 3: gathered for the ") + (backward ? "backward" : "forward") +
                              " pass, freed after its last use there",
                          ruleWhere(flat), Placement{});
  }

  // A flat shard is kept by a layer's Slice of a stacked piece and by the
  // gather of stacked copies' pieces; every other reader gets the value
  // whole. Returns the flat dim the result keeps, or "".
  std::string resolveFlat(const Node& old, Node& n, size_t a) {
    std::string kept;
    bool all_flat = !n.inputs.empty();
    for (int x : n.inputs) all_flat = all_flat && place_[static_cast<size_t>(x)][a].flat();
    for (int& x : n.inputs) {
      const Placement p = place_[static_cast<size_t>(x)][a];
      if (!p.flat()) continue;
      const Shape& in = out_.nodes[static_cast<size_t>(x)].shape;
      const bool slices_kept_dim = old.op == Op::Slice && !old.names.empty() && in.find(old.names[0]) >= 0 &&
                                   in.find(old.names[0]) < flatStart(in, p.dim);
      if (slices_kept_dim || (old.op == Op::SliceGrad && all_flat)) {
        kept = p.dim;
        continue;
      }
      x = gatherPieces(x, a, old.id >= in_.forward_end);
    }
    return kept;
  }

  int replicate(int id, const std::string& why) {
    for (size_t a = 0; a < mesh_.size(); ++a) id = convert(id, a, why);
    return id;
  }

  // The split rule behind a Partial: the dim whose sum made it.
  std::string partialOrigin(int id, size_t a) const {
    auto it = partial_dim_.find({id, a});
    return it == partial_dim_.end() ? "" : it->second;
  }

  std::string ruleWhere(const std::string& dim) const {
    if (Placement::isFlat(dim)) return "zero = " + std::to_string(zero_.level) + " (" + zero_.where + ")";
    auto it = split_.find(dim);
    return it == split_.end() ? "" : "split " + dim + " over " + mesh_[it->second.first].name + " (" + it->second.second + ")";
  }

  // Dims an op needs whole on one rank.
  static std::set<std::string> within(const Node& n, const ir::Graph& g) {
    switch (n.op) {
      case Op::Softmax: case Op::LogSoftmax: case Op::SoftmaxGrad: case Op::LogSoftmaxGrad:
      case Op::Normalize: case Op::RmsNormalize: case Op::NormalizeGrad: case Op::RmsNormalizeGrad:
      case Op::CrossEntropy: case Op::CrossEntropyGrad: case Op::Argmax: case Op::MaxGrad:
        return {n.names.begin(), n.names.end()};
      case Op::Reduce: return {};  // a max over a split dim is each rank's max, then the largest (P(max))
      case Op::Attention: case Op::AttentionGrad: {
        const Shape& q = g.nodes[static_cast<size_t>(n.inputs[0])].shape;
        const Shape& k = g.nodes[static_cast<size_t>(n.inputs[1])].shape;
        std::set<std::string> s;
        if (q.rank() >= 3) s = {q.dims[q.rank() - 3].name, q.dims[q.rank() - 1].name, k.dims[k.rank() - 3].name};
        return s;
      }
      // A table split by its rows: each rank looks up the ids it holds (P).
      case Op::Embed: return {};
      case Op::Reshape: {
        std::set<std::string> s;  // split or merged dims must be whole
        const Shape& x = g.nodes[static_cast<size_t>(n.inputs[0])].shape;
        for (const Dim& d : x.dims)
          if (!n.shape.has(d.name)) s.insert(d.name);
        for (const Dim& d : n.shape.dims)
          if (!x.has(d.name)) s.insert(d.name);
        return s;
      }
      default: return {};
    }
  }

  // Is the op linear in input k, so a Partial input gives a Partial output?
  static bool linearIn(const Node& n, size_t k, const std::vector<bool>& partial) {
    switch (n.op) {
      case Op::Align: case Op::ReduceTo: case Op::Reshape: case Op::Slice: case Op::Cast: case Op::DropoutGrad:
        return true;
      case Op::SliceGrad:  // a stack of copies: partial in all of them or in none (P beside R counts R n times)
        return std::find(partial.begin(), partial.end(), false) == partial.end();
      case Op::Unary: return n.fn == "neg";
      case Op::Reduce: return n.fn != "max";
      case Op::Binary:
        if (n.fn == "add" || n.fn == "sub") return partial[0] && partial[1];  // P + R would count R n times
        if (n.fn == "mul") return !(partial[0] && partial[1]);
        if (n.fn == "div") return k == 0 && !partial[1];
        return false;
      case Op::Contract: return !(partial[0] && partial[1]);
      case Op::CrossEntropyGrad: return k == 2;  // linear in dy
      case Op::PickClass: return k == 0;
      case Op::UnaryGrad: case Op::SoftmaxGrad: case Op::LogSoftmaxGrad: case Op::NormalizeGrad:
      case Op::RmsNormalizeGrad: case Op::MaxGrad: case Op::EmbedGrad:
        return k == n.inputs.size() - 1;  // linear in the incoming gradient
      case Op::AttentionGrad: return k == 5;  // linear in dy (inputs q, k, v, out, lse, dy)
      default: return false;
    }
  }

  // The dims an op sums away (its output lacks them, its result is a sum or mean over them).
  static std::set<std::string> summed(const Node& n, const ir::Graph& g) {
    std::set<std::string> s;
    if (n.op == Op::Contract || n.op == Op::ReduceTo || n.op == Op::Reduce || n.op == Op::CrossEntropy ||
        n.op == Op::PickClass || n.op == Op::Embed) {
      for (int in : n.inputs)
        for (const Dim& d : g.nodes[static_cast<size_t>(in)].shape.dims)
          if (!n.shape.has(d.name)) s.insert(d.name);
    }
    return s;
  }

  // The dim of value `id` a rule splits over axis `a` (the first rule's), or "".
  std::string firstRuledDim(int id, size_t a) const {
    std::string best;
    for (const Dim& d : out_.nodes[static_cast<size_t>(id)].shape.dims) {
      auto it = split_.find(d.name);
      if (it != split_.end() && it->second.first == a && (best.empty() || rank(d.name) < rank(best))) best = d.name;
    }
    return best;
  }

  int rank(const std::string& dim) const {
    auto it = priority_.find(dim);
    return it == priority_.end() ? 1 << 30 : it->second;
  }

  // An op that makes a dim none of its inputs has (a table's gradient, a
  // one-hot over the classes) computes just this rank's rows of it when a
  // rule splits that dim, rather than all of them to slice later.
  bool bornSharded(const Node& old, size_t a, Placement& out) const {
    if (old.op != Op::EmbedGrad && old.op != Op::PickClassGrad) return false;
    const std::string& dim = old.op == Op::EmbedGrad ? old.shape.dims.at(0).name : old.names.at(0);
    auto it = split_.find(dim);
    if (it == split_.end() || it->second.first != a) return false;
    out = Placement{Placement::Shard, dim};
    return true;
  }

  void visit(const Node& old) {
    Node n = old;
    for (int& in : n.inputs) in = map_[static_cast<size_t>(in)];
    if (n.op == Op::Input || n.op == Op::Param) return seed(old, std::move(n));
    if (n.op == Op::Update) return update(old, std::move(n));
    if (n.op == Op::Result) return result(old, std::move(n));
    if (old.op == Op::SliceGrad) reduceCopiesFirst(old, n);
    std::set<std::string> whole = within(old, in_);
    const std::set<std::string> sums = summed(old, in_);
    // Several results share the node's placement: a dim not in all of them stays whole.
    for (const ir::Result& r : old.results)
      for (const Dim& d : old.shape.dims)
        if (!r.shape.has(d.name)) whole.insert(d.name);
    Pl out(mesh_.size());
    std::vector<std::string> origin(mesh_.size());  // per axis: the split dim a partial result sums
    for (size_t a = 0; a < mesh_.size(); ++a) out[a] = placeOnAxis(old, n, a, whole, sums, origin[a]);
    int id = add(n, out);
    made_[old.id] = id;
    for (size_t a = 0; a < mesh_.size(); ++a)
      if (out[a].kind == Placement::Partial) partial_dim_[{id, a}] = origin[a];
    id = scaleMean(old, n, id);
    if (reduce_early_.count(old.id))
      for (size_t a = 0; a < mesh_.size(); ++a)
        if (place_[static_cast<size_t>(id)][a].kind == Placement::Partial)
          id = convert(id, a, "reduced before its readers fork: one reduction instead of one on every branch",
                       firstRuledDim(id, a));
    map_[static_cast<size_t>(old.id)] = id;
  }

  // A view of result k of a node of several: placed as the node itself (its
  // results are split on the same names), read before any conversion of the
  // node's first result.
  void result(const Node& old, Node n) {
    const int of = made_.at(old.inputs[0]);
    n.inputs = {of};
    for (const Placement& p : place_[static_cast<size_t>(of)])
      if (p.kind == Placement::Shard && !p.flat() && !n.shape.has(p.dim))
        errors_.push_back(old.where + ": error: result " + std::to_string(n.index) + " of `" + ir::opName(out_.nodes[static_cast<size_t>(of)].op) +
                          "` lacks its split dim `" + p.dim + "`");
    Pl place = place_[static_cast<size_t>(of)];
    map_[static_cast<size_t>(old.id)] = add(std::move(n), std::move(place));
  }

  // 1. An input is fed by samples: only its leading dim is split as it is
  // read; a consumer that needs another dim split slices it locally. A
  // parameter is split on each dim a rule names (the first one per axis).
  void seed(const Node& old, Node n) {
    Pl out(mesh_.size());
    for (size_t k = 0; k < n.shape.dims.size(); ++k) {
      if (n.op == Op::Input && k > 0) break;
      auto it = split_.find(n.shape.dims[k].name);
      if (it != split_.end() && out[it->second.first].kind == Placement::Replicate)
        out[it->second.first] = Placement{Placement::Shard, n.shape.dims[k].name};
    }
    // ZeRO-3: a parameter is stored as this rank's flat piece.
    if (n.op == Op::Param && zero_.level >= 3 && zero_axis_ >= 0 &&
        out[static_cast<size_t>(zero_axis_)].kind == Placement::Replicate)
      out[static_cast<size_t>(zero_axis_)] = Placement{Placement::Shard, flatOf(old.id)};
    map_[static_cast<size_t>(old.id)] = add(std::move(n), std::move(out));
  }

  // 4. The gradient must be placed like the parameter: reduced for a
  // replicated one; for a split one, reduce-scattered to this rank's piece,
  // exchanged for it, or sliced. On ZeRO's axis, last (its piece is of what
  // the other axes leave this rank), the step runs on flat pieces (5).
  void update(const Node& old, Node n) {
    const bool pieces = zeroCuts(place_[static_cast<size_t>(n.inputs[0])]);
    for (size_t a = 0; a < mesh_.size(); ++a) {
      if (pieces && static_cast<int>(a) == zero_axis_) continue;
      const Placement pp = place_[static_cast<size_t>(n.inputs[0])][a];
      const Placement gp = place_[static_cast<size_t>(n.inputs[1])][a];
      if (gp.kind == pp.kind && gp.dim == pp.dim) continue;
      if (pp.kind == Placement::Replicate) {
        n.inputs[1] = convert(n.inputs[1], a, "the optimiser updates " + n.name + " on every rank");
      } else {
        n.inputs[1] = convert(n.inputs[1], a, "the optimiser updates this rank's piece of " + n.name, pp.dim);
        if (place_[static_cast<size_t>(n.inputs[1])][a].kind != Placement::Shard) n.inputs[1] = localSlice(n.inputs[1], a, pp.dim);
      }
    }
    const bool gather_after = pieces && updateOnPieces(old, n, static_cast<size_t>(zero_axis_));
    out_.grads.emplace_back(n.name, n.inputs[1]);
    Pl place = place_[static_cast<size_t>(n.inputs[0])];
    const int id = add(std::move(n), place);
    map_[static_cast<size_t>(old.id)] = id;
    if (!gather_after) return;
    // Levels 1 and 2: every rank gets the updated parameter back whole.
    const size_t a = static_cast<size_t>(zero_axis_);
    conversion(Op::AllGather, id, a, {place[a].dim},
               "zero = " + std::to_string(zero_.level) + ": the updated pieces of " + out_.nodes[static_cast<size_t>(id)].name +
                   " gathered on every rank",
               ruleWhere(place[a].dim), Placement{});
  }

  // Does ZeRO cut a parameter placed so into flat pieces? On its axis it
  // must be replicated (levels 1, 2) or a piece already (3); one a rule
  // splits over that axis is updated by its own pieces, as without ZeRO.
  bool zeroCuts(const Pl& param) const {
    if (zero_axis_ < 0) return false;
    const Placement& p = param[static_cast<size_t>(zero_axis_)];
    return p.kind == Placement::Replicate || p.flat();
  }

  // 5. The update's parameter and gradient as this rank's flat pieces on
  // ZeRO's axis `a`. True when the parameter is replicated there (levels 1,
  // 2), so the updated pieces must be gathered.
  bool updateOnPieces(const Node& old, Node& n, size_t a) {
    const Placement pp = place_[static_cast<size_t>(n.inputs[0])][a];
    const std::string flat = flatOf(old.inputs[0]);
    n.inputs[1] = toPiece(n.inputs[1], a, flat, "zero = " + std::to_string(zero_.level) +
                                                    ": the optimiser updates this rank's piece of " + n.name);
    if (pp.flat()) return false;
    n.inputs[0] = localSlice(n.inputs[0], a, flat, "zero = " + std::to_string(zero_.level) + ": this rank's piece of " + n.name);
    return true;
  }

  // 2. One axis of an op: its inputs converted where the op needs it, and
  // the placement of its result.
  Placement placeOnAxis(const Node& old, Node& n, size_t a, const std::set<std::string>& whole,
                        const std::set<std::string>& sums, std::string& origin) {
    const std::string flat = resolveFlat(old, n, a);
    if (!flat.empty()) return Placement{Placement::Shard, flat};
    std::vector<bool> partial = reduceNonLinearPartials(old, n, a, whole);
    bool any_partial = std::find(partial.begin(), partial.end(), true) != partial.end();
    bool reduced = false;
    const std::string shard = resolveShards(old, n, a, whole, sums, reduced);
    // A partial sum meeting a shard on the same axis is reduced first: a
    // value is either split or summed over an axis, not both (x split by
    // `d` times a partial gradient would be the split of a partial sum).
    if (!shard.empty() && any_partial) {
      for (size_t k = 0; k < n.inputs.size(); ++k)
        if (partial[k])
          n.inputs[k] = convert(n.inputs[k], a, std::string("`") + ir::opName(old.op) + "` meets a partial sum and a value split by `" +
                                                    shard + "`", shard);
      any_partial = false;
    }
    // A replicated operand that carries the sharded dim: each rank takes
    // its slice, whether the op keeps the dim or sums it away.
    if (!shard.empty())
      for (int& in : n.inputs)
        if (place_[static_cast<size_t>(in)][a].kind == Placement::Replicate && out_.nodes[static_cast<size_t>(in)].shape.has(shard))
          in = localSlice(in, a, shard);
    Placement out;
    if (reduced) {
      out = Placement{Placement::Partial, "", old.op == Op::Reduce && old.fn == "max"};
      origin = shard;
    } else if (!shard.empty()) {
      out = Placement{Placement::Shard, shard};
    } else if (!any_partial && bornSharded(old, a, out)) {
    } else if (any_partial) {
      out = Placement{Placement::Partial, ""};
      for (size_t k = 0; k < n.inputs.size(); ++k)
        if (partial[k]) origin = partialOrigin(n.inputs[k], a);
    }
    return out;
  }

  // Partial inputs of a non-linear use are reduced first (a largest-of is
  // linear in nothing). Until nothing changes: reducing one input can make
  // the op non-linear in another (P + P(max) → P + R). Returns which inputs
  // are still partial.
  std::vector<bool> reduceNonLinearPartials(const Node& old, Node& n, size_t a, const std::set<std::string>& whole) {
    std::vector<bool> partial;
    for (int in : n.inputs) partial.push_back(place_[static_cast<size_t>(in)][a].kind == Placement::Partial);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        if (partial[k] && (!linearIn(old, k, partial) || place_[static_cast<size_t>(n.inputs[k])][a].max)) {
          n.inputs[k] = convert(n.inputs[k], a, std::string("`") + ir::opName(old.op) + "` is not linear in a partial sum",
                                scatterDim(n.inputs[k], a, n, whole));
          partial[k] = false;
          changed = true;
        }
      }
    }
    return partial;
  }

  // The dim the op's result keeps split over axis `a`: inputs split along a
  // dim the op needs whole are gathered; where two dims split over the axis
  // meet (x split by `seq` into a projection split by `heads`) the dim whose
  // rule comes first in the spec is kept and the other operands exchanged
  // for it (all-to-all) or gathered. `reduced`: the op sums the kept dim away.
  std::string resolveShards(const Node& old, Node& n, size_t a, const std::set<std::string>& whole,
                            const std::set<std::string>& sums, bool& reduced) {
    std::string shard;
    for (int x : n.inputs) {
      const Placement& p = place_[static_cast<size_t>(x)][a];
      if (p.kind == Placement::Shard && !whole.count(p.dim) && (shard.empty() || rank(p.dim) < rank(shard))) shard = p.dim;
    }
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const Placement p = place_[static_cast<size_t>(n.inputs[k])][a];
      if (p.kind != Placement::Shard) continue;
      if (whole.count(p.dim)) {
        n.inputs[k] = convert(n.inputs[k], a, std::string("`") + ir::opName(old.op) + "` needs all of `" + p.dim + "`");
      } else if (p.dim != shard) {
        n.inputs[k] = convert(n.inputs[k], a, std::string("`") + ir::opName(old.op) + "` meets `" + shard + "` and `" + p.dim +
                                                  "` sharded over `" + mesh_[a].name + "`; it keeps `" + shard +
                                                  "`, whose rule comes first", shard);
      } else if (sums.count(p.dim)) {
        reduced = true;
      }
    }
    if (!shard.empty() && !reduced && !n.shape.has(shard)) reduced = true;
    return shard;
  }

  // 3. A mean over a split dim: the local mean scaled by local / global size.
  int scaleMean(const Node& old, const Node& n, int id) {
    const double scale = meanScale(old, n);
    if (scale == 1.0) return id;
    Node c;
    c.op = Op::Const;
    c.scalar = scale;
    c.dtype = n.dtype;
    c.where = n.where;
    int cid = add(std::move(c), replicated());
    Node m;
    m.op = Op::Binary;
    m.fn = "mul";
    m.shape = n.shape;
    m.dtype = n.dtype;
    m.inputs = {id, cid};
    m.where = n.where;
    Pl keep = place_[static_cast<size_t>(id)];
    int mid = add(std::move(m), keep);
    for (size_t a = 0; a < mesh_.size(); ++a)
      if (partial_dim_.count({id, a})) partial_dim_[{mid, a}] = partial_dim_[{id, a}];
    return mid;
  }

  // local / global element count of the mean a node takes: each rank's
  // kernel averages its local slice, so a mean over a dim its operand is
  // sharded on is scaled down by that axis' size (the partial means then
  // sum to the global one).
  double meanScale(const Node& old, const Node& n) {
    std::vector<std::string> dims;
    if (old.op == Op::Reduce && old.fn == "mean") dims = old.names;
    if (old.op == Op::CrossEntropy || old.op == Op::CrossEntropyGrad) {
      const Shape& logits = in_.nodes[static_cast<size_t>(old.inputs[0])].shape;
      for (const Dim& d : logits.dims)
        if (d.name != old.names[0]) dims.push_back(d.name);
    }
    if (dims.empty() || n.inputs.empty()) return 1;
    double scale = 1;
    const Pl in = place_[static_cast<size_t>(n.inputs[0])];
    const Shape& shape = out_.nodes[static_cast<size_t>(n.inputs[0])].shape;
    for (size_t a = 0; a < mesh_.size(); ++a) {
      if (in[a].kind != Placement::Shard || std::find(dims.begin(), dims.end(), in[a].dim) == dims.end()) continue;
      scale /= static_cast<double>(mesh_[a].size);
      const int k = shape.find(in[a].dim);
      if (k >= 0 && shape.dims[static_cast<size_t>(k)].size % mesh_[a].size != 0 && uneven_means_.insert({in[a].dim, a}).second)
        errors_.push_back(old.where + ": error: a mean over `" + in[a].dim + "` (" +
                          std::to_string(shape.dims[static_cast<size_t>(k)].size) + "), split unevenly over `" +
                          mesh_[a].name + "` (" + std::to_string(mesh_[a].size) +
                          "), is not built: each rank's share of it would differ\n"
                          "hint: make `" + in[a].dim + "` divide by `" + mesh_[a].name + "`, or split another dim");
    }
    return scale;
  }

  const ir::Graph& in_;
  std::vector<MeshAxis> mesh_;
  const std::set<int>& reduce_early_;
  ZeroRule zero_;
  int zero_axis_ = -1;             // the mesh axis ZeRO shards over, or -1
  std::vector<int> stack_depth_;  // per input parameter: its leading stacked dims
  std::map<std::string, std::pair<size_t, std::string>> split_;  // dim → (axis, rule source)
  std::map<std::string, int> priority_;                          // dim → its rule's place in the spec
  ir::Graph out_;
  std::vector<Pl> place_;
  std::vector<int> map_;
  std::map<int, int> made_;  // input node → the node made for it, before the conversions of its result
  std::map<std::pair<int, size_t>, std::string> partial_dim_;
  std::map<std::tuple<int, size_t, std::string>, int> sliced_;
  std::map<std::tuple<int, size_t, std::string>, int> converted_;
  std::set<std::pair<std::string, size_t>> uneven_means_;  // reported once, at the first mean
  std::vector<int> stack_update_;  // per input node: the update its gather leads to, or -1
  std::vector<std::string> errors_;
};


// Bytes one rank sends per step for the collectives of a laid-out graph
// (ring formulas: all-reduce 2(n−1)/n of its local bytes, all-gather and
// reduce-scatter (n−1)/n of the whole).
double bytesSent(const ir::Graph& g, const Layout& layout) {
  double sent = 0;
  for (const Node& n : g.nodes) {
    double n_ranks = 1;
    for (const MeshAxis& a : layout.mesh)
      if (a.name == n.name) n_ranks = static_cast<double>(a.size);
    const int sized = n.op == Op::ReduceScatter ? n.inputs[0] : n.id;  // of the whole it reduces
    if (n.op == Op::AllToAll) {  // each rank sends n − 1 of the n parts of its piece
      sent += static_cast<double>(localShape(n.shape, layout.of[static_cast<size_t>(n.id)], layout.mesh).elements().value_or(0)) *
              4 * (n_ranks - 1) / n_ranks;
      continue;
    }
    const double bytes = static_cast<double>(
        localShape(g[sized].shape, layout.of[static_cast<size_t>(sized)], layout.mesh).elements().value_or(0)) * 4;
    const bool max = n.op == Op::AllReduce && !n.names.empty() && n.names[0] == "max";
    if (max) sent += bytes * (n_ranks - 1);  // every rank's values gathered (plan.cc's formula)
    else if (n.op == Op::AllReduce) sent += bytes * 2 * (n_ranks - 1) / n_ranks;
    if (n.op == Op::AllGather || n.op == Op::ReduceScatter) sent += bytes * (n_ranks - 1) / n_ranks;
  }
  return sent;
}

}  // namespace

// One pass places every value by the rules above; then each partial sum
// that forks (a gradient read by a norm's backward and by its parameters'
// gradients) is tried reduced where it is made, and kept so when the step
// sends fewer bytes. That is where Megatron-LM reduces the backward pass:
// before a layer norm's backward, so its parameters' gradients come out
// equal on every tp rank and need no reduction of their own.
std::vector<std::string> assignPlacements(ir::Graph& graph, const std::vector<MeshAxis>& mesh,
                                          const std::vector<SplitRule>& rules, Layout& out, const ZeroRule& zero) {
  const ir::Graph g = splitCrossEntropy(graph, rules);
  std::set<int> early;
  ir::Graph best;
  std::vector<std::string> errors;
  Pass first(g, mesh, rules, early, zero);
  errors = first.run(best, out);
  double best_bytes = bytesSent(best, out);
  for (int fork : first.partialForks()) {
    std::set<int> trial = early;
    trial.insert(fork);
    ir::Graph laid;
    Layout placed;
    std::vector<std::string> e = Pass(g, mesh, rules, trial, zero).run(laid, placed);
    const double bytes = bytesSent(laid, placed);
    if (!e.empty() || bytes >= best_bytes) continue;
    early = std::move(trial);
    best = std::move(laid);
    out = std::move(placed);
    errors = std::move(e);
    best_bytes = bytes;
  }
  graph = std::move(best);
  // One message per cause (a loss and its gradient meet the same rule).
  std::vector<std::string> once;
  for (std::string& e : errors)
    if (std::find(once.begin(), once.end(), e) == once.end()) once.push_back(std::move(e));
  return once;
}

}  // namespace dtl::layout
