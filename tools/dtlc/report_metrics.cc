#include "tools/dtlc/report_metrics.h"

#include <cmath>
#include <limits>

#include "runtime/data/literal.h"

namespace dtl::cli::report {

namespace {

using rt::data::Literal;

double numberOf(const Literal& v) {
  if (v.type == Literal::Type::Int) return static_cast<double>(v.i);
  if (v.type == Literal::Type::Float) return v.f;
  return std::numeric_limits<double>::quiet_NaN();
}

// One line's fields into `m`; false when it is not an object with a step.
bool addLine(const Literal& o, Metrics& m) {
  const Literal* step = o.get("step");
  if (o.type != Literal::Type::Dict || !step || step->type != Literal::Type::Int) return false;
  const double x = static_cast<double>(step->i);
  for (size_t k = 0; k < o.keys.size(); ++k) {
    const std::string& key = o.keys[k];
    const Point p{x, numberOf(o.items[k])};
    if (key == "loss") m.loss.push_back(p);
    else if (key == "lr") m.lr.push_back(p);
    else if (key == "samples_per_s") m.samples_per_s.push_back(p);
    else if (key.rfind("eval_", 0) == 0) m.eval[key].push_back(p);
  }
  return true;
}

}  // namespace

Metrics parseMetrics(const std::string& text) {
  Metrics m;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    ++m.lines;
    Literal o;
    std::string error;
    if (rt::data::parseLiteral(line, rt::data::Syntax::Json, o, error) && addLine(o, m)) continue;
    if (m.bad_lines++ == 0)
      m.first_bad = "line " + std::to_string(m.lines) + ": " + (error.empty() ? "not an object with a \"step\"" : error);
  }
  return m;
}

std::vector<Chart> metricCharts(const Metrics& m) {
  std::vector<Chart> out;
  Chart loss{"chart-loss", "loss", {{"train", m.loss, false}}};
  if (m.eval.count("eval_loss")) loss.series.push_back({"eval", m.eval.at("eval_loss"), true});
  out.push_back(loss);
  for (const auto& [key, points] : m.eval)
    if (key != "eval_loss") out.push_back({"chart-" + key, "eval " + key.substr(5), {{key, points, true}}});
  out.push_back({"chart-lr", "learning rate", {{"lr", m.lr, false}}});
  out.push_back({"chart-throughput", "throughput (samples/s)", {{"samples/s", m.samples_per_s, false}}});
  std::vector<Chart> drawn;
  for (Chart& c : out) {
    size_t n = 0;
    for (const Series& s : c.series) n += s.points.size();
    if (n > 0) drawn.push_back(std::move(c));
  }
  return drawn;
}

}  // namespace dtl::cli::report
