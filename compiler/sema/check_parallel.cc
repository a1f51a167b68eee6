// Stage 5c: the parallel block (language.md §9).
//
// 1. The mesh: unique axis names, sizes ≥ 1 or `auto` (at most once); with
//    --world N the product must be N (auto = N / the rest). No block means
//    `mesh dp = auto; split batch over dp`.
// 2. Split rules: the dim exists, the axis exists, a dim is split once, a
//    split dim (other than the per-rank `batch`) divides by its axis size,
//    and no tensor of the model has two dims split over one axis.
// 3. Settings: pipeline (its axis must carry a split of a `repeat` dim;
//    microbatches = train.accumulate), zero, bucket, overlap, reduce_dtype,
//    recompute.
#include <algorithm>
#include <set>

#include "compiler/sema/check_blocks.h"
#include "compiler/sema/constants.h"
#include "compiler/sema/signatures.h"
#include "compiler/syntax/parse.h"

namespace dtl::sema {

namespace {

using syntax::Expr;

// ZeRO shards over the data-parallel axis: the one `split batch over` names.
void zeroAxis(ParallelSpec& out, diag::Diagnostics& diags) {
  if (out.zero <= 0) return;
  for (const SplitSpec& s : out.splits)
    if (s.dim == "batch") {
      out.zero_axis = s.axis;
      return;
    }
  auto at = out.where.find("zero");
  diags.error(at == out.where.end() ? Loc{} : at->second,
              "`zero = " + std::to_string(out.zero) + "` shards over the data-parallel axis, and no rule splits `batch`",
              "add `split batch over dp` (the axis whose ranks read different samples), or remove `zero`");
}

void mesh(const syntax::ParallelDecl& p, int64_t world, ParallelSpec& out, Constants& c, diag::Diagnostics& diags) {
  std::set<std::string> names;
  std::string auto_axis;  // the axis sized `auto`, if any
  bool sizes_known = true;
  for (const syntax::MeshAxis& a : p.mesh) {
    MeshAxisSpec m;
    m.name = a.name.name;
    m.loc = a.name.loc;
    if (!names.insert(m.name).second) {
      diags.error(a.name.loc, "mesh axis `" + m.name + "` is declared twice",
                  "each axis appears once on the `mesh` line; remove or rename one");
      continue;
    }
    if (a.size->kind == Expr::Kind::Name && a.size->text == "auto") {
      m.is_auto = true;
      if (!auto_axis.empty()) {
        diags.error(a.size->loc, "`auto` is used for two mesh axes, `" + auto_axis + "` and `" + m.name + "`",
                    "`auto` means the world size divided by the other axes, so only one axis can have it");
        m.is_auto = false;
        sizes_known = false;
      }
    } else if (!c.integer(*a.size, "mesh axis `" + m.name + "`", m.size)) {
      sizes_known = false;
    }
    // An axis with a bad size is kept (size 0, unknown) so rules over it resolve.
    out.mesh.push_back(m);
    if (m.is_auto) auto_axis = m.name;
  }
  if (world <= 0 || !sizes_known) return;
  int64_t fixed = 1;
  std::string product;
  for (const MeshAxisSpec& m : out.mesh) {
    if (m.is_auto) continue;
    if (!checkedMul(fixed, m.size, fixed)) fixed = -1;
    product += (product.empty() ? "" : " × ") + m.name + " " + std::to_string(m.size);
  }
  Loc at = p.has_mesh ? p.mesh_loc : p.loc;
  for (MeshAxisSpec& m : out.mesh) {
    if (!m.is_auto) continue;
    if (fixed <= 0 || world % fixed != 0) {
      diags.error(at, "the world of " + std::to_string(world) + " ranks does not divide by the fixed axes (" + product +
                          " = " + std::to_string(fixed) + ")",
                  "`" + m.name + " = auto` is the world size divided by the other axes; choose a world that is a multiple of " +
                      std::to_string(fixed));
      return;
    }
    m.size = world / fixed;
    return;
  }
  if (fixed != world)
    diags.error(at, "the mesh has " + std::to_string(fixed) + " ranks (" + product + ") but the world is " +
                        std::to_string(world),
                "make the axes multiply to the world size, or set one axis to `auto`");
}

// Every tensor the model names: params, inputs, bound values.
// The tensors a split rule seeds: parameters and inputs (values are laid out
// from them, by rule order where two split dims meet).
std::vector<std::pair<std::string, const Shape*>> seededTensors(const Model& model) {
  std::vector<std::pair<std::string, const Shape*>> out;
  for (const ParamInfo& p : model.params) out.emplace_back(p.path, &p.shape);
  for (const InputInfo& i : model.inputs) out.emplace_back(i.name, &i.shape);
  return out;
}

void splits(const syntax::ParallelDecl& p, const Model& model, ParallelSpec& out, diag::Diagnostics& diags) {
  std::map<std::string, const syntax::SplitRule*> by_dim;
  std::vector<std::string> dims;
  for (const auto& [n, size] : model.all_dims) dims.push_back(n);
  if (std::find(dims.begin(), dims.end(), "batch") == dims.end()) dims.push_back("batch");
  for (const syntax::SplitRule& r : p.splits) {
    const std::string& d = r.dim.name;
    const MeshAxisSpec* axis = nullptr;
    std::vector<std::string> axes;
    for (const MeshAxisSpec& m : out.mesh) {
      axes.push_back(m.name);
      if (m.name == r.axis.name) axis = &m;
    }
    bool ok = true;
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) {
      std::string hint = diag::didYouMean(d, dims);
      diags.error(r.dim.loc, "`split " + d + "`: the model has no dim `" + d + "`",
                  hint.empty() ? "split rules name dims of the model's tensors" : hint);
      ok = false;
    }
    if (!axis) {
      std::string hint = diag::didYouMean(r.axis.name, axes);
      diags.error(r.axis.loc, "`over " + r.axis.name + "`: the mesh has no axis `" + r.axis.name + "`",
                  hint.empty() ? (axes.empty() ? "declare the mesh: `mesh " + r.axis.name + " = …`"
                                               : "mesh axes: " + [&] {
                                                   std::string s;
                                                   for (const auto& a : axes) s += (s.empty() ? "" : ", ") + a;
                                                   return s;
                                                 }())
                               : hint);
      ok = false;
    }
    if (!ok) continue;
    auto prev = by_dim.find(d);
    if (prev != by_dim.end()) {
      diags.error(r.loc, "`" + d + "` is split twice (over `" + prev->second->axis.name + "` at line " +
                             std::to_string(prev->second->loc.line) + " and over `" + r.axis.name + "`)",
                  "a dim is split over one mesh axis; shard another dim over the second axis");
      continue;
    }
    by_dim[d] = &r;
    auto size = model.all_dims.find(d);
    // Uneven splits are built (the first D mod n ranks hold one more: GPT-2's
    // vocab of 50257 over tp = 2); every rank must hold some of the dim.
    if (d != "batch" && size != model.all_dims.end() && axis->size > 0 && size->second < axis->size)
      diags.error(r.dim.loc, "`" + d + "` (" + std::to_string(size->second) + ") is smaller than `" + axis->name +
                                 "` (" + std::to_string(axis->size) + "): some ranks would hold none of it",
                  "split a larger dim over `" + axis->name + "`, or use fewer ranks on it");
    out.splits.push_back(SplitSpec{d, r.axis.name, r.loc, r.axis.loc});
  }
  // No parameter or input may have two dims split over one axis (a value
  // meeting two is laid out by the rule written first: language guide §11).
  for (const auto& [name, shape] : seededTensors(model)) {
    std::map<std::string, const SplitSpec*> axis_of;
    for (const Dim& dm : shape->dims) {
      for (const SplitSpec& s : out.splits) {
        if (s.dim != dm.name) continue;
        auto [it, fresh] = axis_of.emplace(s.axis, &s);
        if (!fresh)
          diags.error(s.loc, "`" + name + "` " + shape->names() + " would be split over `" + s.axis +
                                 "` twice, by `" + it->second->dim + "` and `" + s.dim + "`",
                      "one tensor can be sharded over an axis by one dim only; split one of them over another axis");
      }
    }
  }
}

void settings(const syntax::ParallelDecl& p, const Model& model, TrainSpec& train, ParallelSpec& out, Constants& c,
              diag::Diagnostics& diags) {
  std::set<std::string> seen;
  const syntax::Setting* pipeline = nullptr;
  int64_t microbatches = 0;
  for (const syntax::Setting& s : p.settings) {
    const std::string& k = s.key.name;
    static const std::vector<std::string> kKeys = {"pipeline", "zero", "prefetch", "bucket", "overlap", "reduce_dtype", "recompute"};
    if (std::find(kKeys.begin(), kKeys.end(), k) == kKeys.end()) {
      std::string hint = diag::didYouMean(k, kKeys);
      diags.error(s.key.loc, "unknown parallel setting `" + k + "`",
                  hint.empty() ? "settings: pipeline, zero, prefetch, bucket, overlap, reduce_dtype, recompute; axes go on the `mesh` line"
                               : hint);
      continue;
    }
    if (!seen.insert(k).second) {
      diags.error(s.key.loc, "`" + k + "` is set twice in `parallel`");
      continue;
    }
    // Where the value came from: the spec's line, or the --set that replaced it.
    out.where[k] = s.value->loc.file != s.key.loc.file ? s.value->loc : s.key.loc;
    const Expr& v = *s.value;
    if (k == "zero") {
      if (c.integer(v, "`parallel.zero`", out.zero, 0) && out.zero > 3)
        diags.error(v.loc, "`zero` is 0, 1, 2 or 3, got " + std::to_string(out.zero),
                    "0 none · 1 optimiser state · 2 + gradients · 3 + parameters (FSDP)");
    } else if (k == "prefetch") {
      c.integer(v, "`parallel.prefetch`", out.prefetch, 0);
    } else if (k == "bucket") {
      c.bytes(v, "`parallel.bucket`", out.bucket_bytes);
    } else if (k == "overlap") {
      c.boolean(v, "`parallel.overlap`", out.overlap);
    } else if (k == "reduce_dtype") {
      std::string n;
      if (c.name(v, "`parallel.reduce_dtype`", n)) {
        auto t = parseDType(n);
        if (!t || !isFloat(*t)) diags.error(v.loc, "`reduce_dtype` is f32, bf16 or f16, got `" + n + "`");
        else out.reduce_dtype = *t;
      }
    } else if (k == "recompute") {
      std::string n;
      if (c.name(v, "`parallel.recompute`", n)) {
        if (std::find(model.layer_paths.begin(), model.layer_paths.end(), n) == model.layer_paths.end()) {
          std::string hint = diag::didYouMean(n, model.layer_paths);
          diags.error(v.loc, "`recompute = " + n + "`: the model has no sub-layer `" + n + "`",
                      hint.empty() ? "recompute names a sub-layer path such as `blocks`" : hint);
        } else {
          out.recompute = n;
        }
      }
    } else if (k == "pipeline") {
      pipeline = &s;
      const Expr* callee = v.kind == Expr::Kind::Call ? v.kids[0].get() : &v;
      const Signature* sig = callee->kind == Expr::Kind::Name ? findBuiltin(BuiltinKind::Pipeline, callee->text) : nullptr;
      if (!sig) {
        std::string name = callee->kind == Expr::Kind::Name ? callee->text : syntax::exprText(v);
        std::string hint = diag::didYouMean(name, builtinNames(BuiltinKind::Pipeline));
        diags.error(callee->loc, "unknown pipeline schedule `" + name + "`",
                    hint.empty() ? "schedules: gpipe(microbatches = N), 1f1b(microbatches = N)" : hint);
        continue;
      }
      out.pipeline = sig->name;
      out.pipeline_axis = "pp";
      if (v.kind == Expr::Kind::Call) {
        std::vector<const Expr*> bound;
        if (!bindArguments(v, *sig, "pipeline `" + sig->name + "`", bound, diags)) continue;
        if (bound[0]) c.integer(*bound[0], "`microbatches`", microbatches);
        if (bound[1]) c.name(*bound[1], "`axis` of the pipeline", out.pipeline_axis);
      }
    }
  }
  zeroAxis(out, diags);
  if (!pipeline) return;
  const SplitSpec* split = nullptr;
  for (const SplitSpec& s : out.splits)
    if (s.axis == out.pipeline_axis) split = &s;
  bool has_axis = std::any_of(out.mesh.begin(), out.mesh.end(), [&](const MeshAxisSpec& m) { return m.name == out.pipeline_axis; });
  if (!has_axis) {
    diags.error(pipeline->value->loc, "the pipeline runs over axis `" + out.pipeline_axis + "`, which the mesh does not have",
                "add it to the mesh (`mesh …, " + out.pipeline_axis + " = 2`) or name the axis: `" + out.pipeline +
                    "(microbatches = N, axis = NAME)`");
  } else if (!split) {
    diags.error(pipeline->value->loc, "`pipeline` needs a split over `" + out.pipeline_axis + "`",
                model.repeat_dims.empty()
                    ? "stages are contiguous blocks of a `repeat(n)` stack, and the model has none; stack its "
                      "layers with `repeat` or drop `pipeline`"
                    : "split the stacked layers into stages: `split " + model.repeat_dims[0] + " over " +
                          out.pipeline_axis + "`");
  } else if (std::find(model.repeat_dims.begin(), model.repeat_dims.end(), split->dim) == model.repeat_dims.end()) {
    diags.error(split->loc, "pipeline stages split `" + split->dim + "`, which is not a `repeat` dim",
                "stages are contiguous blocks of a `repeat(n)` stack; split its dim over `" + out.pipeline_axis + "`");
  }
  if (microbatches > 0) {
    if (train.present && train.accumulate != 1 && train.accumulate != microbatches)
      diags.error(pipeline->value->loc, "`microbatches = " + std::to_string(microbatches) + "` but `train.accumulate = " +
                                            std::to_string(train.accumulate) + "`",
                  "they are one number (micro-batches per optimiser step); set one of them");
    train.accumulate = microbatches;
  }
  out.microbatches = train.accumulate;
}

}  // namespace

