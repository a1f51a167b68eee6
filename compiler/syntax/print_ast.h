// A deterministic text dump of a Module (`dtlc check --emit=ast`): one node
// per line, indented, with line:col. No pointers, stable order.
#pragma once

#include <string>

#include "compiler/syntax/ast.h"

namespace dtl::syntax {

std::string printAst(const Module& m);

}  // namespace dtl::syntax
