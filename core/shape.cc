#include "core/shape.h"

namespace dtl {

int Shape::find(const std::string& name) const {
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i].name == name) return static_cast<int>(i);
  return -1;
}

bool checkedMul(int64_t a, int64_t b, int64_t& out) { return !__builtin_mul_overflow(a, b, &out); }

std::optional<int64_t> Shape::elements() const {
  int64_t n = 1;
  for (const Dim& d : dims)
    if (!checkedMul(n, d.size, n)) return std::nullopt;
  return n;
}

std::string Shape::str() const {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += dims[i].name + "=" + std::to_string(dims[i].size);
  }
  return s + "]";
}

std::string Shape::names() const {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + dims[i].name;
  return s + "]";
}

std::optional<Shape> broadcastByName(const Shape& a, const Shape& b) {
  auto subset = [](const Shape& x, const Shape& y) {
    for (const Dim& d : x.dims)
      if (!y.has(d.name)) return false;
    return true;
  };
  for (const Dim& d : a.dims) {
    int j = b.find(d.name);
    if (j >= 0 && b.dims[static_cast<size_t>(j)].size != d.size) return std::nullopt;
  }
  if (subset(b, a)) return a;
  if (subset(a, b)) return b;
  Shape out = a;
  for (const Dim& d : b.dims)
    if (!a.has(d.name)) out.dims.push_back(d);
  return out;
}

}  // namespace dtl
