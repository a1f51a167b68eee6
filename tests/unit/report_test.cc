// `dtlc report` (tools/dtlc/report_*.cc): curves land on the right pixels on
// both scales, non-finite values (and values ≤ 0 on the log scale) are
// skipped rather than drawn, the metrics file is read back, and the page
// names what is missing; a RUN_DIR that does not exist is an error.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "tests/unit/scratch_dir.h"
#include "tools/dtlc/cli.h"
#include "tools/dtlc/report_curves.h"
#include "tools/dtlc/report_metrics.h"
#include "tools/dtlc/report_page.h"

namespace dtl {
namespace {

using cli::report::Axes;
using cli::report::Chart;
using cli::report::kPlotBottom;
using cli::report::kPlotLeft;
using cli::report::kPlotRight;
using cli::report::kPlotTop;
using cli::report::Series;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

Chart chart(std::vector<cli::report::Point> points) { return Chart{"c", "loss", {Series{"train", points, false}}}; }

TEST(ReportCurves, LinearPointsMapToThePlotCorners) {
  Chart c = chart({{0, 0}, {10, 10}, {5, 2.5}});
  Axes a = cli::report::fitAxes(c, false);
  EXPECT_EQ(a.x0, 0);
  EXPECT_EQ(a.x1, 10);
  EXPECT_EQ(a.y0, 0);
  EXPECT_EQ(a.y1, 10);
  EXPECT_DOUBLE_EQ(a.px(0), kPlotLeft);
  EXPECT_DOUBLE_EQ(a.px(10), kPlotRight);
  EXPECT_DOUBLE_EQ(a.py(0), kPlotBottom);
  EXPECT_DOUBLE_EQ(a.py(10), kPlotTop);
  // (64, 212) to (544, 30); step 5 is the middle column, 2.5 a quarter up.
  EXPECT_EQ(cli::report::pathData(c.series[0], a), "M64 212L544 30L304 166.5");
}

TEST(ReportCurves, TheRangeWidensToRoundTicks) {
  Axes a = cli::report::fitAxes(chart({{1, 2.31}, {40, 0.83}}), false);
  EXPECT_EQ(a.x0, 1);
  EXPECT_EQ(a.x1, 40);
  EXPECT_NEAR(a.y0, 0.5, 1e-12);  // (2.31 − 0.83) / 5 ≈ 0.3 → steps of 0.5
  EXPECT_NEAR(a.y1, 2.5, 1e-12);
  std::vector<double> t = a.yTicks();
  ASSERT_EQ(t.size(), 5u);
  EXPECT_NEAR(t[1], 1.0, 1e-12);
  // A range just past a round number keeps its step: 0.12..0.24 by 0.02.
  std::vector<double> u = cli::report::fitAxes(chart({{10, 0.22004}, {40, 0.1208}}), false).yTicks();
  ASSERT_EQ(u.size(), 7u);
  EXPECT_NEAR(u[0], 0.12, 1e-12);
  EXPECT_NEAR(u[6], 0.24, 1e-12);
}

TEST(ReportCurves, LogScaleSpansWholeDecades) {
  Chart c = chart({{0, 0.5}, {10, 50}, {20, 5}});
  Axes a = cli::report::fitAxes(c, true);
  EXPECT_DOUBLE_EQ(a.y0, 0.1);
  EXPECT_DOUBLE_EQ(a.y1, 100);
  EXPECT_NEAR(a.py(1), kPlotBottom - (kPlotBottom - kPlotTop) / 3, 1e-9);
  EXPECT_NEAR(a.py(10), kPlotBottom - 2 * (kPlotBottom - kPlotTop) / 3, 1e-9);
  EXPECT_NEAR(a.py(5), a.py(10) + (std::log10(10) - std::log10(5)) / 3 * (kPlotBottom - kPlotTop), 1e-9);
  std::vector<double> t = a.yTicks();
  EXPECT_EQ(t.front(), 0.1);
  EXPECT_EQ(t.back(), 100);
}

TEST(ReportCurves, NonFiniteValuesAreSkippedAndBreakTheLine) {
  Chart c = chart({{0, 4}, {1, kNaN}, {2, kInf}, {3, 2}, {4, -kInf}, {5, -1}, {6, 1}});
  Axes lin = cli::report::fitAxes(c, false);
  EXPECT_EQ(lin.y0, -1);  // -1 is drawn on the linear scale; ±inf set no range
  EXPECT_EQ(lin.y1, 4);
  const std::string d = cli::report::pathData(c.series[0], lin);
  EXPECT_EQ(count(d, "M"), 3u) << d;  // 0 | 3 | 5 6
  EXPECT_EQ(count(d, "L"), 1u) << d;
  // On the log scale -1 is skipped too: 0 | 3 | 6.
  const std::string l = cli::report::pathData(c.series[0], cli::report::fitAxes(c, true));
  EXPECT_EQ(count(l, "M"), 3u) << l;
  EXPECT_EQ(count(l, "L"), 0u) << l;
  const std::string svg = cli::report::chartSvg(c);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

TEST(ReportCurves, NothingDrawableSaysSo) {
  const std::string svg = cli::report::chartSvg(chart({{1, kNaN}, {2, -3}}));
  EXPECT_NE(svg.find(">no positive values to draw on a log scale<"), std::string::npos) << svg;
  EXPECT_EQ(count(svg, "class=\"lin\""), 1u);
  EXPECT_EQ(count(svg, "class=\"log\""), 1u);
}

TEST(ReportCurves, ADenseSeriesKeepsEachColumnsExtremes) {
  std::vector<cli::report::Point> points;
  for (int i = 0; i < 100000; ++i) points.push_back({static_cast<double>(i), i % 2 ? 1.0 : 3.0 + i * 1e-5});
  Chart c = chart(points);
  const std::string d = cli::report::pathData(c.series[0], cli::report::fitAxes(c, false));
  const size_t drawn = count(d, "L") + count(d, "M");
  EXPECT_LE(drawn, 2 * static_cast<size_t>(kPlotRight - kPlotLeft + 2));
  EXPECT_GE(drawn, static_cast<size_t>(kPlotRight - kPlotLeft));
  // The spikes survive: every column reaches both the low and the high values.
  Axes a = cli::report::fitAxes(c, false);
  EXPECT_NE(d.find(" " + std::to_string(static_cast<int>(a.py(1)))), std::string::npos) << d.substr(0, 200);
}

TEST(ReportMetrics, ReadsStepsEvaluationsAndPassesOverBadLines) {
  cli::report::Metrics m = cli::report::parseMetrics(
      "{\"step\": 1, \"epoch\": 0, \"loss\": 2.5, \"lr\": 0.001, \"samples_per_s\": 100.5}\n"
      "{\"step\": 2, \"epoch\": 0, \"loss\": null, \"lr\": 0.002, \"samples_per_s\": 99}\n"
      "not json\n"
      "\n"
      "{\"step\": 2, \"epoch\": 0, \"eval_loss\": 2.1, \"eval_accuracy\": 0.5}\n");
  ASSERT_EQ(m.loss.size(), 2u);
  EXPECT_EQ(m.loss[0].y, 2.5);
  EXPECT_TRUE(std::isnan(m.loss[1].y));
  EXPECT_EQ(m.lr[1].y, 0.002);
  EXPECT_EQ(m.samples_per_s[1].y, 99);
  EXPECT_EQ(m.eval.at("eval_accuracy").at(0).x, 2);
  EXPECT_EQ(m.lines, 4);
  EXPECT_EQ(m.bad_lines, 1);
  EXPECT_EQ(m.first_bad.substr(0, 8), "line 3: ");
  std::vector<Chart> charts = cli::report::metricCharts(m);
  std::vector<std::string> ids;
  for (const Chart& c : charts) ids.push_back(c.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"chart-loss", "chart-eval_accuracy", "chart-lr", "chart-throughput"}));
  EXPECT_EQ(charts[0].series.size(), 2u);  // train and eval loss
}

TEST(ReportPage, NamesWhatIsMissing) {
  cli::report::PageInputs in;
  in.run_dir = "runs/<x>";
  in.metrics_missing = "No metrics: runs/x/metrics.jsonl does not exist.";
  in.spec_missing = "No spec: runs/x/spec.dtl does not exist.";
  in.plan_missing = "No plan: it is compiled from the spec.";
  const std::string html = cli::report::reportHtml(in);
  EXPECT_EQ(count(html, "class=\"missing\""), 4u) << html;  // metrics, plan, checkpoints, spec
  EXPECT_NE(html.find("No metrics: runs/x/metrics.jsonl does not exist."), std::string::npos);
  EXPECT_NE(html.find("runs/&lt;x&gt;"), std::string::npos);
  EXPECT_EQ(html.find("runs/<x>"), std::string::npos);
  // Self-contained: nothing is fetched, nothing runs.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
}

class ReportCommand : public testing::ScratchDirTest {};

TEST_F(ReportCommand, ARunDirThatDoesNotExistIsAnError) {
  std::string out, err;
  EXPECT_EQ(cli::runCli({"report", (dir_ / "nope").string()}, out, err), 1);
  EXPECT_EQ(err, "dtlc report: RUN_DIR " + (dir_ / "nope").string() +
                     " does not exist (a run folder of dtlc run, e.g. runs/x)\n");
  EXPECT_EQ(cli::runCli({"report"}, out, err = ""), 2);
  EXPECT_EQ(err.substr(0, err.find('\n')), "dtlc report: no RUN_DIR given: a run folder of dtlc run, e.g. runs/x");
}

TEST_F(ReportCommand, AnEmptyRunDirGivesAPageThatSaysWhatIsMissing) {
  std::string out, err;
  ASSERT_EQ(cli::runCli({"report", dir_.string()}, out, err), 0) << err;
  EXPECT_EQ(out.rfind("wrote " + (dir_ / "report.html").string(), 0), 0u) << out;
  std::ifstream f(dir_ / "report.html");
  std::string html((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(html.find("No metrics: " + (dir_ / "metrics.jsonl").string() + " does not exist"), std::string::npos);
  EXPECT_NE(html.find("No spec: "), std::string::npos);
  EXPECT_NE(html.find("no checkpoints in "), std::string::npos);
  EXPECT_NE(err.find("note: dtlc report: No metrics"), std::string::npos) << err;
}

}  // namespace
}  // namespace dtl
