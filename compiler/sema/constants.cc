#include "compiler/sema/constants.h"

#include <cmath>

#include "compiler/syntax/parse.h"

namespace dtl::sema {

using syntax::Expr;

namespace {

// Folds unary minus so `-1` reads as a number.
bool foldNumber(const Expr& e, double& out, bool& is_int) {
  if (e.kind == Expr::Kind::Number) {
    out = e.number;
    is_int = e.is_int;
    return true;
  }
  if (e.kind == Expr::Kind::Unary && (e.text == "-" || e.text == "+") && foldNumber(*e.kids[0], out, is_int)) {
    if (e.text == "-") out = -out;
    return true;
  }
  return false;
}

}  // namespace

bool Constants::integer(const Expr& e, const std::string& what, int64_t& out, int64_t min) {
  double v;
  bool is_int;
  if (e.kind == Expr::Kind::Error) return false;
  if (!foldNumber(e, v, is_int) || !is_int || std::fabs(v) > 9e18) {
    diags_.error(e.loc, what + " expects a whole number, got `" + syntax::exprText(e) + "`");
    return false;
  }
  out = static_cast<int64_t>(v);
  if (out < min) {
    diags_.error(e.loc, what + " must be at least " + std::to_string(min) + ", got " + std::to_string(out));
    return false;
  }
  return true;
}

bool Constants::number(const Expr& e, const std::string& what, double& out) {
  bool is_int;
  if (e.kind == Expr::Kind::Error) return false;
  if (!foldNumber(e, out, is_int)) {
    diags_.error(e.loc, what + " expects a number, got `" + syntax::exprText(e) + "`");
    return false;
  }
  return true;
}

bool Constants::boolean(const Expr& e, const std::string& what, bool& out) {
  if (e.kind == Expr::Kind::Error) return false;
  if (e.kind != Expr::Kind::Bool) {
    diags_.error(e.loc, what + " expects true or false, got `" + syntax::exprText(e) + "`");
    return false;
  }
  out = e.number != 0;
  return true;
}

bool Constants::string(const Expr& e, const std::string& what, std::string& out) {
  if (e.kind == Expr::Kind::Error) return false;
  if (e.kind != Expr::Kind::String) {
    diags_.error(e.loc, what + " expects a string in quotes, got `" + syntax::exprText(e) + "`");
    return false;
  }
  out = e.text;
  return true;
}

bool Constants::name(const Expr& e, const std::string& what, std::string& out) {
  if (e.kind == Expr::Kind::Error) return false;
  if (e.kind == Expr::Kind::Name) {
    out = e.text;
    return true;
  }
  if (e.kind == Expr::Kind::Member) {
    std::string base;
    if (!name(*e.kids[0], what, base)) return false;
    out = base + "." + e.text;
    return true;
  }
  diags_.error(e.loc, what + " expects a name, got `" + syntax::exprText(e) + "`");
  return false;
}

bool Constants::bytes(const Expr& e, const std::string& what, int64_t& out) {
  if (e.kind == Expr::Kind::Error) return false;
  if (e.kind == Expr::Kind::Number) {
    // A bare number is ambiguous (bytes? MiB?): a size carries its unit.
    diags_.error(e.loc, what + " needs a unit, got `" + syntax::exprText(e) + "`",
                 "write a size such as `" + syntax::exprText(e) + " MiB`; units: B, KiB, MiB, GiB, TiB, KB, MB, GB, TB");
    return false;
  }
  static const struct {
    const char* unit;
    double factor;
  } kUnits[] = {{"B", 1},         {"KiB", 1024.0},     {"MiB", 1048576.0}, {"GiB", 1073741824.0},
                {"TiB", 1099511627776.0}, {"KB", 1e3}, {"MB", 1e6},        {"GB", 1e9}, {"TB", 1e12}};
  if (e.kind == Expr::Kind::Quantity) {
    for (const auto& u : kUnits) {
      if (e.text == u.unit) {
        double v = e.number * u.factor;
        if (v < 1 || v > 9e18) {
          diags_.error(e.loc, what + " of " + syntax::exprText(e) + " is out of range");
          return false;
        }
        out = static_cast<int64_t>(v);
        return true;
      }
    }
  }
  diags_.error(e.loc, what + " expects a size such as `25 MiB`, got `" + syntax::exprText(e) + "`",
               "units: B, KiB, MiB, GiB, TiB, KB, MB, GB, TB");
  return false;
}

bool Constants::every(const Expr& e, const std::string& what, int64_t& count, std::string& unit) {
  if (e.kind == Expr::Kind::Error) return false;
  if (e.kind == Expr::Kind::Quantity && e.is_int && e.number >= 1 && e.number < 9e18) {
    if (e.text == "step" || e.text == "steps") unit = "steps";
    else if (e.text == "epoch" || e.text == "epochs") unit = "epochs";
    else unit.clear();
    if (!unit.empty()) {
      count = static_cast<int64_t>(e.number);
      return true;
    }
  }
  diags_.error(e.loc, what + " expects a period such as `20 steps` or `1 epoch`, got `" + syntax::exprText(e) + "`");
  return false;
}

}  // namespace dtl::sema
