// The typing rules of language.md §5: how named shapes and element types
// flow through arithmetic, `@` and every primitive. Pure functions over
// Values; each reports its own mistakes at the location it is given.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/diag/diagnostics.h"
#include "compiler/sema/values.h"

namespace dtl::sema {

using diag::Loc;

// + - * / and comparisons, broadcast by name.
Value binaryRule(const std::string& op, const Value& a, const Value& b, Loc loc,
                 diag::Diagnostics& diags);
// a @ b: contracts every shared name; result is (a's rest, b's rest).
Value contractRule(const Value& a, const Value& b, Loc loc, diag::Diagnostics& diags);
// A primitive call; args are in signature order, nullopt where omitted; locs
// are each argument's location (the call's where omitted).
Value primitiveRule(const std::string& name, const std::vector<std::optional<Value>>& args,
                    const std::vector<Loc>& locs, Loc call, diag::Diagnostics& diags);

}  // namespace dtl::sema
