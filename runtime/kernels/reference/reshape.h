// reshape: split one dim into two, merge two adjacent dims into one, or rename
// a dim. The values never move; only the shape changes. Each is the other's
// backward: split's gradient is dy merged back, merge's is dy split, rename's
// is dy renamed back.
#pragma once

#include <string>

#include "runtime/kernels/reference/tensor.h"

namespace dtl::rt::ref {

// d → (a, b) in d's place; a.size · b.size must equal d's size.
Tensor splitDim(const Tensor& x, const std::string& d, const Dim& a, const Dim& b);
// (a, b) → d, where b immediately follows a in x's order.
Tensor mergeDims(const Tensor& x, const std::string& a, const std::string& b, const Dim& d);
// from → to, same size and place.
Tensor renameDim(const Tensor& x, const std::string& from, const std::string& to);

}  // namespace dtl::rt::ref
