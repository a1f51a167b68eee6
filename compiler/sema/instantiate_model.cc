// Stage 4: model instantiation and shape inference.
//
// 1. The model is an Instance: its dims are evaluated in order, its inputs
//    typed, its params created, its sub-layers instantiated (recursively,
//    depth-capped, a layer that contains itself is an error).
// 2. A sub-layer's dim arguments bind to the caller's dims (so a Linear's
//    weight is [pixels, hidden], named by the caller), other arguments to
//    constants; defaults are evaluated in the callee.
// 3. `repeat(n) L(…)` instantiates L once with the stack dim n in front of
//    every parameter it owns; calling it checks one copy and that the copy
//    returns the shape it takes (so n copies chain).
// 4. The model's bindings are evaluated by dependency: `loss` first, then the
//    metrics and the rest in source order; a cycle is an error.
#include "compiler/sema/instantiate_model.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <set>
#include <tuple>

#include "compiler/sema/resolve_names.h"
#include "compiler/sema/shape_rules.h"
#include "compiler/sema/signatures.h"
#include "compiler/syntax/parse.h"

namespace dtl::sema {

namespace {

using syntax::Expr;
using K = Value::Kind;
constexpr int kMaxLayerDepth = 32;
constexpr int kMaxCallDepth = 64;
// A layer that holds or calls another twice, nested, doubles the work per
// level; these totals keep such a spec from running for hours. (The samples
// take at most 152 evaluation steps.)
constexpr int kMaxInstances = 10000;
constexpr int64_t kMaxEvalSteps = 50000;

struct Frame {
  Instance* inst;
  const std::map<std::string, Value>* locals;  // forward params + lets; may be null
};

class Instantiator {
 public:
  Instantiator(const Program& prog, int64_t batch, Model& out, diag::Diagnostics& diags, ir::Graph* graph)
      : prog_(prog), batch_(batch), out_(out), diags_(diags), graph_(graph) {}

  void run() {
    const syntax::LayerDecl& m = *prog_.model;
    out_.name = m.name.name;
    out_.loc = m.name.loc;
    model_.decl = &m;
    model_.where = m.name.loc;
    for (const auto& f : m.forwards)
      diags_.error(f.loc, "a model has no `forward`",
                   "bind the output instead: `logits = …` and `loss = …`");
    setup(model_, nullptr);
    for (const syntax::DimDef& d : m.dims) {
      auto it = model_.env.find(d.name.name);
      if (it != model_.env.end() && it->second.kind == K::Dim) out_.dims.push_back(it->second.dim);
    }
    for (const syntax::InputDecl& in : m.inputs) {
      auto it = model_.env.find(in.name.name);
      if (it == model_.env.end() || it->second.kind != K::Tensor) continue;
      out_.inputs.push_back(InputInfo{in.name.name, it->second.shape, it->second.dtype, in.name.loc});
    }
    // Evaluate loss first so its errors come first, then the rest in order.
    const syntax::Binding* loss = nullptr;
    for (const syntax::Binding& b : m.bindings)
      if (b.name.name == "loss" && !b.is_metric) loss = &b;
    if (!loss) {
      diags_.error(m.name.loc, "model `" + m.name.name + "` has no `loss`",
                   "bind the scalar to minimise: `loss = cross_entropy(logits, label, over = classes)`");
    } else {
      Value v = binding(model_, "loss", loss->name.loc);
      if (graph_) graph_->loss = v.node;
      if (v.kind == K::Tensor && (!v.shape.scalar() || v.dtype != DType::F32))
        diags_.error(loss->value->loc,
                     "`loss` must be a scalar f32, got " + std::string(dtypeName(v.dtype)) + v.shape.str(),
                     v.shape.scalar() ? "convert it with cast(…, f32)"
                                      : "reduce it to a scalar, e.g. `mean(…)` averages over all of " + v.shape.names());
      else if (!v.isError() && v.kind != K::Tensor)
        diags_.error(loss->value->loc, "`loss` must be a scalar f32 tensor, got " + describe(v));
    }
    for (const syntax::Binding& b : m.bindings) {
      if (&b == loss || !model_.bindings.count(b.name.name)) continue;
      Value v = binding(model_, b.name.name, b.name.loc);
      if (graph_ && b.is_metric && v.kind == K::Tensor && v.shape.scalar())
        graph_->metrics.emplace_back(b.name.name, v.node);
      if (b.is_metric && v.kind == K::Tensor && !v.shape.scalar())
        diags_.error(b.value->loc, "metric `" + b.name.name + "` must be a scalar, got " +
                                       dtypeName(v.dtype) + v.shape.str(),
                     "reduce it to a scalar, e.g. `mean(…)` averages over all of " + v.shape.names());
      else if (b.is_metric && !v.isError() && v.kind != K::Tensor && v.kind != K::Number)
        diags_.error(b.value->loc, "metric `" + b.name.name + "` must be a scalar, got " + describe(v));
    }
    for (const syntax::Binding& b : m.bindings) {
      auto it = model_.done.find(b.name.name);
      if (it != model_.done.end() && it->second.kind == K::Tensor)
        out_.values.push_back(ValueInfo{b.name.name, it->second.shape, it->second.dtype, b.is_metric, b.name.loc});
    }
    for (const ParamInfo& p : out_.params) {
      int64_t n = p.shape.elements().value_or(-1), bytes = 0;
      if (n < 0 || !checkedMul(n, dtypeBytes(p.dtype), bytes) || __builtin_add_overflow(out_.parameters, n, &out_.parameters) ||
          __builtin_add_overflow(out_.parameter_bytes, bytes, &out_.parameter_bytes)) {
        out_.parameters = out_.parameter_bytes = -1;  // past 64 bits: checkSizes names the dim
        break;
      }
    }
  }

