// The metrics file of `dtlc run --metrics FILE` read back for `dtlc report`:
// one JSON object per line (step, epoch, loss, lr, samples_per_s; eval_*
// on evaluation lines). A value that is not a number (null: the writer's
// NaN or infinity) is kept as NaN so the chart skips it; a line that is not
// a JSON object is counted and passed over.
#pragma once

#include <map>
#include <string>

#include "tools/dtlc/report_curves.h"

namespace dtl::cli::report {

struct Metrics {
  std::vector<Point> loss, lr, samples_per_s;
  std::map<std::string, std::vector<Point>> eval;  // "eval_loss", "eval_accuracy", …
  int64_t lines = 0, bad_lines = 0;
  std::string first_bad;  // "line 7: at byte 3: …"
};

Metrics parseMetrics(const std::string& text);

// The charts the page draws: loss (train and eval), each other eval metric,
// learning rate, throughput; a chart with no points is left out.
std::vector<Chart> metricCharts(const Metrics& m);

}  // namespace dtl::cli::report