void checkParallel(const Program& prog, const Model& model, TrainSpec& train, int64_t world, ParallelSpec& out,
                   diag::Diagnostics& diags) {
  out.world = world;
  Constants c(diags);
  syntax::ParallelDecl implicit;
  const syntax::ParallelDecl* p = prog.parallel;
  out.present = p != nullptr;
  if (!p) p = &implicit;
  // Defaults: data parallel over every rank.
  syntax::ParallelDecl with_defaults;
  if (!p->has_mesh || (p->splits.empty() && !p->has_mesh)) {
    with_defaults.loc = p->loc;
    with_defaults.has_mesh = true;
    with_defaults.mesh_loc = p->loc;
    for (const auto& a : p->mesh) with_defaults.mesh.push_back(syntax::MeshAxis{a.name, a.size->clone()});
    if (with_defaults.mesh.empty()) {
      auto e = std::make_unique<Expr>();
      e->kind = Expr::Kind::Name;
      e->text = "auto";
      e->loc = p->loc;
      with_defaults.mesh.push_back(syntax::MeshAxis{syntax::Ident{"dp", p->loc}, std::move(e)});
    }
    for (const auto& s : p->splits) with_defaults.splits.push_back(s);
    if (with_defaults.splits.empty() && !p->has_mesh)
      with_defaults.splits.push_back(syntax::SplitRule{p->loc, syntax::Ident{"batch", p->loc}, syntax::Ident{"dp", p->loc}});
    for (const auto& s : p->settings) with_defaults.settings.push_back(syntax::Setting{s.key, s.value->clone()});
    p = &with_defaults;
  }
  mesh(*p, world, out, c, diags);
  splits(*p, model, out, diags);
  settings(*p, model, train, out, c, diags);
}

}  // namespace dtl::sema
