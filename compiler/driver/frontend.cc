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
#include "compiler/ir/lower_model.h"
#include "compiler/passes/accumulate_into_contraction.h"
#include "compiler/passes/bucket_gradients.h"
#include "compiler/passes/scatter_into_gradient.h"
#include "compiler/passes/prefetch_gathers.h"

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
  sema::checkSizes(prog_, spec_.model, spec_.train, *diags_);
  sema::checkData(prog_, spec_.model, spec_.data, *diags_);
  sema::checkParallel(prog_, spec_.model, spec_.train, opt.world, spec_.parallel, *diags_);
  if (diags_->hasErrors()) return 1;
  sema::checkUnbuilt(spec_, opt.refuse_unbuilt ? diag::Severity::Error : diag::Severity::Warning, *diags_);
  if (diags_->hasErrors()) return 1;
  if (stop == Stop::Ir || stop == Stop::Grad || stop == Stop::Plan) lower(stop != Stop::Ir);
  if (stop == Stop::Plan && !diags_->hasErrors()) layOut(opt);
  if (stop == Stop::Grad && !diags_->hasErrors()) {  // one process: no layout
    passes::scatterIntoGradient(graph_, nullptr);
    if (opt.accumulate_into_contraction) passes::accumulateIntoContraction(graph_, nullptr);
  }
  return diags_->hasErrors() ? 1 : 0;
}

// The mesh with every size resolved (an unresolved `auto` counts as 1), the
// split rules with their source, the layout pass, then the buckets.
void Frontend::layOut(const FrontendOptions& opt) {
  std::vector<layout::MeshAxis> mesh;
  for (const sema::MeshAxisSpec& a : spec_.parallel.mesh) mesh.push_back({a.name, std::max<int64_t>(1, a.size)});
  std::vector<layout::SplitRule> rules;
  for (const sema::SplitSpec& s : spec_.parallel.splits) {
    std::string where = spec_.parallel.present && s.loc.valid()
                            ? sources_->name(s.loc.file) + ":" + std::to_string(s.loc.line) + ":" + std::to_string(s.loc.col)
                            : "implied: no parallel block";
    rules.push_back({s.dim, s.axis, where});
  }
  layout::ZeroRule zero;
  if (spec_.parallel.zero > 0) {
    auto at = spec_.parallel.where.find("zero");
    const diag::Loc loc = at == spec_.parallel.where.end() ? diag::Loc{} : at->second;
    zero = {static_cast<int>(spec_.parallel.zero), spec_.parallel.zero_axis,
            loc.valid() ? sources_->name(loc.file) + ":" + std::to_string(loc.line) + ":" + std::to_string(loc.col) : "--set"};
  }
  layout_errors_ = layout::assignPlacements(graph_, mesh, rules, layout_, zero);
  passes::scatterIntoGradient(graph_, &layout_);
  if (opt.accumulate_into_contraction) passes::accumulateIntoContraction(graph_, &layout_);
  passes::bucketGradients(graph_, spec_.parallel.bucket_bytes, spec_.parallel.overlap, spec_.parallel.zero == 1);
  passes::prefetchGathers(graph_, static_cast<int>(spec_.parallel.prefetch));
}

// The graph's `batch` is the global batch: train.batch (per rank) times the
// size of every mesh axis `split batch over` names. It is the only place
// the key's per-rank meaning is applied; the graph, the layout and the
// per-rank program see a dim like any other.
int64_t Frontend::globalBatch() const {
  int64_t batch = spec_.train.batch;
  for (const sema::SplitSpec& s : spec_.parallel.splits) {
    if (s.dim != "batch") continue;
    for (const sema::MeshAxisSpec& a : spec_.parallel.mesh)
      if (a.name == s.axis) batch *= std::max<int64_t>(1, a.size);
  }
  return batch;
}

void Frontend::lower(bool with_backward) {
  // Lowering reads what sema recorded while checking the model (sema/op_trace.h).
  graph_ = ir::lowerModel(spec_.model, globalBatch(), *sources_, *diags_);
  if (!with_backward || diags_->hasErrors()) return;
  ir::appendBackward(graph_);
  ir::appendUpdates(graph_);
}

}  // namespace dtl::driver
