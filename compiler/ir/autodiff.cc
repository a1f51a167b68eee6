// Reverse-mode autodiff.
//
// 1. Mark the nodes on a path from a parameter to the loss.
// 2. Seed d(loss) = 1 and visit the forward nodes in reverse order; each
//    marked node's gradient (the sum of its consumers' contributions) is
//    pushed to its inputs by the node's rule below.
// 3. Parameter gradients are summed per path and recorded in g.grads in
//    forward order of the parameters, so printing and bucketing are
//    deterministic. A stacked parameter is read per copy through a chain of
//    slices (lowering: param → slice → slice … one chain per copy); the
//    gradients of its copies are not scattered one by one into full-size
//    zero tensors but gathered, per stacked dim, into one slice_grad whose
//    inputs are the copies' gradients in copy order (the executor lets each
//    copy's producer write straight into its block of that one buffer).
#include "compiler/ir/autodiff.h"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

namespace dtl::ir {

namespace {

class Backward {
 public:
  explicit Backward(Graph& g) : g_(g), grad_(g.nodes.size(), -1), needs_(g.nodes.size(), false) {}

  void run() {
    int end = g_.forward_end;
    for (int i = 0; i < end; ++i) {
      const Node& n = g_[i];
      if (n.op == Op::Param) needs_[i] = true;
      if (n.op == Op::Argmax || n.op == Op::Arange || n.dtype == DType::Bool || !isFloat(n.dtype)) continue;
      if (n.op == Op::Binary && (n.fn == "eq" || n.fn == "ne" || n.fn == "lt" || n.fn == "le" || n.fn == "gt" ||
                                 n.fn == "ge"))
        continue;
      for (int in : n.inputs)
        if (needs_[in]) needs_[i] = true;
    }
    if (g_.loss < 0 || !needs_[g_.loss]) return;
    Node one = like(g_[g_.loss], Op::Const);
    one.scalar = 1;
    grad_[g_.loss] = g_.add(one);
    for (int i = g_.loss; i >= 0; --i) {
      if (grad_[i] < 0 || !needs_[i]) continue;
      visit(i);
    }
    std::map<std::string, int> stacked = emitStacks();
    // Parameters in forward order: the gathered copies first, then any
    // direct contributions, summed.
    std::map<std::string, int> sum;
    std::vector<std::string> order;
    for (int i = 0; i < end; ++i) {
      const Node& n = g_[i];
      if (n.op != Op::Param) continue;
      if (!sum.count(n.name)) {
        auto st = stacked.find(n.name);
        if (st != stacked.end()) {
          order.push_back(n.name);
          sum[n.name] = st->second;
        }
      }
      if (grad_[i] < 0) continue;
      if (!sum.count(n.name)) order.push_back(n.name);
      sum[n.name] = sum.count(n.name) ? add(sum[n.name], grad_[i]) : grad_[i];
    }
    for (const std::string& p : order) g_.grads.emplace_back(p, sum[p]);
  }

 private:
  // The copies' gradients of one stacked value along one dim.
  struct Stack {
    int src = -1;     // a node holding the stacked value (the first Param of the path)
    std::string dim;
    int depth = 0;    // slices between the parameter and `src`
    std::map<int64_t, int> copies;  // copy index → its gradient (contributions summed)
  };

  // The parameter path a node reads, with the copy of each stack dim sliced
  // on the way ("blocks.w[layers=3]"), or "" when it is not a parameter or a
  // slice chain of one.
  std::string paramKey(int id, int* depth) const {
    const Node& n = g_[id];
    if (n.op == Op::Param) {
      *depth = 0;
      return n.name;
    }
    if (n.op != Op::Slice || n.names.empty()) return "";
    std::string in = paramKey(n.inputs[0], depth);
    if (in.empty()) return "";
    ++*depth;
    return in + "[" + n.names[0] + "=" + std::to_string(n.index) + "]";
  }

  void gather(int src, const std::string& dim, int64_t index, int grad) {
    int depth = 0;
    std::string key = paramKey(src, &depth);
    Stack& s = stacks_[{key, dim}];
    if (s.src < 0 || src < s.src) s.src = src;
    s.dim = dim;
    s.depth = depth;
    auto it = s.copies.find(index);
    if (it == s.copies.end()) s.copies[index] = grad;
    else it->second = add(it->second, grad);
  }

