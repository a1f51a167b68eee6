// Named shapes: the type of every tensor from sema to the runtime. A shape is
// an ordered list of (name, size); order is storage order (row-major, last
// name fastest). Broadcasting and contraction work by name.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dtl {

struct Dim {
  std::string name;
  int64_t size = 0;
  bool operator==(const Dim& o) const { return name == o.name && size == o.size; }
};

struct Shape {
  std::vector<Dim> dims;

  size_t rank() const { return dims.size(); }
  bool scalar() const { return dims.empty(); }
  // -1 when absent.
  int find(const std::string& name) const;
  bool has(const std::string& name) const { return find(name) >= 0; }
  // Element count, or nullopt on int64 overflow.
  std::optional<int64_t> elements() const;
  bool operator==(const Shape& o) const { return dims == o.dims; }
  bool operator!=(const Shape& o) const { return !(*this == o); }
  // "[batch=128, hidden=512]"; "[]" for a scalar.
  std::string str() const;
  // "[batch, hidden]"
  std::string names() const;
};

// The result of broadcasting two shapes by name: the larger operand's dim
// order when one's names are a subset of the other's (a's when equal), else
// a's names then b's extra ones. nullopt when a shared name has two sizes.
// The one rule every kernel (reference, fast, generated) follows.
std::optional<Shape> broadcastByName(const Shape& a, const Shape& b);

// Multiplies with overflow detection; false on overflow.
bool checkedMul(int64_t a, int64_t b, int64_t& out);

}  // namespace dtl