 private:
  // ---- instances -------------------------------------------------------

  // Fills an instance whose args are already in env.
  void setup(Instance& inst, Frame* caller) {
    (void)caller;
    const syntax::LayerDecl& l = *inst.decl;
    if (!l.is_model)
      for (const auto& in : l.inputs)
        diags_.error(in.name.loc, "`input` in layer `" + l.name.name + "`",
                     "inputs belong to the model; pass values to the layer's forward");
    Frame self{&inst, nullptr};
    for (const syntax::DimDef& d : l.dims) {
      int64_t size = 0;
      if (inst.env.count(d.name.name)) continue;  // a duplicate, reported by resolve_names
      if (dimValue(d.name.name, *d.value, self, size)) inst.env[d.name.name] = Value::ofDim(Dim{d.name.name, size});
      else inst.env[d.name.name] = Value::error();
    }
    for (const syntax::InputDecl& in : l.inputs) {
      if (!l.is_model || inst.env.count(in.name.name)) continue;
      Shape s;
      DType t = DType::F32;
      if (!in.type.elem) {
        diags_.error(in.type.loc, "input `" + in.name.name + "` needs an element type",
                     "e.g. `input " + in.name.name + " : f32[batch, …]` or i32[…] for ids and labels");
        inst.env[in.name.name] = Value::error();
        continue;
      }
      if (tensorType(in.type, self, "input `" + in.name.name + "`", s, t))
        inst.env[in.name.name] = Value::tensor(std::move(s), t);
      else
        inst.env[in.name.name] = Value::error();
      if (graph_ && inst.env[in.name.name].kind == K::Tensor) {
        Value& v = inst.env[in.name.name];
        ir::Node n = node(ir::Op::Input, v, in.name.loc);
        n.name = in.name.name;
        v.node = graph_->add(std::move(n));
      }
    }
    // Params and sub-layers in source order, so parameter paths list the
    // way the spec reads (neither depends on the other).
    std::vector<std::pair<Loc, std::function<void()>>> items;
    for (const syntax::ParamDecl& p : l.params)
      items.emplace_back(p.name.loc, [&, pp = &p] { param(inst, *pp, self); });
    for (const syntax::Binding& b : l.bindings) {
      if (!b.is_metric && isSubLayer(*b.value, inst))
        items.emplace_back(b.name.loc, [&, bb = &b] { subLayer(inst, *bb, self); });
      else
        inst.bindings[b.name.name] = &b;
    }
    std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) {
      return std::tie(a.first.line, a.first.col) < std::tie(b.first.line, b.first.col);
    });
    for (auto& item : items) item.second();
  }

