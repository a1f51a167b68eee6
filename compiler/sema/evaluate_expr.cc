// Expressions: names, bindings (lazily, cycle-checked), constants folded,
// tensor operations typed by shape_rules.cc, and layer calls, whose forward
// is checked once per call (once for a whole `repeat` stack). Every tensor
// operation is also recorded for lowering (record_ops.cc).
#include <algorithm>

#include "compiler/sema/instantiator.h"
#include "compiler/sema/shape_rules.h"
#include "compiler/sema/signatures.h"
#include "compiler/syntax/parse.h"

namespace dtl::sema {

using K = Value::Kind;

namespace {

bool isParam(const Instance& inst, const std::string& name) {
  for (const auto& p : inst.decl->params)
    if (p.name.name == name) return true;
  return false;
}

}  // namespace

Value Instantiator::lookup(const std::string& name, Frame& f, Loc loc) {
  if (f.locals) {
    auto it = f.locals->find(name);
    if (it != f.locals->end()) return it->second;
  }
  Instance& inst = *f.inst;
  auto it = inst.env.find(name);
  if (it != inst.env.end()) {
    if (it->second.kind == K::Tensor && isParam(inst, name))
      return recordParam(inst, name, inst.stack.size(), it->second);
    return it->second;
  }
  if (inst.bindings.count(name)) return binding(inst, name, loc);
  return globalName(name);
}

// `batch`, an element type, a layer type or a primitive; anything else was
// reported by resolve_names.
Value Instantiator::globalName(const std::string& name) {
  if (name == "batch") return Value::ofDim(Dim{"batch", batch_});
  Value v;
  if (auto t = parseDType(name)) {
    v.kind = K::DType;
    v.dtype_value = *t;
  } else if (prog_.layers.count(name)) {
    v.kind = K::LayerType;
    v.text = name;
  } else if (findBuiltin(BuiltinKind::Primitive, name)) {
    v.kind = K::Builtin;
    v.text = name;
  }
  return v;
}

Value Instantiator::binding(Instance& inst, const std::string& name, Loc use) {
  // Lowering unrolls a stack, so a binding of a stacked layer is recorded as
  // a block of its own and lowered again at each use (record_ops.cc).
  bool stacked = !inst.stack.empty();
  auto done = inst.done.find(name);
  if (done != inst.done.end())
    return stacked ? recordReplay(binding_blocks_.at({&inst, name}), done->second, use) : done->second;
  const syntax::Binding* b = inst.bindings.at(name);
  if (inst.evaluating.count(name)) {
    std::string chain;
    bool in_cycle = false;
    for (const auto& [i, n] : binding_stack_) {
      in_cycle |= i == &inst && n == name;
      if (in_cycle) chain += n + " → ";
    }
    diags_.error(use, "`" + name + "` depends on itself (" + chain + name + ")",
                 "bindings may come in any order, but not in a cycle");
    return Value::error();
  }
  inst.evaluating.insert(name);
  binding_stack_.emplace_back(&inst, name);
  Frame f{&inst, nullptr};
  int block = stacked ? openBlock() : -1;
  Value v = eval(*b->value, f);
  if (stacked) closeBlock();
  binding_stack_.pop_back();
  inst.evaluating.erase(name);
  inst.done[name] = v;
  if (!stacked) return v;
  binding_blocks_[{&inst, name}] = block;
  return recordReplay(block, v, use);
}

Value Instantiator::eval(const Expr& e, Frame& f) {
  if (++steps_ > kMaxEvalSteps) {
    if (steps_ == kMaxEvalSteps + 1)
      diags_.error(e.loc, "checking the model takes more than " + std::to_string(kMaxEvalSteps) + " steps",
                   "each call of a layer checks its forward again; calls inside calls multiply the work");
    return Value::error();
  }
  switch (e.kind) {
    case Expr::Kind::Error: return Value::error();
    case Expr::Kind::Number: return Value::num(e.number, e.is_int);
    case Expr::Kind::Bool: return Value::boolean(e.number != 0);
    case Expr::Kind::String: {
      Value v;
      v.kind = K::String;
      v.text = e.text;
      return v;
    }
    case Expr::Kind::Quantity:
      diags_.error(e.loc, "`" + syntax::exprText(e) + "` is a quantity with a unit; a model computes with plain numbers");
      return Value::error();
    case Expr::Kind::Name: return lookup(e.text, f, e.loc);
    case Expr::Kind::Member: return member(e, f);
    case Expr::Kind::Call: return call(e, f);
    case Expr::Kind::Unary: return unary(e, f);
    case Expr::Kind::Binary: return binary(e, f);
    case Expr::Kind::Tuple:
    case Expr::Kind::Arrow: return tuple(e, f);
    case Expr::Kind::Range:
      diags_.error(e.loc, "a range `a..b` is only meaningful in `csv(…, columns = a..b)`");
      return Value::error();
    case Expr::Kind::Repeat:
      diags_.error(e.loc, "`repeat` must be bound to a name: `blocks = repeat(n) Layer(…)`");
      return Value::error();
  }
  return Value::error();
}

Value Instantiator::unary(const Expr& e, Frame& f) {
  Value x = eval(*e.kids[0], f);
  if (x.isError()) return x;
  if (e.text == "!") {
    if (x.kind == K::Bool) return Value::boolean(x.number == 0);
    diags_.error(e.loc, "`!` needs a bool, got " + describe(x));
    return Value::error();
  }
  if (x.kind == K::Number) return Value::num(e.text == "-" ? -x.number : x.number, x.is_int);
  if (x.kind == K::Dim) return Value::num(e.text == "-" ? -x.dim.size : x.dim.size, true);
  if (x.kind == K::Tensor && x.dtype != DType::Bool) return e.text == "-" ? recordUnary("neg", x, e.loc) : x;
  diags_.error(e.loc, "`" + e.text + "` cannot take " + describe(x));
  return Value::error();
}

// `(a, b, …)` stops at its first erroneous item; `a -> b` evaluates both.
Value Instantiator::tuple(const Expr& e, Frame& f) {
  Value v;
  v.kind = K::Tuple;
  if (e.kind == Expr::Kind::Arrow) {
    v.text = "->";
    v.items.push_back(eval(*e.kids[0], f));
    v.items.push_back(eval(*e.kids[1], f));
    if (v.items[0].isError() || v.items[1].isError()) return Value::error();
    return v;
  }
  for (const auto& k : e.kids) {
    v.items.push_back(eval(*k, f));
    if (v.items.back().isError()) return Value::error();
  }
  return v;
}

Value Instantiator::member(const Expr& e, Frame& f) {
  Value base = eval(*e.kids[0], f);
  if (base.isError()) return base;
  if (base.kind != K::Layer) {
    diags_.error(e.loc, "`." + e.text + "` on " + describe(base), "members belong to sub-layers, e.g. `wte.table`");
    return Value::error();
  }
  Instance& inst = *base.inst;
  auto it = inst.env.find(e.text);
  bool is_param = isParam(inst, e.text);
  if (it == inst.env.end() || (!is_param && it->second.kind != K::Layer)) {
    std::vector<std::string> members;
    for (const auto& p : inst.decl->params) members.push_back(p.name.name);
    for (const auto& [n, s] : inst.subs) members.push_back(n);
    std::string hint = diag::didYouMean(e.text, members);
    if (hint.empty()) {
      hint = "its parameters and sub-layers are:";
      for (const auto& m : members) hint += " " + m;
    }
    diags_.error(e.loc, "layer `" + inst.decl->name.name + "` has no parameter or sub-layer `" + e.text + "`", hint);
    return Value::error();
  }
  Value v = it->second;
  // Outside its stack a stacked parameter shows every copy.
  size_t depth = f.inst->stack.size();
  if (v.kind == K::Tensor && !inst.stack.empty() && inst.stack.size() > depth) {
    Shape full;
    full.dims.assign(inst.stack.begin() + depth, inst.stack.end());
    for (const Dim& d : v.shape.dims) full.dims.push_back(d);
    v.shape = full;
  }
  if (is_param && v.kind == K::Tensor) v = recordParam(inst, e.text, depth, v);
  return v;
}

Value Instantiator::binary(const Expr& e, Frame& f) {
  Value a = eval(*e.kids[0], f);
  Value b = eval(*e.kids[1], f);
  if (a.isError() || b.isError()) return Value::error();
  const std::string& op = e.text;
  // An absent parameter leaves its term out.
  if (a.kind == K::Absent || b.kind == K::Absent) {
    if (op == "+" || op == "*" || (op == "-" && b.kind == K::Absent)) {
      if (a.kind == K::Absent && b.kind == K::Absent) return a;
      return a.kind == K::Absent ? b : a;
    }
    diags_.error(e.loc, "an absent parameter (its `if` is false) used with `" + op + "`",
                 "an absent parameter may only be left out of `+`, `-` or `*`");
    return Value::error();
  }
  if (op == "&&" || op == "||") {
    if (a.kind != K::Bool || b.kind != K::Bool) {
      diags_.error(e.loc, "`" + op + "` needs two bools, got " + describe(a.kind != K::Bool ? a : b));
      return Value::error();
    }
    return Value::boolean(op == "&&" ? (a.number != 0 && b.number != 0) : (a.number != 0 || b.number != 0));
  }
  if (std::optional<Value> folded = fold(op, a, b, e.loc)) return *folded;
  if (op == "@") return recordBinary(op, a, b, contractRule(a, b, e.loc, diags_), e.loc);
  return recordBinary(op, a, b, binaryRule(op, a, b, e.loc, diags_), e.loc);
}

// Constant folding over numbers and dim sizes; nullopt when `a op b` is not
// a constant.
std::optional<Value> Instantiator::fold(const std::string& op, const Value& a, const Value& b, Loc loc) {
  auto asNum = [](const Value& v, double& x, bool& is_int) {
    if (v.kind == K::Number) {
      x = v.number;
      is_int = v.is_int;
      return true;
    }
    if (v.kind == K::Dim) {
      x = static_cast<double>(v.dim.size);
      is_int = true;
      return true;
    }
    return false;
  };
  double x, y;
  bool xi, yi;
  if (op == "@" || !asNum(a, x, xi) || !asNum(b, y, yi)) return std::nullopt;
  if (op == "+") return Value::num(x + y, xi && yi);
  if (op == "-") return Value::num(x - y, xi && yi);
  if (op == "*") return Value::num(x * y, xi && yi);
  if (op == "/") {
    if (y == 0) {
      diags_.error(loc, "division by zero");
      return Value::error();
    }
    return Value::num(x / y, false);
  }
  if (op == "==") return Value::boolean(x == y);
  if (op == "!=") return Value::boolean(x != y);
  if (op == "<") return Value::boolean(x < y);
  if (op == "<=") return Value::boolean(x <= y);
  if (op == ">") return Value::boolean(x > y);
  if (op == ">=") return Value::boolean(x >= y);
  return std::nullopt;
}

Value Instantiator::call(const Expr& e, Frame& f) {
  const Expr& callee = *e.kids[0];
  Value fn = eval(callee, f);
  if (fn.isError()) {
    for (size_t i = 1; i < e.kids.size(); ++i) eval(*e.kids[i], f);  // report errors inside
    return fn;
  }
  if (fn.kind == K::Builtin) return callPrimitive(e, fn.text, f);
  if (fn.kind == K::LayerType) {
    diags_.error(callee.loc, "layer `" + fn.text + "` is called before it is instantiated",
                 "bind an instance first: `name = " + fn.text + "(…)`, then call `name(x)`");
    return Value::error();
  }
  if (fn.kind != K::Layer) {
    diags_.error(callee.loc, "`" + syntax::exprText(callee) + "` is " + describe(fn) + ", not something to call");
    return Value::error();
  }
  return callLayer(e, *fn.inst, f);
}

Value Instantiator::callPrimitive(const Expr& e, const std::string& fn, Frame& f) {
  const Signature* sig = findBuiltin(BuiltinKind::Primitive, fn);
  std::vector<const Expr*> bound;
  if (!bindArguments(e, *sig, "`" + fn + "`", bound, diags_)) return Value::error();
  std::vector<std::optional<Value>> args(bound.size());
  std::vector<Loc> locs(bound.size(), e.loc);
  for (size_t i = 0; i < bound.size(); ++i) {
    if (!bound[i]) continue;
    args[i] = eval(*bound[i], f);
    locs[i] = bound[i]->loc;
    if (args[i]->isError()) return Value::error();
  }
  return recordPrimitive(fn, args, primitiveRule(fn, args, locs, e.loc, diags_), e.loc);
}

Value Instantiator::callLayer(const Expr& e, Instance& inst, Frame& f) {
  const syntax::LayerDecl& decl = *inst.decl;
  std::vector<Value> args;
  if (!forwardArgs(e, decl, f, args)) return Value::error();
  if (++call_depth_ > kMaxCallDepth) {
    --call_depth_;
    diags_.error(e.loc, "forward calls nested deeper than " + std::to_string(kMaxCallDepth));
    return Value::error();
  }
  // One copy is checked; lowering runs the recorded block once per copy.
  std::vector<Value> params = args;
  TraceStep step = openCall(inst, f.inst->stack.size(), params, e.loc);
  Value out = forwardBody(e, inst, decl.forwards[0], params);
  out = closeCall(std::move(step), out);
  --call_depth_;
  // A stack's copies chain: each must return what it takes.
  if (inst.stack.size() > f.inst->stack.size() && !out.isError() && !args.empty()) {
    const Value& in = args[0];
    if (out.kind != K::Tensor || in.kind != K::Tensor || out.shape != in.shape || out.dtype != in.dtype) {
      diags_.error(e.loc, "a repeated layer must return what it takes: `" + decl.name.name + "` maps " +
                              describe(in) + " to " + describe(out),
                   "each copy feeds the next, so input and output shapes must match");
      return Value::error();
    }
  }
  return out;
}

// The forward's positional arguments, evaluated and counted.
bool Instantiator::forwardArgs(const Expr& e, const syntax::LayerDecl& decl, Frame& f, std::vector<Value>& args) {
  if (decl.forwards.empty()) {
    diags_.error(e.loc, "layer `" + decl.name.name + "` has no `forward` to call",
                 "add `forward(x) = …` to the layer");
    return false;
  }
  const syntax::Forward& fw = decl.forwards[0];
  for (size_t i = 1; i < e.kids.size(); ++i) {
    if (!e.arg_names[i - 1].empty()) {
      diags_.error(e.arg_name_locs[i - 1], "a layer's forward takes positional arguments only");
      return false;
    }
    args.push_back(eval(*e.kids[i], f));
    if (args.back().isError()) return false;
  }
  if (args.size() == fw.params.size()) return true;
  std::string names;
  for (const syntax::Ident& p : fw.params) names += (names.empty() ? "" : ", ") + p.name;
  diags_.error(e.loc, "`" + syntax::exprText(*e.kids[0]) + "` takes " + std::to_string(fw.params.size()) +
                          " input" + (fw.params.size() == 1 ? "" : "s") + ", got " + std::to_string(args.size()),
               "the forward of `" + decl.name.name + "` takes (" + names + "), declared at line " +
                   std::to_string(fw.loc.line));
  return false;
}

Value Instantiator::forwardBody(const Expr& e, Instance& inst, const syntax::Forward& fw, const std::vector<Value>& args) {
  const syntax::LayerDecl& decl = *inst.decl;
  std::map<std::string, Value> locals;
  for (size_t i = 0; i < args.size(); ++i) locals[fw.params[i].name] = args[i];
  Frame inner{&inst, &locals};
  size_t first_error = diags_.all().size();
  for (const syntax::Let& let : fw.lets) {
    Value v = eval(*let.value, inner);
    locals[let.name.name] = v;
  }
  Value out;
  if (!fw.result) {
    diags_.error(fw.body_end, "forward of `" + decl.name.name + "` has no `return`",
                 "end the block with `return EXPR`");
    out = Value::error();
  } else {
    out = eval(*fw.result, inner);
  }
  noteOutsideSpec(first_error, e.loc, "in the forward of `" + decl.name.name + "` called here");
  return out;
}

}  // namespace dtl::sema
