// The generator's transcendentals (f32 formulas over inline exp and erf,
// core/f32_math.h, and libmvec's log and tanh, vector_math.h)
// against the reference over many inputs: the special values, random 32-bit
// patterns (every exponent, NaN payloads, denormals) and uniform values where
// the functions bend, over/underflow or cancel. Each element must be within
// the oracle's bound for its fn (region_oracle.h); the largest error seen and
// where are printed. In ctest 2^18 inputs per fn; for the measurement
// docs/compiler.md quotes, DTL_VMATH_SAMPLES=N (per fn) or DTL_VMATH_SWEEP=all
// (every f32 bit pattern, minutes per fn). Also: the oracle catches an error
// just past each elementwise bound.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "core/f32_math.h"
#include "runtime/kernels/reference/elementwise.h"
#include "tests/unit/codegen_check.h"

namespace dtl::codegen::testing {
namespace {

namespace ref = dtl::rt::ref;

constexpr int64_t kChunk = int64_t{1} << 20;

// The fns the generator computes through a libm/libmvec call, and rsqrt.
constexpr UnaryFn kTranscendentals[] = {UnaryFn::Exp,     UnaryFn::Log,  UnaryFn::Tanh,     UnaryFn::Sigmoid,
                                        UnaryFn::Silu,    UnaryFn::Gelu, UnaryFn::GeluTanh, UnaryFn::Rsqrt};

float bitsToFloat(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

// Chunk `k` of the samples: the special values first, then in turn random
// bit patterns, uniform in [−110, 110] (exp's and sigmoid's over/underflow)
// and uniform in [−12, 12] (where gelu cancels and tanh saturates).
void fillSamples(int64_t k, std::vector<float>& x) {
  std::mt19937_64 rng(static_cast<uint64_t>(k) * 7919 + 1);
  std::uniform_real_distribution<float> wide(-110.0f, 110.0f), narrow(-12.0f, 12.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    switch ((static_cast<size_t>(k) + i) % 3) {
      case 0: x[i] = bitsToFloat(static_cast<uint32_t>(rng())); break;
      case 1: x[i] = wide(rng); break;
      default: x[i] = narrow(rng); break;
    }
  }
  if (k == 0) {
    const float special[] = {NAN,     -NAN,   INFINITY, -INFINITY, 0.0f,   -0.0f,    1e-45f,   -1e-45f, 1e-40f,
                             FLT_MIN, FLT_MAX, -FLT_MAX, 88.72f,   88.73f, -87.34f,  -103.97f, -104.0f, 1e-20f,
                             -1e-20f, 9.0f,    -9.0f,    -5.0f,    -13.0f, 7e12f,    -7e12f,   1e30f,   -1e30f};
    std::copy(std::begin(special), std::end(special), x.begin());
  }
}

struct Worst {
  int64_t failures = 0;
  int64_t max_ulps = 0;
  int64_t max_normal_ulps = 0;  // where the reference is a normal f32 (not a denormal)
  double max_units = 0;
  float at = 0, dy = 0, jit = 0;
  double reference = 0;
};

// Checks y = fn(x) element by element against the reference's double formula.
void checkChunk(UnaryFn fn, const std::vector<float>& x, const std::vector<float>& y, Worst* w) {
  std::vector<double> xd(x.begin(), x.end());
  ref::Tensor r = ref::unary(*ref::parseUnary(fnName(fn)),
                             ref::Tensor::fromValues(Shape{{{"i", static_cast<int64_t>(x.size())}}}, xd));
  double units_bound = operandUnitsBound(fn);
  for (size_t i = 0; i < x.size(); ++i) {
    bool ok;
    bool worse = false;
    if (units_bound > 0) {
      double units;
      ok = withinOperandUnits(y[i], r.f[i], x[i], units_bound, &units);
      if (units > w->max_units) w->max_units = units, worse = true;
    } else {
      int64_t ulps;
      ok = withinUlps(y[i], r.f[i], ulpBound(fn), &ulps);
      if (ulps > w->max_ulps) w->max_ulps = ulps, worse = true;
      if (std::fabs(r.f[i]) >= FLT_MIN) w->max_normal_ulps = std::max(w->max_normal_ulps, ulps);
    }
    if (worse || (!ok && w->failures == 0)) w->at = x[i], w->jit = y[i], w->reference = r.f[i];
    w->failures += !ok;
  }
}

int64_t samplesPerFn(bool* every_float) {
  const char* sweep = std::getenv("DTL_VMATH_SWEEP");
  *every_float = sweep && std::string(sweep) == "all";
  if (*every_float) return int64_t{1} << 32;
  const char* n = std::getenv("DTL_VMATH_SAMPLES");
  return n ? std::max<int64_t>(1, std::atoll(n)) : int64_t{1} << 18;
}

TEST(CodegenVmath, SweepWithinBounds) {
  std::printf("vector math: %s\n", hostVectorMath().c_str());
  bool every_float = false;
  const int64_t total = samplesPerFn(&every_float);
  const int64_t chunk = std::min(total, kChunk);
  for (UnaryFn fn : kTranscendentals) {
    Region r(std::string("sweep_") + fnName(fn));
    r.output("y", r.unary(fn, r.input("x", Shape{{{"i", chunk}}})));
    std::string error;
    std::unique_ptr<JitKernel> k = compileX86(r, &error);
    ASSERT_TRUE(k) << error;
    std::vector<float> x(static_cast<size_t>(chunk)), y(static_cast<size_t>(chunk));
    Worst w;
    for (int64_t c = 0; c * chunk < total; ++c) {
      if (every_float)
        for (int64_t i = 0; i < chunk; ++i) x[static_cast<size_t>(i)] = bitsToFloat(static_cast<uint32_t>(c * chunk + i));
      else
        fillSamples(c, x);
      k->run({x.data()}, {y.data()});
      checkChunk(fn, x, y, &w);
    }
    if (operandUnitsBound(fn) > 0)
      std::printf("  %-10s max %.3g units of u|x| (bound %.3g)", fnName(fn), w.max_units, operandUnitsBound(fn));
    else
      std::printf("  %-10s max %lld ulps (bound %lld; %lld where the result is normal)", fnName(fn),
                  static_cast<long long>(w.max_ulps), static_cast<long long>(ulpBound(fn)),
                  static_cast<long long>(w.max_normal_ulps));
    std::printf(" at x = %.9g: jit %.9g, reference %.17g; %lld inputs\n", w.at, w.jit, w.reference,
                static_cast<long long>(((total + chunk - 1) / chunk) * chunk));
    EXPECT_EQ(w.failures, 0) << fnName(fn) << " past its bound, e.g. at x = " << w.at << ": jit " << w.jit
                             << ", reference " << w.reference;
  }
}

// The gradients the generator computes in f32 (emit_llvm.cc, derivativeF32 and expGrad).
constexpr UnaryFn kF32Gradients[] = {UnaryFn::Exp,  UnaryFn::Tanh, UnaryFn::Sigmoid,
                                     UnaryFn::Silu, UnaryFn::Gelu, UnaryFn::GeluTanh};

// dy for chunk `k`: random bit patterns (every magnitude, NaN, ±inf), ±1 and
// uniform in [−4, 4], with x's cases of fillSamples in turn against each,
// and every fourth group of x uniform in [−420, 200] instead.
// Chunk 0 starts with every pair of special x and special dy.
void fillGradSamples(int64_t k, std::vector<float>& x, std::vector<float>& dy) {
  fillSamples(k, x);
  std::mt19937_64 rng(static_cast<uint64_t>(k) * 104729 + 7);
  std::uniform_real_distribution<float> unit(-4.0f, 4.0f), far(-420.0f, 200.0f);
  for (size_t i = 0; i < dy.size(); ++i) {
    if ((i / 9) % 4 == 3) x[i] = far(rng);  // exp′'s halved and quartered e^x
    switch ((i / 3) % 3) {  // every x case meets every dy case
      case 0: dy[i] = bitsToFloat(static_cast<uint32_t>(rng())); break;
      case 1: dy[i] = rng() % 2 ? 1.0f : -1.0f; break;
      default: dy[i] = unit(rng); break;
    }
  }
  if (k == 0) {
    // exp's: its near/far split at ±87, where e^(x/2) leaves the normals and
    // reaches 0 or inf, and the reference's double e^x underflow and overflow
    // (−745.13318 and 709.78265 are the last floats where it is neither); the
    // others' saturation points.
    const float special_x[] = {NAN,       INFINITY,   -INFINITY, 0.0f,     -0.0f,   1e-45f,      -1e-40f,     FLT_MIN,
                               FLT_MAX,   -FLT_MAX,   87.0f,     87.00001f, -87.0f,  -87.00001f,  88.72f,      177.0f,
                               177.5f,    709.78265f, 709.78271f, 800.0f,   -174.7f, -175.0f,     -180.0f,     -207.9f,
                               -208.0f,   -745.13318f, -745.13324f, -800.0f, -1.2785f, -0.7518f,   9.0f,        -9.0f,
                               17.0f,     -19.0f,     -38.0f,    -5.5f,     7e12f,   -7e12f,      5e19f,       -5e19f,
                               1e30f,     -1e30f,     2.0f,      -3.0f};
    const float special_dy[] = {NAN,   INFINITY, -INFINITY, 0.0f,   -0.0f, 1e-45f, -1e-40f, FLT_MIN,
                                FLT_MAX, -FLT_MAX, 1e30f,  1e-30f, 1.0f,  -1.0f,  0.5f,    3e38f};
    size_t i = 0;
    for (float a : special_x)
      for (float b : special_dy) x[i] = a, dy[i] = b, ++i;
  }
}

// y = dy · f'(x) element by element against the reference's double formula.
void checkGradChunk(UnaryFn fn, const std::vector<float>& x, const std::vector<float>& dy, const std::vector<float>& y,
                    Worst* w) {
  const Shape s{{{"i", static_cast<int64_t>(x.size())}}};
  const ref::Unary op = *ref::parseUnary(fnName(fn));
  const ref::Tensor tx = ref::Tensor::fromValues(s, std::vector<double>(x.begin(), x.end()));
  const ref::Tensor r = ref::unaryBackward(op, tx, ref::Tensor::fromValues(s, std::vector<double>(dy.begin(), dy.end())));
  const ref::Tensor slope = ref::unaryBackward(op, tx, ref::Tensor::fromValues(s, std::vector<double>(x.size(), 1.0)));
  const double units_bound = gradUnitsBound(fn);
  for (size_t i = 0; i < x.size(); ++i) {
    bool ok;
    bool worse = false;
    if (units_bound > 0) {
      double units;
      ok = withinGradUnits(y[i], r.f[i], dy[i], slope.f[i], units_bound, &units);
      if (units > w->max_units) w->max_units = units, worse = true;
    } else {
      int64_t ulps;
      ok = withinUlps(y[i], r.f[i], gradUlpBound(fn), &ulps);
      if (ulps > w->max_ulps) w->max_ulps = ulps, worse = true;
      if (std::fabs(r.f[i]) >= FLT_MIN) w->max_normal_ulps = std::max(w->max_normal_ulps, ulps);
    }
    if (worse || (!ok && w->failures == 0)) w->at = x[i], w->dy = dy[i], w->jit = y[i], w->reference = r.f[i];
    w->failures += !ok;
  }
}

// The f32 gradients as the sweep above does the forward fns, over (x, dy)
// pairs; docs/compiler.md quotes DTL_VMATH_SAMPLES=30000000.
TEST(CodegenVmath, GradientSweepWithinBounds) {
  std::printf("vector math: %s\n", hostVectorMath().c_str());
  bool every_float = false;
  const int64_t total = samplesPerFn(&every_float);  // every_float: x takes every pattern, dy as usual
  const int64_t chunk = std::min(total, kChunk);
  for (UnaryFn fn : kF32Gradients) {
    Region r(std::string("sweep_grad_") + fnName(fn));
    int x_in = r.input("x", Shape{{{"i", chunk}}});
    r.output("dx", r.unaryGrad(fn, x_in, r.input("dy", Shape{{{"i", chunk}}})));
    std::string error;
    std::unique_ptr<JitKernel> k = compileX86(r, &error);
    ASSERT_TRUE(k) << error;
    std::vector<float> x(static_cast<size_t>(chunk)), dy(static_cast<size_t>(chunk)), y(static_cast<size_t>(chunk));
    Worst w;
    for (int64_t c = 0; c * chunk < total; ++c) {
      fillGradSamples(c, x, dy);
      if (every_float)
        for (int64_t i = 0; i < chunk; ++i) x[static_cast<size_t>(i)] = bitsToFloat(static_cast<uint32_t>(c * chunk + i));
      k->run({x.data(), dy.data()}, {y.data()});
      checkGradChunk(fn, x, dy, y, &w);
    }
    if (gradUnitsBound(fn) > 0)
      std::printf("  %-10s_grad max %.3g units of u|dy| (bound %.3g)", fnName(fn), w.max_units, gradUnitsBound(fn));
    else
      std::printf("  %-10s_grad max %lld ulps (bound %lld; %lld where the result is normal)", fnName(fn),
                  static_cast<long long>(w.max_ulps), static_cast<long long>(gradUlpBound(fn)),
                  static_cast<long long>(w.max_normal_ulps));
    std::printf(" at x = %.9g, dy = %.9g: jit %.9g, reference %.17g; %lld inputs\n", w.at, w.dy, w.jit, w.reference,
                static_cast<long long>(((total + chunk - 1) / chunk) * chunk));
    EXPECT_EQ(w.failures, 0) << fnName(fn) << "_grad past its bound, e.g. at x = " << w.at << ", dy = " << w.dy
                             << ": jit " << w.jit << ", reference " << w.reference;
  }
}

// The loop calls the vector variant of the host's width (or, without
// libmvec, plain libm), and the shim that computes the remainder is there;
// so do the gradients computed in f32. (exp and erf are inline: below.)
TEST(CodegenVmath, LoopsCallTheHostsVectorVariant) {
  const std::string vm = hostVectorMath();
  const Shape s{{{"rows", 5}, {"i", 1003}}};
  for (UnaryFn fn : {UnaryFn::Log, UnaryFn::Tanh, UnaryFn::GeluTanh}) {
    for (bool grad : {false, true}) {
      if (grad && fn == UnaryFn::Log) continue;  // 1/x in double: no call
      Region r(std::string(grad ? "vector_grad_" : "vector_") + fnName(fn));
      int x = r.input("x", s);
      r.output("y", grad ? r.unaryGrad(fn, x, r.input("dy", s)) : r.unary(fn, x));
      const std::string ir = x86Ir(r, /*optimised=*/true);
      const std::string name = fn == UnaryFn::Log ? "logf" : "tanhf";
      if (vm.rfind("libmvec ", 0) == 0) {
        const std::string prefix = vm.substr(8, vm.find(' ', 8) - 8);  // "_ZGVeN16v_"
        const std::string lanes = prefix.substr(6, prefix.size() - 8);  // "16"
        EXPECT_NE(ir.find("call <" + lanes + " x float> @" + prefix + name + "("), std::string::npos) << vm << "\n" << ir;
        EXPECT_NE(ir.find("@dtl_vm_" + name + "("), std::string::npos) << "the remainder's shim\n" << ir;
      } else {  // libm, and the 16-lane variant a sum's forced width needs, made of its calls
        EXPECT_NE(ir.find("@" + name + "("), std::string::npos) << vm << "\n" << ir;
        EXPECT_EQ(ir.find("@_ZGV"), std::string::npos) << vm << "\n" << ir;
        EXPECT_NE(ir.find("@dtl_vm16_" + name + "("), std::string::npos) << vm << "\n" << ir;
      }
    }
  }
}

// exp and erf are core/f32_math.h's polynomials inline (no call: nothing
// for a loop to spill around), bit for bit on the sweep's samples, NaN, ±inf
// and denormals included: exp is expF32, gelu is 0.5·x·(1 + erfF32(x/√2)),
// the formula of the fast kernel's gelu (elementwise.cc), which a GEMM's
// epilogue runs in the place of the JIT's gelu region.
TEST(CodegenVmath, ExpAndErfAreInlineAsCoreF32Math) {
  const Shape s{{{"i", kChunk}}};
  std::vector<float> x(static_cast<size_t>(kChunk)), y(x.size());
  fillSamples(0, x);
  for (UnaryFn fn : {UnaryFn::Exp, UnaryFn::Gelu}) {
    Region r(std::string("inline_") + fnName(fn));
    r.output("y", r.unary(fn, r.input("x", s)));
    const std::string ir = x86Ir(r, /*optimised=*/true);
    for (const char* call : {"@expf", "@erff", "_ZGV", "@dtl_vm_"}) EXPECT_EQ(ir.find(call), std::string::npos) << call;
    EXPECT_NE(ir.find("@llvm.fma."), std::string::npos) << ir;
    std::string error;
    std::unique_ptr<JitKernel> k = compileX86(r, &error);
    ASSERT_TRUE(k) << error;
    k->run({x.data()}, {y.data()});
    int64_t differ = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const float v = x[i];
      const float want = fn == UnaryFn::Exp ? f32math::expF32(v)
                                            : 0.5f * v * (1.0f + f32math::erfF32(v * 0.7071067811865476f));
      if (std::memcmp(&want, &y[i], sizeof want) != 0 && !(std::isnan(want) && std::isnan(y[i])))
        EXPECT_LT(differ++, 3) << fnName(fn) << "(" << v << "): jit " << y[i] << ", C++ " << want;
    }
    EXPECT_EQ(differ, 0) << fnName(fn);
  }
}

// Every host function realigns its stack: a loop that calls libmvec keeps
// 64-byte vectors on the stack across each call, and on a stack aligned to
// the ABI's 16 bytes their alignment (so whether each spill splits over two
// cache lines) depended on the caller's depth: the GELU gradient ran 1.8x
// slower from some call paths (docs/compiler.md, "Aligned spills").
TEST(CodegenVmath, FunctionsRealignTheirStackForVectorSpills) {
  const Shape s{{{"rows", 5}, {"i", 1003}}};
  Region r("spills");
  int x = r.input("x", s);
  r.output("y", r.unaryGrad(UnaryFn::GeluTanh, x, r.input("dy", s)));  // tanhf: a libmvec call
  const std::string ir = x86Ir(r, /*optimised=*/true);
  int defined = 0;
  for (size_t at = ir.find("\ndefine "); at != std::string::npos; at = ir.find("\ndefine ", at + 1)) {
    const std::string line = ir.substr(at + 1, ir.find('\n', at + 1) - at - 1);
    const size_t hash = line.rfind(" #");
    ASSERT_NE(hash, std::string::npos) << line;
    const std::string group = line.substr(hash + 1, line.find(' ', hash + 1) - hash - 1);  // "#3"
    const size_t attrs = ir.find("attributes " + group + " = {");
    ASSERT_NE(attrs, std::string::npos) << group << "\n" << ir;
    const std::string body = ir.substr(attrs, ir.find('}', attrs) - attrs);
    EXPECT_NE(body.find("\"stackrealign\""), std::string::npos) << line << "\n" << body;
    ++defined;
  }
  EXPECT_GE(defined, 1) << ir;
}

// A value of fn at x just past its bound (first = just inside it), as a
// tampered probe value would be.
std::pair<float, float> justInsideAndPast(UnaryFn fn, float x, double reference) {
  float inside = static_cast<float>(reference), past = inside;
  if (double units_bound = operandUnitsBound(fn); units_bound > 0) {
    double units = 0;
    while (withinOperandUnits(past, reference, x, units_bound, &units)) inside = past, past = std::nextafter(past, INFINITY);
    return {inside, past};
  }
  for (int64_t k = 0; k <= ulpBound(fn); ++k) inside = past, past = std::nextafter(past, INFINITY);
  return {inside, past};
}

TEST(CodegenCheck, CatchesAnErrorJustPastEachUnaryBound) {
  const Values x = {0.3f, -1.7f, 2.5f, -4.0f, 0.75f};
  for (UnaryFn fn : kAllUnaryFns) {
    Region r(std::string("tamper_") + fnName(fn));
    r.output("y", r.unary(fn, r.input("x", Shape{{{"i", static_cast<int64_t>(x.size())}}})));
    std::vector<double> xd(x.begin(), x.end());
    ref::Tensor want = ref::unary(*ref::parseUnary(fnName(fn)), ref::Tensor::fromValues(Shape{{{"i", 5}}}, xd));
    for (size_t e = 0; e < x.size(); ++e) {
      if (fn == UnaryFn::Log || fn == UnaryFn::Sqrt || fn == UnaryFn::Rsqrt) {
        if (x[e] < 0) continue;  // NaN: exact
      }
      auto [inside, past] = justInsideAndPast(fn, x[e], want.f[e]);
      for (bool over : {false, true}) {
        OracleOptions o;
        o.tamper = [&, e, over, inside = inside, past = past](int id, Values& v) {
          if (id == 1) v[e] = over ? past : inside;
        };
        std::string report;
        compareWithReference(r, {x}, nullptr, &report, o);
        std::string needle = "%1 (" + std::string(fnName(fn)) + ") element " + std::to_string(e);
        if (over)
          EXPECT_NE(report.find(needle), std::string::npos) << fnName(fn) << " at " << x[e] << " set to " << past;
        else
          EXPECT_EQ(report.find(needle), std::string::npos) << fnName(fn) << " at " << x[e] << ":\n" << report;
      }
    }
  }
}

// The same for the f32 gradients: a value just inside each bound passes, the
// next float past it is reported.
TEST(CodegenCheck, CatchesAnErrorJustPastEachGradientBound) {
  const Values x = {0.3f, -1.7f, 2.5f, -4.0f, 0.75f}, dy = {1.5f, -0.25f, 3.0f, 1e-3f, -2.0f};
  const Shape s{{{"i", static_cast<int64_t>(x.size())}}};
  for (UnaryFn fn : kF32Gradients) {
    Region r(std::string("tamper_grad_") + fnName(fn));
    int xi = r.input("x", s);
    r.output("dx", r.unaryGrad(fn, xi, r.input("dy", s)));
    const ref::Unary op = *ref::parseUnary(fnName(fn));
    const ref::Tensor tx = ref::Tensor::fromValues(s, std::vector<double>(x.begin(), x.end()));
    const ref::Tensor want = ref::unaryBackward(op, tx, ref::Tensor::fromValues(s, std::vector<double>(dy.begin(), dy.end())));
    const ref::Tensor slope = ref::unaryBackward(op, tx, ref::Tensor::fromValues(s, std::vector<double>(x.size(), 1.0)));
    for (size_t e = 0; e < x.size(); ++e) {
      float inside = static_cast<float>(want.f[e]), past = inside;
      if (double bound = gradUnitsBound(fn); bound > 0) {
        double units = 0;
        while (withinGradUnits(past, want.f[e], dy[e], slope.f[e], bound, &units))
          inside = past, past = std::nextafter(past, INFINITY);
      } else {
        for (int64_t k = 0; k <= gradUlpBound(fn); ++k) inside = past, past = std::nextafter(past, INFINITY);
      }
      for (bool over : {false, true}) {
        OracleOptions o;
        o.tamper = [&, e, over, inside = inside, past = past](int id, Values& v) {
          if (id == 2) v[e] = over ? past : inside;
        };
        std::string report;
        compareWithReference(r, {x, dy}, nullptr, &report, o);
        const std::string needle = "%2 (" + std::string(fnName(fn)) + "_grad) element " + std::to_string(e);
        if (over)
          EXPECT_NE(report.find(needle), std::string::npos) << fnName(fn) << "_grad at " << x[e] << " set to " << past;
        else
          EXPECT_EQ(report.find(needle), std::string::npos) << fnName(fn) << "_grad at " << x[e] << ":\n" << report;
      }
    }
  }
}

}  // namespace
}  // namespace dtl::codegen::testing
