// Training curves as inline SVG for `dtlc report`: one chart per quantity
// (loss, an eval metric, learning rate, throughput), x = optimiser step,
// drawn twice — a linear y axis in `g.lin`, a log one in `g.log` — so the
// page switches between them with CSS alone. Non-finite values (and, on the
// log axis, values ≤ 0) are skipped: the line breaks there, nothing is drawn.
#pragma once

#include <string>
#include <vector>

namespace dtl::cli::report {

struct Point {
  double x = 0, y = 0;
};

struct Series {
  std::string name;  // in the legend ("train", "eval")
  std::vector<Point> points;
  bool dots = false;  // a marker at each point (evaluations: few, far apart)
};

struct Chart {
  std::string id, title;  // id: the svg's element id ("chart-loss")
  std::vector<Series> series;
};

// Where data lands in the chart's pixels.
struct Axes {
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;  // data range (y: the values, not their logs)
  bool log = false;
  double y_step = 0;  // linear: the tick step the range was widened to
  double px(double x) const;  // pixel column of step x
  double py(double y) const;  // pixel row of value y (top is 0)
  bool drawable(double x, double y) const;
  std::vector<double> yTicks() const;
  std::vector<double> xTicks() const;
};

// The chart's size and plot box, in pixels.
constexpr double kChartWidth = 560, kChartHeight = 250;
constexpr double kPlotLeft = 64, kPlotRight = kChartWidth - 16, kPlotTop = 30, kPlotBottom = kChartHeight - 38;

// Ranges over every drawable point of every series, widened to round ticks
// (linear) or whole decades (log). Nothing drawable: 0..1 (log: 1..10).
Axes fitAxes(const Chart& c, bool log);

// The SVG path ("M64 212L120.5 30…") of a series: a new M after each point
// that is skipped; a dense series keeps each pixel column's lowest and
// highest point.
std::string pathData(const Series& s, const Axes& a);

// The chart's <svg>: title, legend, and the linear and log groups.
std::string chartSvg(const Chart& c);

}  // namespace dtl::cli::report
