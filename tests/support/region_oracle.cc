// The JIT-versus-reference oracle of region_oracle.h.
#include "tests/support/region_oracle.h"

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

#include "compiler/codegen/jit_x86.h"
#include "runtime/kernels/reference/elementwise.h"
#include "runtime/kernels/reference/reduce.h"

namespace dtl::codegen::testing {

namespace ref = dtl::rt::ref;

namespace {

constexpr double kU = 0x1p-24;  // f32 unit roundoff

ref::Binary refBinary(BinaryFn fn) {
  switch (fn) {
    case BinaryFn::Add: return ref::Binary::Add;
    case BinaryFn::Sub: return ref::Binary::Sub;
    case BinaryFn::Mul: return ref::Binary::Mul;
    case BinaryFn::Div: return ref::Binary::Div;
    case BinaryFn::Eq: return ref::Binary::Eq;
    case BinaryFn::Ne: return ref::Binary::Ne;
    case BinaryFn::Lt: return ref::Binary::Lt;
    case BinaryFn::Le: return ref::Binary::Le;
    case BinaryFn::Gt: return ref::Binary::Gt;
    case BinaryFn::Ge: return ref::Binary::Ge;
  }
  return ref::Binary::Add;
}

ref::Tensor tensorOf(const Shape& s, const Values& v) {
  return ref::Tensor::fromValues(s, std::vector<double>(v.begin(), v.end()));
}

int64_t extentOf(const Region& r, int id) {
  const RegionNode& n = r.node(id);
  const Shape& in = r.node(n.a).shape;
  return in.dims[static_cast<size_t>(in.find(n.dim))].size;
}

// Node `id` (not an input) by the reference kernels from its operands' tensors.
ref::Tensor referenceNode(const Region& r, int id, const std::vector<ref::Tensor>& at) {
  const RegionNode& n = r.node(id);
  ref::Tensor y;
  switch (n.kind) {
    case Kind::Input: break;
    case Kind::Const: y = ref::Tensor::scalar(n.value); break;
    case Kind::Unary: y = ref::unary(*ref::parseUnary(fnName(n.unary)), at[static_cast<size_t>(n.a)]); break;
    case Kind::Binary:
      y = ref::binary(refBinary(n.binary), at[static_cast<size_t>(n.a)], at[static_cast<size_t>(n.b)]);
      break;
    case Kind::UnaryGrad:  // the reference takes x and dy of one shape: broadcast both to the node's
      y = ref::unaryBackward(*ref::parseUnary(fnName(n.unary)), ref::alignTo(at[static_cast<size_t>(n.a)], n.shape),
                             ref::alignTo(at[static_cast<size_t>(n.b)], n.shape));
      break;
    case Kind::Select: {
      const ref::Tensor &c = at[static_cast<size_t>(n.a)], &t = at[static_cast<size_t>(n.b)],
                        &f = at[static_cast<size_t>(n.c)];
      std::vector<int64_t> oc = ref::offsetsIn(c.shape, n.shape), ot = ref::offsetsIn(t.shape, n.shape),
                           of = ref::offsetsIn(f.shape, n.shape);
      y = ref::Tensor::zeros(n.shape);
      for (size_t k = 0; k < y.f.size(); ++k) y.f[k] = c.i[static_cast<size_t>(oc[k])] ? t.f[static_cast<size_t>(ot[k])] : f.f[static_cast<size_t>(of[k])];
      break;
    }
    case Kind::Reduce: {
      const ref::Tensor& x = at[static_cast<size_t>(n.a)];
      switch (n.reduce) {
        case ReduceFn::Sum: y = ref::reduceSum(x, {n.dim}); break;
        case ReduceFn::Mean: y = ref::reduceMean(x, {n.dim}); break;
        case ReduceFn::Max:
          if (extentOf(r, id) == 0) {  // the region's rule; the reference refuses this
            y = ref::Tensor::zeros(n.shape);
            for (double& v : y.f) v = -std::numeric_limits<double>::infinity();
          } else {
            y = ref::reduceMax(x, {n.dim});
          }
          break;
      }
      break;
    }
  }
  return y;
}

std::string floatText(double v) {
  char s[64];
  std::snprintf(s, sizeof s, "%.9g", v);
  return s;
}

std::string opName(const RegionNode& n) {
  switch (n.kind) {
    case Kind::Unary: return fnName(n.unary);
    case Kind::Binary: return fnName(n.binary);
    case Kind::Reduce: return fnName(n.reduce);
    case Kind::UnaryGrad: return std::string(fnName(n.unary)) + "_grad";
    case Kind::Select: return "select";
    case Kind::Input: return "input";
    case Kind::Const: return "const";
  }
  return "";
}

// The first few problems, one line each, and how many there were.
struct Problems {
  int max = 5;
  int count = 0;
  std::string lines;
  void add(const std::string& what) {
    if (count++ < max) lines += "  " + what + "\n";
  }
};

// Node `id`'s JIT values y against the reference of that node on `at`
// (its operands as the JIT computed them); returns the reference. A sum the
// kernel plan folds over a chain of sums (kernel_plan.h, step 5) is one sum
// of the chain's operand over all its dims: checked as that, n their product.
ref::Tensor checkNode(const Region& r, int id, const Values& y, const std::vector<ref::Tensor>& at, Stats* stats,
                      Problems* problems, const FoldedSum* folded) {
  const RegionNode& n = r.node(id);
  if (folded && folded->dims.size() < 2) folded = nullptr;  // a sum of its own operand: the usual check
  const ref::Tensor& summed = at[static_cast<size_t>(folded ? folded->operand : n.a)];
  int64_t extent = n.kind == Kind::Reduce ? extentOf(r, id) : 0;
  std::vector<std::string> dims = {n.dim};
  if (folded) {
    dims = folded->dims;
    extent = 1;
    for (const std::string& d : dims) extent *= summed.shape.dims[static_cast<size_t>(summed.shape.find(d))].size;
  }
  ref::Tensor want = folded ? ref::reduceSum(summed, dims) : referenceNode(r, id, at);
  std::string op = opName(n);
  if (want.shape != n.shape) {
    problems->add("%" + std::to_string(id) + " (" + op + "): the reference's shape " + want.shape.str() +
                  " differs from the region's " + n.shape.str());
    return want;
  }
  ref::Tensor abs_sum;
  if (n.kind == Kind::Reduce && n.reduce != ReduceFn::Max) {
    ref::Tensor finite_abs = ref::unary(ref::Unary::Abs, summed);
    for (double& v : finite_abs.f) v = std::isfinite(v) ? v : 0.0;
    abs_sum = ref::reduceSum(finite_abs, dims);
  }
  ref::Tensor dy, slope;  // a gradient bounded in units of u·|dy|: dy and f'(x) at each element
  if (n.kind == Kind::UnaryGrad && gradUnitsBound(n.unary) > 0) {
    dy = ref::alignTo(at[static_cast<size_t>(n.b)], n.shape);
    ref::Tensor ones = ref::Tensor::zeros(n.shape);
    for (double& v : ones.f) v = 1.0;
    slope = ref::unaryBackward(*ref::parseUnary(fnName(n.unary)), ref::alignTo(at[static_cast<size_t>(n.a)], n.shape), ones);
  }
  for (size_t e = 0; e < y.size(); ++e) {
    bool ok = true;
    std::string why;
    if (n.dtype == DType::Bool) {
      ok = y[e] == static_cast<float>(want.i[e]);
    } else {
      double r_e = want.f[e];
      stats->nonfinite += !std::isfinite(r_e);
      if (n.kind == Kind::Reduce && n.reduce != ReduceFn::Max) {
        double ratio;
        ok = withinSumBound(y[e], r_e, abs_sum.f[e], extent, n.reduce == ReduceFn::Mean, &ratio);
        double& worst = stats->max_bound_ratio[op];
        worst = std::max(worst, ratio);
        why = " (Σ|x| = " + floatText(abs_sum.f[e]) + ", n = " + std::to_string(extent) + (folded ? ", folded" : "") + ")";
      } else if (double grad_bound = n.kind == Kind::UnaryGrad ? gradUnitsBound(n.unary) : 0; grad_bound > 0) {
        double units;
        ok = withinGradUnits(y[e], r_e, static_cast<float>(dy.f[e]), slope.f[e], grad_bound, &units);
        double& worst = stats->max_dy_units[op];
        worst = std::max(worst, units);
        why = " (dy " + floatText(dy.f[e]) + ", f' " + floatText(slope.f[e]) + ": " + floatText(units) +
              " units of u·|dy|, bound " + floatText(grad_bound) + ")";
      } else if (double units_bound = n.kind == Kind::Unary ? operandUnitsBound(n.unary) : 0; units_bound > 0) {
        double units;
        ok = withinOperandUnits(y[e], r_e, static_cast<float>(at[static_cast<size_t>(n.a)].f[e]), units_bound, &units);
        double& worst = stats->max_operand_units[op];
        worst = std::max(worst, units);
        why = " (" + floatText(units) + " units of u·|x|, bound " + floatText(units_bound) + ")";
      } else {
        int64_t bound = n.kind == Kind::Unary       ? ulpBound(n.unary)
                        : n.kind == Kind::Binary    ? ulpBound(n.binary)
                        : n.kind == Kind::UnaryGrad ? gradUlpBound(n.unary)
                                                    : 0;  // select: exact
        int64_t ulps;
        ok = withinUlps(y[e], r_e, bound, &ulps);
        int64_t& worst = stats->max_ulps[op];
        worst = std::max(worst, ulps);
        why = " (" + std::to_string(ulps) + " ulps, bound " + std::to_string(bound) + ")";
      }
    }
    stats->values += 1;
    if (!ok)
      problems->add("%" + std::to_string(id) + " (" + op + ") element " + std::to_string(e) + ": got " +
                    floatText(y[e]) + ", reference " +
                    floatText(n.dtype == DType::Bool ? static_cast<double>(want.i[e]) : want.f[e]) + why);
  }
  return want;
}

}  // namespace

// Elementwise: see the header. Returns the distance in *ulps (0 for NaN/inf matches).
bool withinUlps(float y, double r, int64_t bound, int64_t* ulps) {
  *ulps = 0;
  if (std::isnan(r)) return std::isnan(y);
  if (std::isinf(r)) return y == static_cast<float>(r);
  if (std::isnan(y)) return false;
  *ulps = ulpDistance(y, static_cast<float>(r));
  return *ulps <= bound;
}

// gelu, gelu_tanh: see the header. *units: |y − r| / (u·|x| + 2⁻¹⁴⁹).
bool withinOperandUnits(float y, double r, float x, double bound, double* units) {
  *units = 0;
  if (std::isnan(r)) return std::isnan(y);
  if (std::isinf(r)) return y == static_cast<float>(r);
  if (!std::isfinite(y)) return false;
  *units = std::fabs(static_cast<double>(y) - r) / (kU * std::fabs(static_cast<double>(x)) + 0x1p-149);
  return *units <= bound;
}

// A gradient: see gradUnitsBound in the header. *units: |y − r| / (u·|dy| + 2⁻¹⁴⁹).
bool withinGradUnits(float y, double r, float dy, double slope, double bound, double* units) {
  *units = 0;
  const double scale = kU * std::fabs(static_cast<double>(dy)) + 0x1p-149;
  if (std::isnan(r)) return std::isnan(y);
  if (std::isinf(r)) {  // an infinite dy (the slope is finite): inf · s̃, NaN where s̃ may be 0
    if (y == static_cast<float>(r)) return true;
    return !std::isfinite(y) && std::fabs(slope) <= bound * kU;
  }
  if (std::isnan(y)) return false;
  if (std::isinf(y)) {  // an overflow: r must be within the bound of where f32 rounds to inf
    constexpr double kOverflow = 0x1p128 - 0x1p103;  // FLT_MAX + half an ulp
    *units = std::max(0.0, kOverflow - std::fabs(r)) / scale;
    return (y > 0) == (r > 0) && *units <= bound;
  }
  *units = std::fabs(static_cast<double>(y) - r) / scale;
  return *units <= bound;
}

// sum or mean of n terms whose finite ones have Σ|xᵢ| = abs_sum. *ratio: |err| / bound.
bool withinSumBound(float y, double r, double abs_sum, int64_t n, bool mean, double* ratio) {
  *ratio = 0;
  double nu = static_cast<double>(n) * kU;
  double gamma = nu / (1 - nu);
  // Where the finite terms reach FLT_MAX an f32 partial sum may overflow (the
  // double reference does not): then ±inf, or NaN once an inf term meets it.
  if (abs_sum * (1 + gamma) >= std::numeric_limits<float>::max() && !std::isfinite(y)) return true;
  if (std::isnan(r)) return std::isnan(y);
  if (std::isinf(r)) return y == static_cast<float>(r);
  if (!std::isfinite(y)) return false;
  double bound = gamma * abs_sum;  // every term is finite here
  if (mean) bound = bound / static_cast<double>(n) * (1 + kU) + kU * std::fabs(r) + 0x1p-149;
  double err = std::fabs(static_cast<double>(y) - r);
  *ratio = bound > 0 ? err / bound : (err == 0 ? 0 : INFINITY);
  return err <= bound;
}

// The largest error measured (CodegenVmath.SweepWithinBounds, 3·10⁷ inputs
// per fn, docs/compiler.md) over the x86 paths a host may take (AVX-512,
// AVX2, SSE; log and tanh through glibc 2.36's libmvec or, without it, its
// scalar libm; exp and erf inline, core/f32_math.h): the generator's f32
// formulas (emit_llvm.cc) against the reference's double ones, with a
// margin where the inline exp left a bound far above what it measures.
int64_t ulpBound(UnaryFn fn) {
  switch (fn) {
    case UnaryFn::Relu:
    case UnaryFn::Neg:
    case UnaryFn::Abs:
    case UnaryFn::Sqrt: return 0;   // exact, or IEEE's correctly rounded sqrt
    case UnaryFn::Rsqrt: return 1;  // the double formula rounded once (measured 0)
    case UnaryFn::Exp: return 2;  // measured 1 (3 with libmvec's expf)
    case UnaryFn::Log: return 4;
    case UnaryFn::Tanh: return 2;
    case UnaryFn::Sigmoid: return 4;
    case UnaryFn::Silu: return 8;
    case UnaryFn::Gelu:
    case UnaryFn::GeluTanh: return 0;  // bounded by operandUnitsBound
  }
  return 0;
}

double operandUnitsBound(UnaryFn fn) {
  switch (fn) {
    case UnaryFn::Gelu: return 2.2;      // measured 1.90 (2.54 with libmvec's erff)
    case UnaryFn::GeluTanh: return 2.4;  // measured 2.34
    default: return 0;
  }
}

// The largest errors measured (CodegenVmath.GradientSweepWithinBounds, docs/
// compiler.md) over the same paths.
// exp: measured 4, where e^(x/2) or e^(x/4) is used two or four times (12
// with libmvec's SSE expf).
int64_t gradUlpBound(UnaryFn fn) { return fn == UnaryFn::Exp ? 6 : 0; }

// Where f' cancels the error peaks: tanh' and sigmoid' where t or s is near
// ±1 or 1; silu' = s · (1 + x · (1 − s)) where 1 − s is a few u and x ≈ 17
// multiplies its error; gelu_tanh' where 1 − t² is and 0.5 · x · √(2/π) ·
// (1 + 0.134 · x²) ≈ 11 multiplies it (x ≈ 5.4).
double gradUnitsBound(UnaryFn fn) {
  switch (fn) {
    case UnaryFn::Gelu: return 3.4;       // measured 3.17 (3.83 with libmvec)
    case UnaryFn::GeluTanh: return 22;    // measured 21.5
    case UnaryFn::Silu: return 17.5;      // measured 17.3
    case UnaryFn::Tanh: return 3.3;       // measured 3.21
    case UnaryFn::Sigmoid: return 1.6;    // measured 1.50
    default: return 0;
  }
}

int64_t ulpDistance(float a, float b) {
  auto key = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, sizeof i);
    return i < 0 ? static_cast<int64_t>(std::numeric_limits<int32_t>::min()) - i : static_cast<int64_t>(i);
  };
  int64_t d = key(a) - key(b);
  return d < 0 ? -d : d;
}

