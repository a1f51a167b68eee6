#include "core/svg.h"

#include <cmath>
#include <cstdio>

namespace dtl::svg {

std::string escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string num(double v) {
  if (!std::isfinite(v)) return "0";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", std::round(v * 10) / 10);
  std::string s = buf;
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  return s == "-0" ? "0" : s;
}

std::string rect(double x, double y, double w, double h, const std::string& cls, const std::string& title,
                 const std::string& extra) {
  std::string r = "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(w) + "\" height=\"" + num(h) +
                  "\" class=\"" + cls + "\"" + (extra.empty() ? "" : " " + extra);
  return title.empty() ? r + "/>" : r + "><title>" + escape(title) + "</title></rect>";
}

std::string text(double x, double y, const std::string& s, const std::string& cls, const std::string& anchor) {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" class=\"" + cls + "\"" +
         (anchor == "start" ? "" : " text-anchor=\"" + anchor + "\"") + ">" + escape(s) + "</text>";
}

std::string line(double x1, double y1, double x2, double y2, const std::string& cls) {
  return "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" + num(y2) +
         "\" class=\"" + cls + "\"/>";
}

std::string open(double w, double h, const std::string& cls, const std::string& label) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " + num(w) + " " + num(h) + "\" width=\"" + num(w) +
         "\" height=\"" + num(h) + "\" class=\"" + cls + "\" role=\"img\" aria-label=\"" + escape(label) + "\">";
}

}  // namespace dtl::svg
