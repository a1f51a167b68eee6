// Runs a function on a thread with a large stack. The front end recurses
// over the input's nesting (bounded by the parser's nesting limit); a big
// stack keeps that bound far from the edge on any input.
#pragma once

#include <cstddef>
#include <functional>

namespace dtl::cli {

void runWithStack(size_t bytes, const std::function<void()>& fn);

}  // namespace dtl::cli