std::vector<Values> jitOutputs(const Region& r, const std::vector<Values>& inputs, Stats* stats, std::string* error) {
  std::unique_ptr<JitKernel> k = compileX86(r, error);
  if (!k) return {};
  if (stats) {
    stats->compile_ms += k->compileMs();
    stats->kernels += 1;
  }
  const KernelPlan& plan = k->plan();
  if (static_cast<int>(inputs.size()) != plan.inputs) {
    *error = "region " + r.name() + " takes " + std::to_string(plan.inputs) + " inputs, given " +
             std::to_string(inputs.size());
    return {};
  }
  std::vector<const float*> in;
  for (int i = 0; i < plan.inputs; ++i) {
    const PlanBuffer& buf = plan.buffers[static_cast<size_t>(i)];
    if (static_cast<int64_t>(inputs[static_cast<size_t>(i)].size()) != buf.elements()) {
      *error = "input " + buf.name + " of region " + r.name() + " has " +
               std::to_string(inputs[static_cast<size_t>(i)].size()) + " values, its shape " + buf.shape.str();
      return {};
    }
    in.push_back(inputs[static_cast<size_t>(i)].data());
  }
  std::vector<Values> f(static_cast<size_t>(plan.outputs));
  std::vector<std::vector<uint8_t>> b(static_cast<size_t>(plan.outputs));
  std::vector<void*> out;
  for (int o = 0; o < plan.outputs; ++o) {
    const PlanBuffer& buf = plan.buffers[static_cast<size_t>(plan.inputs + o)];
    if (buf.dtype == DType::Bool) {
      b[static_cast<size_t>(o)].assign(static_cast<size_t>(buf.elements()), 7);  // neither 0 nor 1: must be written
      out.push_back(b[static_cast<size_t>(o)].data());
    } else {
      f[static_cast<size_t>(o)].assign(static_cast<size_t>(buf.elements()), 12345.0f);
      out.push_back(f[static_cast<size_t>(o)].data());
    }
  }
  k->run(in, out);
  for (int o = 0; o < plan.outputs; ++o)
    if (plan.buffers[static_cast<size_t>(plan.inputs + o)].dtype == DType::Bool)
      f[static_cast<size_t>(o)].assign(b[static_cast<size_t>(o)].begin(), b[static_cast<size_t>(o)].end());
  return f;
}

