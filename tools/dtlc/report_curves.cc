#include "tools/dtlc/report_curves.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/svg.h"

namespace dtl::cli::report {

namespace {

const char* const kColors[] = {"#3b75af", "#e1812c", "#3a923a", "#c44e52", "#8e6bb8", "#84584e"};

std::string color(size_t i) { return kColors[i % (sizeof kColors / sizeof *kColors)]; }

// 1, 2 or 5 × 10^k, the smallest at least `raw`.
double niceStep(double raw) {
  const double p = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw * (1 - 1e-6)) return m * p;  // 0.1 / 5 may come out a hair above 0.02
  return 10 * p;
}

// [lo, hi] widened to multiples of a nice step (about five ticks); returns the step.
double niceRange(double& lo, double& hi) {
  if (hi - lo <= 0) {
    const double d = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= d;
    hi += d;
  }
  const double step = niceStep((hi - lo) / 5);
  lo = std::floor(lo / step + 1e-9) * step;
  hi = std::ceil(hi / step - 1e-9) * step;
  return step;
}

std::vector<double> linearTicks(double lo, double hi, double step) {
  std::vector<double> t;
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step)
    t.push_back(std::fabs(v) < step * 1e-9 ? 0 : v);
  return t;
}

// "0.05", "2000", "10000" (not "1e+04"), "1e-05".
std::string tickLabel(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v == std::round(v) && std::fabs(v) < 1e7 ? "%.0f" : "%.4g", v);
  return buf;
}

}  // namespace

double Axes::px(double x) const { return kPlotLeft + (x - x0) / (x1 - x0) * (kPlotRight - kPlotLeft); }

double Axes::py(double y) const {
  const double f = log ? (std::log10(y) - std::log10(y0)) / (std::log10(y1) - std::log10(y0)) : (y - y0) / (y1 - y0);
  return kPlotBottom - f * (kPlotBottom - kPlotTop);
}

bool Axes::drawable(double x, double y) const { return std::isfinite(x) && std::isfinite(y) && (!log || y > 0); }

std::vector<double> Axes::xTicks() const { return linearTicks(x0, x1, niceStep((x1 - x0) / 5)); }

std::vector<double> Axes::yTicks() const {
  if (!log) return linearTicks(y0, y1, y_step > 0 ? y_step : niceStep((y1 - y0) / 5));
  std::vector<double> t;
  const int lo = static_cast<int>(std::lround(std::log10(y0))), hi = static_cast<int>(std::lround(std::log10(y1)));
  for (int e = lo; e <= hi; ++e)
    for (double m : hi - lo <= 2 ? std::vector<double>{1, 2, 5} : std::vector<double>{1})
      if (m * std::pow(10, e) <= y1 * (1 + 1e-9)) t.push_back(m * std::pow(10, e));
  return t;
}

Axes fitAxes(const Chart& c, bool log) {
  Axes a;
  a.log = log;
  double xlo = std::numeric_limits<double>::infinity(), xhi = -xlo, ylo = xlo, yhi = -xlo;
  for (const Series& s : c.series)
    for (const Point& p : s.points)
      if (a.drawable(p.x, p.y)) {
        xlo = std::min(xlo, p.x), xhi = std::max(xhi, p.x);
        ylo = std::min(ylo, p.y), yhi = std::max(yhi, p.y);
      }
  if (xlo > xhi) return log ? Axes{0, 1, 1, 10, true} : Axes{0, 1, 0, 1, false};
  if (xhi == xlo) xhi = xlo + 1;
  a.x0 = xlo, a.x1 = xhi;
  if (log) {
    a.y0 = std::pow(10, std::floor(std::log10(ylo)));
    a.y1 = std::pow(10, std::ceil(std::log10(yhi)));
    if (a.y1 <= a.y0) a.y1 = a.y0 * 10;
  } else {
    a.y_step = niceRange(ylo, yhi);
    a.y0 = ylo, a.y1 = yhi;
  }
  return a;
}

