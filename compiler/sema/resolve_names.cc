// Stage 3: name resolution.
//
// Scopes, innermost first: forward parameters and earlier `let`s; the body's
// args, dims, params, inputs, bindings and sub-layers (all visible
// throughout the body: bindings are declarative); global names — layers,
// primitives, element types and `batch`. Initialiser names are visible only
// as the callee of `init`. Each body is checked on its own.
#include "compiler/sema/resolve_names.h"

#include <map>
#include <set>

#include "compiler/sema/signatures.h"
#include "core/dtype.h"

namespace dtl::sema {

bool isGlobalName(const std::string& n) {
  return n == "batch" || parseDType(n).has_value() || findBuiltin(BuiltinKind::Primitive, n);
}

namespace {

using syntax::Expr;

class Resolver {
 public:
  Resolver(const Program& prog, diag::Diagnostics& diags) : prog_(prog), diags_(diags) {}

  void body(const syntax::LayerDecl& l) {
    names_.clear();
    std::map<std::string, Loc> defined;
    auto define = [&](const syntax::Ident& id, const char* what) {
      auto [it, fresh] = defined.emplace(id.name, id.loc);
      if (!fresh) {
        diags_.error(id.loc, std::string("`") + id.name + "` is already defined in `" + l.name.name + "`",
                     "the first definition is at line " + std::to_string(it->second.line) +
                         "; " + what + " names must be unique in a body");
        return;
      }
      names_.insert(id.name);
    };
    for (const auto& a : l.args) define(a.name, "argument");
    for (const auto& d : l.dims) define(d.name, "dim");
    for (const auto& p : l.params) define(p.name, "parameter");
    for (const auto& in : l.inputs) define(in.name, "input");
    for (const auto& b : l.bindings) define(b.name, "binding");
    if (l.forwards.size() > 1)
      diags_.error(l.forwards[1].loc, "a second `forward` in `" + l.name.name + "`",
                   "a layer has one forward; give it several parameters instead");

    for (const auto& a : l.args)
      if (a.default_value) expr(*a.default_value, {});
    for (const auto& d : l.dims) expr(*d.value, {});
    for (const auto& p : l.params) {
      init(*p.init);
      if (p.cond) expr(*p.cond, {});
    }
    for (const auto& b : l.bindings) expr(*b.value, {});
    for (const auto& f : l.forwards) {
      std::set<std::string> local;
      for (const auto& p : f.params) local.insert(p.name);
      for (const auto& let : f.lets) {
        expr(*let.value, local);
        local.insert(let.name.name);
      }
      if (f.result) expr(*f.result, local);
    }
  }

 private:
  void init(const Expr& e) {
    const Expr* callee = &e;
    if (e.kind == Expr::Kind::Call && !e.kids.empty()) {
      callee = e.kids[0].get();
      for (size_t i = 1; i < e.kids.size(); ++i) expr(*e.kids[i], {});
    }
    if (callee->kind != Expr::Kind::Name) {
      if (callee->kind != Expr::Kind::Error)
        diags_.error(callee->loc, "expected an initialiser",
                     "one of: zeros, ones, normal(std = s), uniform(lo, hi), xavier, kaiming");
      return;
    }
    if (!findBuiltin(BuiltinKind::Init, callee->text))
      diags_.error(callee->loc, "unknown initialiser `" + callee->text + "`",
                   hintOr(callee->text, builtinNames(BuiltinKind::Init),
                          "one of: zeros, ones, normal(std = s), uniform(lo, hi), xavier, kaiming"));
  }

  static std::string hintOr(const std::string& name, const std::vector<std::string>& cands,
                            std::string fallback) {
    std::string h = diag::didYouMean(name, cands);
    return h.empty() ? fallback : h;
  }

  void expr(const Expr& e, const std::set<std::string>& local) {
    switch (e.kind) {
      case Expr::Kind::Name: name(e, local); return;
      case Expr::Kind::Member: expr(*e.kids[0], local); return;
      case Expr::Kind::Call:
        // Callee names may also be layers.
        if (!e.kids.empty() && e.kids[0]->kind == Expr::Kind::Name &&
            prog_.layers.count(e.kids[0]->text) && !local.count(e.kids[0]->text) &&
            !names_.count(e.kids[0]->text)) {
        } else if (!e.kids.empty()) {
          expr(*e.kids[0], local);
        }
        for (size_t i = 1; i < e.kids.size(); ++i) expr(*e.kids[i], local);
        return;
      default:
        for (const auto& k : e.kids)
          if (k) expr(*k, local);
    }
  }

  void name(const Expr& e, const std::set<std::string>& local) {
    const std::string& n = e.text;
    if (local.count(n) || names_.count(n) || isGlobalName(n) || prog_.layers.count(n)) return;
    std::vector<std::string> cands(local.begin(), local.end());
    cands.insert(cands.end(), names_.begin(), names_.end());
    for (const auto& [ln, decl] : prog_.layers) cands.push_back(ln);
    for (const std::string& p : builtinNames(BuiltinKind::Primitive)) cands.push_back(p);
    cands.push_back("batch");
    std::string hint = diag::didYouMean(n, cands);
    if (hint.empty() && findBuiltin(BuiltinKind::Init, n))
      hint = "`" + n + "` is an initialiser; it is used after `init`";
    diags_.error(e.loc, "unknown name `" + n + "`", hint);
  }

  const Program& prog_;
  diag::Diagnostics& diags_;
  std::set<std::string> names_;
};

}  // namespace

void resolveNames(const Program& prog, diag::Diagnostics& diags) {
  Resolver r(prog, diags);
  for (const auto& m : prog.modules)
    for (const syntax::LayerDecl& l : m->layers) r.body(l);
}

}  // namespace dtl::sema
