// A fused region: what the kernel generator (emit_llvm.h) compiles. A small
// SSA list over named shapes: f32 inputs, scalar constants, the elementwise
// functions of core/graph.h's Unary/Binary nodes, a Unary fn's gradient, a
// select on a comparison, and reductions along one dim; some nodes are named
// outputs. It says what to compute, not how: the
// buffers and loop nests are kernel_plan.h's. The fusion pass that cuts
// regions out of a rank's program is fuse_regions.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"

namespace dtl::codegen {

// The spellings are core/graph.h's `fn` strings ("gelu_tanh", "add", "eq", "sum").
enum class UnaryFn { Relu, Gelu, GeluTanh, Silu, Tanh, Sigmoid, Exp, Log, Sqrt, Rsqrt, Neg, Abs };
enum class BinaryFn { Add, Sub, Mul, Div, Eq, Ne, Lt, Le, Gt, Ge };
enum class ReduceFn { Sum, Mean, Max };

inline constexpr UnaryFn kAllUnaryFns[] = {UnaryFn::Relu, UnaryFn::Gelu,    UnaryFn::GeluTanh, UnaryFn::Silu,
                                           UnaryFn::Tanh, UnaryFn::Sigmoid, UnaryFn::Exp,      UnaryFn::Log,
                                           UnaryFn::Sqrt, UnaryFn::Rsqrt,   UnaryFn::Neg,      UnaryFn::Abs};
inline constexpr BinaryFn kAllBinaryFns[] = {BinaryFn::Add, BinaryFn::Sub, BinaryFn::Mul, BinaryFn::Div,
                                             BinaryFn::Eq,  BinaryFn::Ne,  BinaryFn::Lt,  BinaryFn::Le,
                                             BinaryFn::Gt,  BinaryFn::Ge};
inline constexpr ReduceFn kAllReduceFns[] = {ReduceFn::Sum, ReduceFn::Mean, ReduceFn::Max};

const char* fnName(UnaryFn fn);
const char* fnName(BinaryFn fn);
const char* fnName(ReduceFn fn);
std::optional<UnaryFn> parseUnaryFn(std::string_view name);
std::optional<BinaryFn> parseBinaryFn(std::string_view name);
std::optional<ReduceFn> parseReduceFn(std::string_view name);
inline bool isComparison(BinaryFn fn) { return fn >= BinaryFn::Eq; }
// Whether fn's derivative calls a transcendental function (exp, erf, tanh):
// the generator evaluates it in f32 over libm's or libmvec's expf, erff,
// tanhf (as the fast backend), not in double as the other derivatives.
bool gradNeedsLibm(UnaryFn fn);

// core/shape.h broadcastByName: the reference kernels' rule.
std::optional<Shape> broadcastShapes(const Shape& a, const Shape& b);

// UnaryGrad: dy · f'(x), the reference's unaryBackward (relu's a select: 0
// where x ≤ 0, else dy). One node, not a chain of region ops: the generator
// evaluates f' as one formula — the fast backend's f32 one for the fns whose
// derivative calls exp, erf or tanh (gradNeedsLibm; its error is absolute,
// in units of u·|dy|, where 1 − tanh² cancels), else the reference's double
// one, rounded once. Select: c ? a : b, c a comparison's Bool.
enum class Kind { Input, Const, Unary, Binary, Reduce, UnaryGrad, Select };

struct RegionNode {
  Kind kind = Kind::Const;
  Shape shape;               // the result's named shape
  DType dtype = DType::F32;  // F32, or Bool for a comparison
  int a = -1, b = -1, c = -1;  // operands (earlier nodes): UnaryGrad x, dy; Select cond, then, else
  UnaryFn unary = UnaryFn::Relu;  // Unary and UnaryGrad
  BinaryFn binary = BinaryFn::Add;
  ReduceFn reduce = ReduceFn::Sum;
  std::string dim;   // Reduce: the dim reduced (absent from `shape`)
  std::string name;  // Input: the input's name
  float value = 0;   // Const
};

struct RegionOutput {
  std::string name;
  int node = -1;
};

// Built node by node; a builder call with operands that do not fit (a shape
// conflict, a Bool operand, an unknown dim) is a broken invariant of the
// caller and aborts with the reason: regions come from checked graphs. A
// call that builds a node equal to an earlier one (same op, operands and
// attributes; never an input) returns that node's id (value numbering).
//
// Semantics (matching runtime/kernels/reference unless said otherwise):
// values are f32, rounded after every node; inputs are dense row-major in
// their shape's order; a comparison gives Bool (stored as one byte, 0 or 1)
// and a Bool value is an output or a Select's condition, nothing else;
// operands broadcast by name (Binary, UnaryGrad, Select); max propagates NaN and keeps the first
// of equal elements; over an empty extent sum is 0, mean is NaN (0/0) and max
// is -inf (the reference refuses that max; the generator needs a value).
class Region {
 public:
  explicit Region(std::string name = "region") : name_(std::move(name)) {}

  int input(std::string name, Shape shape);
  int constant(float value);
  int unary(UnaryFn fn, int x);
  int binary(BinaryFn fn, int a, int b);
  int reduce(ReduceFn fn, int x, const std::string& dim);
  int unaryGrad(UnaryFn fn, int x, int dy);
  int select(int cond, int if_true, int if_false);
  void output(std::string name, int node);

  // Composites of the above, as the fusion pass sees the graph's nodes: the
  // formulas of runtime/kernels/reference (softmax.cc, normalize.cc), op for
  // op, in f32 (eps an f32 constant).
  int softmax(int x, const std::string& dim);     // exp(x − max) / Σ exp(x − max)
  int logSoftmax(int x, const std::string& dim);  // (x − max) − log Σ exp(x − max)
  int softmaxGrad(int y, int dy, const std::string& dim);     // y · (dy − Σ y·dy)
  int logSoftmaxGrad(int y, int dy, const std::string& dim);  // dy − exp(y) · Σ dy
  // (x − μ) · r and x · r', r = rsqrt(mean((x − μ)²) + eps), r' = rsqrt(mean(x²) + eps)
  int normalize(int x, const std::string& dim, float eps);
  int rmsNormalize(int x, const std::string& dim, float eps);
  // r · (dy − mean(dy) − x̂ · mean(dy · x̂)), x̂ = (x − μ) · r
  int normalizeGrad(int x, int dy, const std::string& dim, float eps);
  // r' · dy − r'³ · x · mean(dy · x)
  int rmsNormalizeGrad(int x, int dy, const std::string& dim, float eps);

  const std::string& name() const { return name_; }
  const std::vector<RegionNode>& nodes() const { return nodes_; }
  const RegionNode& node(int id) const { return nodes_[static_cast<size_t>(id)]; }
  const std::vector<RegionOutput>& outputs() const { return outputs_; }
  std::vector<int> inputs() const;  // input node ids, in order of creation

  // "" when the region is well formed (what the builder enforces, rechecked
  // for regions built by hand), else the first problem found.
  std::string validate() const;

 private:
  int add(RegionNode n);
  std::string name_;
  std::vector<RegionNode> nodes_;
  std::vector<RegionOutput> outputs_;
};

// Deterministic text, one node per line: "  %2 = add %0 %1 : [b=3, c=5]".
std::string printRegion(const Region& r);

// FNV-1a of the printed region without its name line: equal for regions that
// compute the same thing from the same buffers, stable across runs and
// machines (part of the kernel cache key to come).
uint64_t regionHash(const Region& r);

}  // namespace dtl::codegen
