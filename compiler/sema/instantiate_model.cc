// Stage 5: model instantiation and shape inference. This file holds the
// model and its instances; sub-layers, dims, expressions and the trace for
// lowering are in the files instantiator.h names.
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
// 5. Every tensor operation evaluated is recorded in `Model::ops`
//    (op_trace.h), which lowering turns into the training graph.
#include "compiler/sema/instantiate_model.h"

#include <algorithm>
#include <functional>
#include <tuple>

#include "compiler/sema/instantiator.h"
#include "compiler/sema/signatures.h"
#include "compiler/syntax/parse.h"

namespace dtl::sema {

using K = Value::Kind;

Instantiator::Instantiator(const Program& prog, int64_t batch, Model& out, diag::Diagnostics& diags)
    : prog_(prog), batch_(batch), out_(out), diags_(diags) {}

void Instantiator::run() {
  const syntax::LayerDecl& m = *prog_.model;
  out_.name = m.name.name;
  out_.loc = m.name.loc;
  model_.decl = &m;
  model_.where = m.name.loc;
  for (const auto& f : m.forwards)
    diags_.error(f.loc, "a model has no `forward`",
                 "bind the output instead: `logits = …` and `loss = …`");
  openBlock();
  setup(model_);
  describeModel();
  const syntax::Binding* loss = evaluateLoss();
  evaluateBindings(loss);
  for (const syntax::Binding& b : m.bindings) {
    auto it = model_.done.find(b.name.name);
    if (it != model_.done.end() && it->second.kind == K::Tensor)
      out_.values.push_back(ValueInfo{b.name.name, it->second.shape, it->second.dtype, b.is_metric, b.name.loc});
  }
  countParameters();
  closeBlock();
}

// The model's dims and typed inputs, in declaration order.
void Instantiator::describeModel() {
  const syntax::LayerDecl& m = *prog_.model;
  for (const syntax::DimDef& d : m.dims) {
    auto it = model_.env.find(d.name.name);
    if (it != model_.env.end() && it->second.kind == K::Dim) out_.dims.push_back(it->second.dim);
  }
  for (const syntax::InputDecl& in : m.inputs) {
    auto it = model_.env.find(in.name.name);
    if (it == model_.env.end() || it->second.kind != K::Tensor) continue;
    out_.inputs.push_back(InputInfo{in.name.name, it->second.shape, it->second.dtype, in.name.loc});
  }
}

// Evaluates `loss` first so its errors come first; returns its binding.
const syntax::Binding* Instantiator::evaluateLoss() {
  const syntax::LayerDecl& m = *prog_.model;
  const syntax::Binding* loss = nullptr;
  for (const syntax::Binding& b : m.bindings)
    if (b.name.name == "loss" && !b.is_metric) loss = &b;
  if (!loss) {
    diags_.error(m.name.loc, "model `" + m.name.name + "` has no `loss`",
                 "bind the scalar to minimise: `loss = cross_entropy(logits, label, over = classes)`");
    return nullptr;
  }
  Value v = binding(model_, "loss", loss->name.loc);
  out_.ops.loss = v.slot;
  if (v.kind == K::Tensor && (!v.shape.scalar() || v.dtype != DType::F32))
    diags_.error(loss->value->loc,
                 "`loss` must be a scalar f32, got " + std::string(dtypeName(v.dtype)) + v.shape.str(),
                 v.shape.scalar() ? "convert it with cast(…, f32)"
                                  : "reduce it to a scalar, e.g. `mean(…)` averages over all of " + v.shape.names());
  else if (!v.isError() && v.kind != K::Tensor)
    diags_.error(loss->value->loc, "`loss` must be a scalar f32 tensor, got " + describe(v));
  return loss;
}

// The metrics and the other bindings, in source order.
void Instantiator::evaluateBindings(const syntax::Binding* loss) {
  for (const syntax::Binding& b : prog_.model->bindings) {
    if (&b == loss || !model_.bindings.count(b.name.name)) continue;
    Value v = binding(model_, b.name.name, b.name.loc);
    if (b.is_metric && v.kind == K::Tensor && v.shape.scalar()) out_.ops.metrics.emplace_back(b.name.name, v.slot);
    if (b.is_metric && v.kind == K::Tensor && !v.shape.scalar())
      diags_.error(b.value->loc, "metric `" + b.name.name + "` must be a scalar, got " +
                                     dtypeName(v.dtype) + v.shape.str(),
                   "reduce it to a scalar, e.g. `mean(…)` averages over all of " + v.shape.names());
    else if (b.is_metric && !v.isError() && v.kind != K::Tensor && v.kind != K::Number)
      diags_.error(b.value->loc, "metric `" + b.name.name + "` must be a scalar, got " + describe(v));
  }
}

void Instantiator::countParameters() {
  for (const ParamInfo& p : out_.params) {
    int64_t n = p.shape.elements().value_or(-1), bytes = 0;
    if (n < 0 || !checkedMul(n, dtypeBytes(p.dtype), bytes) || __builtin_add_overflow(out_.parameters, n, &out_.parameters) ||
        __builtin_add_overflow(out_.parameter_bytes, bytes, &out_.parameter_bytes)) {
      out_.parameters = out_.parameter_bytes = -1;  // past 64 bits: checkSizes names the dim
      break;
    }
  }
}

// Fills an instance whose args are already in env.
void Instantiator::setup(Instance& inst) {
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
  if (l.is_model) modelInputs(inst, self);
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

void Instantiator::modelInputs(Instance& inst, Frame& self) {
  for (const syntax::InputDecl& in : inst.decl->inputs) {
    if (inst.env.count(in.name.name)) continue;
    Shape s;
    DType t = DType::F32;
    if (!in.type.elem) {
      diags_.error(in.type.loc, "input `" + in.name.name + "` needs an element type",
                   "e.g. `input " + in.name.name + " : f32[batch, …]` or i32[…] for ids and labels");
      inst.env[in.name.name] = Value::error();
      continue;
    }
    if (tensorType(in.type, self, "input `" + in.name.name + "`", s, t))
      inst.env[in.name.name] = recordInput(in.name.name, Value::tensor(std::move(s), t), in.name.loc);
    else
      inst.env[in.name.name] = Value::error();
  }
}

void Instantiator::param(Instance& inst, const syntax::ParamDecl& p, Frame& self) {
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

std::string Instantiator::initText(const Expr& e, Frame& self) {
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

bool Instantiator::tensorType(const syntax::TensorType& tt, Frame& self, const std::string& what, Shape& s, DType& t) {
  static const std::vector<std::string> kTypes = {"f32", "bf16", "f16", "i32", "i64", "u8", "u16", "bool"};
  bool ok = true;
  if (tt.elem) {
    auto parsed = parseDType(tt.elem->name);
    if (!parsed) {
      std::string hint = diag::didYouMean(tt.elem->name, kTypes);
      diags_.error(tt.elem->loc, "unknown element type `" + tt.elem->name + "`",
                   hint.empty() ? "one of f32, bf16, f16, i32, i64, u8, u16, bool" : hint);
      ok = false;
    } else {
      t = *parsed;
    }
  }
  for (const syntax::Ident& id : tt.dims) {
    Value v = lookup(id.name, self, id.loc);
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

// An error inside a layer of another file (the stdlib, an import) also
// points, level by level, at the lines that led there.
void Instantiator::noteOutsideSpec(size_t first_error, Loc here, const std::string& message) {
  for (size_t i = first_error; i < diags_.all().size(); ++i)
    if (diags_.all()[i].loc.file != prog_.spec_file) diags_.addNote(i, here, message);
}

void instantiateModel(const Program& prog, int64_t batch, Model& out, diag::Diagnostics& diags) {
  if (!prog.model) return;
  Instantiator(prog, batch, out, diags).run();
  for (const ParamInfo& p : out.params)
    for (const Dim& d : p.shape.dims) out.all_dims.emplace(d.name, d.size);
  for (const InputInfo& i : out.inputs)
    for (const Dim& d : i.shape.dims) out.all_dims.emplace(d.name, d.size);
  for (const ValueInfo& v : out.values)
    for (const Dim& d : v.shape.dims) out.all_dims.emplace(d.name, d.size);
  for (const Dim& d : out.dims) out.all_dims.emplace(d.name, d.size);
}

}  // namespace dtl::sema