std::vector<std::vector<double>> runReference(const Region& r, const std::vector<Values>& inputs) {
  std::vector<ref::Tensor> at(r.nodes().size());
  size_t next_input = 0;
  for (size_t k = 0; k < r.nodes().size(); ++k) {
    const RegionNode& n = r.nodes()[k];
    at[k] = n.kind == Kind::Input ? tensorOf(n.shape, inputs[next_input++]) : referenceNode(r, static_cast<int>(k), at);
  }
  std::vector<std::vector<double>> out;
  for (const RegionOutput& o : r.outputs()) {
    const ref::Tensor& t = at[static_cast<size_t>(o.node)];
    out.push_back(t.floating() ? t.f : std::vector<double>(t.i.begin(), t.i.end()));
  }
  return out;
}

Region probeOf(const Region& r) {
  Region probe = r;
  for (size_t k = 0; k < r.nodes().size(); ++k) {
    Kind kind = r.nodes()[k].kind;
    if (kind != Kind::Input && kind != Kind::Const) probe.output("node" + std::to_string(k), static_cast<int>(k));
  }
  return probe;
}

namespace {

// compareWithReference's work; `found` collects the problems.
std::vector<Values> compareNodes(const Region& r, const std::vector<Values>& inputs, Stats* stats, Problems* found,
                                 const OracleOptions& options) {
  Region probe = probeOf(r);
  std::vector<int> probed(r.nodes().size(), -1);  // node → probe output index
  for (size_t k = 0, next = r.outputs().size(); k < r.nodes().size(); ++k) {
    Kind kind = r.nodes()[k].kind;
    if (kind != Kind::Input && kind != Kind::Const) probed[k] = static_cast<int>(next++);
  }
  const RegionRunner run = options.run ? options.run : RegionRunner(jitOutputs);
  std::string error;
  std::vector<Values> got = run(probe, inputs, stats, &error);
  const KernelPlan plan = planKernel(probe);
  if (!error.empty()) {
    found->add("the probe (every node an output) did not run: " + error);
    return {};
  }

  // Each node's JIT values as reference tensors, so each node is checked on its own operands.
  std::vector<ref::Tensor> at(r.nodes().size());
  size_t next_input = 0;
  for (size_t k = 0; k < r.nodes().size(); ++k) {
    const RegionNode& n = r.nodes()[k];
    int id = static_cast<int>(k);
    if (n.kind == Kind::Input) {
      at[k] = tensorOf(n.shape, inputs[next_input++]);
      continue;
    }
    if (n.kind == Kind::Const) {
      at[k] = referenceNode(r, id, at);
      continue;
    }
    Values& y = got[static_cast<size_t>(probed[k])];
    if (options.tamper) options.tamper(id, y);
    ref::Tensor want = checkNode(r, id, y, at, stats, found, plan.foldedSum(id));
    // Consumers see the JIT's values (rounded to f32), not the reference's.
    at[k] = n.dtype == DType::Bool ? want : tensorOf(n.shape, y);
  }

  // The region as given: its outputs are the probe's, bit for bit.
  std::vector<Values> plain = run(r, inputs, stats, &error);
  if (!error.empty()) {
    found->add("the region did not run: " + error);
    return {};
  }
  for (size_t o = 0; o < plain.size(); ++o) {
    const Values& p = got[o];
    for (size_t e = 0; e < plain[o].size(); ++e) {
      bool same = std::memcmp(&plain[o][e], &p[e], sizeof(float)) == 0 || (std::isnan(plain[o][e]) && std::isnan(p[e]));
      if (!same)
        found->add("output " + r.outputs()[o].name + " element " + std::to_string(e) + " is " + floatText(plain[o][e]) +
                  " fused but " + floatText(p[e]) + " with every node stored");
    }
  }
  return plain;
}

}  // namespace

