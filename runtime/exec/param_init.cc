#include "runtime/exec/param_init.h"

#include "core/hash.h"

#include <cmath>

namespace dtl::rt {

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double uniform01(uint64_t& s) { return static_cast<double>(splitmix64(s) >> 11) * 0x1.0p-53; }

double normal(uint64_t& s) {
  double u1 = uniform01(s), u2 = uniform01(s);
  if (u1 < 1e-300) u1 = 1e-300;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

double arg(const ParamSpec& p, const char* name, double fallback) {
  auto it = p.init_args.find(name);
  return it == p.init_args.end() ? fallback : it->second;
}

}  // namespace

std::vector<float> initParam(const ParamSpec& p, uint64_t seed) {
  int64_t n = p.shape.elements().value_or(0);
  std::vector<float> out(static_cast<size_t>(n), 0.0f);
  uint64_t state = fnv1a(p.path, seed);
  double fan_in = 1, fan_out = 1;
  for (size_t i = static_cast<size_t>(p.stack_dims); i < p.shape.dims.size(); ++i)
    (i == static_cast<size_t>(p.stack_dims) ? fan_in : fan_out) *= static_cast<double>(p.shape.dims[i].size);
  if (p.shape.dims.size() == static_cast<size_t>(p.stack_dims) + 1) fan_out = fan_in;
  if (p.init == "ones") {
    std::fill(out.begin(), out.end(), 1.0f);
  } else if (p.init == "normal") {
    double sd = arg(p, "std", 1.0), mean = arg(p, "mean", 0.0);
    for (float& v : out) v = static_cast<float>(mean + sd * normal(state));
  } else if (p.init == "uniform") {
    double lo = arg(p, "lo", 0.0), hi = arg(p, "hi", 1.0);
    for (float& v : out) v = static_cast<float>(lo + (hi - lo) * uniform01(state));
  } else if (p.init == "xavier") {
    double bound = arg(p, "gain", 1.0) * std::sqrt(6.0 / (fan_in + fan_out));
    for (float& v : out) v = static_cast<float>(-bound + 2 * bound * uniform01(state));
  } else if (p.init == "kaiming") {
    double a = arg(p, "a", 0.0);
    double sd = std::sqrt(2.0 / (1.0 + a * a)) / std::sqrt(fan_in);
    for (float& v : out) v = static_cast<float>(sd * normal(state));
  }
  return out;  // zeros: already
}

}  // namespace dtl::rt