  // One slice_grad per gathered stack, deepest (innermost stack dim) first,
  // each level in forward order of its source; an inner stack is the
  // gradient of one copy of the level above. Returns the parameter-level
  // stacks by path.
  std::map<std::string, int> emitStacks() {
    std::map<std::string, int> by_path;
    int max_depth = 0;
    for (const auto& [key, s] : stacks_) max_depth = std::max(max_depth, s.depth);
    for (int depth = max_depth; depth >= 0; --depth) {
      std::vector<Stack> level;
      for (const auto& [key, s] : stacks_)
        if (s.depth == depth) level.push_back(s);
      std::sort(level.begin(), level.end(), [](const Stack& a, const Stack& b) {
        return a.src != b.src ? a.src < b.src : a.dim < b.dim;
      });
      for (const Stack& s : level) {
        const Node src = g_[s.src];  // copy: g_.add may reallocate
        // Copies [first, last] in order; a copy without a gradient reads zeros.
        int64_t first = s.copies.begin()->first, last = s.copies.rbegin()->first;
        std::vector<int> inputs;
        for (int64_t c = first; c <= last; ++c) {
          auto it = s.copies.find(c);
          if (it != s.copies.end()) {
            inputs.push_back(it->second);
            continue;
          }
          Node z = like(src, Op::Const);
          z.shape.dims.erase(z.shape.dims.begin() + src.shape.find(s.dim));
          z.scalar = 0;
          inputs.push_back(g_.add(std::move(z)));
        }
        Node sg = like(src, Op::SliceGrad);
        sg.inputs = std::move(inputs);
        sg.names = {s.dim};
        sg.index = first;
        sg.name = src.name;
        int id = g_.add(std::move(sg));
        if (src.op == Op::Param) {
          by_path[src.name] = id;
        } else {  // the gradient of one copy of the enclosing stack
          gather(src.inputs[0], src.names[0], src.index, id);
        }
      }
    }
    return by_path;
  }

  Node like(const Node& of, Op op) {
    Node n;
    n.op = op;
    n.shape = of.shape;
    n.dtype = of.dtype;
    n.where = of.where;
    return n;
  }

  int make(Op op, const Node& shape_of, std::vector<int> inputs, const std::string& fn = "") {
    Node n = like(shape_of, op);
    n.inputs = std::move(inputs);
    n.fn = fn;
    return g_.add(std::move(n));
  }

  // A view of node `of`'s result k (k ≥ 1).
  int result(int of, int64_t k) {
    const Result r = resultOf(g_[of], k);
    Node n = like(g_[of], Op::Result);
    n.shape = r.shape;
    n.dtype = r.dtype;
    n.inputs = {of};
    n.index = k;
    return g_.add(std::move(n));
  }

  int add(int a, int b) {
    Node n = like(g_[a], Op::Binary);
    n.fn = "add";
    n.inputs = {a, b};
    return g_.add(std::move(n));
  }

  void contribute(int input, int grad) {
    if (!needs_[input]) return;
    grad_[input] = grad_[input] < 0 ? grad : add(grad_[input], grad);
  }

  // The gradient `gid` (shaped like the output) summed down to `target`'s shape.
  int reduceTo(int gid, int target) {
    if (g_[gid].shape == g_[target].shape) return gid;
    Node n = like(g_[target], Op::ReduceTo);
    n.inputs = {gid};
    return g_.add(std::move(n));
  }

  int alignTo(int gid, const Node target) {  // by value: adding nodes moves the vector
    if (g_[gid].shape == target.shape) return gid;
    Node n = like(target, Op::Align);
    n.inputs = {gid};
    return g_.add(std::move(n));
  }

  int scalarConst(double v, const Node& like_node) {
    Node n;
    n.op = Op::Const;
    n.dtype = like_node.dtype;
    n.scalar = v;
    n.where = like_node.where;
    return g_.add(std::move(n));
  }

