#include "tools/dtlc/flags.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace dtl::cli {

Flags& Flags::toggle(const std::string& name, bool& out) {
  flags_.push_back({name, Kind::Toggle, &out, "", {}});
  return *this;
}

Flags& Flags::text(const std::string& name, std::string& out, const std::string& what,
                   const std::vector<std::string>& choices) {
  flags_.push_back({name, Kind::Text, &out, what, choices});
  return *this;
}

Flags& Flags::list(const std::string& name, std::vector<std::string>& out, const std::string& what) {
  flags_.push_back({name, Kind::List, &out, what, {}});
  return *this;
}

Flags& Flags::integer(const std::string& name, int64_t& out, const std::string& what, int64_t least, int64_t most,
                      bool* given) {
  flags_.push_back({name, Kind::Integer, &out, what, {}, least, most, given});
  return *this;
}

Flags& Flags::number(const std::string& name, double& out, const std::string& what, double least, double most,
                     bool* given) {
  flags_.push_back({name, Kind::Number, &out, what, {}, 0, 0, given, least, most});
  return *this;
}

Flags& Flags::bytes(const std::string& name, int64_t& out) {
  flags_.push_back({name, Kind::Bytes, &out, "a size such as '24 GiB'", {}});
  return *this;
}

int64_t parseSize(const std::string& text) {
  static const struct {
    const char* unit;
    double factor;
  } kUnits[] = {{"", 1},    {"B", 1},     {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
                {"TiB", 1099511627776.0}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}};
  const char* s = text.c_str();
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s, &end);
  if (end == s || errno == ERANGE || !(v > 0) || *s == ' ' || *s == '+' || *s == '-') return -1;
  std::string unit(end);
  unit.erase(0, unit.find_first_not_of(' '));
  for (const auto& u : kUnits) {
    if (unit != u.unit) continue;
    double bytes = v * u.factor;
    return bytes >= 1 && bytes < 9e18 ? static_cast<int64_t>(bytes) : -1;
  }
  return -1;
}

namespace {

// "a, b or c"
std::string alternatives(const std::vector<std::string>& choices) {
  std::string s;
  for (size_t i = 0; i < choices.size(); ++i)
    s += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  return s;
}

}  // namespace

std::string Flags::take(const Flag& f, const std::string& value) const {
  switch (f.kind) {
    case Kind::Toggle:
      *static_cast<bool*>(f.out) = true;
      return "";
    case Kind::Text: {
      if (!f.choices.empty()) {
        bool ok = false;
        for (const std::string& c : f.choices) ok |= c == value;
        if (!ok) return f.name + " is " + alternatives(f.choices) + ", got '" + value + "'";
      }
      *static_cast<std::string*>(f.out) = value;
      return "";
    }
    case Kind::List:
      static_cast<std::vector<std::string>*>(f.out)->push_back(value);
      return "";
    case Kind::Integer: {
      char* end = nullptr;
      errno = 0;
      long long n = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end || errno == ERANGE || n < f.least || n > f.most)
        return f.name + " expects " + f.what + ", got '" + value + "'";
      *static_cast<int64_t*>(f.out) = n;
      if (f.given) *f.given = true;
      return "";
    }
    case Kind::Number: {
      char* end = nullptr;
      errno = 0;
      double v = std::strtod(value.c_str(), &end);
      if (value.empty() || *end || errno == ERANGE || !std::isfinite(v) || v < f.real_least || v > f.real_most)
        return f.name + " expects " + f.what + ", got '" + value + "'";
      *static_cast<double*>(f.out) = v;
      if (f.given) *f.given = true;
      return "";
    }
    case Kind::Bytes: {
      int64_t n = parseSize(value);
      if (n < 0) return f.name + " expects " + f.what + ", got '" + value + "'";
      *static_cast<int64_t*>(f.out) = n;
      return "";
    }
  }
  return "";
}

std::string Flags::parse(const std::vector<std::string>& args, std::string& spec, bool& help) const {
  for (size_t i = 1; i < args.size(); ++i) {
    std::string a = args[i], value;
    bool inline_value = false;
    size_t eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
      inline_value = true;
    }
    if (a == "-h" || a == "--help") {
      help = true;
      return "";
    }
    const Flag* flag = nullptr;
    for (const Flag& f : flags_)
      if (f.name == a) flag = &f;
    if (flag) {
      if (flag->kind != Kind::Toggle && !inline_value) {
        if (i + 1 >= args.size()) {
          std::string what = flag->choices.empty() ? flag->what : alternatives(flag->choices);
          bool expects = flag->kind == Kind::Integer || flag->kind == Kind::Number || flag->kind == Kind::Bytes;
          return flag->name + (expects ? " expects " : " needs ") + what;
        }
        value = args[++i];
      }
      std::string bad = take(*flag, value);
      if (!bad.empty()) return bad;
    } else if (a.rfind("-", 0) == 0 && a.size() > 1) {
      return "unknown option '" + args[i] + "' (see dtlc " + command_ + " --help)";
    } else if (spec.empty()) {
      spec = args[i];
    } else {
      return "more than one SPEC given: '" + spec + "' and '" + args[i] + "'";
    }
  }
  return "";
}

}  // namespace dtl::cli
