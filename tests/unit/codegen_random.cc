// The random region generator of codegen_random.h.
#include "tests/unit/codegen_random.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>

namespace dtl::codegen::testing {

namespace {

template <class T, size_t N>
T pick(std::mt19937_64& rng, const T (&options)[N]) {
  return options[rng() % N];
}

bool chance(std::mt19937_64& rng, double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; }

std::vector<Dim> randomDims(std::mt19937_64& rng, int64_t max_points) {
  static const char* const kNames[] = {"batch", "seq", "hidden", "heads"};
  static const int64_t kSizes[] = {1, 1, 2, 3, 5, 7, 8, 13, 16, 17, 31, 33, 64, 100};
  for (;;) {
    std::vector<Dim> dims;
    int rank = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < rank; ++k) dims.push_back({kNames[k], pick(rng, kSizes)});
    if (chance(rng, 0.06)) dims[rng() % dims.size()].size = 0;
    int64_t points = 1;
    for (const Dim& d : dims) points *= std::max<int64_t>(d.size, 1);
    if (points <= max_points) return dims;
  }
}

// A random subset of `dims` in a random order (a scalar now and then).
Shape randomShape(std::mt19937_64& rng, const std::vector<Dim>& dims) {
  Shape s;
  if (chance(rng, 0.1)) return s;
  for (const Dim& d : dims)
    if (chance(rng, 0.7)) s.dims.push_back(d);
  if (s.dims.empty()) s.dims.push_back(dims[rng() % dims.size()]);
  std::shuffle(s.dims.begin(), s.dims.end(), rng);
  return s;
}

float randomConstant(std::mt19937_64& rng) {
  static const float kConstants[] = {0.5f, 2.0f, -1.0f, 0.0f, 1e-3f, 3.0f, 1e-40f, INFINITY, NAN, 0.044715f};
  return pick(rng, kConstants);
}

}  // namespace

RandomCase randomCase(uint64_t seed, int64_t max_points) {
  std::mt19937_64 rng(seed);
  std::vector<Dim> dims = randomDims(rng, max_points);
  RandomCase c{Region("random" + std::to_string(seed)), {}};
  Region& r = c.region;
  std::vector<int> values;  // the f32 nodes so far
  int inputs = 1 + static_cast<int>(rng() % 3);
  for (int k = 0; k < inputs; ++k) values.push_back(r.input("in" + std::to_string(k), randomShape(rng, dims)));

  // Operands favour the newest value, so chains grow deep.
  auto operand = [&] { return chance(rng, 0.5) ? values.back() : values[rng() % values.size()]; };
  std::vector<int> flags;  // Bool results: outputs, never operands
  int ops = 2 + static_cast<int>(rng() % 9);
  for (int k = 0; k < ops; ++k) {
    int x = operand();
    const Shape& xs = r.node(x).shape;
    switch (rng() % 10) {
      case 0: case 1: case 2: case 3:
        values.push_back(r.unary(pick(rng, kAllUnaryFns), x));
        break;
      case 4: case 5: case 6: {
        static const BinaryFn kArith[] = {BinaryFn::Add, BinaryFn::Sub, BinaryFn::Mul, BinaryFn::Div};
        int y = chance(rng, 0.2) ? r.constant(randomConstant(rng)) : operand();
        if (chance(rng, 0.5)) std::swap(x, y);
        values.push_back(r.binary(pick(rng, kArith), x, y));
        break;
      }
      case 7: {
        static const BinaryFn kCompare[] = {BinaryFn::Eq, BinaryFn::Ne, BinaryFn::Lt,
                                            BinaryFn::Le, BinaryFn::Gt, BinaryFn::Ge};
        flags.push_back(r.binary(pick(rng, kCompare), x, operand()));
        break;
      }
      case 8:
        if (xs.rank() > 0) values.push_back(r.reduce(pick(rng, kAllReduceFns), x, xs.dims[rng() % xs.rank()].name));
        break;
      case 9:
        if (xs.rank() > 0) {
          const std::string& dim = xs.dims[rng() % xs.rank()].name;
          values.push_back(chance(rng, 0.5) ? r.softmax(x, dim) : r.logSoftmax(x, dim));
        }
        break;
    }
  }
  r.output("out", values.back());
  for (size_t k = 0; k + 1 < values.size(); ++k)
    if (r.node(values[k]).kind != Kind::Input && chance(rng, 0.2)) r.output("extra" + std::to_string(k), values[k]);
  for (int f : flags) r.output("flag" + std::to_string(f), f);

  static const double kSpecial[] = {0.0, 0.02, 0.1, 0.3};
  for (int id : r.inputs())
    c.inputs.push_back(randomValues(r.node(id).shape.elements().value_or(0), rng, pick(rng, kSpecial)));
  return c;
}

}  // namespace dtl::codegen::testing