std::vector<Values> compareWithReference(const Region& r, const std::vector<Values>& inputs, Stats* stats,
                                         std::string* report, const OracleOptions& options) {
  Stats unused;
  Problems found;
  found.max = options.max_problems;
  std::vector<Values> outputs = compareNodes(r, inputs, stats ? stats : &unused, &found, options);
  report->clear();
  if (found.count == 0) return outputs;
  *report = "region " + r.name() + ": " + std::to_string(found.count) + " problem(s)" +
            (found.count > found.max ? ", the first " + std::to_string(found.max) : "") + ":\n" + found.lines +
            printRegion(r);
  return outputs;
}

std::string formatStats(const Stats& s) {
  std::string out;
  char line[160];
  for (const auto& [op, ulps] : s.max_ulps) {
    std::snprintf(line, sizeof line, "  %-10s max %lld ulps\n", op.c_str(), static_cast<long long>(ulps));
    out += line;
  }
  for (const auto& [op, units] : s.max_operand_units) {
    std::snprintf(line, sizeof line, "  %-10s max |err| / (u|x| + 2^-149) = %.3g\n", op.c_str(), units);
    out += line;
  }
  for (const auto& [op, units] : s.max_dy_units) {
    std::snprintf(line, sizeof line, "  %-10s max |err| / (u|dy| + 2^-149) = %.3g\n", op.c_str(), units);
    out += line;
  }
  for (const auto& [op, ratio] : s.max_bound_ratio) {
    std::snprintf(line, sizeof line, "  %-10s max |err| / (gamma_n sum|x|) = %.3g\n", op.c_str(), ratio);
    out += line;
  }
  std::snprintf(line, sizeof line,
                "  %lld values compared (%lld non-finite in the reference); %d kernels, %.1f ms compile each\n",
                static_cast<long long>(s.values), static_cast<long long>(s.nonfinite), s.kernels,
                s.kernels ? s.compile_ms / s.kernels : 0.0);
  return out + line;
}

}  // namespace dtl::codegen::testing
