// Printers for the checked spec: the `dtlc check` summary (text and JSON)
// and the full sema dump (`--emit=sema`). Deterministic: stable order, no
// pointers, numbers formatted one way.
#pragma once

#include <string>

#include "compiler/sema/spec.h"

namespace dtl::sema {

std::string summaryText(const Spec& spec);
std::string summaryJson(const Spec& spec);
std::string semaDump(const Spec& spec);

// 124439808 → "124,439,808"
std::string groupDigits(int64_t n);
// 497759232 → "474.7 MiB"
std::string humanBytes(int64_t n);

}  // namespace dtl::sema
