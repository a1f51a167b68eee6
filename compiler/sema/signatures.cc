#include "compiler/sema/signatures.h"

#include <map>

namespace dtl::sema {

namespace {

using Table = std::map<std::string, Signature>;

Signature sig(std::string name, std::vector<ParamSig> params) {
  return Signature{std::move(name), std::move(params)};
}
ParamSig req(std::string n) { return ParamSig{std::move(n), true}; }
ParamSig opt(std::string n) { return ParamSig{std::move(n), false}; }

Table makePrimitives() {
  Table t;
  for (const char* n : {"relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid", "exp", "log", "sqrt",
                        "rsqrt", "neg", "abs"})
    t[n] = sig(n, {req("x")});
  for (const char* n : {"sum", "mean", "max"}) t[n] = sig(n, {req("x"), opt("over")});
  for (const char* n : {"softmax", "log_softmax"}) t[n] = sig(n, {req("x"), req("over")});
  t["normalize"] = sig("normalize", {req("x"), req("over"), opt("eps")});
  t["rms_normalize"] = sig("rms_normalize", {req("x"), req("over"), opt("eps")});
  t["embed"] = sig("embed", {req("table"), req("ids")});
  t["attention"] = sig("attention", {req("q"), req("k"), req("v"), opt("causal")});
  t["dropout"] = sig("dropout", {req("x"), req("p")});
  t["cross_entropy"] = sig("cross_entropy", {req("logits"), req("labels"), req("over")});
  t["argmax"] = sig("argmax", {req("x"), req("over")});
  t["reshape"] = sig("reshape", {req("x"), req("dims")});
  t["arange"] = sig("arange", {req("d")});
  t["cast"] = sig("cast", {req("x"), req("type")});
  return t;
}

Table makeInits() {
  Table t;
  t["zeros"] = sig("zeros", {});
  t["ones"] = sig("ones", {});
  t["normal"] = sig("normal", {opt("std"), opt("mean")});
  t["uniform"] = sig("uniform", {req("lo"), req("hi")});
  t["xavier"] = sig("xavier", {opt("gain")});
  t["kaiming"] = sig("kaiming", {opt("a")});
  return t;
}

Table makeSources() {
  Table t;
  t["idx"] = sig("idx", {req("path")});
  t["csv"] = sig("csv", {req("path"), opt("columns"), opt("header"), opt("skip"), opt("delimiter")});
  t["npy"] = sig("npy", {req("path")});
  t["safetensors"] = sig("safetensors", {req("path"), req("key")});
  t["text"] = sig("text", {req("path"), req("seq")});
  t["tokens"] = sig("tokens", {req("path"), opt("dtype"), req("seq")});
  t["synthetic"] = sig("synthetic", {opt("seed")});
  return t;
}

Table makeOptimizers() {
  Table t;
  t["sgd"] = sig("sgd", {req("lr"), opt("momentum"), opt("dampening"), opt("nesterov"), opt("weight_decay")});
  t["adam"] = sig("adam", {opt("lr"), opt("betas"), opt("eps"), opt("weight_decay")});
  t["adamw"] = sig("adamw", {opt("lr"), opt("betas"), opt("eps"), opt("weight_decay")});
  return t;
}

Table makeSchedules() {
  Table t;
  t["constant"] = sig("constant", {opt("warmup")});
  t["linear"] = sig("linear", {opt("warmup"), opt("min_lr")});
  t["cosine"] = sig("cosine", {opt("warmup"), opt("min_lr")});
  return t;
}

Table makePipelines() {
  Table t;
  t["gpipe"] = sig("gpipe", {opt("microbatches"), opt("axis")});
  t["1f1b"] = sig("1f1b", {opt("microbatches"), opt("axis")});
  return t;
}

const Table& table(BuiltinKind k) {
  static const Table prim = makePrimitives(), init = makeInits(), src = makeSources(),
                     optim = makeOptimizers(), sched = makeSchedules(), pipe = makePipelines();
  switch (k) {
    case BuiltinKind::Primitive: return prim;
    case BuiltinKind::Init: return init;
    case BuiltinKind::Source: return src;
    case BuiltinKind::Optimizer: return optim;
    case BuiltinKind::Schedule: return sched;
    case BuiltinKind::Pipeline: return pipe;
  }
  return prim;
}

}  // namespace

const Signature* findBuiltin(BuiltinKind kind, const std::string& name) {
  const Table& t = table(kind);
  auto it = t.find(name);
  return it == t.end() ? nullptr : &it->second;
}

std::vector<std::string> builtinNames(BuiltinKind kind) {
  std::vector<std::string> out;
  for (const auto& [n, s] : table(kind)) out.push_back(n);
  return out;
}

bool bindArguments(const syntax::Expr& call, const Signature& sig, const std::string& what,
                   std::vector<const syntax::Expr*>& result, diag::Diagnostics& diags) {
  result.assign(sig.params.size(), nullptr);
  bool ok = true;
  size_t positional = 0;
  bool seen_named = false;
  bool unknown_name = false;  // a misspelt name may be the missing argument
  bool too_many = false;      // reported at the first extra argument only
  const size_t given = call.kids.empty() ? 0 : call.kids.size() - 1;
  std::vector<std::string> names;
  for (const ParamSig& p : sig.params) names.push_back(p.name);
  for (size_t i = 1; i < call.kids.size(); ++i) {
    const std::string& n = call.arg_names[i - 1];
    const syntax::Expr* arg = call.kids[i].get();
    if (n.empty()) {
      if (seen_named) {
        diags.error(arg->loc, "a positional argument after a named one",
                    "write positional arguments first");
        ok = false;
        continue;
      }
      if (positional >= sig.params.size()) {
        ok = false;
        if (too_many) continue;
        too_many = true;
        diags.error(arg->loc,
                    what + " takes " + std::to_string(sig.params.size()) + " argument" +
                        (sig.params.size() == 1 ? "" : "s") + ", got " + std::to_string(given),
                    sig.params.empty() ? "call it without arguments"
                                       : "its arguments are (" + [&] {
                                           std::string s;
                                           for (size_t k = 0; k < names.size(); ++k) s += (k ? ", " : "") + names[k];
                                           return s;
                                         }() + ")");
        ok = false;
        continue;
      }
      result[positional++] = arg;
      continue;
    }
    seen_named = true;
    size_t k = 0;
    while (k < sig.params.size() && sig.params[k].name != n) ++k;
    if (k == sig.params.size()) {
      std::string hint = diag::didYouMean(n, names);
      if (hint.empty()) {
        hint = "its arguments are (";
        for (size_t j = 0; j < names.size(); ++j) hint += (j ? ", " : "") + names[j];
        hint += ")";
      }
      diags.error(call.arg_name_locs[i - 1], what + " has no argument `" + n + "`", hint);
      ok = false;
      unknown_name = true;
      continue;
    }
    if (result[k]) {
      diags.error(call.arg_name_locs[i - 1], "argument `" + n + "` given twice");
      ok = false;
      continue;
    }
    result[k] = arg;
  }
  for (size_t k = 0; k < sig.params.size(); ++k) {
    if (sig.params[k].required && !result[k] && !unknown_name) {
      diags.error(call.loc, what + " needs argument `" + sig.params[k].name + "`");
      ok = false;
    }
  }
  return ok;
}

}  // namespace dtl::sema
