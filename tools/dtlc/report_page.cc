#include "tools/dtlc/report_page.h"

#include <cmath>
#include <cstdio>

#include "compiler/sema/print_sema.h"
#include "core/svg.h"

namespace dtl::cli::report {

namespace {

using svg::escape;

// The log-scale switch is a checkbox before <main>: CSS shows each chart's
// `g.lin` or `g.log` by its state (no script).
const char* kCss =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;color:#222;background:#fafafa;margin:0}"
    "header{padding:16px 0 4px}"
    "h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:0 0 10px}"
    "main{padding:8px 28px 40px;max-width:1200px}"
    "section{background:#fff;border:1px solid #e2e2e2;border-radius:6px;padding:14px 18px;margin:14px 0}"
    ".summary{color:#555;margin:0}.summary b{color:#222}"
    ".missing{color:#8a5a00;background:#fff6e0;border:1px solid #f0d9a0;border-radius:4px;padding:8px 12px;white-space:pre-wrap}"
    ".charts{display:flex;flex-wrap:wrap;gap:12px}"
    "svg.chart{background:#fff;border:1px solid #eee;border-radius:4px}"
    "svg .title{font:600 13px sans-serif;fill:#222}svg .legend{font:600 12px sans-serif}"
    "svg .tick{font:11px sans-serif;fill:#666}svg .note{font:12px sans-serif;fill:#999}"
    "svg .grid{stroke:#eee;stroke-width:1}svg .axis{stroke:#999;stroke-width:1}"
    "#logscale{position:absolute;opacity:0}"
    ".switch{cursor:pointer;user-select:none;font-weight:600;color:#333}"
    ".switch::before{content:'';display:inline-block;width:12px;height:12px;border:1px solid #777;"
    "border-radius:2px;margin-right:6px;vertical-align:-1px;background:#fff}"
    "#logscale:checked~main .switch::before{background:#3b75af;border-color:#3b75af}"
    "#logscale:checked~main svg.chart .lin,#logscale:not(:checked)~main svg.chart .log{display:none}"
    "table{border-collapse:collapse}th,td{text-align:left;padding:3px 14px 3px 0;border-bottom:1px solid #eee}"
    "td.num{text-align:right;font-variant-numeric:tabular-nums}"
    "pre{background:#f6f8fa;border:1px solid #e5e5e5;border-radius:4px;padding:10px 12px;overflow:auto;"
    "font:12.5px/1.4 ui-monospace,'DejaVu Sans Mono',monospace}"
    "code{font:12.5px ui-monospace,'DejaVu Sans Mono',monospace}"
    "details summary{cursor:pointer;color:#3b75af;margin-top:8px}";

std::string missing(const std::string& why) { return "<p class=\"missing\">" + escape(why) + "</p>\n"; }

std::string value(double v) {
  if (!std::isfinite(v)) return "—";
  char buf[32];
  std::snprintf(buf, sizeof buf, std::fabs(v) >= 1e-3 || v == 0 ? "%.4f" : "%.3e", v);
  return buf;
}

// The last finite value of a series, or NaN.
double last(const std::vector<Point>& s) {
  for (size_t i = s.size(); i-- > 0;)
    if (std::isfinite(s[i].y)) return s[i].y;
  return NAN;
}

std::string summary(const PageInputs& in) {
  const Metrics& m = in.metrics;
  std::string s = "run folder <code>" + escape(in.run_dir) + "</code>";
  if (in.world > 0) s += " · <b>" + std::to_string(in.world) + "</b> rank" + (in.world == 1 ? "" : "s");
  if (!m.loss.empty()) s += " · <b>" + std::to_string(static_cast<int64_t>(m.loss.back().x)) + "</b> steps";
  if (!m.loss.empty()) s += " · last loss <b>" + value(last(m.loss)) + "</b>";
  for (const auto& [key, points] : m.eval) s += " · " + escape(key) + " <b>" + value(last(points)) + "</b>";
  s += " · <b>" + std::to_string(in.checkpoints.size()) + "</b> checkpoint" + (in.checkpoints.size() == 1 ? "" : "s");
  return "<p class=\"summary\">" + s + "</p>\n";
}

std::string curvesSection(const PageInputs& in) {
  std::string out = "<section id=\"curves\"><h2>Training curves</h2>\n";
  if (!in.metrics_missing.empty()) return out + missing(in.metrics_missing) + "</section>\n";
  out += "<p><label for=\"logscale\" class=\"switch\">log scale</label> <span class=\"summary\">from <code>" +
         escape(in.metrics_path) + "</code>, " + std::to_string(in.metrics.lines) + " lines</span></p>\n";
  if (in.metrics.bad_lines > 0)
    out += missing(std::to_string(in.metrics.bad_lines) + " line(s) of " + in.metrics_path +
                   " could not be read and were passed over (" + in.metrics.first_bad + ")");
  std::vector<Chart> charts = metricCharts(in.metrics);
  if (charts.empty()) out += missing(in.metrics_path + " holds no steps yet");
  out += "<div class=\"charts\">\n";
  for (const Chart& c : charts) out += chartSvg(c);
  return out + "</div></section>\n";
}

std::string planSection(const PageInputs& in) {
  std::string out = "<section id=\"plan\"><h2>Plan</h2>\n";
  if (!in.plan_missing.empty()) return out + missing(in.plan_missing) + "</section>\n";
  out += in.plan_svg;
  out += "<details><summary>the plan as text (dtlc plan)</summary><pre>" + escape(in.plan_text) + "</pre></details>\n";
  return out + "</section>\n";
}

std::string checkpointSection(const PageInputs& in) {
  std::string out = "<section id=\"checkpoints\"><h2>Checkpoints</h2>\n";
  if (!in.checkpoints_note.empty()) out += missing(in.checkpoints_note);
  if (in.checkpoints.empty()) return out + missing("no checkpoints in " + in.run_dir) + "</section>\n";
  out += "<table class=\"checkpoints\"><tr><th>step</th><th>path</th><th>size</th><th></th></tr>\n";
  for (const CheckpointRow& c : in.checkpoints)
    out += "<tr><td class=\"num\">" + std::to_string(c.step) + "</td><td><code>" + escape(c.path) +
           "</code></td><td class=\"num\">" + sema::humanBytes(c.bytes) + "</td><td>" +
           (c.latest ? "latest" : c.diverged ? "set aside: the loss diverged after it" : "") + "</td></tr>\n";
  return out + "</table></section>\n";
}

std::string specSection(const PageInputs& in) {
  std::string out = "<section id=\"spec\"><h2>Spec</h2>\n";
  if (!in.spec_missing.empty()) return out + missing(in.spec_missing) + "</section>\n";
  return out + "<p class=\"summary\"><code>" + escape(in.spec_path) + "</code></p><pre class=\"spec\">" +
         escape(in.spec_text) + "</pre></section>\n";
}

}  // namespace

std::string reportHtml(const PageInputs& in) {
  const std::string title = "dtl report: " + (in.model.empty() ? in.run_dir : in.model + " — " + in.run_dir);
  return "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" + escape(title) +
         "</title>\n<style>" + kCss + "</style></head>\n<body>\n<input type=\"checkbox\" id=\"logscale\">\n<main>\n" +
         "<header><h1>" + escape(in.model.empty() ? "dtl run" : in.model) + "</h1>\n" + summary(in) + "</header>\n" +
         curvesSection(in) + planSection(in) + checkpointSection(in) + specSection(in) + "</main>\n</body></html>\n";
}

}  // namespace dtl::cli::report
