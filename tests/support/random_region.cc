// The random region generator of random_region.h.
#include "tests/support/random_region.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>
#include <utility>

namespace dtl::codegen::testing {

namespace {

std::vector<Dim> randomDims(ChoiceStream& s, int64_t max_points) {
  static const char* const kNames[] = {"batch", "seq", "hidden", "heads"};
  static const int64_t kSizes[] = {0, 1, 1, 2, 3, 4, 5, 7, 8, 13, 16, 17, 31, 32, 33, 64, 100, 127, 257, 1000};
  std::vector<Dim> dims;
  int rank = 1 + static_cast<int>(s.below(4));
  for (int k = 0; k < rank; ++k) dims.push_back({kNames[k], s.pick(kSizes)});
  // Too many points: halve the largest dim until they fit (no retry loop, so
  // every byte string gives a case).
  for (;;) {
    int64_t points = 1;
    Dim* largest = &dims[0];
    for (Dim& d : dims) {
      points *= std::max<int64_t>(d.size, 1);
      if (d.size > largest->size) largest = &d;
    }
    if (points <= max_points) return dims;
    largest->size /= 2;
  }
}

// A random subset of `dims` in a random order; a scalar now and then.
Shape randomShape(ChoiceStream& s, const std::vector<Dim>& dims) {
  Shape shape;
  if (s.percent(10)) return shape;
  for (const Dim& d : dims)
    if (s.percent(70)) shape.dims.push_back(d);
  if (shape.dims.empty()) shape.dims.push_back(dims[s.below(dims.size())]);
  for (size_t k = shape.dims.size(); k > 1; --k) std::swap(shape.dims[k - 1], shape.dims[s.below(k)]);
  return shape;
}

float randomConstant(ChoiceStream& s) {
  static const float kConstants[] = {0.5f, 2.0f,     -1.0f,     0.0f, -0.0f,    1e-3f,   3.0f,  1e-40f,
                                     INFINITY, -INFINITY, NAN, 0.044715f, 1e30f, -7.25f, FLT_MAX};
  return s.percent(10) ? s.rawFloat() : s.pick(kConstants);
}

// One input's values, at a rate of specials and a scale of its own.
Values randomInputValues(ChoiceStream& s, int64_t n) {
  static const int kSpecialPercent[] = {0, 2, 10, 30, 100};
  static const double kScales[] = {1e-30, 1e-3, 1, 1, 10, 100, 1e4, 1e30};
  static const float kSpecials[] = {NAN,     INFINITY, -INFINITY, 0.0f,    -0.0f,  1e-40f, -3e-42f, 1e-45f,
                                    FLT_MIN, FLT_MAX,  -FLT_MAX,  1e30f,   -1e30f, 88.7f,  -104.0f, 1.0f};
  int special = s.pick(kSpecialPercent);
  double scale = s.pick(kScales);
  Values v(static_cast<size_t>(n));
  for (float& x : v) {
    if (s.percent(special))
      x = s.percent(25) ? s.rawFloat() : s.pick(kSpecials);
    else if (s.percent(10))
      x = static_cast<float>(static_cast<int>(s.below(7)) - 3);  // ties and equal operands
    else
      x = static_cast<float>(s.normal() * scale);
  }
  return v;
}

// softmaxGrad or logSoftmaxGrad of y = x along dim.
int reductionGrad(ChoiceStream& s, Region& r, int x, int dy, const std::string& dim) {
  return s.percent(50) ? r.softmaxGrad(x, dy, dim) : r.logSoftmaxGrad(x, dy, dim);
}

// One of the four normalizations along dim.
int normalization(ChoiceStream& s, Region& r, int x, int dy, const std::string& dim) {
  static const float kEps[] = {1e-5f, 1e-6f, 0.0f, 1.0f};
  float eps = s.pick(kEps);
  switch (s.below(4)) {
    case 0: return r.normalize(x, dim, eps);
    case 1: return r.rmsNormalize(x, dim, eps);
    case 2: return r.normalizeGrad(x, dy, dim, eps);
    default: return r.rmsNormalizeGrad(x, dy, dim, eps);
  }
}

}  // namespace

RandomCase randomCase(ChoiceStream& s, const std::string& name, int64_t max_points) {
  std::vector<Dim> dims = randomDims(s, max_points);
  RandomCase c{Region(name), {}};
  Region& r = c.region;
  std::vector<int> values;  // the f32 nodes so far
  int inputs = 1 + static_cast<int>(s.below(3));
  for (int k = 0; k < inputs; ++k) values.push_back(r.input("in" + std::to_string(k), randomShape(s, dims)));

  // Operands favour the newest value, so chains grow deep.
  auto operand = [&] { return s.percent(50) ? values.back() : values[s.below(values.size())]; };
  auto other = [&] { return s.percent(25) ? r.constant(randomConstant(s)) : operand(); };
  std::vector<int> flags;  // Bool results: outputs, and the conditions of selects
  // A comparison's Bool: one made before now and then, else a new one.
  auto condition = [&] {
    if (!flags.empty() && s.percent(40)) return flags[s.below(flags.size())];
    static const BinaryFn kCompare[] = {BinaryFn::Eq, BinaryFn::Ne, BinaryFn::Lt,
                                        BinaryFn::Le, BinaryFn::Gt, BinaryFn::Ge};
    BinaryFn fn = s.pick(kCompare);
    int a = operand(), b = other();
    flags.push_back(r.binary(fn, a, b));
    return flags.back();
  };
  // A value over `dim` (the newest value has it at least half the time).
  auto withDim = [&](const std::string& dim) {
    std::vector<int> have;
    for (int v : values)
      if (r.node(v).shape.has(dim)) have.push_back(v);
    return have[s.below(have.size())];
  };
  int ops = 1 + static_cast<int>(s.below(12));
  for (int k = 0; k < ops; ++k) {
    int x = operand();
    const Shape& xs = r.node(x).shape;
    uint64_t what = s.below(26);
    if (what < 7) {
      values.push_back(r.unary(s.pick(kAllUnaryFns), x));
    } else if (what < 12) {
      static const BinaryFn kArith[] = {BinaryFn::Add, BinaryFn::Sub, BinaryFn::Mul, BinaryFn::Div};
      BinaryFn fn = s.pick(kArith);
      int y = other();
      if (s.percent(50)) std::swap(x, y);
      values.push_back(r.binary(fn, x, y));
    } else if (what < 14) {
      static const BinaryFn kCompare[] = {BinaryFn::Eq, BinaryFn::Ne, BinaryFn::Lt,
                                          BinaryFn::Le, BinaryFn::Gt, BinaryFn::Ge};
      BinaryFn fn = s.pick(kCompare);
      int y = other();
      if (s.percent(50)) std::swap(x, y);
      flags.push_back(r.binary(fn, x, y));
    } else if (what < 17) {
      if (xs.rank() > 0) {
        ReduceFn fn = s.pick(kAllReduceFns);
        std::string dim = xs.dims[s.below(xs.rank())].name;  // a copy: the builder grows the node list
        values.push_back(r.reduce(fn, x, dim));
      }
    } else if (what < 19) {
      if (xs.rank() > 0) {
        bool log = s.percent(50);
        std::string dim = xs.dims[s.below(xs.rank())].name;
        values.push_back(log ? r.logSoftmax(x, dim) : r.softmax(x, dim));
      }
    } else if (what < 20) {
      values.push_back(r.unary(s.pick(kAllUnaryFns), r.constant(randomConstant(s))));  // a scalar-only chain
    } else if (what < 22) {
      UnaryFn fn = s.pick(kAllUnaryFns);
      values.push_back(r.unaryGrad(fn, x, other()));
    } else if (what < 24) {
      values.push_back(r.select(condition(), other(), other()));
    } else if (xs.rank() > 0) {
      std::string dim = xs.dims[s.below(xs.rank())].name;
      int dy = withDim(dim);
      values.push_back(what == 24 ? reductionGrad(s, r, x, dy, dim) : normalization(s, r, x, dy, dim));
    }
  }
  r.output("out", values.back());
  for (size_t k = 0; k + 1 < r.nodes().size(); ++k) {
    Kind kind = r.nodes()[k].kind;
    bool leaf = kind == Kind::Input || kind == Kind::Const;
    if (r.nodes()[k].dtype == DType::F32 && s.percent(leaf ? 3 : 20)) r.output("extra" + std::to_string(k), static_cast<int>(k));
  }
  std::sort(flags.begin(), flags.end());  // a comparison built twice is one node (the builder's value numbering)
  flags.erase(std::unique(flags.begin(), flags.end()), flags.end());
  for (int f : flags) r.output("flag" + std::to_string(f), f);

  for (int id : r.inputs()) c.inputs.push_back(randomInputValues(s, r.node(id).shape.elements().value_or(0)));
  return c;
}

RandomCase randomGradientCase(uint64_t seed, int64_t max_points) {
  static const UnaryFn kGradients[] = {UnaryFn::Exp,  UnaryFn::Tanh, UnaryFn::Sigmoid,
                                       UnaryFn::Silu, UnaryFn::Gelu, UnaryFn::GeluTanh};
  ChoiceStream s(seed);
  std::vector<Dim> dims = randomDims(s, max_points);
  RandomCase c{Region("gradient" + std::to_string(seed)), {}};
  Region& r = c.region;
  int x = r.input("in0", randomShape(s, dims));
  int dy = s.percent(15) ? r.constant(randomConstant(s)) : r.input("in1", randomShape(s, dims));
  if (s.percent(30)) x = r.unary(s.pick(kAllUnaryFns), x);  // a computed operand
  // A chain of gradients (a backward pass through stacked activations), each
  // dy the previous gradient, x now and then another fn of x.
  int links = 1 + static_cast<int>(s.below(3));
  for (int k = 0; k < links; ++k) {
    int xk = s.percent(25) ? r.unary(s.pick(kGradients), x) : x;
    dy = r.unaryGrad(s.pick(kGradients), xk, dy);
  }
  const Shape& ys = r.node(dy).shape;
  if (ys.rank() > 0 && s.percent(30)) {
    std::string dim = ys.dims[s.below(ys.rank())].name;  // a copy: the builder grows the node list
    r.output("extra", dy);
    dy = r.reduce(ReduceFn::Sum, dy, dim);  // a bias's gradient
  }
  r.output("out", dy);
  for (int id : r.inputs()) c.inputs.push_back(randomInputValues(s, r.node(id).shape.elements().value_or(0)));
  return c;
}

RandomCase randomCase(uint64_t seed, int64_t max_points) {
  ChoiceStream s(seed);
  return randomCase(s, "random" + std::to_string(seed), max_points);
}

RandomCase randomCaseFromBytes(const uint8_t* data, size_t size, int64_t max_points) {
  ChoiceStream s(data, size);
  return randomCase(s, "fuzz", max_points);
}

// Every op class once, small (random_region.h).
std::vector<Region> opClassRegions() {
  std::vector<Region> all;
  const Shape rows{{{"batch", 3}, {"hidden", 7}}};
  for (UnaryFn fn : kAllUnaryFns) {
    Region r(std::string("unary_") + fnName(fn));
    r.output("y", r.unary(fn, r.input("x", rows)));
    all.push_back(r);
  }
  for (BinaryFn fn : kAllBinaryFns) {
    Region r(std::string("binary_") + fnName(fn));
    r.output("y", r.binary(fn, r.input("a", rows), r.input("b", Shape{{{"hidden", 7}, {"batch", 3}}})));
    all.push_back(r);
  }
  for (ReduceFn fn : kAllReduceFns) {
    Region r(std::string("reduce_") + fnName(fn));
    r.output("y", r.reduce(fn, r.input("x", rows), "batch"));
    all.push_back(r);
  }
  Region softmax("softmax");
  softmax.output("y", softmax.softmax(softmax.input("x", rows), "hidden"));
  all.push_back(softmax);
  Region log_softmax("log_softmax");
  log_softmax.output("y", log_softmax.logSoftmax(log_softmax.input("x", rows), "hidden"));
  all.push_back(log_softmax);
  for (UnaryFn fn : kAllUnaryFns) {
    Region r(std::string("grad_") + fnName(fn));
    int gx = r.input("x", rows);
    r.output("dx", r.unaryGrad(fn, gx, r.input("dy", rows)));
    all.push_back(r);
  }
  Region select("select");
  int sx = select.input("x", rows);
  select.output("y", select.select(select.binary(BinaryFn::Gt, sx, select.constant(0.0f)), sx, select.constant(-1.0f)));
  all.push_back(select);
  Region norms("norms");  // every normalization and softmax gradient, sharing x and dy
  int nx = norms.input("x", rows), ndy = norms.input("dy", rows);
  norms.output("ln", norms.normalize(nx, "hidden", 1e-5f));
  norms.output("rms", norms.rmsNormalize(nx, "hidden", 1e-6f));
  norms.output("dln", norms.normalizeGrad(nx, ndy, "hidden", 1e-5f));
  norms.output("drms", norms.rmsNormalizeGrad(nx, ndy, "hidden", 1e-6f));
  norms.output("dsm", norms.softmaxGrad(nx, ndy, "hidden"));
  norms.output("dlsm", norms.logSoftmaxGrad(nx, ndy, "hidden"));
  all.push_back(norms);
  Region bias_relu("bias_relu");
  int x = bias_relu.input("x", rows);
  bias_relu.output("y", bias_relu.unary(UnaryFn::Relu, bias_relu.binary(BinaryFn::Add, x, bias_relu.input("b", Shape{{{"hidden", 7}}}))));
  all.push_back(bias_relu);
  return all;
}

Values randomValues(int64_t n, std::mt19937_64& rng, double special) {
  static const float kSpecials[] = {NAN,   INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -3e-42f, 1.17e-38f,
                                    FLT_MAX, -FLT_MAX, 1e30f,    -1e30f, 88.7f, -104.0f};
  std::uniform_real_distribution<double> coin(0, 1);
  std::normal_distribution<float> normal(0, 1);
  const float scales[] = {1, 10, 100};
  float scale = scales[rng() % 3];
  Values v(static_cast<size_t>(n));
  for (float& x : v)
    x = coin(rng) < special ? kSpecials[rng() % (sizeof kSpecials / sizeof *kSpecials)] : normal(rng) * scale;
  return v;
}

}  // namespace dtl::codegen::testing
