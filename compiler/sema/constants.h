// Reading settings (train, data, parallel, source and optimiser arguments):
// each helper accepts one form of constant, or reports what it expected at
// the expression and returns false.
#pragma once

#include <cstdint>
#include <string>

#include "compiler/diag/diagnostics.h"
#include "compiler/syntax/ast.h"

namespace dtl::sema {

class Constants {
 public:
  explicit Constants(diag::Diagnostics& diags) : diags_(diags) {}

  // `what` names the setting in messages, e.g. "`train.batch`".
  bool integer(const syntax::Expr& e, const std::string& what, int64_t& out, int64_t min = 1);
  bool number(const syntax::Expr& e, const std::string& what, double& out);
  bool boolean(const syntax::Expr& e, const std::string& what, bool& out);
  bool string(const syntax::Expr& e, const std::string& what, std::string& out);
  // A name (identifier) such as `f32` or `blocks`; dotted paths allowed.
  bool name(const syntax::Expr& e, const std::string& what, std::string& out);
  // `25 MiB`, `512 B` or a plain whole number of bytes.
  bool bytes(const syntax::Expr& e, const std::string& what, int64_t& out);
  // `20 steps` / `1 epoch` → count and "steps" | "epochs".
  bool every(const syntax::Expr& e, const std::string& what, int64_t& count, std::string& unit);

 private:
  diag::Diagnostics& diags_;
};

}  // namespace dtl::sema
