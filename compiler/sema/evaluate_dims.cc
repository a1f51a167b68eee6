// Dim sizes: `dim d = …` is an integer expression of numbers and dims,
// evaluated exactly (overflow-checked, division must leave no remainder).
#include <cmath>

#include "compiler/sema/instantiator.h"
#include "compiler/syntax/parse.h"

namespace dtl::sema {

using K = Value::Kind;

bool Instantiator::dimValue(const std::string& name, const Expr& e, Frame& f, int64_t& out) {
  if (!intExpr(e, f, out)) return false;
  if (out <= 0) {
    diags_.error(e.loc, "dim `" + name + "` must be positive, got " + std::to_string(out),
                 "a dim is the size of a tensor axis: 1 or more");
    return false;
  }
  return true;
}

bool Instantiator::intExpr(const Expr& e, Frame& f, int64_t& out) {
  switch (e.kind) {
    case Expr::Kind::Number:
      if (!e.is_int || e.number > 9.2e18) {
        diags_.error(e.loc, "a dim size must be a whole number, got " + syntax::exprText(e));
        return false;
      }
      out = static_cast<int64_t>(e.number);
      return true;
    case Expr::Kind::Name: return intName(e, f, out);
    case Expr::Kind::Unary: {
      if (e.text != "-" && e.text != "+") break;
      if (!intExpr(*e.kids[0], f, out)) return false;
      if (e.text == "-" && __builtin_sub_overflow(int64_t{0}, out, &out)) {
        diags_.error(e.loc, "dim size overflows 64 bits");
        return false;
      }
      return true;
    }
    case Expr::Kind::Binary:
      if (e.text != "+" && e.text != "-" && e.text != "*" && e.text != "/") {
        int64_t a = 0, b = 0;
        if (!intExpr(*e.kids[0], f, a) || !intExpr(*e.kids[1], f, b)) return false;
        break;
      }
      return intBinary(e, f, out);
    case Expr::Kind::Error: return false;
    default: break;
  }
  diags_.error(e.loc, "a dim size must be an integer expression of numbers and dims, got " + syntax::exprText(e));
  return false;
}

// A dim, or a name bound to an integer.
bool Instantiator::intName(const Expr& e, Frame& f, int64_t& out) {
  Value v = lookup(e.text, f, e.loc);
  if (v.kind == K::Dim) {
    out = v.dim.size;
    return true;
  }
  if (v.kind == K::Number && v.is_int) {
    if (!(std::fabs(v.number) <= 9.2e18)) {  // also NaN, e.g. from inf - inf
      diags_.error(e.loc, "dim size overflows 64 bits");
      return false;
    }
    out = static_cast<int64_t>(v.number);
    return true;
  }
  if (!v.isError())
    diags_.error(e.loc, "`" + e.text + "` in a dim size is " + describe(v) + ", not an integer");
  return false;
}

// a + b, a - b, a * b, a / b over int64.
bool Instantiator::intBinary(const Expr& e, Frame& f, int64_t& out) {
  int64_t a = 0, b = 0;
  if (!intExpr(*e.kids[0], f, a) || !intExpr(*e.kids[1], f, b)) return false;
  bool overflow = false;
  if (e.text == "+") {
    overflow = __builtin_add_overflow(a, b, &out);
  } else if (e.text == "-") {
    overflow = __builtin_sub_overflow(a, b, &out);
  } else if (e.text == "*") {
    overflow = __builtin_mul_overflow(a, b, &out);
  } else if (b == 0) {
    diags_.error(e.loc, "division by zero in a dim size");
    return false;
  } else if (b == -1) {
    overflow = __builtin_sub_overflow(int64_t{0}, a, &out);  // INT64_MIN / -1 traps
  } else if (a % b != 0) {
    diags_.error(e.loc, std::to_string(a) + " / " + std::to_string(b) + " leaves a remainder of " +
                            std::to_string(a % b),
                 "a dim size is a whole number; choose sizes for which " + syntax::exprText(e) +
                     " divides exactly");
    return false;
  } else {
    out = a / b;
  }
  if (overflow) {
    diags_.error(e.loc, "dim size overflows 64 bits");
    return false;
  }
  return true;
}

}  // namespace dtl::sema
