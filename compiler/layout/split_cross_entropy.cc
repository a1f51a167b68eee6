// split_cross_entropy.h: the rewrite. Nodes are copied in order with their
// ids renumbered; a forward cross-entropy's log-sum-exp is kept per (logits,
// labels) so its gradient reuses it.
#include "compiler/layout/split_cross_entropy.h"

#include <map>
#include <set>

namespace dtl::layout {

namespace {

using ir::Node;
using ir::Op;

class Rewrite {
 public:
  Rewrite(const ir::Graph& in, const std::vector<SplitRule>& rules) : in_(in) {
    for (const SplitRule& r : rules) split_.insert(r.dim);
  }

  ir::Graph run() {
    map_.assign(in_.nodes.size(), -1);
    for (const Node& n : in_.nodes) {
      const bool split = (n.op == Op::CrossEntropy || n.op == Op::CrossEntropyGrad) && split_.count(n.names.at(0));
      if (!split) {
        Node c = n;
        for (int& x : c.inputs) x = map_[static_cast<size_t>(x)];
        map_[static_cast<size_t>(n.id)] = out_.add(std::move(c));
      } else {
        map_[static_cast<size_t>(n.id)] = n.op == Op::CrossEntropy ? forward(n) : backward(n);
      }
    }
    auto remap = [&](int id) { return id < 0 ? id : map_[static_cast<size_t>(id)]; };
    out_.loss = remap(in_.loss);
    for (const auto& [name, id] : in_.metrics) out_.metrics.emplace_back(name, remap(id));
    for (const auto& [path, id] : in_.grads) out_.grads.emplace_back(path, remap(id));
    out_.forward_end = in_.forward_end > 0 ? remap(in_.forward_end - 1) + 1 : 0;
    return std::move(out_);
  }

 private:
  int add(Op op, std::vector<int> inputs, Shape shape, const Node& from, std::string fn = {},
          std::vector<std::string> names = {}) {
    Node n;
    n.op = op;
    n.inputs = std::move(inputs);
    n.shape = std::move(shape);
    n.dtype = DType::F32;
    n.fn = std::move(fn);
    n.names = std::move(names);
    n.where = from.where;
    return out_.add(std::move(n));
  }

  static Shape rowsOf(const Shape& logits, const std::string& classes) {
    Shape rows = logits;
    rows.dims.erase(rows.dims.begin() + logits.find(classes));
    return rows;
  }

  // log Σ exp over the classes, per row.
  int logSumExp(int logits, const std::string& c, const Node& from) {
    const Shape l = out_[logits].shape;  // a copy: add() may move the nodes
    const Shape rows = rowsOf(l, c);
    const int m = add(Op::Reduce, {logits}, rows, from, "max", {c});
    const int z = add(Op::Binary, {logits, m}, l, from, "sub");
    const int e = add(Op::Unary, {z}, l, from, "exp");
    const int s = add(Op::Reduce, {e}, rows, from, "sum", {c});
    const int ls = add(Op::Unary, {s}, rows, from, "log");
    return add(Op::Binary, {ls, m}, rows, from, "add");
  }

  int forward(const Node& n) {
    const int logits = map_[static_cast<size_t>(n.inputs[0])], labels = map_[static_cast<size_t>(n.inputs[1])];
    const std::string& c = n.names[0];
    const Shape rows = rowsOf(out_[logits].shape, c);
    const int lse = logSumExp(logits, c, n);
    lse_[{logits, labels}] = lse;
    const int p = add(Op::PickClass, {logits, labels}, rows, n, {}, {c});
    const int d = add(Op::Binary, {lse, p}, rows, n, "sub");
    std::vector<std::string> all;
    for (const Dim& r : rows.dims) all.push_back(r.name);
    return add(Op::Reduce, {d}, n.shape, n, "mean", all);
  }

  int backward(const Node& n) {
    const int logits = map_[static_cast<size_t>(n.inputs[0])], labels = map_[static_cast<size_t>(n.inputs[1])];
    const int dy = map_[static_cast<size_t>(n.inputs[2])];
    const std::string& c = n.names[0];
    const Shape l = out_[logits].shape;  // a copy: add() may move the nodes
    auto it = lse_.find({logits, labels});
    const int lse = it != lse_.end() ? it->second : logSumExp(logits, c, n);
    const int t = add(Op::Binary, {logits, lse}, l, n, "sub");
    const int sm = add(Op::Unary, {t}, l, n, "exp");
    const int oh = add(Op::PickClassGrad, {labels}, l, n, {}, {c});
    const int g = add(Op::Binary, {sm, oh}, l, n, "sub");
    Node k;  // the mean's 1/N over the rows (global sizes)
    k.op = Op::Const;
    k.scalar = 1.0 / static_cast<double>(rowsOf(l, c).elements().value_or(1));
    k.where = n.where;
    const int inv = out_.add(std::move(k));
    const int scale = add(Op::Binary, {dy, inv}, out_[dy].shape, n, "mul");
    return add(Op::Binary, {g, scale}, l, n, "mul");
  }

  const ir::Graph& in_;
  std::set<std::string> split_;
  ir::Graph out_;
  std::vector<int> map_;
  std::map<std::pair<int, int>, int> lse_;
};

}  // namespace

ir::Graph splitCrossEntropy(const ir::Graph& g, const std::vector<SplitRule>& rules) { return Rewrite(g, rules).run(); }

}  // namespace dtl::layout
