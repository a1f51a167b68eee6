// What an expression evaluates to while sema instantiates the model: a
// tensor type (named shape + element type), a compile-time constant, a dim,
// a layer instance, or an error that has already been reported.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "compiler/syntax/ast.h"
#include "core/dtype.h"
#include "core/shape.h"

namespace dtl::sema {

using diag::Loc;

struct Instance;

struct Value {
  enum class Kind { Error, Tensor, Number, Bool, String, Dim, Layer, LayerType, DType, Builtin, Tuple, Absent };
  Kind kind = Kind::Error;
  // Tensor
  Shape shape;
  DType dtype = DType::F32;
  int slot = -1;  // the trace step that computes this tensor (op_trace.h)
  // Number / Bool
  double number = 0;
  bool is_int = false;
  // String, LayerType, Builtin names; DType
  std::string text;
  DType dtype_value = DType::F32;
  // Dim
  Dim dim;
  // Layer
  Instance* inst = nullptr;
  // Tuple
  std::vector<Value> items;

  static Value error() { return Value{}; }
  static Value tensor(Shape s, DType t) {
    Value v;
    v.kind = Kind::Tensor;
    v.shape = std::move(s);
    v.dtype = t;
    return v;
  }
  static Value num(double x, bool is_int) {
    Value v;
    v.kind = Kind::Number;
    v.number = x;
    v.is_int = is_int;
    return v;
  }
  static Value boolean(bool b) {
    Value v;
    v.kind = Kind::Bool;
    v.number = b ? 1 : 0;
    return v;
  }
  static Value ofDim(Dim d) {
    Value v;
    v.kind = Kind::Dim;
    v.dim = std::move(d);
    return v;
  }
  bool isError() const { return kind == Kind::Error; }
};

// "a tensor [batch, hidden]", "a number", … for messages.
std::string describe(const Value& v);

// One instantiated layer (or the model). Parameters of an instance created by
// `repeat(n)` carry the stack dims first in the registry, but read as one
// copy's shape inside its forward.
struct Instance {
  const syntax::LayerDecl* decl = nullptr;
  std::string path;        // "" for the model, else "blocks.attn"
  std::vector<Dim> stack;  // repeat dims, outermost first
  Loc where;               // the instantiation
  std::map<std::string, Value> env;  // args, dims, params (tensor or Absent), inputs
  std::map<std::string, std::unique_ptr<Instance>> subs;
  std::map<std::string, const syntax::Binding*> bindings;  // lazily evaluated
  std::map<std::string, Value> done;                       // evaluated bindings
  std::set<std::string> evaluating;                        // cycle detection
};

}  // namespace dtl::sema