  bool isSubLayer(const Expr& e, const Instance& inst) {
    if (e.kind == Expr::Kind::Repeat) return true;
    const std::string& callee = e.calleeName();
    if (callee.empty() || !prog_.layers.count(callee)) return false;
    // A local name shadows a layer.
    return !inst.env.count(callee);
  }

  void param(Instance& inst, const syntax::ParamDecl& p, Frame& self) {
    if (inst.env.count(p.name.name)) return;  // a duplicate, reported by resolve_names
    if (p.cond) {
      Value c = eval(*p.cond, self);
      if (c.kind != K::Bool) {
        if (!c.isError())
          diags_.error(p.cond->loc, "the `if` of param `" + p.name.name + "` must be true or false, got " + describe(c),
                       "use a bool argument, e.g. `if use_bias`");
        inst.env[p.name.name] = Value::error();
        return;
      }
      if (c.number == 0) {
        Value absent;
        absent.kind = K::Absent;
        inst.env[p.name.name] = absent;
        return;
      }
    }
    Shape s;
    DType t = DType::F32;
    if (!tensorType(p.type, self, "param `" + p.name.name + "`", s, t)) {
      inst.env[p.name.name] = Value::error();
      return;
    }
    if (!isFloat(t)) {
      diags_.error(p.type.loc, "param `" + p.name.name + "` is " + dtypeName(t) + "; parameters are trained, so floating-point",
                   "use f32 (the default), bf16 or f16");
      inst.env[p.name.name] = Value::error();
      return;
    }
    std::string init = initText(*p.init, self);
    Shape full;
    full.dims = inst.stack;
    for (const Dim& d : s.dims) {
      if (full.has(d.name)) {
        diags_.error(p.type.loc, "param `" + p.name.name + "` would have `" + d.name + "` twice once stacked by `repeat`");
        inst.env[p.name.name] = Value::error();
        return;
      }
      full.dims.push_back(d);
    }
    // A shape past 64 bits is kept: checkSizes reports it at the dim that makes it so.
    std::string path = inst.path.empty() ? p.name.name : inst.path + "." + p.name.name;
    out_.params.push_back(ParamInfo{path, full, t, init, p.name.loc});
    inst.env[p.name.name] = Value::tensor(std::move(s), t);
  }

  std::string initText(const Expr& e, Frame& self) {
    const Expr* callee = e.kind == Expr::Kind::Call ? e.kids[0].get() : &e;
    if (callee->kind != Expr::Kind::Name) return "?";
    const Signature* sig = findBuiltin(BuiltinKind::Init, callee->text);
    if (!sig) return "?";  // reported by resolve_names
    if (e.kind != Expr::Kind::Call) {
      for (const ParamSig& ps : sig->params)
        if (ps.required) diags_.error(e.loc, "initialiser `" + callee->text + "` needs argument `" + ps.name + "`");
      return callee->text;
    }
    std::vector<const Expr*> bound;
    if (!bindArguments(e, *sig, "initialiser `" + callee->text + "`", bound, diags_)) return "?";
    std::string text = callee->text + "(";
    bool first = true;
    for (size_t i = 0; i < bound.size(); ++i) {
      if (!bound[i]) continue;
      Value v = eval(*bound[i], self);
      if (v.kind != K::Number) {
        if (!v.isError())
          diags_.error(bound[i]->loc, "argument `" + sig->params[i].name + "` of `" + callee->text +
                                          "` must be a number, got " + describe(v));
        continue;
      }
      if (sig->params[i].name == "std" && v.number < 0)
        diags_.error(bound[i]->loc, "`std` must not be negative");
      text += (first ? "" : ", ") + sig->params[i].name + " = " + syntax::exprText(*bound[i]);
      first = false;
    }
    return text + ")";
  }

