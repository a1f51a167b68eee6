// Writing SVG and HTML text by hand: escaping, coordinates with one decimal,
// and a few elements. Shared by the plan picture (`dtlc plan --format svg`)
// and the report page (`dtlc report`). Not a DOM: callers append strings.
#pragma once

#include <string>

namespace dtl::svg {

// &, <, >, " and ' as entities: safe in text and in attribute values.
std::string escape(const std::string& s);
// A coordinate or length with at most one decimal ("12", "12.5"); never
// "nan" (callers skip non-finite values before they get here).
std::string num(double v);

// <rect x y width height class> with an optional <title> (a tooltip) and
// extra attributes (`data-op="all_reduce"`, written as given).
std::string rect(double x, double y, double w, double h, const std::string& cls, const std::string& title = "",
                 const std::string& extra = "");
// <text x y class>escaped</text>; `anchor` is start, middle or end.
std::string text(double x, double y, const std::string& s, const std::string& cls, const std::string& anchor = "start");
// <line x1 y1 x2 y2 class/>
std::string line(double x1, double y1, double x2, double y2, const std::string& cls);
// <svg …> with a viewBox of w × h, class `cls`, and an accessible label.
std::string open(double w, double h, const std::string& cls, const std::string& label);

}  // namespace dtl::svg
