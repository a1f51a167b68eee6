// The HTML of `dtlc report`: one self-contained page (inline CSS and SVG, no
// script, no fonts or files fetched) from what the command found in the run
// folder. Each part that is missing says so and why, in its own section.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/dtlc/report_metrics.h"

namespace dtl::cli::report {

struct CheckpointRow {
  std::string name, path;  // "step-00000040", "runs/x/step-00000040"
  int64_t step = 0, bytes = 0;
  bool latest = false;  // the one index.json names last
  bool diverged = false;
};

struct PageInputs {
  std::string run_dir;
  std::string model;  // from the spec or the latest state.json; may be empty
  int64_t world = 0;  // 0: not known
  std::string metrics_path, metrics_missing;  // the file read, or why there is none
  Metrics metrics;
  std::string spec_path, spec_text, spec_missing;
  std::string plan_svg, plan_text, plan_missing;
  std::vector<CheckpointRow> checkpoints;
  std::string checkpoints_note;  // e.g. index.json unreadable
};

std::string reportHtml(const PageInputs& in);

}  // namespace dtl::cli::report
