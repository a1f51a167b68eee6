// Sub-layers: a binding `name = Layer(…)` or `name = repeat(n) Layer(…)`
// becomes an Instance below its parent, its arguments bound (dims to the
// caller's dims), its stack dims in front of every parameter it owns.
#include <algorithm>

#include "compiler/sema/instantiator.h"
#include "compiler/sema/signatures.h"
#include "compiler/syntax/parse.h"

namespace dtl::sema {

using K = Value::Kind;

bool Instantiator::isSubLayer(const Expr& e, const Instance& inst) {
  if (e.kind == Expr::Kind::Repeat) return true;
  const std::string& callee = e.calleeName();
  if (callee.empty() || !prog_.layers.count(callee)) return false;
  // A local name shadows a layer.
  return !inst.env.count(callee);
}

void Instantiator::subLayer(Instance& parent, const syntax::Binding& b, Frame& self) {
  if (parent.env.count(b.name.name)) return;  // a duplicate, reported by resolve_names
  const Expr* call = b.value.get();
  std::vector<Dim> stack = parent.stack;
  if (call->kind == Expr::Kind::Repeat) call = repeatStack(*call, self, stack);
  if (!call) {
    parent.env[b.name.name] = Value::error();
    return;
  }
  const syntax::LayerDecl* decl = prog_.layers.at(call->calleeName());
  if (!enterLayer(*call, *decl)) {
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
  setup(*inst);
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

// `repeat(n) Layer(…)`: pushes n onto `stack` and returns the instantiation,
// or null after reporting why it cannot stack.
const syntax::Expr* Instantiator::repeatStack(const Expr& call, Frame& self, std::vector<Dim>& stack) {
  Value n = eval(*call.kids[0], self);
  const Expr* inner = call.kids[1].get();
  if (n.kind != K::Dim) {
    if (!n.isError())
      diags_.error(call.kids[0]->loc, "`repeat` needs a dim, got " + describe(n),
                   "declare one, e.g. `dim layers = 12`, and write `repeat(layers)`");
    return nullptr;
  }
  if (inner->calleeName().empty() || !prog_.layers.count(inner->calleeName())) {
    diags_.error(inner->loc, "`repeat(n)` must be followed by a layer instantiation",
                 "e.g. `blocks = repeat(layers) TransformerBlock(d, heads, hidden)`");
    return nullptr;
  }
  for (const Dim& d : stack)
    if (d.name == n.dim.name) {
      diags_.error(call.kids[0]->loc, "`repeat(" + n.dim.name + ")` inside another `repeat(" + n.dim.name + ")`",
                   "nested stacks need distinct dims");
      return nullptr;
    }
  stack.push_back(n.dim);
  return inner;
}

// Whether one more instance of `decl` may be made: not inside itself, not
// past the depth and instance caps.
bool Instantiator::enterLayer(const Expr& call, const syntax::LayerDecl& decl) {
  if (std::find(active_.begin(), active_.end(), &decl) != active_.end() ||
      static_cast<int>(active_.size()) >= kMaxLayerDepth) {
    std::string chain;
    for (const auto* a : active_) chain += a->name.name + " → ";
    diags_.error(call.loc, "layer `" + decl.name.name + "` contains itself (" + chain + decl.name.name + ")",
                 "a layer cannot instantiate itself, directly or through others");
    return false;
  }
  if (++instances_ > kMaxInstances) {
    if (instances_ == kMaxInstances + 1)
      diags_.error(call.loc, "the model has more than " + std::to_string(kMaxInstances) + " layer instances",
                   "`repeat(n) Layer(…)` stacks n copies as one instance");
    return false;
  }
  return true;
}

bool Instantiator::bindLayerArgs(const Expr& call, const syntax::LayerDecl& decl, Frame& caller, Instance& inst) {
  static const std::vector<std::string> kTypes = {"dim", "int", "float", "bool", "string"};
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
    if (std::find(kTypes.begin(), kTypes.end(), type) == kTypes.end()) {
      std::string hint = diag::didYouMean(type, kTypes);
      diags_.error(a.type.loc, "unknown argument type `" + type + "`",
                   hint.empty() ? "one of dim, int, float, bool, string" : hint);
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
  return ok;
}

}  // namespace dtl::sema
