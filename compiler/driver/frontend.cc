#include "compiler/driver/frontend.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "compiler/sema/apply_overrides.h"
#include "compiler/sema/check_blocks.h"
#include "compiler/sema/instantiate_model.h"
#include "compiler/sema/resolve_names.h"
#include "compiler/ir/autodiff.h"
#include "compiler/passes/bucket_gradients.h"

namespace dtl::driver {

Frontend::Frontend()
    : sources_(std::make_unique<diag::SourceManager>()),
      diags_(std::make_unique<diag::Diagnostics>(*sources_)) {}

int Frontend::run(const std::string& path, const FrontendOptions& opt, Stop stop) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    usage_.push_back("'" + path + "' is a folder; expected a .dtl file");
    return 2;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    usage_.push_back("cannot read '" + path + "': " + (std::filesystem::exists(path, ec) ? "permission denied" : "no such file"));
    return 2;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return runText(path, ss.str(), opt, stop);
}

int Frontend::runText(const std::string& name, const std::string& text, const FrontendOptions& opt, Stop stop) {
  spec_.file = name;
  int file = sources_->add(name, text);
  sema::loadModules(prog_, *sources_, file, name, *diags_);
  if (diags_->hasErrors() || stop == Stop::Ast) return diags_->hasErrors() ? 1 : 0;

  usage_ = sema::applyOverrides(prog_, *sources_, opt.sets, *diags_);
  if (!usage_.empty()) return 2;
  if (diags_->hasErrors()) return 1;

  sema::resolveNames(prog_, *diags_);
  sema::checkTrain(prog_, spec_.train, *diags_);
  sema::instantiateModel(prog_, spec_.train.batch, spec_.model, *diags_);
  sema::checkData(prog_, spec_.model, spec_.data, *diags_);
  sema::checkParallel(prog_, spec_.model, spec_.train, opt.world, spec_.parallel, *diags_);
  if (diags_->hasErrors()) return 1;
  if (stop == Stop::Ir || stop == Stop::Grad || stop == Stop::Plan) lower(stop != Stop::Ir);
  if (stop == Stop::Plan) layOut();
  if (stop == Stop::Grad || stop == Stop::Plan) refuseUnbuilt();
  return diags_->hasErrors() ? 1 : 0;
}

// The mesh with every size resolved (an unresolved `auto` counts as 1), the
// split rules with their source, the layout pass, then the buckets.
void Frontend::layOut() {
  std::vector<layout::MeshAxis> mesh;
  for (const sema::MeshAxisSpec& a : spec_.parallel.mesh) mesh.push_back({a.name, std::max<int64_t>(1, a.size)});
  std::vector<layout::SplitRule> rules;
  for (const sema::SplitSpec& s : spec_.parallel.splits) {
    std::string where = spec_.parallel.present && s.loc.valid()
                            ? sources_->name(s.loc.file) + ":" + std::to_string(s.loc.line) + ":" + std::to_string(s.loc.col)
                            : "implied: no parallel block";
    rules.push_back({s.dim, s.axis, where});
  }
  layout_errors_ = layout::assignPlacements(graph_, mesh, rules, layout_);
  passes::bucketGradients(graph_, spec_.parallel.bucket_bytes, spec_.parallel.overlap);
}

// Settings the language has and `dtlc check` accepts, but this build cannot
// run yet: planning or training with them would silently do something else.
void Frontend::refuseUnbuilt() {
  const sema::ParallelSpec& p = spec_.parallel;
  auto refuse = [&](const std::string& setting, const std::string& instead) {
    layout_errors_.push_back(setting + " is not built yet; " + instead);
  };
  if (p.zero > 0)
    refuse("`zero = " + std::to_string(p.zero) + "` (sharded optimiser state, gradients or parameters)",
           "remove it (or --set parallel.zero=0) to keep replicated state");
  if (!p.pipeline.empty()) refuse("`pipeline = " + p.pipeline + "(…)`", "remove it to run without pipeline stages");
  if (!p.recompute.empty()) refuse("`recompute = " + p.recompute + "`", "remove it to keep every activation");
  if (p.reduce_dtype != DType::F32)
    refuse(std::string("`reduce_dtype = ") + dtypeName(p.reduce_dtype) + "` (gradients on the wire)",
           "remove it (or --set parallel.reduce_dtype=f32) to reduce in f32");
  if (spec_.train.precision != DType::F32)
    refuse(std::string("`precision = ") + dtypeName(spec_.train.precision) + "`",
           "remove it (or --set train.precision=f32) to train in f32");
}

void Frontend::lower(bool with_backward) {
  // The checked model is evaluated once more, this time emitting nodes; it
  // cannot fail where checking passed, so its diagnostics are the same.
  sema::Model scratch;
  graph_ = ir::Graph{};
  sema::instantiateModel(prog_, spec_.train.batch, scratch, *diags_, &graph_);
  if (!with_backward) return;
  ir::appendBackward(graph_);
  ir::appendUpdates(graph_);
}

}  // namespace dtl::driver
