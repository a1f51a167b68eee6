// The region builder, its checks, printer and hash.
#include "compiler/codegen/region.h"

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>

#include "core/hash.h"

namespace dtl::codegen {

namespace {

[[noreturn]] void fail(const std::string& region, const std::string& what) {
  std::fprintf(stderr, "codegen: region `%s`: %s\n", region.c_str(), what.c_str());
  std::abort();
}

template <class Fn, size_t N>
std::optional<Fn> parseFn(std::string_view name, const Fn (&all)[N]) {
  for (Fn fn : all)
    if (name == fnName(fn)) return fn;
  return std::nullopt;
}

std::string operandProblem(const std::vector<RegionNode>& nodes, int id, int at, DType want = DType::F32) {
  if (id < 0 || id >= at) return "operand %" + std::to_string(id) + " is not an earlier node";
  if (nodes[static_cast<size_t>(id)].dtype != want)
    return want == DType::F32 ? "operand %" + std::to_string(id) +
                                    " is Bool (a comparison's result is an output or a select's condition only)"
                              : "select's condition %" + std::to_string(id) + " is not a comparison's Bool";
  return "";
}

// The broadcast of the operands' shapes (the ones that exist yet), if they fit.
std::optional<Shape> broadcastOf(const std::vector<RegionNode>& nodes, std::initializer_list<int> ids) {
  Shape s;
  for (int id : ids) {
    if (id < 0 || id >= static_cast<int>(nodes.size())) continue;
    auto b = broadcastShapes(s, nodes[static_cast<size_t>(id)].shape);
    if (!b) return std::nullopt;
    s = *b;
  }
  return s;
}

// Inputs are never equal (each is its own buffer); a constant is its bits (−0 is not 0).
bool sameValue(const RegionNode& x, const RegionNode& y) {
  return x.kind == y.kind && x.kind != Kind::Input && x.shape == y.shape && x.dtype == y.dtype && x.a == y.a &&
         x.b == y.b && x.c == y.c && x.unary == y.unary && x.binary == y.binary && x.reduce == y.reduce &&
         x.dim == y.dim && std::bit_cast<uint32_t>(x.value) == std::bit_cast<uint32_t>(y.value);
}

}  // namespace

const char* fnName(UnaryFn fn) {
  static const char* const kNames[] = {"relu", "gelu", "gelu_tanh", "silu",  "tanh", "sigmoid",
                                       "exp",  "log",  "sqrt",      "rsqrt", "neg",  "abs"};
  return kNames[static_cast<int>(fn)];
}

const char* fnName(BinaryFn fn) {
  static const char* const kNames[] = {"add", "sub", "mul", "div", "eq", "ne", "lt", "le", "gt", "ge"};
  return kNames[static_cast<int>(fn)];
}

const char* fnName(ReduceFn fn) {
  static const char* const kNames[] = {"sum", "mean", "max"};
  return kNames[static_cast<int>(fn)];
}

std::optional<UnaryFn> parseUnaryFn(std::string_view name) { return parseFn(name, kAllUnaryFns); }
std::optional<BinaryFn> parseBinaryFn(std::string_view name) { return parseFn(name, kAllBinaryFns); }
std::optional<ReduceFn> parseReduceFn(std::string_view name) { return parseFn(name, kAllReduceFns); }

std::optional<Shape> broadcastShapes(const Shape& a, const Shape& b) { return broadcastByName(a, b); }

bool gradNeedsLibm(UnaryFn fn) {
  switch (fn) {
    case UnaryFn::Gelu: case UnaryFn::GeluTanh: case UnaryFn::Silu: case UnaryFn::Tanh:
    case UnaryFn::Sigmoid: case UnaryFn::Exp: return true;
    default: return false;  // relu neg abs: exact; log sqrt rsqrt: IEEE double ops
  }
}

int Region::add(RegionNode n) {
  // Value numbering: a node that computes what an earlier one computes (same
  // op, operands and attributes) is that node. The composites repeat pieces
  // — a layer norm's gradient region rebuilds x̂ for the weight's gradient
  // and again inside normalizeGrad — and every repeated reduction would be a
  // loop nest of its own over the rows. Equal nodes give equal bits, so
  // sharing them changes no result.
  if (n.kind != Kind::Input)
    for (size_t i = 0; i < nodes_.size(); ++i)
      if (sameValue(nodes_[i], n)) return static_cast<int>(i);
  nodes_.push_back(std::move(n));
  std::string problem = validate();
  if (!problem.empty()) fail(name_, problem);
  return static_cast<int>(nodes_.size()) - 1;
}

int Region::input(std::string name, Shape shape) {
  RegionNode n;
  n.kind = Kind::Input;
  n.name = std::move(name);
  n.shape = std::move(shape);
  return add(std::move(n));
}

int Region::constant(float value) {
  RegionNode n;
  n.kind = Kind::Const;
  n.value = value;
  return add(std::move(n));
}

int Region::unary(UnaryFn fn, int x) {
  RegionNode n;
  n.kind = Kind::Unary;
  n.unary = fn;
  n.a = x;
  if (x >= 0 && x < static_cast<int>(nodes_.size())) n.shape = node(x).shape;
  return add(std::move(n));
}

int Region::binary(BinaryFn fn, int a, int b) {
  RegionNode n;
  n.kind = Kind::Binary;
  n.binary = fn;
  n.a = a;
  n.b = b;
  n.dtype = isComparison(fn) ? DType::Bool : DType::F32;
  int size = static_cast<int>(nodes_.size());
  if (a >= 0 && a < size && b >= 0 && b < size) {
    auto s = broadcastShapes(node(a).shape, node(b).shape);
    if (!s) fail(name_, std::string(fnName(fn)) + " of " + node(a).shape.str() + " and " + node(b).shape.str());
    n.shape = *s;
  }
  return add(std::move(n));
}

int Region::reduce(ReduceFn fn, int x, const std::string& dim) {
  RegionNode n;
  n.kind = Kind::Reduce;
  n.reduce = fn;
  n.a = x;
  n.dim = dim;
  if (x >= 0 && x < static_cast<int>(nodes_.size())) {
    const Shape& s = node(x).shape;
    if (!s.has(dim)) fail(name_, std::string(fnName(fn)) + " over `" + dim + "`, which " + s.str() + " lacks");
    for (const Dim& d : s.dims)
      if (d.name != dim) n.shape.dims.push_back(d);
  }
  return add(std::move(n));
}

int Region::unaryGrad(UnaryFn fn, int x, int dy) {
  RegionNode n;
  n.kind = Kind::UnaryGrad;
  n.unary = fn;
  n.a = x;
  n.b = dy;
  auto s = broadcastOf(nodes_, {x, dy});
  if (!s) fail(name_, std::string(fnName(fn)) + "_grad of " + node(x).shape.str() + " and " + node(dy).shape.str());
  n.shape = *s;
  return add(std::move(n));
}

int Region::select(int cond, int if_true, int if_false) {
  RegionNode n;
  n.kind = Kind::Select;
  n.a = cond;
  n.b = if_true;
  n.c = if_false;
  auto s = broadcastOf(nodes_, {cond, if_true, if_false});
  if (!s) fail(name_, "select of operands whose shapes do not broadcast");
  n.shape = *s;
  return add(std::move(n));
}

void Region::output(std::string name, int node_id) {
  if (node_id < 0 || node_id >= static_cast<int>(nodes_.size()))
    fail(name_, "output `" + name + "` of no node (%" + std::to_string(node_id) + ")");
  outputs_.push_back({std::move(name), node_id});
}

int Region::softmax(int x, const std::string& dim) {
  int m = reduce(ReduceFn::Max, x, dim);
  int e = unary(UnaryFn::Exp, binary(BinaryFn::Sub, x, m));
  return binary(BinaryFn::Div, e, reduce(ReduceFn::Sum, e, dim));
}

int Region::logSoftmax(int x, const std::string& dim) {
  int shifted = binary(BinaryFn::Sub, x, reduce(ReduceFn::Max, x, dim));
  int total = reduce(ReduceFn::Sum, unary(UnaryFn::Exp, shifted), dim);
  return binary(BinaryFn::Sub, shifted, unary(UnaryFn::Log, total));
}

int Region::softmaxGrad(int y, int dy, const std::string& dim) {
  int total = reduce(ReduceFn::Sum, binary(BinaryFn::Mul, y, dy), dim);
  return binary(BinaryFn::Mul, y, binary(BinaryFn::Sub, dy, total));
}

int Region::logSoftmaxGrad(int y, int dy, const std::string& dim) {
  int total = reduce(ReduceFn::Sum, dy, dim);
  return binary(BinaryFn::Sub, dy, binary(BinaryFn::Mul, unary(UnaryFn::Exp, y), total));
}

namespace {

// rsqrt(v + eps): the reference's 1 / sqrt(var + eps).
int rstd(Region& r, int variance, float eps) {
  return r.unary(UnaryFn::Rsqrt, r.binary(BinaryFn::Add, variance, r.constant(eps)));
}

struct Moments {
  int centered, rstd;
};

Moments moments(Region& r, int x, const std::string& dim, float eps) {
  int centered = r.binary(BinaryFn::Sub, x, r.reduce(ReduceFn::Mean, x, dim));
  int variance = r.reduce(ReduceFn::Mean, r.binary(BinaryFn::Mul, centered, centered), dim);
  return {centered, rstd(r, variance, eps)};
}

int rmsScale(Region& r, int x, const std::string& dim, float eps) {
  return rstd(r, r.reduce(ReduceFn::Mean, r.binary(BinaryFn::Mul, x, x), dim), eps);
}

}  // namespace

int Region::normalize(int x, const std::string& dim, float eps) {
  Moments m = moments(*this, x, dim, eps);
  return binary(BinaryFn::Mul, m.centered, m.rstd);
}

int Region::rmsNormalize(int x, const std::string& dim, float eps) {
  return binary(BinaryFn::Mul, x, rmsScale(*this, x, dim, eps));
}

int Region::normalizeGrad(int x, int dy, const std::string& dim, float eps) {
  Moments m = moments(*this, x, dim, eps);
  int xhat = binary(BinaryFn::Mul, m.centered, m.rstd);
  int mean_dy = reduce(ReduceFn::Mean, dy, dim);
  int mean_dy_xhat = reduce(ReduceFn::Mean, binary(BinaryFn::Mul, dy, xhat), dim);
  int inner = binary(BinaryFn::Sub, binary(BinaryFn::Sub, dy, mean_dy), binary(BinaryFn::Mul, xhat, mean_dy_xhat));
  return binary(BinaryFn::Mul, m.rstd, inner);
}

int Region::rmsNormalizeGrad(int x, int dy, const std::string& dim, float eps) {
  int r = rmsScale(*this, x, dim, eps);
  int mean_dy_x = reduce(ReduceFn::Mean, binary(BinaryFn::Mul, dy, x), dim);
  int r3 = binary(BinaryFn::Mul, binary(BinaryFn::Mul, r, r), r);
  return binary(BinaryFn::Sub, binary(BinaryFn::Mul, r, dy),
                binary(BinaryFn::Mul, binary(BinaryFn::Mul, r3, x), mean_dy_x));
}

std::vector<int> Region::inputs() const {
  std::vector<int> ids;
  for (size_t k = 0; k < nodes_.size(); ++k)
    if (nodes_[k].kind == Kind::Input) ids.push_back(static_cast<int>(k));
  return ids;
}

std::string Region::validate() const {
  for (size_t k = 0; k < nodes_.size(); ++k) {
    const RegionNode& n = nodes_[k];
    int at = static_cast<int>(k);
    std::string where = "%" + std::to_string(k) + ": ";
    for (size_t i = 0; i < n.shape.dims.size(); ++i) {
      if (n.shape.dims[i].size < 0) return where + "negative size in " + n.shape.str();
      for (size_t j = 0; j < i; ++j)
        if (n.shape.dims[j].name == n.shape.dims[i].name) return where + "dim named twice in " + n.shape.str();
    }
    if (!n.shape.elements()) return where + "element count of " + n.shape.str() + " overflows";
    std::string p;
    switch (n.kind) {
      case Kind::Input:
        if (n.name.empty()) return where + "input without a name";
        if (n.dtype != DType::F32) return where + "input `" + n.name + "` is not f32";
        break;
      case Kind::Const:
        if (!n.shape.scalar()) return where + "constant with a shape";
        break;
      case Kind::Unary:
        if (!(p = operandProblem(nodes_, n.a, at)).empty()) return where + p;
        if (n.shape != nodes_[static_cast<size_t>(n.a)].shape) return where + "unary result shape differs";
        break;
      case Kind::Binary: {
        if (!(p = operandProblem(nodes_, n.a, at)).empty()) return where + p;
        if (!(p = operandProblem(nodes_, n.b, at)).empty()) return where + p;
        auto s = broadcastShapes(nodes_[static_cast<size_t>(n.a)].shape, nodes_[static_cast<size_t>(n.b)].shape);
        if (!s || *s != n.shape) return where + "binary result shape is not the operands' broadcast";
        if (n.dtype != (isComparison(n.binary) ? DType::Bool : DType::F32)) return where + "binary result dtype";
        break;
      }
      case Kind::UnaryGrad: {
        if (!(p = operandProblem(nodes_, n.a, at)).empty()) return where + p;
        if (!(p = operandProblem(nodes_, n.b, at)).empty()) return where + p;
        auto s = broadcastOf(nodes_, {n.a, n.b});
        if (!s || *s != n.shape) return where + "gradient result shape is not the operands' broadcast";
        if (n.dtype != DType::F32) return where + "gradient result dtype";
        break;
      }
      case Kind::Select: {
        if (!(p = operandProblem(nodes_, n.a, at, DType::Bool)).empty()) return where + p;
        if (!(p = operandProblem(nodes_, n.b, at)).empty()) return where + p;
        if (!(p = operandProblem(nodes_, n.c, at)).empty()) return where + p;
        auto s = broadcastOf(nodes_, {n.a, n.b, n.c});
        if (!s || *s != n.shape) return where + "select result shape is not the operands' broadcast";
        if (n.dtype != DType::F32) return where + "select result dtype";
        break;
      }
      case Kind::Reduce: {
        if (!(p = operandProblem(nodes_, n.a, at)).empty()) return where + p;
        const Shape& s = nodes_[static_cast<size_t>(n.a)].shape;
        if (!s.has(n.dim)) return where + "reduction over `" + n.dim + "`, which " + s.str() + " lacks";
        Shape rest;
        for (const Dim& d : s.dims)
          if (d.name != n.dim) rest.dims.push_back(d);
        if (rest != n.shape) return where + "reduction result shape differs";
        break;
      }
    }
  }
  for (const RegionOutput& o : outputs_)
    if (o.node < 0 || o.node >= static_cast<int>(nodes_.size())) return "output `" + o.name + "` of no node";
  return "";
}

namespace {

std::string body(const Region& r) {
  std::string s;
  char num[32];
  for (size_t k = 0; k < r.nodes().size(); ++k) {
    const RegionNode& n = r.nodes()[k];
    s += "  %" + std::to_string(k) + " = ";
    switch (n.kind) {
      case Kind::Input: s += "input " + n.name; break;
      case Kind::Const:
        std::snprintf(num, sizeof num, "%.9g", static_cast<double>(n.value));  // round-trips an f32
        s += std::string("const ") + num;
        break;
      case Kind::Unary: s += std::string(fnName(n.unary)) + " %" + std::to_string(n.a); break;
      case Kind::Binary:
        s += std::string(fnName(n.binary)) + " %" + std::to_string(n.a) + " %" + std::to_string(n.b);
        break;
      case Kind::Reduce: s += std::string(fnName(n.reduce)) + " %" + std::to_string(n.a) + " over " + n.dim; break;
      case Kind::UnaryGrad:
        s += std::string(fnName(n.unary)) + "_grad %" + std::to_string(n.a) + " %" + std::to_string(n.b);
        break;
      case Kind::Select:
        s += "select %" + std::to_string(n.a) + " %" + std::to_string(n.b) + " %" + std::to_string(n.c);
        break;
    }
    s += " : " + n.shape.str() + (n.dtype == DType::Bool ? " bool" : "") + "\n";
  }
  for (const RegionOutput& o : r.outputs()) s += "  output " + o.name + " = %" + std::to_string(o.node) + "\n";
  return s;
}

}  // namespace

std::string printRegion(const Region& r) { return "region " + r.name() + "\n" + body(r); }

uint64_t regionHash(const Region& r) { return fnv1a(body(r)); }

}  // namespace dtl::codegen
