// The front end as one call: load → overrides → names → model → sizes →
// blocks → not built yet → (lower → lay out). Each stage runs only when the
// ones before it left no errors that would make its own reports noise
// (syntax errors stop after stage 1; name errors still allow data/train
// checks); what this build cannot run yet stops before lowering.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/diag/diagnostics.h"
#include "compiler/sema/program.h"
#include "compiler/layout/assign_placements.h"
#include "compiler/sema/spec.h"
#include "core/graph.h"

namespace dtl::driver {

struct FrontendOptions {
  std::vector<std::string> sets;  // --set key=value
  int64_t world = 0;              // --world N; 0 = unknown
  // What this build cannot run yet (a tensor-parallel split, zero, …) is an
  // error that stops before lowering (plan, run) or a warning (check).
  bool refuse_unbuilt = false;
  // The accumulate-into-contraction pass (passes/accumulate_into_contraction.h);
  // off only to compare against the graph without it (tests, jit_bench).
  bool accumulate_into_contraction = true;
};

enum class Stop { Ast, Sema, Ir, Grad, Plan };

class Frontend {
 public:
  Frontend();
  // Reads and checks `path`. Returns 0 when the spec is good, 1 for spec
  // errors (in diagnostics()), 2 for usage errors (in usageErrors()).
  int run(const std::string& path, const FrontendOptions& opt, Stop stop = Stop::Sema);
  // The same from text in memory (tests, fuzzing); `name` is the file name.
  int runText(const std::string& name, const std::string& text, const FrontendOptions& opt, Stop stop = Stop::Sema);

  const diag::Diagnostics& diagnostics() const { return *diags_; }
  const std::vector<std::string>& usageErrors() const { return usage_; }
  const sema::Spec& spec() const { return spec_; }
  // The training graph (Stop::Ir: forward only; Stop::Grad: with backward and updates).
  const ir::Graph& graph() const { return graph_; }
  // Stop::Plan: the laid-out graph's placements; what the layout could not do.
  const layout::Layout& layout() const { return layout_; }
  const std::vector<std::string>& layoutErrors() const { return layout_errors_; }
  const sema::Program& program() const { return prog_; }
  const diag::SourceManager& sources() const { return *sources_; }
  // The graph's `batch`: train.batch (per rank) × the size of every mesh
  // axis `split batch over` names (after sema).
  int64_t globalBatch() const;

 private:
  void lower(bool with_backward);
  void layOut(const FrontendOptions& opt);

  std::unique_ptr<diag::SourceManager> sources_;
  std::unique_ptr<diag::Diagnostics> diags_;
  sema::Program prog_;
  sema::Spec spec_;
  ir::Graph graph_;
  layout::Layout layout_;
  std::vector<std::string> layout_errors_;
  std::vector<std::string> usage_;
};

}  // namespace dtl::driver
