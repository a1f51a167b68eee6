// The front end as every dtlc command runs it: the spec compiled up to
// `stop`, with usage errors (exit 2) and diagnostics (exit 1) written the
// same way by all of them.
#pragma once

#include <string>

#include "compiler/driver/frontend.h"

namespace dtl::cli {

// Returns 0 when the spec is good; else the exit status, with `err` holding
// "dtlc COMMAND: …" usage lines or the rendered diagnostics (JSON with `json`).
int compileSpec(driver::Frontend& fe, const std::string& command, const std::string& spec,
                const driver::FrontendOptions& opt, driver::Stop stop, std::string& err, bool json = false);

// The layout's and the build's refusals ("… is not built yet"): exit 1 when any.
int refusals(const driver::Frontend& fe, const std::string& command, std::string& err);

}  // namespace dtl::cli
