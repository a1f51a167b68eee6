// Unary and binary elementwise kernels with their gradients. Binary kernels run
// over the broadcast shape with one offset map per operand (tensor.h).
#include "runtime/kernels/reference/elementwise.h"

#include <cmath>
#include <iterator>
#include <numbers>

#include "runtime/kernels/reference/convert.h"

namespace dtl::rt::ref {

namespace {

constexpr double kGeluTanhC = 0.044715;
const double kSqrt2OverPi = std::sqrt(2.0 / std::numbers::pi);

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

double forward(Unary op, double x) {
  switch (op) {
    case Unary::Relu: return x <= 0 ? 0.0 : x;  // NaN stays NaN, as torch's relu
    case Unary::Gelu: return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2));
    case Unary::GeluTanh: return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + kGeluTanhC * x * x * x)));
    case Unary::Silu: return x * sigmoid(x);
    case Unary::Tanh: return std::tanh(x);
    case Unary::Sigmoid: return sigmoid(x);
    case Unary::Exp: return std::exp(x);
    case Unary::Log: return std::log(x);
    case Unary::Sqrt: return std::sqrt(x);
    case Unary::Rsqrt: return 1.0 / std::sqrt(x);
    case Unary::Neg: return -x;
    case Unary::Abs: return std::fabs(x);
  }
  DTL_REF_FAIL("unknown unary op");
}

double derivative(Unary op, double x) {
  switch (op) {
    case Unary::Relu: DTL_REF_FAIL("relu's gradient is a select (reluBackward)");
    case Unary::Gelu: {
      double pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi);
      return 0.5 * (1.0 + std::erf(x / std::numbers::sqrt2)) + x * pdf;
    }
    case Unary::GeluTanh: {
      double t = std::tanh(kSqrt2OverPi * (x + kGeluTanhC * x * x * x));
      return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * kGeluTanhC * x * x);
    }
    case Unary::Silu: {
      double s = sigmoid(x);
      return s * (1.0 + x * (1.0 - s));
    }
    case Unary::Tanh: {
      double t = std::tanh(x);
      return 1.0 - t * t;
    }
    case Unary::Sigmoid: {
      double s = sigmoid(x);
      return s * (1.0 - s);
    }
    case Unary::Exp: return std::exp(x);
    case Unary::Log: return 1.0 / x;
    case Unary::Sqrt: return 0.5 / std::sqrt(x);
    case Unary::Rsqrt: return -0.5 / (x * std::sqrt(x));
    case Unary::Neg: return -1.0;
    case Unary::Abs: return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0);
  }
  DTL_REF_FAIL("unknown unary op");
}

int64_t intOp(Binary op, int64_t a, int64_t b) {
  // Unsigned arithmetic wraps without undefined behaviour; wrapToInt narrows.
  uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  switch (op) {
    case Binary::Add: return static_cast<int64_t>(ua + ub);
    case Binary::Sub: return static_cast<int64_t>(ua - ub);
    case Binary::Mul: return static_cast<int64_t>(ua * ub);
    case Binary::Div:
      if (b == 0) return 0;
      if (b == -1) return static_cast<int64_t>(0 - ua);  // INT64_MIN / -1 would trap
      return a / b;
    default: break;
  }
  DTL_REF_FAIL("intOp on a comparison");
}

template <class T>
bool compare(Binary op, T a, T b) {
  switch (op) {
    case Binary::Eq: return a == b;
    case Binary::Ne: return a != b;
    case Binary::Lt: return a < b;
    case Binary::Le: return a <= b;
    case Binary::Gt: return a > b;
    case Binary::Ge: return a >= b;
    default: break;
  }
  DTL_REF_FAIL("compare on arithmetic");
}

double floatOp(Binary op, double a, double b) {
  switch (op) {
    case Binary::Add: return a + b;
    case Binary::Sub: return a - b;
    case Binary::Mul: return a * b;
    case Binary::Div: return a / b;
    default: break;
  }
  DTL_REF_FAIL("floatOp on a comparison");
}

}  // namespace

const char* unaryName(Unary op) {
  static const char* const kNames[] = {"relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid",
                                       "exp",  "log",  "sqrt",      "rsqrt", "neg", "abs"};
  return kNames[static_cast<int>(op)];
}

std::optional<Unary> parseUnary(std::string_view name) {
  for (Unary op : kAllUnary)
    if (name == unaryName(op)) return op;
  return std::nullopt;
}

