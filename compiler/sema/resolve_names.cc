// Stage 3: name resolution.
//
// Scopes, innermost first: forward parameters and earlier `let`s; the body's
// args, dims, params, inputs, bindings and sub-layers (all visible
// throughout the body: bindings are declarative); global names — layers,
// primitives, element types and `batch`. Initialiser names are visible only
// as the callee of `init`. Each body is checked on its own.
#include "compiler/sema/resolve_names.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <tuple>

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
    std::map<std::string, std::pair<Loc, const char*>> defined;
    auto define = [&](const syntax::Ident& id, const char* what) {
      auto [it, fresh] = defined.emplace(id.name, std::make_pair(id.loc, what));
      if (!fresh) {
        diags_.error(id.loc, std::string("`") + id.name + "` is already defined in `" + l.name.name + "`",
                     std::string("it is first defined as ") + it->second.second + " at line " +
                         std::to_string(it->second.first.line) + "; names in a body are unique, so rename one");
        return;
      }
      names_.insert(id.name);
    };
    // In source order, so the later of two definitions is the one reported.
    std::vector<std::pair<const syntax::Ident*, const char*>> defs;
    for (const auto& a : l.args) defs.emplace_back(&a.name, "an argument");
    for (const auto& d : l.dims) defs.emplace_back(&d.name, "a dim");
    for (const auto& p : l.params) defs.emplace_back(&p.name, "a parameter");
    for (const auto& in : l.inputs) defs.emplace_back(&in.name, "an input");
    for (const auto& b : l.bindings) defs.emplace_back(&b.name, "a binding");
    std::stable_sort(defs.begin(), defs.end(), [](const auto& x, const auto& y) {
      return std::tie(x.first->loc.line, x.first->loc.col) < std::tie(y.first->loc.line, y.first->loc.col);
    });
    for (const auto& [id, what] : defs) define(*id, what);
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
        } else if (!e.kids.empty() && e.kids[0]->kind == Expr::Kind::Name) {
          name(*e.kids[0], local, true);
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

  void name(const Expr& e, const std::set<std::string>& local, bool callee = false) {
    const std::string& n = e.text;
    if (local.count(n) || names_.count(n) || isGlobalName(n) || prog_.layers.count(n)) return;
    // A capitalised callee is meant as a layer (layers are named `Linear`,
    // primitives `relu`): suggest among the layers in scope.
    if (callee && std::isupper(static_cast<unsigned char>(n[0]))) {
      std::vector<std::string> layers;
      for (const auto& [ln, decl] : prog_.layers) layers.push_back(ln);
      diags_.error(e.loc, "unknown layer `" + n + "`", diag::didYouMean(n, layers));
      return;
    }
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