  bool tensorType(const syntax::TensorType& tt, Frame& self, const std::string& what, Shape& s, DType& t) {
    bool ok = true;
    if (tt.elem) {
      auto parsed = parseDType(tt.elem->name);
      if (!parsed) {
        diags_.error(tt.elem->loc, "unknown element type `" + tt.elem->name + "`",
                     diag::didYouMean(tt.elem->name, {"f32", "bf16", "f16", "i32", "i64", "u8", "u16", "bool"}).empty()
                         ? "one of f32, bf16, f16, i32, i64, u8, u16, bool"
                         : diag::didYouMean(tt.elem->name, {"f32", "bf16", "f16", "i32", "i64", "u8", "u16", "bool"}));
        ok = false;
      } else {
        t = *parsed;
      }
    }
    for (const syntax::Ident& id : tt.dims) {
      Value v = lookup(id.name, self, id.loc, false);
      if (v.kind != K::Dim) {
        if (!v.isError()) {
          std::vector<std::string> dims;
          for (const auto& [n, val] : self.inst->env)
            if (val.kind == K::Dim) dims.push_back(n);
          dims.push_back("batch");
          std::string hint = diag::didYouMean(id.name, dims);
          diags_.error(id.loc, "`" + id.name + "` in the shape of " + what + " is not a dim" +
                                   (v.kind == K::Error ? "" : " (it is " + describe(v) + ")"),
                       hint.empty() ? "declare it: `dim " + id.name + " = …`" : hint);
        }
        ok = false;
        continue;
      }
      if (s.has(v.dim.name)) {
        diags_.error(id.loc, what + " has the dim `" + v.dim.name + "` twice",
                     "a tensor names each dim once; declare a second dim, e.g. `dim " + v.dim.name +
                         "2 = " + v.dim.name + "`");
        ok = false;
        continue;
      }
      s.dims.push_back(v.dim);
    }
    return ok;
  }

  void subLayer(Instance& parent, const syntax::Binding& b, Frame& self) {
    if (parent.env.count(b.name.name)) return;  // a duplicate, reported by resolve_names
    const Expr* call = b.value.get();
    std::vector<Dim> stack = parent.stack;
    if (call->kind == Expr::Kind::Repeat) {
      Value n = eval(*call->kids[0], self);
      const Expr* inner = call->kids[1].get();
      if (n.kind != K::Dim) {
        if (!n.isError())
          diags_.error(call->kids[0]->loc, "`repeat` needs a dim, got " + describe(n),
                       "declare one, e.g. `dim layers = 12`, and write `repeat(layers)`");
        parent.env[b.name.name] = Value::error();
        return;
      }
      if (inner->calleeName().empty() || !prog_.layers.count(inner->calleeName())) {
        diags_.error(inner->loc, "`repeat(n)` must be followed by a layer instantiation",
                     "e.g. `blocks = repeat(layers) TransformerBlock(d, heads, hidden)`");
        parent.env[b.name.name] = Value::error();
        return;
      }
      for (const Dim& d : stack)
        if (d.name == n.dim.name) {
          diags_.error(call->kids[0]->loc, "`repeat(" + n.dim.name + ")` inside another `repeat(" + n.dim.name + ")`",
                       "nested stacks need distinct dims");
          parent.env[b.name.name] = Value::error();
          return;
        }
      stack.push_back(n.dim);
      call = inner;
    }
    const syntax::LayerDecl* decl = prog_.layers.at(call->calleeName());
    if (std::find(active_.begin(), active_.end(), decl) != active_.end() ||
        static_cast<int>(active_.size()) >= kMaxLayerDepth) {
      std::string chain;
      for (const auto* a : active_) chain += a->name.name + " → ";
      diags_.error(call->loc, "layer `" + decl->name.name + "` contains itself (" + chain + decl->name.name + ")",
                   "a layer cannot instantiate itself, directly or through others");
      parent.env[b.name.name] = Value::error();
      return;
    }
    if (++instances_ > kMaxInstances) {
      if (instances_ == kMaxInstances + 1)
        diags_.error(call->loc, "the model has more than " + std::to_string(kMaxInstances) + " layer instances",
                     "`repeat(n) Layer(…)` stacks n copies as one instance");
      parent.env[b.name.name] = Value::error();
      return;
    }
    auto inst = std::make_unique<Instance>();
    inst->decl = decl;
    inst->path = parent.path.empty() ? b.name.name : parent.path + "." + b.name.name;
    inst->stack = std::move(stack);
    inst->where = b.name.loc;
    if (!bindLayerArgs(*call, *decl, self, *inst)) {
      parent.env[b.name.name] = Value::error();
      return;
    }
    active_.push_back(decl);
    size_t first_error = diags_.all().size();
    setup(*inst, &self);
    noteOutsideSpec(first_error, call->loc, "in `" + decl->name.name + "` instantiated here");
    active_.pop_back();
    out_.layer_paths.push_back(inst->path);
    for (const Dim& d : inst->stack)
      if (std::find(out_.repeat_dims.begin(), out_.repeat_dims.end(), d.name) == out_.repeat_dims.end())
        out_.repeat_dims.push_back(d.name);
    Value v;
    v.kind = K::Layer;
    v.inst = inst.get();
    v.text = decl->name.name;
    parent.subs[b.name.name] = std::move(inst);
    parent.env[b.name.name] = v;
  }

