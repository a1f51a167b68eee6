// Elementwise primitives: the unary functions of language.md §5 and the
// arithmetic and comparison operators, which broadcast by dim name.
#pragma once

#include <optional>
#include <string_view>

#include "runtime/kernels/reference/tensor.h"

namespace dtl::rt::ref {

enum class Unary { Relu, Gelu, GeluTanh, Silu, Tanh, Sigmoid, Exp, Log, Sqrt, Rsqrt, Neg, Abs };
inline constexpr Unary kAllUnary[] = {Unary::Relu, Unary::Gelu,  Unary::GeluTanh, Unary::Silu,
                                      Unary::Tanh, Unary::Sigmoid, Unary::Exp,    Unary::Log,
                                      Unary::Sqrt, Unary::Rsqrt,   Unary::Neg,    Unary::Abs};
const char* unaryName(Unary op);  // the language's spelling: "gelu_tanh"
std::optional<Unary> parseUnary(std::string_view name);

// Same shape and dtype as x. Neg and abs also take integers (wrapping); the
// rest need floats. gelu is the exact erf form.
Tensor unary(Unary op, const Tensor& x);
// dx = dy · f'(x). At kinks: relu'(0) = 0 and abs'(0) = 0, as PyTorch. NaN and
// ±inf as PyTorch 1.13 (docs/language-guide.md "NaN and infinity"): relu(NaN)
// = NaN with gradient dy there, relu's gradient 0 where x ≤ 0 even when dy is
// NaN, abs'(NaN) = 0; elsewhere IEEE arithmetic on the formulas.
Tensor unaryBackward(Unary op, const Tensor& x, const Tensor& dy);

enum class Binary { Add, Sub, Mul, Div, Eq, Ne, Lt, Le, Gt, Ge };
const char* binaryName(Binary op);  // "+", "==", …
bool isComparison(Binary op);
// From the graph's Binary fn ("add" … "ge", core/graph.h).
std::optional<Binary> parseBinary(std::string_view fn);

// The result's dim order: if one operand's names are a subset of the other's,
// the larger operand's order (a's when the sets are equal); otherwise a's names
// then b's extra names. A name in both must have one size.
Shape broadcastShape(const Shape& a, const Shape& b);

// a and b of one dtype. Arithmetic keeps it; comparisons give Bool. Integer
// arithmetic wraps to the dtype's width and divides truncating toward zero,
// with x / 0 = 0 (no trap on user data).
Tensor binary(Binary op, const Tensor& a, const Tensor& b);

// Floating arithmetic only. Each gradient has its operand's shape: summed over
// the names the operand was broadcast along.
struct BinaryGrads {
  Tensor da, db;
};
BinaryGrads binaryBackward(Binary op, const Tensor& a, const Tensor& b, const Tensor& dy);

}  // namespace dtl::rt::ref