std::string pathData(const Series& s, const Axes& a) {
  const bool dense = static_cast<double>(s.points.size()) > 2 * (kPlotRight - kPlotLeft);
  std::string d;
  bool pen = false;
  long column = -1;
  std::vector<Point> held;  // a point, or (dense) this pixel column's highest and lowest
  auto flush = [&] {
    for (size_t i = 0; i < held.size(); ++i) {
      if (i > 0 && held[i].x == held[0].x && held[i].y == held[0].y) continue;
      d += (pen ? "L" : "M") + svg::num(held[i].x) + " " + svg::num(held[i].y);
      pen = true;
    }
    held.clear();
  };
  for (const Point& p : s.points) {
    if (!a.drawable(p.x, p.y)) {
      flush();
      pen = false;
      continue;
    }
    const Point q{a.px(p.x), a.py(p.y)};
    if (!dense) {
      held.push_back(q);
      flush();
      continue;
    }
    if (std::lround(q.x) != column) {
      flush();
      column = std::lround(q.x);
    }
    if (held.empty()) held = {q, q};
    if (q.y < held[0].y) held[0] = q;
    if (q.y > held[1].y) held[1] = q;
  }
  flush();
  return d;
}

namespace {

std::string grid(const Axes& a) {
  std::string out;
  for (double t : a.yTicks()) {
    out += svg::line(kPlotLeft, a.py(t), kPlotRight, a.py(t), "grid");
    out += svg::text(kPlotLeft - 6, a.py(t) + 4, tickLabel(t), "tick", "end");
  }
  for (double t : a.xTicks()) {
    out += svg::line(a.px(t), kPlotBottom, a.px(t), kPlotBottom + 4, "axis");
    out += svg::text(a.px(t), kPlotBottom + 17, tickLabel(t), "tick", "middle");
  }
  out += svg::line(kPlotLeft, kPlotBottom, kPlotRight, kPlotBottom, "axis");
  return out;
}

std::string seriesSvg(const Series& s, const Axes& a, size_t i) {
  std::string out = "<path class=\"curve\" fill=\"none\" stroke=\"" + color(i) + "\" stroke-width=\"1.5\" d=\"" +
                    pathData(s, a) + "\"/>";
  if (!s.dots || s.points.size() > 200) return out;
  for (const Point& p : s.points)
    if (a.drawable(p.x, p.y))
      out += "<circle class=\"dot\" cx=\"" + svg::num(a.px(p.x)) + "\" cy=\"" + svg::num(a.py(p.y)) +
             "\" r=\"3\" fill=\"" + color(i) + "\"><title>" + svg::escape(s.name + ", step " + tickLabel(p.x) + ": " +
             tickLabel(p.y)) + "</title></circle>";
  return out;
}

// One scale's group: grid, ticks and every series.
std::string scaleGroup(const Chart& c, bool log) {
  const Axes a = fitAxes(c, log);
  std::string out = std::string("<g class=\"") + (log ? "log" : "lin") + "\">" + grid(a);
  bool any = false;
  for (const Series& s : c.series)
    for (const Point& p : s.points) any = any || a.drawable(p.x, p.y);
  if (!any)
    out += svg::text((kPlotLeft + kPlotRight) / 2, (kPlotTop + kPlotBottom) / 2,
                     log ? "no positive values to draw on a log scale" : "no finite values to draw", "note", "middle");
  for (size_t i = 0; i < c.series.size(); ++i) out += seriesSvg(c.series[i], a, i);
  return out + "</g>";
}

}  // namespace

std::string chartSvg(const Chart& c) {
  std::string out = svg::open(kChartWidth, kChartHeight, "chart", c.title);
  out.insert(4, " id=\"" + svg::escape(c.id) + "\"");
  out += svg::text(kPlotLeft, 18, c.title, "title");
  double x = kPlotRight;
  for (size_t i = c.series.size(); c.series.size() > 1 && i-- > 0;) {
    out += svg::text(x, 18, c.series[i].name, "legend", "end").insert(5, " fill=\"" + color(i) + "\"");
    x -= 12 + 7 * static_cast<double>(c.series[i].name.size());
  }
  out += scaleGroup(c, false) + scaleGroup(c, true);
  out += svg::text((kPlotLeft + kPlotRight) / 2, kChartHeight - 6, "step", "tick", "middle");
  return out + "</svg>\n";
}

}  // namespace dtl::cli::report
