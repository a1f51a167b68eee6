// A run's folder (docs/running.md, "Run folders"): where `dtlc run` keeps a
// run's checkpoints, metrics, resolved spec and plan. `--out DIR`, else the
// folder `--resume` names, else the spec's `checkpoint "DIR"`, else
// runs/<spec file stem>/ — all relative to the working folder, never beside
// the spec. A folder already holding a run is refused unless it is resumed.
#pragma once

#include <string>
#include <string_view>

#include "compiler/driver/frontend.h"
#include "tools/dtlc/run_flags.h"

namespace dtl::cli {

struct RunFolder {
  std::string dir;                // the run folder
  std::string resume_dir;         // the folder --resume loads from ("" without --resume)
  std::string resume_checkpoint;  // "step-00000005" when --resume named one checkpoint, else ""
};

// Where this run's files go, from the flags and the spec's `checkpoint`
// folder ("" when it has none). `--resume DIR/step-N` resumes that
// checkpoint of the run folder DIR.
RunFolder resolveRunFolder(const RunFlags& f, const std::string& spec_checkpoint_dir);

// "" when `folder.dir` may take this run; else the refusal with its hint.
// A folder holds a run when it has checkpoints (index.json, step-N,
// diverged-step-N) or a non-empty metrics.jsonl; resuming into the folder
// the run is resumed from is allowed.
std::string refuseTakenFolder(const RunFolder& folder);

// The spec as this run compiled it: the spec file's text with its data and
// import paths made absolute (so it compiles from the run folder, as `dtlc
// report RUN_DIR` does), under a header naming the original file and the
// `--set`s (as `# set: KEY=VALUE` lines, which `dtlc report` applies).
inline constexpr std::string_view kSetHeader = "# set: ";
std::string resolvedSpecText(const driver::Frontend& fe, const std::vector<std::string>& sets);

// Writes spec.dtl, plan.txt and plan.json (the plan of global rank 0, as
// `dtlc plan --kernels KERNELS` prints it) into the run folder, creating it.
// "" or the error.
std::string writeRunFiles(const RunFolder& folder, const driver::Frontend& fe, const std::vector<std::string>& sets,
                          const std::string& kernels);

}  // namespace dtl::cli
