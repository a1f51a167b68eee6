// Signatures of every built-in callable — primitives (language.md §5),
// initialisers, data sources, optimisers, schedules, pipeline schedules —
// and the one argument binder all calls go through (layers included), so
// every call reports missing, unknown and duplicate arguments the same way.
#pragma once

#include <string>
#include <vector>

#include "compiler/diag/diagnostics.h"
#include "compiler/syntax/ast.h"

namespace dtl::sema {

struct ParamSig {
  std::string name;
  bool required = true;  // else it has a default
};

struct Signature {
  std::string name;
  std::vector<ParamSig> params;
};

enum class BuiltinKind { Primitive, Init, Source, Optimizer, Schedule, Pipeline };

// nullptr when `name` is not a built-in of that kind.
const Signature* findBuiltin(BuiltinKind kind, const std::string& name);
std::vector<std::string> builtinNames(BuiltinKind kind);

// Binds a call's arguments to a signature: result[i] is the expression for
// params[i] or nullptr when omitted (callers supply defaults). Reports
// unknown names (with did-you-mean), too many positionals, duplicates and
// missing required arguments at the call. `what` names the callee in
// messages ("layer `Linear`", "`softmax`"). Returns false on any error.
bool bindArguments(const syntax::Expr& call, const Signature& sig, const std::string& what,
                   std::vector<const syntax::Expr*>& result, diag::Diagnostics& diags);

}  // namespace dtl::sema
