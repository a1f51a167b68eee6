// Shared by backend_test.cc and backend_graph_test.cc: executor-style buffers,
// random fills, and running one node on a backend.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/exec/backend.h"
#include "runtime/kernels/fast/gemm.h"

namespace dtl::rt::testing {

// A tensor in executor memory (f32 or int32 storage) that owns its data.
struct Buf {
  Shape shape;
  DType dtype = DType::F32;
  std::vector<float> f;
  std::vector<int32_t> i;

  Buf() = default;
  Buf(Shape s, DType t) : shape(std::move(s)), dtype(t) {
    int64_t n = shape.elements().value();
    if (isFloat(t)) f.assign(static_cast<size_t>(n), 0.0f);
    else i.assign(static_cast<size_t>(n), 0);
  }
  int64_t size() const { return static_cast<int64_t>(isFloat(dtype) ? f.size() : i.size()); }
  TensorView view() {
    TensorView v;
    v.shape = shape;
    v.dtype = dtype;
    v.data = isFloat(dtype) ? static_cast<void*>(f.data()) : static_cast<void*>(i.data());
    v.elements = size();
    return v;
  }
};

inline Buf normal(const Shape& s, std::mt19937& rng, float scale = 1.0f) {
  Buf b(s, DType::F32);
  std::normal_distribution<float> d(0.0f, scale);
  for (float& v : b.f) v = d(rng);
  return b;
}

inline Buf ints(const Shape& s, std::mt19937& rng, int lo, int hi, DType t = DType::I32) {
  Buf b(s, t);
  std::uniform_int_distribution<int> d(lo, hi);
  for (int32_t& v : b.i) v = d(rng);
  return b;
}

struct Outcome {
  KernelStatus status;
  Buf out;
};

inline Outcome runNode(Backend& be, const ir::Node& n, std::vector<Buf*> in, const RunContext& ctx) {
  std::vector<TensorView> views;
  for (Buf* b : in) views.push_back(b->view());
  std::vector<const TensorView*> ptrs;
  for (const TensorView& v : views) ptrs.push_back(&v);
  Outcome o{{}, Buf(n.shape, n.dtype)};
  TensorView out = o.out.view();
  o.status = be.run(n, ptrs, out, ctx);
  return o;
}

// A node of several results (ir::Node::results): out[k] is result k. `fill` is
// written into every output first (NaN shows an element a kernel leaves unwritten).
struct Outcomes {
  KernelStatus status;
  std::vector<Buf> out;
};

inline Outcomes runResults(Backend& be, const ir::Node& n, std::vector<Buf*> in, const RunContext& ctx,
                           float fill = 0.0f) {
  std::vector<TensorView> views;
  for (Buf* b : in) views.push_back(b->view());
  std::vector<const TensorView*> ptrs;
  for (const TensorView& v : views) ptrs.push_back(&v);
  Outcomes o;
  for (int64_t k = 0; k <= static_cast<int64_t>(n.results.size()); ++k) {
    const ir::Result r = ir::resultOf(n, k);
    o.out.emplace_back(r.shape, r.dtype);
    o.out.back().f.assign(o.out.back().f.size(), fill);
  }
  std::vector<TensorView> outs;
  for (Buf& b : o.out) outs.push_back(b.view());
  std::vector<TensorView*> out_ptrs;
  for (TensorView& v : outs) out_ptrs.push_back(&v);
  o.status = be.runResults(n, ptrs, out_ptrs, ctx);
  return o;
}

// Node-by-node evaluation of a graph: `results[id]` holds node id's results
// (one for most nodes). Runs n (any node but Input, Param, Update) on `in`,
// its inputs' first results; a Result node (a view) takes its input's result
// `index` from `results`, a node of several results runs through runResults.
inline Outcomes evalNode(Backend& be, const ir::Node& n, std::vector<Buf*> in,
                         const std::vector<std::vector<Buf>>& results, const RunContext& ctx) {
  if (n.op == ir::Op::Result)
    return {{}, {results.at(static_cast<size_t>(n.inputs.at(0))).at(static_cast<size_t>(n.index))}};
  if (!n.results.empty()) return runResults(be, n, in, ctx);
  Outcome o = runNode(be, n, in, ctx);
  return {o.status, {std::move(o.out)}};
}

// Floats: |fast − ref| ≤ rtol·(|ref| + 0.1·max|ref|) + atol per element: the
// second term allows for cancellation in sums whose terms are of the tensor's
// scale, atol for tensors that are pure rounding noise (a gradient that is 0
// in exact arithmetic); the tests' data is O(1). NaN must match NaN.
// Integers: exactly equal.
inline ::testing::AssertionResult close(const Buf& fast, const Buf& ref, double rtol, double atol = 1e-6) {
  if (fast.size() != ref.size()) return ::testing::AssertionFailure() << "sizes differ";
  if (!isFloat(ref.dtype)) {
    for (size_t k = 0; k < ref.i.size(); ++k)
      if (fast.i[k] != ref.i[k])
        return ::testing::AssertionFailure() << "element " << k << ": " << fast.i[k] << " vs " << ref.i[k];
    return ::testing::AssertionSuccess();
  }
  double scale = 0;
  for (float v : ref.f)
    if (std::isfinite(v)) scale = std::max(scale, std::fabs(static_cast<double>(v)));
  for (size_t k = 0; k < ref.f.size(); ++k) {
    double a = fast.f[k], b = ref.f[k];
    if (std::isnan(b) != std::isnan(a)) return ::testing::AssertionFailure() << "element " << k << ": NaN mismatch";
    if (std::isnan(b) || a == b) continue;
    if (!(std::fabs(a - b) <= rtol * (std::fabs(b) + 0.1 * scale) + atol))
      return ::testing::AssertionFailure() << "element " << k << " of " << ref.shape.str() << ": fast " << a
                                           << " vs reference " << b << " (scale " << scale << ")";
  }
  return ::testing::AssertionSuccess();
}

// The row padding of a GEMM's B (fast::setGemmRowPadding: contract and
// contractBias) forced for a scope: the padded path is AMD's by default, and
// tested on every host.
struct RowPadding {
  explicit RowPadding(bool on) { fast::setGemmRowPadding(on); }
  ~RowPadding() { fast::setGemmRowPadding(std::nullopt); }
};

template <typename Case>
std::vector<std::pair<Case, bool>> withAndWithoutPadding(const std::vector<Case>& cases) {
  std::vector<std::pair<Case, bool>> all;
  for (bool pad : {false, true})
    for (const Case& c : cases) all.emplace_back(c, pad);
  return all;
}

}  // namespace dtl::rt::testing
