#include "compiler/syntax/ast.h"

namespace dtl::syntax {

ExprPtr Expr::clone() const {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->loc = loc;
  e->text = text;
  e->number = number;
  e->is_int = is_int;
  e->arg_names = arg_names;
  e->arg_name_locs = arg_name_locs;
  e->kids.reserve(kids.size());
  for (const ExprPtr& k : kids) e->kids.push_back(k ? k->clone() : nullptr);
  return e;
}

const std::string& Expr::calleeName() const {
  static const std::string kEmpty;
  if (kind != Kind::Call || kids.empty() || !kids[0] || kids[0]->kind != Kind::Name) return kEmpty;
  return kids[0]->text;
}

}  // namespace dtl::syntax