  bool bindLayerArgs(const Expr& call, const syntax::LayerDecl& decl, Frame& caller, Instance& inst) {
    Signature sig{decl.name.name, {}};
    for (const auto& a : decl.args) sig.params.push_back(ParamSig{a.name.name, a.default_value == nullptr});
    std::vector<const Expr*> bound;
    if (!bindArguments(call, sig, "layer `" + decl.name.name + "`", bound, diags_)) return false;
    bool ok = true;
    Frame self{&inst, nullptr};
    for (size_t i = 0; i < decl.args.size(); ++i) {
      const syntax::LayerArg& a = decl.args[i];
      Value v = bound[i] ? eval(*bound[i], caller) : eval(*a.default_value, self);
      Loc at = bound[i] ? bound[i]->loc : a.default_value->loc;
      if (v.isError()) {
        ok = false;
        inst.env[a.name.name] = v;
        continue;
      }
      const std::string& type = a.type.name;
      bool fits = (type == "dim" && v.kind == K::Dim) || (type == "bool" && v.kind == K::Bool) ||
                  (type == "int" && v.kind == K::Number && v.is_int) ||
                  (type == "float" && v.kind == K::Number) || (type == "string" && v.kind == K::String);
      if (type != "dim" && type != "bool" && type != "int" && type != "float" && type != "string") {
        diags_.error(a.type.loc, "unknown argument type `" + type + "`",
                     diag::didYouMean(type, {"dim", "int", "float", "bool", "string"}).empty()
                         ? "one of dim, int, float, bool, string"
                         : diag::didYouMean(type, {"dim", "int", "float", "bool", "string"}));
        ok = false;
      } else if (!fits) {
        std::string hint;
        if (type == "dim" && v.kind == K::Number)
          hint = "dims are passed by name so shapes stay named: declare `dim NAME = " +
                 syntax::exprText(bound[i] ? *bound[i] : *a.default_value) + "` and pass NAME";
        diags_.error(at, "argument `" + a.name.name + "` of layer `" + decl.name.name + "` expects " +
                             (type == "int" ? "an int" : "a " + type) + ", got " + describe(v),
                     hint);
        ok = false;
      }
      inst.env[a.name.name] = v;
    }
    // Dim arguments bound to one caller dim would give a tensor one name twice.
    return ok;
  }

  // ---- dims ---------------------------------------------------------------

  bool dimValue(const std::string& name, const Expr& e, Frame& f, int64_t& out) {
    if (!intExpr(e, f, out)) return false;
    if (out <= 0) {
      diags_.error(e.loc, "dim `" + name + "` must be positive, got " + std::to_string(out),
                   "a dim is the size of a tensor axis: 1 or more");
      return false;
    }
    return true;
  }

