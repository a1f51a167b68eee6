// Stage 5a: the train block.
//
// 1. Each `key = value` is known, given once and of the right form.
// 2. The optimiser and schedule are calls of known names with known
//    arguments; PyTorch's defaults fill the rest (so runs compare 1:1).
// 3. `log|eval|checkpoint … every N steps|epochs [keep K]`.
#include <algorithm>
#include <set>

#include "compiler/sema/check_blocks.h"
#include "compiler/sema/constants.h"
#include "compiler/sema/signatures.h"
#include "compiler/syntax/parse.h"

namespace dtl::sema {

namespace {

using syntax::Expr;

// name or name(args) → the call parts.
bool callParts(const Expr& e, BuiltinKind kind, const char* what, const char* choices, const Signature*& sig,
               std::vector<const Expr*>& bound, diag::Diagnostics& diags) {
  const Expr* callee = e.kind == Expr::Kind::Call ? e.kids[0].get() : &e;
  if (callee->kind != Expr::Kind::Name) {
    if (e.kind != Expr::Kind::Error)
      diags.error(e.loc, std::string("expected ") + what + ", got `" + syntax::exprText(e) + "`",
                  std::string("one of: ") + choices);
    return false;
  }
  sig = findBuiltin(kind, callee->text);
  if (!sig) {
    std::string hint = diag::didYouMean(callee->text, builtinNames(kind));
    diags.error(callee->loc, std::string("unknown ") + what + " `" + callee->text + "`",
                hint.empty() ? std::string("one of: ") + choices : hint);
    return false;
  }
  if (e.kind != Expr::Kind::Call) {
    bound.assign(sig->params.size(), nullptr);
    for (const ParamSig& p : sig->params)
      if (p.required) {
        diags.error(e.loc, std::string(what) + " `" + sig->name + "` needs argument `" + p.name + "`",
                    "e.g. `" + sig->name + "(" + p.name + " = …)`");
        return false;
      }
    return true;
  }
  return bindArguments(e, *sig, std::string(what) + " `" + sig->name + "`", bound, diags);
}

void optimizer(const Expr& e, TrainSpec& t, Constants& c, diag::Diagnostics& diags) {
  const Signature* sig = nullptr;
  std::vector<const Expr*> bound;
  if (!callParts(e, BuiltinKind::Optimizer, "optimizer", "sgd(lr = …), adam(…), adamw(…)", sig, bound, diags)) return;
  t.optimizer = sig->name;
  auto& a = t.optimizer_args;
  a.clear();
  if (sig->name == "sgd") {
    a = {{"lr", 0}, {"momentum", 0}, {"dampening", 0}, {"nesterov", 0}, {"weight_decay", 0}};
  } else {
    a = {{"lr", 1e-3}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8},
         {"weight_decay", sig->name == "adamw" ? 1e-2 : 0.0}};
  }
  for (size_t i = 0; i < bound.size(); ++i) {
    if (!bound[i]) continue;
    const std::string& n = sig->params[i].name;
    std::string what = "`" + n + "` of " + sig->name;
    if (n == "nesterov") {
      bool b;
      if (c.boolean(*bound[i], what, b)) a[n] = b ? 1 : 0;
    } else if (n == "betas") {
      const Expr& tup = *bound[i];
      double b1, b2;
      if (tup.kind != Expr::Kind::Tuple || tup.kids.size() != 2) {
        diags.error(tup.loc, "`betas` expects two numbers, e.g. (0.9, 0.999)");
      } else if (c.number(*tup.kids[0], "`betas`", b1) && c.number(*tup.kids[1], "`betas`", b2)) {
        for (int k = 0; k < 2; ++k) {
          double b = k == 0 ? b1 : b2;
          if (b < 0 || b >= 1)
            diags.error(tup.kids[k]->loc, "`betas` must lie in [0, 1), got " + syntax::exprText(*tup.kids[k]),
                        "each beta is a decay rate; PyTorch's default is (0.9, 0.999)");
        }
        a["beta1"] = b1;
        a["beta2"] = b2;
      }
    } else {
      double v;
      if (!c.number(*bound[i], what, v)) continue;
      if (v < 0 || (n == "lr" && v == 0) || (n == "eps" && v == 0))
        diags.error(bound[i]->loc, what + " must be " + (n == "lr" || n == "eps" ? "positive" : "non-negative") +
                                       ", got " + syntax::exprText(*bound[i]));
      a[n] = v;
    }
  }
  if (sig->name == "sgd" && a["nesterov"] != 0 && (a["momentum"] <= 0 || a["dampening"] != 0))
    diags.error(e.loc, "nesterov momentum needs momentum > 0 and dampening = 0", "as in PyTorch's SGD");
}

void schedule(const Expr& e, TrainSpec& t, Constants& c, diag::Diagnostics& diags) {
  const Signature* sig = nullptr;
  std::vector<const Expr*> bound;
  if (!callParts(e, BuiltinKind::Schedule, "schedule", "constant, linear(warmup = …), cosine(warmup = …, min_lr = …)",
                 sig, bound, diags))
    return;
  t.schedule = sig->name;
  t.schedule_args = {{"warmup", 0}, {"min_lr", 0}};
  for (size_t i = 0; i < bound.size(); ++i) {
    if (!bound[i]) continue;
    const std::string& n = sig->params[i].name;
    if (n == "warmup") {
      int64_t w;
      if (c.integer(*bound[i], "`warmup`", w, 0)) t.schedule_args[n] = static_cast<double>(w);
    } else {
      double v;
      if (c.number(*bound[i], "`" + n + "`", v)) {
        if (v < 0) diags.error(bound[i]->loc, "`" + n + "` must be non-negative");
        t.schedule_args[n] = v;
      }
    }
  }
}

}  // namespace

