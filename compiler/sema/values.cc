#include "compiler/sema/values.h"

namespace dtl::sema {

std::string describe(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Error: return "an erroneous value";
    case Value::Kind::Tensor: return std::string("a tensor ") + dtypeName(v.dtype) + v.shape.names();
    case Value::Kind::Number: return "a number";
    case Value::Kind::Bool: return "a bool";
    case Value::Kind::String: return "a string";
    case Value::Kind::Dim: return "the dim `" + v.dim.name + "`";
    case Value::Kind::Layer: return "a layer instance";
    case Value::Kind::LayerType: return "the layer `" + v.text + "`";
    case Value::Kind::DType: return std::string("the element type ") + dtypeName(v.dtype_value);
    case Value::Kind::Builtin: return "the built-in `" + v.text + "`";
    case Value::Kind::Tuple: return "a tuple";
    case Value::Kind::Absent: return "an absent parameter";
  }
  return "a value";
}

}  // namespace dtl::sema
