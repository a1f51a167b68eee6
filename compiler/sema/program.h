// The loaded program: the spec file, everything it imports and the stdlib,
// parsed, with the global layer table. Stage 1 (load_modules) builds it;
// stage 2 (apply_overrides) edits its settings; later stages read it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/diag/diagnostics.h"
#include "compiler/syntax/ast.h"

namespace dtl::sema {

using diag::Loc;

struct Program {
  diag::SourceManager* sources = nullptr;
  std::vector<std::unique_ptr<syntax::Module>> modules;  // [0] = stdlib, then spec, then imports
  int spec_file = -1;
  std::string spec_dir;  // relative data paths resolve against this
  std::map<std::string, const syntax::LayerDecl*> layers;  // every layer, by name
  std::vector<std::string> stdlib_layers;
  syntax::LayerDecl* model = nullptr;           // in the spec file
  syntax::DataDecl* data = nullptr;
  syntax::TrainDecl* train = nullptr;
  syntax::ParallelDecl* parallel = nullptr;
  // A synthetic parallel block created by `--set parallel.…` without one.
  std::unique_ptr<syntax::ParallelDecl> parallel_storage;
  std::unique_ptr<syntax::TrainDecl> train_storage;
};

// Stage 1. Parses `spec_path` (its text already added as `spec_file`), the
// embedded stdlib and every import (relative to the importing file), and
// collects the declarations. Reports duplicates, a missing or second model,
// missing imports and import cycles.
void loadModules(Program& prog, diag::SourceManager& sources, int spec_file,
                 const std::string& spec_path, diag::Diagnostics& diags);

// The embedded text of stdlib/nn.dtl (generated at build time).
extern const char* const kStdlibSource;

}  // namespace dtl::sema
