// The front end as every dtlc command runs it: the spec compiled up to
// `stop`, with usage errors (exit 2) and diagnostics (exit 1) written the
// same way by all of them.
#pragma once

#include <string>

#include "compiler/driver/frontend.h"

namespace dtl::cli {

// Returns 0 when the spec is good; else the exit status, with `err` holding
// "dtlc COMMAND: …" usage lines or the rendered diagnostics (JSON with `json`).
// Warnings are rendered into `err` for a good spec too.
int compileSpec(driver::Frontend& fe, const std::string& command, const std::string& spec,
                const driver::FrontendOptions& opt, driver::Stop stop, std::string& err, bool json = false);

// What the layout pass could not lay out ("… not supported yet"): exit 1
// when any. Rules and settings not built yet never get this far: the front
// end refuses them at their source (FrontendOptions::refuse_unbuilt).
int layoutRefusals(const driver::Frontend& fe, const std::string& command, std::string& err);

// `dtlc run`'s front end: SPEC compiled as every rank compiles it, on `world`
// ranks (laid out when more than one), and refused — before any rank starts —
// when it has errors, rules or settings not built yet, or no data or train
// block. Returns 0 or the exit status with the messages in `err`.
int compileForRun(driver::Frontend& fe, const std::string& spec, const std::vector<std::string>& sets, int64_t world,
                  std::string& err);

// The spec as one process runs a trained model (`dtlc generate`, `dtlc
// export`): every mesh axis at 1 and `train.batch` at 1, compiled up to
// `stop`. The diagnostics (and warnings) are written only when it fails.
int compileOneProcess(driver::Frontend& fe, const std::string& command, const std::string& spec,
                      const std::vector<std::string>& sets, driver::Stop stop, std::string& err);

}  // namespace dtl::cli
