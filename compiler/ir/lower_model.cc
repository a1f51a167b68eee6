// Lowering: the checked model to the forward training graph.
//
// Why a trace: sema alone evaluates the model — binds layer calls, sizes
// dims, checks a `repeat` stack once, applies the shape rules — and records
// each tensor operation it evaluated, resolved, in order (sema/op_trace.h).
// Lowering only walks that record and maps each operation to nodes; it never
// evaluates the spec, so the two stages cannot disagree about a shape and
// neither re-implements the other's rules.
//
// 1. The model's block is lowered step by step; a step's node ids are kept
//    per slot, so a value used twice is one node.
// 2. A call's block is lowered once per copy of the stack dims it unrolls,
//    the copies numbered innermost fastest; copy c > 0 takes the previous
//    copy's result as its first argument.
// 3. A parameter read `depth` stack levels deep is its full tensor, then one
//    `Slice` per level at that level's current copy; each (path, copies) is
//    made once.
// 4. A binding of a stacked layer is lowered again at every use.
// 5. Numbers and dims used as tensor operands become scalar `Const` nodes,
//    made after the operation's tensor operands.
#include "compiler/ir/lower_model.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace dtl::ir {

namespace {

using sema::TraceOperand;
using sema::TraceStep;

// As many steps as sema may take to check a model: unrolling stacks must not
// make lowering run for hours either.
constexpr int64_t kMaxLoweredSteps = 50000;

class Lowering {
 public:
  Lowering(const sema::Model& model, int64_t batch, const diag::SourceManager& sources, diag::Diagnostics& diags)
      : model_(model), batch_(batch), trace_(model.ops), sources_(sources), diags_(diags),
        slots_(static_cast<size_t>(trace_.slots), -1) {
    for (const sema::ParamInfo& p : model.params) params_[p.path] = &p;
  }

  Graph run() {
    if (!trace_.blocks.empty()) lowerBlock(0);
    graph_.loss = nodeOf(trace_.loss);
    for (const auto& [name, slot] : trace_.metrics) graph_.metrics.emplace_back(name, nodeOf(slot));
    graph_.forward_end = static_cast<int>(graph_.nodes.size());
    return std::move(graph_);
  }

 private:
  int nodeOf(int slot) const { return slot < 0 ? -1 : slots_[static_cast<size_t>(slot)]; }
  void define(int slot, int node) {
    if (slot >= 0) slots_[static_cast<size_t>(slot)] = node;
  }

  // Counts one step; false (reported once) past the cap.
  bool spend() {
    if (++steps_ <= kMaxLoweredSteps) return true;
    diags_.error(calls_.empty() ? model_.loc : calls_.back(),
                 "lowering the model takes more than " + std::to_string(kMaxLoweredSteps) + " steps",
                 "`repeat(n)` lowers n copies of its layer's forward; stacks inside stacks multiply the work");
    return false;
  }

  bool lowerBlock(int block) {
    for (const TraceStep& s : trace_.blocks[static_cast<size_t>(block)].steps)
      if (!lowerStep(s)) return false;
    return true;
  }

  bool lowerStep(const TraceStep& s) {
    if (s.kind != TraceStep::Kind::Input && !spend()) return false;
    switch (s.kind) {
      case TraceStep::Kind::Input: {
        Node n = node(Op::Input, s.shape, s.dtype, s.loc);
        n.name = s.name;
        define(s.slot, graph_.add(std::move(n)));
        return true;
      }
      case TraceStep::Kind::Param: define(s.slot, param(s)); return true;
      case TraceStep::Kind::Binary: define(s.slot, binary(s)); return true;
      case TraceStep::Kind::Unary: {
        Node n = node(Op::Unary, s.shape, s.dtype, s.loc);
        n.fn = s.name;
        n.inputs = {nodeOf(s.operands[0]->slot)};
        define(s.slot, graph_.add(std::move(n)));
        return true;
      }
      case TraceStep::Kind::Primitive: define(s.slot, primitive(s)); return true;
      case TraceStep::Kind::Call: return call(s);
      case TraceStep::Kind::Replay:
        if (!lowerBlock(s.block)) return false;
        define(s.slot, nodeOf(s.result));
        return true;
    }
    return true;
  }