Tensor unary(Unary op, const Tensor& x) {
  Tensor y = Tensor::zeros(x.shape, x.dtype);
  if (!x.floating()) {
    DTL_REF_CHECK((op == Unary::Neg || op == Unary::Abs) && x.dtype != DType::Bool,
                  std::string(unaryName(op)) + " on " + dtypeName(x.dtype));
    for (size_t k = 0; k < x.i.size(); ++k) {
      uint64_t u = static_cast<uint64_t>(x.i[k]);
      bool flip = op == Unary::Neg || x.i[k] < 0;
      y.i[k] = wrapToInt(static_cast<int64_t>(flip ? 0 - u : u), x.dtype);
    }
    return y;
  }
  for (size_t k = 0; k < x.f.size(); ++k) y.f[k] = forward(op, x.f[k]);
  return y;
}

Tensor unaryBackward(Unary op, const Tensor& x, const Tensor& dy) {
  DTL_REF_CHECK(x.floating() && dy.shape == x.shape, "unaryBackward of " + x.shape.str() + " with dy " + dy.shape.str());
  Tensor dx = Tensor::zeros(x.shape, x.dtype);
  // relu's gradient selects rather than multiplies, as torch's threshold_backward:
  // dy where relu(x) > 0 or is NaN (so 1 at NaN), else 0 even for a NaN dy.
  if (op == Unary::Relu) {
    for (size_t k = 0; k < x.f.size(); ++k) dx.f[k] = x.f[k] <= 0 ? 0.0 : dy.f[k];
    return dx;
  }
  for (size_t k = 0; k < x.f.size(); ++k) dx.f[k] = dy.f[k] * derivative(op, x.f[k]);
  return dx;
}

const char* binaryName(Binary op) {
  static const char* const kNames[] = {"+", "-", "*", "/", "==", "!=", "<", "<=", ">", ">="};
  return kNames[static_cast<int>(op)];
}

bool isComparison(Binary op) { return op >= Binary::Eq; }

std::optional<Binary> parseBinary(std::string_view fn) {
  static const char* const kFns[] = {"add", "sub", "mul", "div", "eq", "ne", "lt", "le", "gt", "ge"};
  for (size_t k = 0; k < std::size(kFns); ++k)  // in Binary's order
    if (fn == kFns[k]) return static_cast<Binary>(k);
  return std::nullopt;
}

Shape broadcastShape(const Shape& a, const Shape& b) {
  std::optional<Shape> s = broadcastByName(a, b);
  DTL_REF_CHECK(s.has_value(), "broadcast of " + a.str() + " and " + b.str());
  return *s;
}

Tensor binary(Binary op, const Tensor& a, const Tensor& b) {
  DTL_REF_CHECK(a.dtype == b.dtype, std::string("`") + binaryName(op) + "` of " + dtypeName(a.dtype) + " and " +
                                        dtypeName(b.dtype));
  DTL_REF_CHECK(isComparison(op) || a.dtype != DType::Bool, std::string("`") + binaryName(op) + "` on bools");
  Shape s = broadcastShape(a.shape, b.shape);
  std::vector<int64_t> oa = offsetsIn(a.shape, s), ob = offsetsIn(b.shape, s);
  Tensor y = Tensor::zeros(s, isComparison(op) ? DType::Bool : a.dtype);
  for (size_t k = 0; k < oa.size(); ++k) {
    if (isComparison(op))
      y.i[k] = a.floating() ? compare(op, a.f[oa[k]], b.f[ob[k]]) : compare(op, a.i[oa[k]], b.i[ob[k]]);
    else if (a.floating())
      y.f[k] = floatOp(op, a.f[oa[k]], b.f[ob[k]]);
    else
      y.i[k] = wrapToInt(intOp(op, a.i[oa[k]], b.i[ob[k]]), a.dtype);
  }
  return y;
}

BinaryGrads binaryBackward(Binary op, const Tensor& a, const Tensor& b, const Tensor& dy) {
  DTL_REF_CHECK(!isComparison(op) && a.floating() && b.floating(), "binaryBackward needs float arithmetic");
  Shape s = broadcastShape(a.shape, b.shape);
  DTL_REF_CHECK(dy.shape == s, "binaryBackward dy " + dy.shape.str() + " for result " + s.str());
  std::vector<int64_t> oa = offsetsIn(a.shape, s), ob = offsetsIn(b.shape, s);
  Tensor ga = Tensor::zeros(s, a.dtype), gb = Tensor::zeros(s, b.dtype);  // [s], before sumTo
  for (size_t k = 0; k < oa.size(); ++k) {
    double x = a.f[oa[k]], z = b.f[ob[k]], g = dy.f[k];
    switch (op) {
      case Binary::Add: ga.f[k] = g, gb.f[k] = g; break;
      case Binary::Sub: ga.f[k] = g, gb.f[k] = -g; break;
      case Binary::Mul: ga.f[k] = g * z, gb.f[k] = g * x; break;
      case Binary::Div: ga.f[k] = g / z, gb.f[k] = -g * x / (z * z); break;
      default: break;
    }
  }
  return {sumTo(ga, a.shape), sumTo(gb, b.shape)};
}

}  // namespace dtl::rt::ref