  bool intExpr(const Expr& e, Frame& f, int64_t& out) {
    switch (e.kind) {
      case Expr::Kind::Number:
        if (!e.is_int || e.number > 9.2e18) {
          diags_.error(e.loc, "a dim size must be a whole number, got " + syntax::exprText(e));
          return false;
        }
        out = static_cast<int64_t>(e.number);
        return true;
      case Expr::Kind::Name: {
        Value v = lookup(e.text, f, e.loc, true);
        if (v.kind == K::Dim) {
          out = v.dim.size;
          return true;
        }
        if (v.kind == K::Number && v.is_int) {
          if (!(std::fabs(v.number) <= 9.2e18)) {  // also NaN, e.g. from inf - inf
            diags_.error(e.loc, "dim size overflows 64 bits");
            return false;
          }
          out = static_cast<int64_t>(v.number);
          return true;
        }
        if (!v.isError())
          diags_.error(e.loc, "`" + e.text + "` in a dim size is " + describe(v) + ", not an integer");
        return false;
      }
      case Expr::Kind::Unary: {
        if (e.text != "-" && e.text != "+") break;
        if (!intExpr(*e.kids[0], f, out)) return false;
        if (e.text == "-" && __builtin_sub_overflow(int64_t{0}, out, &out)) {
          diags_.error(e.loc, "dim size overflows 64 bits");
          return false;
        }
        return true;
      }
      case Expr::Kind::Binary: {
        int64_t a = 0, b = 0;
        if (!intExpr(*e.kids[0], f, a) || !intExpr(*e.kids[1], f, b)) return false;
        bool overflow = false;
        if (e.text == "+") overflow = __builtin_add_overflow(a, b, &out);
        else if (e.text == "-") overflow = __builtin_sub_overflow(a, b, &out);
        else if (e.text == "*") overflow = __builtin_mul_overflow(a, b, &out);
        else if (e.text == "/") {
          if (b == 0) {
            diags_.error(e.loc, "division by zero in a dim size");
            return false;
          }
          if (b == -1) {
            overflow = __builtin_sub_overflow(int64_t{0}, a, &out);  // INT64_MIN / -1 traps
          } else if (a % b != 0) {
            diags_.error(e.loc, std::to_string(a) + " / " + std::to_string(b) + " leaves a remainder of " +
                                    std::to_string(a % b),
                         "a dim size is a whole number; choose sizes for which " + syntax::exprText(e) +
                             " divides exactly");
            return false;
          } else {
            out = a / b;
          }
        } else {
          break;
        }
        if (overflow) {
          diags_.error(e.loc, "dim size overflows 64 bits");
          return false;
        }
        return true;
      }
      case Expr::Kind::Error: return false;
      default: break;
    }
    diags_.error(e.loc, "a dim size must be an integer expression of numbers and dims, got " + syntax::exprText(e));
    return false;
  }

  // ---- names --------------------------------------------------------------

  Value lookup(const std::string& name, Frame& f, Loc loc, bool quiet) {
    if (f.locals) {
      auto it = f.locals->find(name);
      if (it != f.locals->end()) return it->second;
    }
    Instance& inst = *f.inst;
    auto it = inst.env.find(name);
    if (it != inst.env.end()) {
      if (graph_ && it->second.kind == K::Tensor && isParam(inst, name)) {
        Value v = it->second;
        v.node = paramNode(inst, name, inst.stack.size());
        return v;
      }
      return it->second;
    }
    if (inst.bindings.count(name)) return binding(inst, name, loc);
    if (name == "batch") return Value::ofDim(Dim{"batch", batch_});
    if (auto t = parseDType(name)) {
      Value v;
      v.kind = K::DType;
      v.dtype_value = *t;
      return v;
    }
    if (prog_.layers.count(name)) {
      Value v;
      v.kind = K::LayerType;
      v.text = name;
      return v;
    }
    if (findBuiltin(BuiltinKind::Primitive, name)) {
      Value v;
      v.kind = K::Builtin;
      v.text = name;
      return v;
    }
    (void)quiet;  // unknown names were reported by resolve_names
    return Value::error();
  }

  Value binding(Instance& inst, const std::string& name, Loc use) {
    auto done = inst.done.find(name);
    // Inside an unrolled stack a binding differs per copy: no caching there.
    if (done != inst.done.end() && (!graph_ || inst.stack.empty())) return done->second;
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
    Value v = eval(*b->value, f);
    binding_stack_.pop_back();
    inst.evaluating.erase(name);
    inst.done[name] = v;
    return v;
  }

  // ---- expressions ------------------------------------------------------

