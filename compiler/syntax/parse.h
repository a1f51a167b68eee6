// Parsing one source file into a Module. Syntax errors become ordinary
// diagnostics (located, with a hint where the expected token is clear); the
// parser recovers and keeps going, so one run reports every independent
// error. Input nested deeper than kMaxNesting is rejected before parsing so
// no input can exhaust the stack.
#pragma once

#include "compiler/diag/diagnostics.h"
#include "compiler/syntax/ast.h"

namespace dtl::syntax {

constexpr int kMaxNesting = 200;

// Parses the file `file` of `sources`. Always returns a Module; a file with
// errors yields what could be recovered.
Module parseFile(const diag::SourceManager& sources, int file, diag::Diagnostics& diags);

// Parses one expression (used by `--set key=value`). Returns null and reports
// into diags on error.
ExprPtr parseExpression(const diag::SourceManager& sources, int file, diag::Diagnostics& diags);

// A printable name for an expression ("x @ w", truncated), for messages.
std::string exprText(const Expr& e);

}  // namespace dtl::syntax