  // A node of this type at `loc`, with the graph's (global) batch.
  Node node(Op op, const Shape& shape, DType dtype, diag::Loc loc) const {
    Node n;
    n.op = op;
    n.shape = shape;
    for (Dim& d : n.shape.dims)
      if (d.name == "batch") d.size = batch_;
    n.dtype = dtype;
    if (loc.valid()) n.where = sources_.name(loc.file) + ":" + std::to_string(loc.line) + ":" + std::to_string(loc.col);
    return n;
  }

  bool call(const TraceStep& s) {
    for (size_t i = 0; i < s.params.size(); ++i) define(s.params[i], nodeOf(s.operands[i]->slot));
    int64_t copies = 1;
    for (const Dim& d : s.stack)
      if (__builtin_mul_overflow(copies, d.size, &copies)) copies = INT64_MAX;
    calls_.push_back(s.loc);
    for (int64_t c = 0; c < copies; ++c) {
      int64_t rest = c;
      for (size_t d = s.stack.size(); d-- > 0;) {
        copy_[s.stack[d].name] = rest % s.stack[d].size;
        rest /= s.stack[d].size;
      }
      if (c > 0 && !s.params.empty()) define(s.params[0], nodeOf(s.result));
      int64_t before = steps_;
      if (!lowerBlock(s.block)) return false;
      if (steps_ == before && !spend()) return false;  // a copy costs a step, even an empty one
    }
    calls_.pop_back();
    define(s.slot, nodeOf(s.result));
    return true;
  }

  int param(const TraceStep& s) {
    std::string key = s.name + "@";
    for (const Dim& d : s.stack) key += std::to_string(copy_[d.name]) + ",";
    auto cached = param_nodes_.find(key);
    if (cached != param_nodes_.end()) return cached->second;
    auto info = params_.find(s.name);
    if (info == params_.end()) return -1;
    const sema::ParamInfo& p = *info->second;
    Node n = node(Op::Param, p.shape, p.dtype, p.loc);
    n.name = p.path;
    int id = graph_.add(std::move(n));
    for (const Dim& d : s.stack) {
      Shape sliced = graph_[id].shape;
      sliced.dims.erase(sliced.dims.begin());
      Node sl = node(Op::Slice, sliced, p.dtype, p.loc);
      sl.inputs = {id};
      sl.names = {d.name};
      sl.index = copy_[d.name];
      sl.name = p.path;
      id = graph_.add(std::move(sl));
    }
    param_nodes_[key] = id;
    return id;
  }

  // A tensor operand's node; a number or dim becomes a scalar constant.
  int operand(const TraceOperand& o, DType as, diag::Loc loc) {
    if (o.tensor) return nodeOf(o.slot);
    Node n = node(Op::Const, Shape{}, as, loc);
    n.scalar = o.number;
    return graph_.add(std::move(n));
  }

  int binary(const TraceStep& s) {
    static const std::map<std::string, std::string> kFn = {
        {"+", "add"}, {"-", "sub"}, {"*", "mul"}, {"/", "div"}, {"==", "eq"}, {"!=", "ne"},
        {"<", "lt"},  {"<=", "le"}, {">", "gt"},  {">=", "ge"}};
    const TraceOperand& a = *s.operands[0];
    const TraceOperand& b = *s.operands[1];
    DType operand_type = s.dtype == DType::Bool ? (a.tensor ? a.dtype : b.dtype) : s.dtype;
    Node n = node(s.name == "@" ? Op::Contract : Op::Binary, s.shape, s.dtype, s.loc);
    if (s.name != "@") n.fn = kFn.at(s.name);
    n.inputs = {operand(a, operand_type, s.loc), operand(b, operand_type, s.loc)};
    return graph_.add(std::move(n));
  }