  Value eval(const Expr& e, Frame& f) {
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
      case Expr::Kind::Name: return lookup(e.text, f, e.loc, false);
      case Expr::Kind::Member: return member(e, f);
      case Expr::Kind::Call: return call(e, f);
      case Expr::Kind::Unary: {
        Value x = eval(*e.kids[0], f);
        if (x.isError()) return x;
        if (e.text == "!") {
          if (x.kind == K::Bool) return Value::boolean(x.number == 0);
          diags_.error(e.loc, "`!` needs a bool, got " + describe(x));
          return Value::error();
        }
        if (x.kind == K::Number) return Value::num(e.text == "-" ? -x.number : x.number, x.is_int);
        if (x.kind == K::Dim) return Value::num(e.text == "-" ? -x.dim.size : x.dim.size, true);
        if (x.kind == K::Tensor && x.dtype != DType::Bool) return e.text == "-" ? emitUnary("neg", x, e.loc) : x;
        diags_.error(e.loc, "`" + e.text + "` cannot take " + describe(x));
        return Value::error();
      }
      case Expr::Kind::Binary: return binary(e, f);
      case Expr::Kind::Tuple: {
        Value v;
        v.kind = K::Tuple;
        for (const auto& k : e.kids) {
          v.items.push_back(eval(*k, f));
          if (v.items.back().isError()) return Value::error();
        }
        return v;
      }
      case Expr::Kind::Arrow: {
        Value v;
        v.kind = K::Tuple;
        v.text = "->";
        v.items.push_back(eval(*e.kids[0], f));
        v.items.push_back(eval(*e.kids[1], f));
        if (v.items[0].isError() || v.items[1].isError()) return Value::error();
        return v;
      }
      case Expr::Kind::Range:
        diags_.error(e.loc, "a range `a..b` is only meaningful in `csv(…, columns = a..b)`");
        return Value::error();
      case Expr::Kind::Repeat:
        diags_.error(e.loc, "`repeat` must be bound to a name: `blocks = repeat(n) Layer(…)`");
        return Value::error();
    }
    return Value::error();
  }

  Value member(const Expr& e, Frame& f) {
    Value base = eval(*e.kids[0], f);
    if (base.isError()) return base;
    if (base.kind != K::Layer) {
      diags_.error(e.loc, "`." + e.text + "` on " + describe(base), "members belong to sub-layers, e.g. `wte.table`");
      return Value::error();
    }
    Instance& inst = *base.inst;
    auto it = inst.env.find(e.text);
    bool is_param = false;
    for (const auto& p : inst.decl->params) is_param |= p.name.name == e.text;
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
    if (v.kind == K::Tensor && !inst.stack.empty() && inst.stack.size() > currentStackDepth(f)) {
      Shape full;
      full.dims.assign(inst.stack.begin() + currentStackDepth(f), inst.stack.end());
      for (const Dim& d : v.shape.dims) full.dims.push_back(d);
      v.shape = full;
    }
    if (graph_ && is_param && v.kind == K::Tensor) v.node = paramNode(inst, e.text, currentStackDepth(f));
    return v;
  }

  static size_t currentStackDepth(Frame& f) { return f.inst->stack.size(); }

  Value binary(const Expr& e, Frame& f) {
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
    if (op != "@" && asNum(a, x, xi) && asNum(b, y, yi)) {
      // Constant folding: numbers and dim sizes.
      if (op == "+") return Value::num(x + y, xi && yi);
      if (op == "-") return Value::num(x - y, xi && yi);
      if (op == "*") return Value::num(x * y, xi && yi);
      if (op == "/") {
        if (y == 0) {
          diags_.error(e.loc, "division by zero");
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
    }
    if (op == "@") return emitBinary(op, a, b, contractRule(a, b, e.loc, diags_), e.loc);
    return emitBinary(op, a, b, binaryRule(op, a, b, e.loc, diags_), e.loc);
  }

  Value call(const Expr& e, Frame& f) {
    const Expr& callee = *e.kids[0];
    Value fn = eval(callee, f);
    if (fn.isError()) {
      for (size_t i = 1; i < e.kids.size(); ++i) eval(*e.kids[i], f);  // report errors inside
      return fn;
    }
    if (fn.kind == K::Builtin) {
      const Signature* sig = findBuiltin(BuiltinKind::Primitive, fn.text);
      std::vector<const Expr*> bound;
      if (!bindArguments(e, *sig, "`" + fn.text + "`", bound, diags_)) return Value::error();
      std::vector<std::optional<Value>> args(bound.size());
      std::vector<Loc> locs(bound.size(), e.loc);
      for (size_t i = 0; i < bound.size(); ++i) {
        if (!bound[i]) continue;
        args[i] = eval(*bound[i], f);
        locs[i] = bound[i]->loc;
        if (args[i]->isError()) return Value::error();
      }
      return emitPrimitive(fn.text, args, primitiveRule(fn.text, args, locs, e.loc, diags_), e.loc);
    }
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

  Value callLayer(const Expr& e, Instance& inst, Frame& f) {
    const syntax::LayerDecl& decl = *inst.decl;
    if (decl.forwards.empty()) {
      diags_.error(e.loc, "layer `" + decl.name.name + "` has no `forward` to call",
                   "add `forward(x) = …` to the layer");
      return Value::error();
    }
    const syntax::Forward& fw = decl.forwards[0];
    std::vector<Value> args;
    for (size_t i = 1; i < e.kids.size(); ++i) {
      if (!e.arg_names[i - 1].empty()) {
        diags_.error(e.arg_name_locs[i - 1], "a layer's forward takes positional arguments only");
        return Value::error();
      }
      args.push_back(eval(*e.kids[i], f));
      if (args.back().isError()) return Value::error();
    }
    if (args.size() != fw.params.size()) {
      diags_.error(e.loc, "`" + syntax::exprText(*e.kids[0]) + "` takes " + std::to_string(fw.params.size()) +
                              " input" + (fw.params.size() == 1 ? "" : "s") + ", got " + std::to_string(args.size()),
                   "the forward of `" + decl.name.name + "` takes (" + [&] {
                     std::string names;
                     for (const syntax::Ident& p : fw.params) names += (names.empty() ? "" : ", ") + p.name;
                     return names;
                   }() + "), declared at line " + std::to_string(fw.loc.line));
      return Value::error();
    }
    if (++call_depth_ > kMaxCallDepth) {
      --call_depth_;
      diags_.error(e.loc, "forward calls nested deeper than " + std::to_string(kMaxCallDepth));
      return Value::error();
    }
    Value out;
    // Lowering unrolls a stack: copy c reads slice c of every stacked
    // parameter and feeds the next copy.
    int64_t copies = 1;
    size_t outer = f.inst->stack.size();
    if (graph_)
      for (size_t d = outer; d < inst.stack.size(); ++d) copies *= inst.stack[d].size;
    for (int64_t c = 0; c < copies; ++c) {
      if (graph_) {
        int64_t rest = c;
        for (size_t d = inst.stack.size(); d-- > outer;) {
          copy_[inst.stack[d].name] = rest % inst.stack[d].size;
          rest /= inst.stack[d].size;
        }
      }
      if (c > 0) args[0] = out;
      out = forwardBody(e, inst, fw, args);
      if (out.isError()) break;
    }
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

  Value forwardBody(const Expr& e, Instance& inst, const syntax::Forward& fw, const std::vector<Value>& args) {
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

#include "compiler/sema/lower_ops.inc"

  // An error inside a layer of another file (the stdlib, an import) also
  // points, level by level, at the lines that led there.
  void noteOutsideSpec(size_t first_error, Loc here, const std::string& message) {
    for (size_t i = first_error; i < diags_.all().size(); ++i)
      if (diags_.all()[i].loc.file != prog_.spec_file) diags_.addNote(i, here, message);
  }

  const Program& prog_;
  int64_t batch_;
  Model& out_;
  diag::Diagnostics& diags_;
  Instance model_;
  std::vector<const syntax::LayerDecl*> active_;
  std::vector<std::pair<const Instance*, std::string>> binding_stack_;  // bindings being evaluated
  ir::Graph* graph_ = nullptr;
  std::map<std::string, int64_t> copy_;           // stack dim → the copy being lowered
  std::map<std::string, int> param_nodes_;        // "path@copies" → node
  int call_depth_ = 0;
  int instances_ = 0;
  int64_t steps_ = 0;
};

}  // namespace

void instantiateModel(const Program& prog, int64_t batch, Model& out, diag::Diagnostics& diags, ir::Graph* graph) {
  if (!prog.model) return;
  Instantiator(prog, batch, out, diags, graph).run();
  if (graph) graph->forward_end = static_cast<int>(graph->nodes.size());
  for (const ParamInfo& p : out.params)
    for (const Dim& d : p.shape.dims) out.all_dims.emplace(d.name, d.size);
  for (const InputInfo& i : out.inputs)
    for (const Dim& d : i.shape.dims) out.all_dims.emplace(d.name, d.size);
  for (const ValueInfo& v : out.values)
    for (const Dim& d : v.shape.dims) out.all_dims.emplace(d.name, d.size);
  for (const Dim& d : out.dims) out.all_dims.emplace(d.name, d.size);
}

}  // namespace dtl::sema
