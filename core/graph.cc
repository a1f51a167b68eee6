#include "core/graph.h"

namespace dtl::ir {

const char* opName(Op op) {
  switch (op) {
    case Op::Input: return "input";
    case Op::Param: return "param";
    case Op::Const: return "const";
    case Op::Slice: return "slice";
    case Op::Align: return "align";
    case Op::ReduceTo: return "reduce_to";
    case Op::Unary: return "unary";
    case Op::Binary: return "binary";
    case Op::Contract: return "contract";
    case Op::Reduce: return "reduce";
    case Op::Softmax: return "softmax";
    case Op::LogSoftmax: return "log_softmax";
    case Op::Normalize: return "normalize";
    case Op::RmsNormalize: return "rms_normalize";
    case Op::Embed: return "embed";
    case Op::Attention: return "attention";
    case Op::Dropout: return "dropout";
    case Op::CrossEntropy: return "cross_entropy";
    case Op::Argmax: return "argmax";
    case Op::Reshape: return "reshape";
    case Op::Cast: return "cast";
    case Op::Arange: return "arange";
    case Op::UnaryGrad: return "unary_grad";
    case Op::MaxGrad: return "max_grad";
    case Op::SoftmaxGrad: return "softmax_grad";
    case Op::LogSoftmaxGrad: return "log_softmax_grad";
    case Op::NormalizeGrad: return "normalize_grad";
    case Op::RmsNormalizeGrad: return "rms_normalize_grad";
    case Op::EmbedGrad: return "embed_grad";
    case Op::AttentionGrad: return "attention_grad";
    case Op::CrossEntropyGrad: return "cross_entropy_grad";
    case Op::DropoutGrad: return "dropout_grad";
    case Op::SliceGrad: return "slice_grad";
    case Op::Update: return "update";
    case Op::AllReduce: return "all_reduce";
    case Op::AllGather: return "all_gather";
    case Op::ReduceScatter: return "reduce_scatter";
    case Op::AllToAll: return "all_to_all";
    case Op::LocalSlice: return "local_slice";
    case Op::PickClass: return "pick_class";
    case Op::PickClassGrad: return "pick_class_grad";
    case Op::Result: return "result";
  }
  return "?";
}

namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

int64_t resultOffset(const Node& n, int64_t k) {
  int64_t at = 0;
  for (int64_t r = 0; r < k; ++r) at += resultOf(n, r).shape.elements().value_or(0);
  return at;
}

int64_t storedElements(const Node& n) { return resultOffset(n, static_cast<int64_t>(n.results.size()) + 1); }

std::string checkResults(const Graph& g) {
  for (const Node& n : g.nodes) {
    if (n.op != Op::Result) continue;
    const std::string at = "%" + std::to_string(n.id) + " = result";
    if (n.inputs.size() != 1 || n.inputs[0] < 0 || n.inputs[0] >= n.id) return at + " needs one earlier node";
    const Node& of = g[n.inputs[0]];
    if (n.index < 1 || n.index > static_cast<int64_t>(of.results.size()))
      return at + " reads result " + std::to_string(n.index) + " of %" + std::to_string(of.id) + ", which has " +
             std::to_string(of.results.size() + 1);
    const Result r = resultOf(of, n.index);
    if (!(r.shape == n.shape) || r.dtype != n.dtype)
      return at + " is " + dtypeName(n.dtype) + n.shape.str() + ", its result is " + dtypeName(r.dtype) + r.shape.str();
  }
  return "";
}

std::vector<bool> optimiserStep(const Graph& g) {
  std::vector<bool> step(g.nodes.size(), false);
  for (const Node& n : g.nodes) {
    if (n.op == Op::Update) {
      step[static_cast<size_t>(n.id)] = true;
      if (g[n.inputs[0]].op == Op::LocalSlice) step[static_cast<size_t>(n.inputs[0])] = true;
    }
    if (n.op == Op::AllGather && g[n.inputs[0]].op == Op::Update) step[static_cast<size_t>(n.id)] = true;
  }
  return step;
}

std::string printPostOp(const Node& n, const PostOp& o) {
  return (o.fn.empty() ? std::string(opName(o.op)) : o.fn) +
         (o.operand >= 0 ? " %" + std::to_string(n.inputs.at(static_cast<size_t>(o.operand))) : std::string()) +
         (o.own ? " into %" : " as %") + std::to_string(o.node);
}

std::string printNode(const Node& n, const std::string& note) {
  std::string s = "%" + std::to_string(n.id) + " = " + opName(n.op);
  // A conversion's fn is why the layout inserted it (a sentence, not a function).
  if (!n.fn.empty() && !isConversion(n.op)) s += "." + n.fn;
  s += "(";
  for (size_t i = 0; i < n.inputs.size(); ++i) s += (i ? ", %" : "%") + std::to_string(n.inputs[i]);
  s += ")";
  std::string attrs;
  auto add = [&](const std::string& a) { attrs += (attrs.empty() ? "" : ", ") + a; };
  if (!n.name.empty()) add(n.name);
  if (!n.names.empty()) {
    std::string over = "over ";
    for (size_t i = 0; i < n.names.size(); ++i) over += (i ? "," : "") + n.names[i];
    add(over);
  }
  if (n.op == Op::Const) add(num(n.scalar));
  if (n.op == Op::Normalize || n.op == Op::RmsNormalize || n.op == Op::NormalizeGrad ||
      n.op == Op::RmsNormalizeGrad)
    add("eps " + num(n.scalar));
  if (n.op == Op::Dropout || n.op == Op::DropoutGrad) add("p " + num(n.scalar));
  if (n.op == Op::Slice || n.op == Op::SliceGrad || n.op == Op::Result) add("index " + std::to_string(n.index));
  if (n.op == Op::Attention || n.op == Op::AttentionGrad) add(n.flag ? "causal" : "full");
  for (const PostOp& o : n.epilogue) add("then " + printPostOp(n, o));
  if (!attrs.empty()) s += " {" + attrs + "}";
  s += " : " + std::string(dtypeName(n.dtype)) + n.shape.str();
  for (const Result& r : n.results) s += ", " + std::string(dtypeName(r.dtype)) + r.shape.str();
  if (!note.empty()) s += "  " + note;
  if (!n.where.empty()) s += "  # " + n.where;
  return s + "\n";
}

std::string printGraph(const Graph& g, bool with_backward, const std::function<std::string(const Node&)>& annotate) {
  std::string out = "forward\n";
  size_t end = with_backward ? g.nodes.size() : static_cast<size_t>(g.forward_end);
  for (size_t i = 0; i < end; ++i) {
    if (static_cast<int>(i) == g.forward_end) out += "backward\n";
    out += "  " + printNode(g.nodes[i], annotate ? annotate(g.nodes[i]) : std::string());
  }
  out += "loss %" + std::to_string(g.loss) + "\n";
  for (const auto& [name, id] : g.metrics) out += "metric " + name + " %" + std::to_string(id) + "\n";
  if (with_backward)
    for (const auto& [path, id] : g.grads) out += "grad " + path + " %" + std::to_string(id) + "\n";
  return out;
}

}  // namespace dtl::ir