void checkTrain(const Program& prog, TrainSpec& t, diag::Diagnostics& diags) {
  if (!prog.train) return;
  t.present = true;
  Constants c(diags);
  static const std::vector<std::string> kKeys = {"batch", "accumulate", "epochs", "steps", "optimizer",
                                                 "schedule", "clip", "precision", "seed",
                                                 "on_nonfinite", "replica_check"};
  std::set<std::string> seen;
  std::set<std::string> misspelt;  // settings that an unknown key was likely meant as
  Loc epochs_loc, steps_loc;
  for (const syntax::Setting& s : prog.train->settings) {
    const std::string& k = s.key.name;
    if (std::find(kKeys.begin(), kKeys.end(), k) == kKeys.end()) {
      std::string hint = diag::didYouMean(k, kKeys);
      if (!hint.empty()) misspelt.insert(diag::closest(k, kKeys));
      diags.error(s.key.loc, "unknown train setting `" + k + "`",
                  hint.empty() ? "settings: batch, accumulate, epochs, steps, optimizer, schedule, clip, precision, seed, "
                                               "on_nonfinite, replica_check"
                               : hint);
      continue;
    }
    if (!seen.insert(k).second) {
      diags.error(s.key.loc, "`" + k + "` is set twice in `train`");
      continue;
    }
    // Where the value came from: the spec's line, or the --set that replaced it.
    t.where[k] = s.value->loc.file != s.key.loc.file ? s.value->loc : s.key.loc;
    const Expr& v = *s.value;
    if (k == "batch") c.integer(v, "`train.batch`", t.batch);
    else if (k == "accumulate") c.integer(v, "`train.accumulate`", t.accumulate);
    else if (k == "epochs") {
      int64_t n;
      if (c.integer(v, "`train.epochs`", n)) t.epochs = n;
      epochs_loc = s.key.loc;
    } else if (k == "steps") {
      int64_t n;
      if (c.integer(v, "`train.steps`", n)) t.steps = n;
      steps_loc = s.key.loc;
    } else if (k == "optimizer") optimizer(v, t, c, diags);
    else if (k == "schedule") schedule(v, t, c, diags);
    else if (k == "clip") {
      double x;
      if (c.number(v, "`train.clip`", x)) {
        if (x <= 0) diags.error(v.loc, "`train.clip` must be positive", "leave it out to train without clipping");
        t.clip = x;
      }
    } else if (k == "precision") {
      std::string n;
      if (c.name(v, "`train.precision`", n)) {
        if (n == "f32") t.precision = DType::F32;
        else if (n == "bf16") t.precision = DType::BF16;
        else diags.error(v.loc, "`train.precision` is f32 or bf16, got `" + n + "`");
      }
    } else if (k == "seed") c.integer(v, "`train.seed`", t.seed, 0);
    else if (k == "on_nonfinite") {
      std::string n;
      if (c.name(v, "`train.on_nonfinite`", n)) {
        if (n == "stop" || n == "skip") t.on_nonfinite = n;
        else diags.error(v.loc, "`train.on_nonfinite` is stop or skip, got `" + n + "`",
                         "stop: end the run naming the tensor and rank; skip: skip the step on every rank");
      }
    } else if (k == "replica_check") c.integer(v, "`train.replica_check`", t.replica_check, 0);
  }
  if (seen.count("epochs") && seen.count("steps"))
    diags.error(steps_loc, "both `epochs` and `steps` are set",
                "give one: `epochs = N` to pass over the data N times, or `steps = N` optimiser steps");
  if (!seen.count("optimizer"))
    t.optimizer_args = {{"lr", 0}, {"momentum", 0}, {"dampening", 0}, {"nesterov", 0}, {"weight_decay", 0}};
  if (!seen.count("optimizer") && !misspelt.count("optimizer"))
    diags.error(prog.train->loc, "`train` has no `optimizer`", "e.g. `optimizer = adamw(lr = 1e-3)`");
  if (!t.epochs && !t.steps) t.epochs = 1;

  for (const syntax::EveryItem& e : prog.train->every) {
    const std::string& w = e.what.name;
    Every* slot = w == "log" ? &t.log_every : w == "eval" ? &t.eval_every : w == "checkpoint" ? &t.checkpoint_every : nullptr;
    if (!slot) {
      std::string hint = diag::didYouMean(w, {"log", "eval", "checkpoint"});
      diags.error(e.what.loc, "unknown periodic action `" + w + "`",
                  hint.empty() ? "one of: log every N steps, eval every N epochs, checkpoint \"dir\" every N epochs keep K" : hint);
      continue;
    }
    if (slot->present) {
      diags.error(e.what.loc, "`" + w + " every` is given twice");
      continue;
    }
    slot->present = c.every(*e.every, "`" + w + " every`", slot->count, slot->unit);
    if (w == "checkpoint") {
      std::string dir;
      // Without a folder the checkpoints go to the run folder (`dtlc run
      // --out DIR`, by default runs/<spec name>).
      if (e.target && c.string(*e.target, "`checkpoint`", dir)) {
        // An output: relative to the working folder, as `--resume DIR` and
        // `--metrics FILE` are, so `--resume` names the folder this wrote.
        // (Inputs — data files, imports — are relative to the spec.)
        if (dir.empty())
          diags.error(e.target->loc, "`checkpoint` needs a folder, not an empty string",
                      "e.g. `checkpoint \"runs/mnist\" every 1 epoch keep 2`");
        t.checkpoint_dir = dir;
      }
      if (e.keep) c.integer(*e.keep, "`keep`", t.checkpoint_keep);
    } else {
      if (e.target) diags.error(e.target->loc, "`" + w + " every` takes no target", "write `" + w + " every 20 steps`");
      if (e.keep) diags.error(e.keep->loc, "`keep` belongs to `checkpoint`");
    }
  }
  if (t.eval_every.present && !prog.data) {
    // reported by checkData when the eval split is missing
  }
}

}  // namespace dtl::sema