  void visit(int i) {
    const Node n = g_[i];  // copy: g_.add may reallocate
    int gy = grad_[i];
    switch (n.op) {
      case Op::Param:
      case Op::Input:
      case Op::Const:
      case Op::Arange:
      case Op::Argmax:
        return;
      case Op::Slice: {
        int depth = 0;
        if (!paramKey(n.inputs[0], &depth).empty()) {  // a copy of a stacked parameter
          gather(n.inputs[0], n.names[0], n.index, gy);
          return;
        }
        Node s = like(g_[n.inputs[0]], Op::SliceGrad);
        s.inputs = {gy};
        s.names = n.names;
        s.index = n.index;
        s.name = n.name;
        contribute(n.inputs[0], g_.add(std::move(s)));
        return;
      }
      case Op::Align:
        contribute(n.inputs[0], reduceTo(gy, n.inputs[0]));
        return;
      case Op::ReduceTo:
        contribute(n.inputs[0], alignTo(gy, g_[n.inputs[0]]));
        return;
      case Op::Reshape:
      case Op::Cast:
        contribute(n.inputs[0], make(n.op, g_[n.inputs[0]], {gy}));
        return;
      case Op::Unary:
        if (n.fn == "neg") contribute(n.inputs[0], make(Op::Unary, n, {gy}, "neg"));
        // relu's gradient from its result (torch's threshold_backward does the
        // same): relu(x) <= 0 exactly where x <= 0, NaN included, so the
        // forward need not keep x, and bias + relu can be a GEMM's epilogue.
        else if (n.fn == "relu") contribute(n.inputs[0], make(Op::UnaryGrad, n, {n.id, gy}, n.fn));
        else contribute(n.inputs[0], make(Op::UnaryGrad, n, {n.inputs[0], gy}, n.fn));
        return;
      case Op::Binary: binary(n, gy); return;
      case Op::Contract: {
        int a = n.inputs[0], b = n.inputs[1];
        const Node na = g_[a], nb = g_[b];
        if (needs_[a]) contribute(a, alignTo(contractShape(gy, b, na), na));
        if (needs_[b]) contribute(b, alignTo(contractShape(a, gy, nb), nb));
        return;
      }
      case Op::Reduce: {
        const Node x = g_[n.inputs[0]];
        if (n.fn == "max") {
          Node m = like(x, Op::MaxGrad);
          m.inputs = {n.inputs[0], gy};
          m.names = n.names;
          contribute(n.inputs[0], g_.add(std::move(m)));
          return;
        }
        int spread = alignTo(gy, x);
        if (n.fn == "mean") {
          int64_t count = 1;
          for (const std::string& name : n.names) count *= x.shape.dims[x.shape.find(name)].size;
          Node mul = like(x, Op::Binary);
          mul.fn = "mul";
          // 1/count of the reduced dims: their global sizes (the graph's),
          // right on every rank whatever the layout shards.
          int inv = scalarConst(1.0 / static_cast<double>(count), x);
          mul.inputs = {spread, inv};
          spread = g_.add(std::move(mul));
        }
        contribute(n.inputs[0], spread);
        return;
      }
      case Op::Softmax:
      case Op::LogSoftmax: {
        Node s = like(n, n.op == Op::Softmax ? Op::SoftmaxGrad : Op::LogSoftmaxGrad);
        s.inputs = {i, gy};
        s.names = n.names;
        contribute(n.inputs[0], g_.add(std::move(s)));
        return;
      }
      case Op::Normalize:
      case Op::RmsNormalize: {
        Node s = like(n, n.op == Op::Normalize ? Op::NormalizeGrad : Op::RmsNormalizeGrad);
        s.inputs = {n.inputs[0], gy};
        s.names = n.names;
        s.scalar = n.scalar;
        contribute(n.inputs[0], g_.add(std::move(s)));
        return;
      }
      case Op::Embed: {
        Node s = like(g_[n.inputs[0]], Op::EmbedGrad);
        s.inputs = {n.inputs[1], gy};
        contribute(n.inputs[0], g_.add(std::move(s)));
        return;
      }
      case Op::Attention: {
        // One node for dq, dk and dv (results 0, 1, 2), from the forward's out and log-sum-exp.
        Node s = like(g_[n.inputs[0]], Op::AttentionGrad);
        s.inputs = {n.inputs[0], n.inputs[1], n.inputs[2], i, result(i, 1), gy};
        s.flag = n.flag;
        s.where = n.where;
        s.results = {resultOf(g_[n.inputs[1]], 0), resultOf(g_[n.inputs[2]], 0)};
        const int grads = g_.add(std::move(s));
        for (int k = 0; k < 3; ++k)
          if (needs_[n.inputs[k]]) contribute(n.inputs[k], k == 0 ? grads : result(grads, k));
        return;
      }
      case Op::Result:  // no forward op reads another's extra result yet: a rule is needed first
        throw std::logic_error("autodiff: no gradient through result " + std::to_string(n.index) + " of " +
                               opName(g_[n.inputs[0]].op));
      case Op::Dropout: {
        Node s = like(n, Op::DropoutGrad);
        s.inputs = {gy};
        s.scalar = n.scalar;
        s.index = n.index;  // the forward's seed: the same mask
        contribute(n.inputs[0], g_.add(std::move(s)));
        return;
      }
      case Op::CrossEntropy: {
        Node s = like(g_[n.inputs[0]], Op::CrossEntropyGrad);
        s.inputs = {n.inputs[0], n.inputs[1], gy};
        s.names = n.names;
        contribute(n.inputs[0], g_.add(std::move(s)));
        return;
      }
      default:
        return;  // backward-only nodes are never visited
    }
  }

