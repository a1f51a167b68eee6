// Stage 6: what the language has but this build cannot run yet.
//
// Split rules over any dim but a `repeat` dim (pipeline stages) are laid out
// for real (data and tensor parallelism); a pipeline split and the settings
// below would be ignored. So each one is reported once, at its rule or setting in the spec, before the graph is
// lowered and laid out (no per-tensor errors follow): an error for `dtlc
// plan` and `dtlc run`, a warning for `dtlc check` (it is valid language).
//
// 1. Collect one finding per pipeline split rule and per unbuilt setting
//    (pipeline, recompute, reduce_dtype, train.precision).
// 2. Report them in source order.
#include <algorithm>
#include <tuple>

#include "compiler/sema/check_blocks.h"

namespace dtl::sema {

namespace {

struct Finding {
  Loc loc;
  std::string message, hint;
};

// The rule's text from `split` to the end of its axis name.
Loc ruleSpan(const SplitSpec& s) {
  Loc at = s.loc;
  if (s.axis_loc.valid() && s.axis_loc.file == at.file && s.axis_loc.line == at.line && s.axis_loc.col > at.col)
    at.len = s.axis_loc.col + s.axis_loc.len - at.col;
  return at;
}

Loc settingAt(const std::map<std::string, Loc>& where, const std::string& key) {
  auto it = where.find(key);
  return it == where.end() ? Loc{} : it->second;
}

void splitRules(const Spec& spec, std::vector<Finding>& out) {
  const std::vector<std::string>& stacked = spec.model.repeat_dims;
  for (const SplitSpec& s : spec.parallel.splits) {
    if (std::find(stacked.begin(), stacked.end(), s.dim) == stacked.end()) continue;
    out.push_back({ruleSpan(s),
                   "`split " + s.dim + " over " + s.axis + "` is not built yet (pipeline stages over the `repeat` dim)",
                   "remove this rule to keep every layer on every rank"});
  }
}

void settings(const Spec& spec, std::vector<Finding>& out) {
  const ParallelSpec& p = spec.parallel;
  auto add = [&](const std::map<std::string, Loc>& where, const std::string& key, const std::string& what,
                 const std::string& hint) {
    out.push_back({settingAt(where, key), what + " is not built yet", hint});
  };
  if (!p.pipeline.empty()) {
    std::string rule;
    for (const SplitSpec& s : p.splits)
      if (s.axis == p.pipeline_axis) rule = " and `split " + s.dim + " over " + s.axis + "`";
    add(p.where, "pipeline", "`pipeline = " + p.pipeline + "(…)` (a pipeline schedule)",
        "remove it" + rule + " to train without pipeline stages");
  }
  if (!p.recompute.empty())
    add(p.where, "recompute", "`recompute = " + p.recompute + "` (activation recomputation)",
        "remove it to keep every activation");
  if (p.reduce_dtype != DType::F32)
    add(p.where, "reduce_dtype", std::string("`reduce_dtype = ") + dtypeName(p.reduce_dtype) + "` (gradients on the wire)",
        "remove it (or --set parallel.reduce_dtype=f32) to reduce in f32");
  if (spec.train.precision != DType::F32)
    add(spec.train.where, "precision", std::string("`precision = ") + dtypeName(spec.train.precision) + "` (mixed precision)",
        "remove it (or --set train.precision=f32) to train in f32");
}

}  // namespace

void checkUnbuilt(const Spec& spec, diag::Severity severity, diag::Diagnostics& diags) {
  std::vector<Finding> found;
  splitRules(spec, found);
  settings(spec, found);
  std::stable_sort(found.begin(), found.end(), [](const Finding& a, const Finding& b) {
    return std::tie(a.loc.file, a.loc.line, a.loc.col) < std::tie(b.loc.file, b.loc.line, b.loc.col);
  });
  for (Finding& f : found) diags.report(severity, f.loc, std::move(f.message), std::move(f.hint));
}

}  // namespace dtl::sema
