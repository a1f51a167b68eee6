// Stage 2: `--set key=value` overrides, applied to the syntax tree before any
// checking so an override is checked exactly like the line it replaces.
#pragma once

#include <string>
#include <vector>

#include "compiler/sema/program.h"

namespace dtl::sema {

// Applies each "key=value". A value is parsed as a DTL expression in its own
// source named `--set KEY`, so its errors are located too. Returns the
// usage errors (unknown key, no '='): the caller exits with status 2.
std::vector<std::string> applyOverrides(Program& prog, diag::SourceManager& sources,
                                        const std::vector<std::string>& sets,
                                        diag::Diagnostics& diags);

}  // namespace dtl::sema