  // a @ b where the result must carry exactly `target`'s names: contracts the
  // names a and b share (none = outer product). When the result has the
  // target's dims it is made in the target's order (no align after it: the
  // GEMM writes a transposed result as cheaply as a straight one).
  int contractShape(int a, int b, const Node target) {
    Node n = like(target, Op::Contract);
    Shape s;
    const Shape& sa = g_[a].shape;
    const Shape& sb = g_[b].shape;
    for (const Dim& d : sa.dims)
      if (!sb.has(d.name)) s.dims.push_back(d);
    for (const Dim& d : sb.dims)
      if (!sa.has(d.name)) s.dims.push_back(d);
    bool same_dims = s.rank() == target.shape.rank();
    for (const Dim& d : target.shape.dims) {
      int k = s.find(d.name);
      if (k < 0 || s.dims[static_cast<size_t>(k)].size != d.size) same_dims = false;
    }
    n.shape = same_dims ? target.shape : s;
    n.inputs = {a, b};
    return g_.add(std::move(n));
  }

  void binary(const Node& n, int gy) {
    int a = n.inputs[0], b = n.inputs[1];
    const std::string& f = n.fn;
    if (f == "add" || f == "sub") {
      contribute(a, reduceTo(gy, a));
      if (needs_[b]) {
        int gb = reduceTo(gy, b);
        contribute(b, f == "sub" ? make(Op::Unary, g_[gb], {gb}, "neg") : gb);
      }
      return;
    }
    if (f == "mul") {
      if (needs_[a]) contribute(a, reduceTo(make(Op::Binary, n, {gy, b}, "mul"), a));
      if (needs_[b]) contribute(b, reduceTo(make(Op::Binary, n, {gy, a}, "mul"), b));
      return;
    }
    if (f == "div") {
      if (needs_[a]) contribute(a, reduceTo(make(Op::Binary, n, {gy, b}, "div"), a));
      if (needs_[b]) {
        // d(a/b)/db = -(a/b)/b
        int q = reduceTo(make(Op::Binary, n, {make(Op::Binary, n, {gy, n.id}, "mul"), b}, "div"), b);
        contribute(b, make(Op::Unary, g_[q], {q}, "neg"));
      }
    }
  }

  Graph& g_;
  std::vector<int> grad_;
  std::vector<bool> needs_;
  std::map<std::pair<std::string, std::string>, Stack> stacks_;  // (param key, dim) → copies
};

}  // namespace

void appendBackward(Graph& g) {
  Backward(g).run();
  // The views of several results it made must read what they say (a compiler bug otherwise).
  if (std::string problem = checkResults(g); !problem.empty()) throw std::logic_error("autodiff: " + problem);
}

void appendUpdates(Graph& g) {
  std::map<std::string, int> param;
  for (int i = 0; i < g.forward_end; ++i)
    if (g[i].op == Op::Param && !param.count(g[i].name)) param[g[i].name] = i;
  for (const auto& [path, grad] : g.grads) {
    Node n = g[param[path]];
    n.op = Op::Update;
    n.inputs = {param[path], grad};
    g.add(std::move(n));
  }
}

}  // namespace dtl::ir