  int primitive(const TraceStep& s);

  const sema::Model& model_;
  const int64_t batch_;
  const sema::OpTrace& trace_;
  const diag::SourceManager& sources_;
  diag::Diagnostics& diags_;
  Graph graph_;
  std::vector<int> slots_;                               // slot → node
  std::map<std::string, const sema::ParamInfo*> params_;  // by path
  std::map<std::string, int64_t> copy_;                  // stack dim → the copy being lowered
  std::map<std::string, int> param_nodes_;               // "path@copies" → node
  std::vector<diag::Loc> calls_;                         // the calls being lowered
  int64_t steps_ = 0;
};

// A primitive call: its operands in signature order (nullopt where omitted).
int Lowering::primitive(const TraceStep& s) {
  static const std::set<std::string> kUnary = {"relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid",
                                               "exp",  "log",  "sqrt",      "rsqrt", "neg", "abs"};
  const std::string& fn = s.name;
  const auto& args = s.operands;
  auto in = [&](size_t i) { return operand(*args[i], args[i]->tensor ? args[i]->dtype : DType::F32, s.loc); };
  Node n = node(Op::Unary, s.shape, s.dtype, s.loc);
  if (kUnary.count(fn)) {
    n.fn = fn;
    n.inputs = {in(0)};
  } else if (fn == "sum" || fn == "mean" || fn == "max") {
    n.op = Op::Reduce;
    n.fn = fn;
    n.inputs = {in(0)};
    if (args[1]) n.names = args[1]->dims;
    else
      for (const Dim& d : args[0]->shape.dims) n.names.push_back(d.name);
  } else if (fn == "softmax" || fn == "log_softmax" || fn == "argmax") {
    n.op = fn == "softmax" ? Op::Softmax : fn == "log_softmax" ? Op::LogSoftmax : Op::Argmax;
    n.inputs = {in(0)};
    n.names = args[1]->dims;
  } else if (fn == "normalize" || fn == "rms_normalize") {
    n.op = fn == "normalize" ? Op::Normalize : Op::RmsNormalize;
    n.inputs = {in(0)};
    n.names = args[1]->dims;
    n.scalar = args.size() > 2 && args[2] ? args[2]->number : (fn == "normalize" ? 1e-5 : 1e-6);
  } else if (fn == "embed") {
    n.op = Op::Embed;
    n.inputs = {in(0), in(1)};
  } else if (fn == "attention") {
    n.op = Op::Attention;
    n.inputs = {in(0), in(1), in(2)};
    n.flag = !(args.size() > 3 && args[3]) || args[3]->number != 0;
    // Each query row's log-sum-exp [lead…, seq_q, heads], for the backward (f32 whatever q's dtype).
    Shape lse = n.shape;
    lse.dims.pop_back();
    n.results = {ir::Result{lse, DType::F32}};
  } else if (fn == "dropout") {
    n.op = Op::Dropout;
    n.inputs = {in(0)};
    n.scalar = args[1]->number;
    // The mask's seed: this node's lowering id, which every mesh shares
    // (the layout renumbers nodes).
    n.index = static_cast<int64_t>(graph_.nodes.size());
  } else if (fn == "cross_entropy") {
    n.op = Op::CrossEntropy;
    n.inputs = {in(0), in(1)};
    n.names = args[2]->dims;
  } else if (fn == "reshape" || fn == "cast") {
    n.op = fn == "reshape" ? Op::Reshape : Op::Cast;
    n.inputs = {in(0)};
  } else if (fn == "arange") {
    n.op = Op::Arange;
  } else {
    return -1;  // every primitive of sema/signatures.cc is listed above; a new one must be added here
  }
  return graph_.add(std::move(n));
}

}  // namespace

Graph lowerModel(const sema::Model& model, int64_t batch, const diag::SourceManager& sources,
                 diag::Diagnostics& diags) {
  return Lowering(model, batch, sources, diags).run();
}

}  // namespace dtl::ir
