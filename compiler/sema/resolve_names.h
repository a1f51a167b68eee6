// Stage 3: name resolution over every layer and the model, instantiated or
// not, so a typo in an unused layer is still found. Reports unknown names
// (with the closest name in scope as a hint) and names defined twice.
#pragma once

#include "compiler/sema/program.h"

namespace dtl::sema {

void resolveNames(const Program& prog, diag::Diagnostics& diags);

// Names every body may use without declaring them.
bool isGlobalName(const std::string& name);

}  // namespace dtl::sema
