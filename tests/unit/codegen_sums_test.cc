// Sums over a region's leading dim, and over several names (kernel_plan.h,
// step 5: deferred into per-chunk partials, combined in a tail): against the
// reference through the oracle (γₙ·Σ|x|, NaN and inf exact), with empty,
// unit, odd and multi-chunk sizes; and bitwise the same whichever threads
// run the chunks, in whichever order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <thread>

#include "compiler/codegen/emit_llvm.h"
#include "compiler/codegen/kernel_plan.h"
#include "core/f32_math.h"
#include "tests/unit/codegen_check.h"

namespace dtl::codegen::testing {
namespace {

enum class Sums { Leading, LeadingMean, BatchThenSeq, SeqThenBatch };

// dx = f'(x)·dy over [batch(, seq), d] and its sums; `tail`: values that read
// the sum (a scale, a sum over d) as a region's later nodes would.
Region biasGradient(Sums sums, const Shape& s, UnaryFn fn, bool dx_out, bool tail) {
  Region r("bias_grad");
  int x = r.input("x", s), dy = r.input("dy", s);
  int dx = r.unaryGrad(fn, x, dy);
  int db = -1;
  switch (sums) {
    case Sums::Leading: db = r.reduce(ReduceFn::Sum, dx, "batch"); break;
    case Sums::LeadingMean: db = r.reduce(ReduceFn::Mean, dx, "batch"); break;
    case Sums::BatchThenSeq: db = r.reduce(ReduceFn::Sum, r.reduce(ReduceFn::Sum, dx, "batch"), "seq"); break;
    case Sums::SeqThenBatch: db = r.reduce(ReduceFn::Sum, r.reduce(ReduceFn::Sum, dx, "seq"), "batch"); break;
  }
  if (dx_out) r.output("dx", dx);
  r.output("db", db);
  if (tail) {
    r.output("db_scaled", r.binary(BinaryFn::Mul, db, r.constant(0.5f)));
    r.output("db_total", r.reduce(ReduceFn::Sum, db, "d"));
  }
  return r;
}

TEST(CodegenSums, DeferredSumsMatchTheReference) {
  std::mt19937_64 rng(7);
  const int64_t batches[] = {0, 1, 7, 37, 300, 2000}, seqs[] = {1, 5, 13}, ds[] = {1, 3, 31, 64};
  const UnaryFn fns[] = {UnaryFn::Relu, UnaryFn::Gelu, UnaryFn::GeluTanh, UnaryFn::Tanh};
  Stats stats;
  int multi_chunk = 0, folded_chains = 0, empty = 0;
  for (int c = 0; c < 80; ++c) {
    Sums sums = static_cast<Sums>(c % 4);
    const bool with_seq = sums == Sums::BatchThenSeq || sums == Sums::SeqThenBatch || c % 8 == 1;
    Shape s{{{"batch", batches[rng() % 6]}}};  // 2000 rows: several chunks over [batch, d] too
    if (with_seq) s.dims[0].size = std::min<int64_t>(s.dims[0].size, 300), s.dims.push_back({"seq", seqs[rng() % 3]});
    s.dims.push_back({"d", ds[rng() % 4]});
    if (c < 16) s.dims.front().size = with_seq ? 300 : 2000, s.dims.back().size = 64;  // several chunks
    Region r = biasGradient(sums, s, fns[rng() % 4], rng() % 2, rng() % 2);
    KernelPlan p = planKernel(r);
    ASSERT_EQ(p.split, "batch") << printRegion(r);
    ASSERT_EQ(p.folded.size(), 1u) << printRegion(r);
    multi_chunk += p.chunks > 1;
    folded_chains += p.folded[0].dims.size() == 2;
    empty += s.dims[0].size == 0;
    const int64_t n = s.elements().value_or(0);
    const double special = c % 3 == 0 ? 0.0 : 0.03;
    std::vector<Values> y = checkRegion(r, {randomValues(n, rng, special), randomValues(n, rng, special)}, &stats);
    if (HasFailure()) return;
  }
  EXPECT_GE(multi_chunk, 8);
  EXPECT_GE(folded_chains, 20);
  EXPECT_GE(empty, 3);
  std::printf("80 regions with deferred sums:\n%s", formatStats(stats).c_str());
}

// An empty batch: the sum is 0, the mean NaN (0/0), as the reference's.
TEST(CodegenSums, AnEmptyLeadingDimSumsToZero) {
  for (Sums sums : {Sums::Leading, Sums::LeadingMean}) {
    Region r = biasGradient(sums, Shape{{{"batch", 0}, {"d", 3}}}, UnaryFn::Relu, true, false);
    std::vector<Values> y = runJit(r, {Values{}, Values{}});
    ASSERT_EQ(y.size(), 2u);
    for (float v : y[1]) EXPECT_TRUE(sums == Sums::Leading ? v == 0.0f : std::isnan(v)) << v;
  }
}

// Every chunk's rows on two threads (interleaved) or in reverse order, then
// the tail: bitwise the kernel's own one-call run.
TEST(CodegenSums, ChunksGiveTheSameBitsOnAnyThreadInAnyOrder) {
  std::mt19937_64 rng(11);
  for (Sums sums : {Sums::Leading, Sums::BatchThenSeq, Sums::SeqThenBatch}) {
    const Shape s{{{"batch", 401}, {"seq", 9}, {"d", 33}}};
    Region r = biasGradient(sums, s, UnaryFn::Gelu, true, true);
    std::string error;
    std::unique_ptr<JitKernel> k = compileX86(r, &error);
    ASSERT_TRUE(k) << error;
    const KernelPlan& p = k->plan();
    ASSERT_GT(p.chunks, 2);
    const int64_t n = s.elements().value_or(0);
    Values x = randomValues(n, rng, 0.01), dy = randomValues(n, rng, 0.01);
    std::vector<Values> buffers;
    for (const PlanBuffer& b : p.buffers) buffers.emplace_back(static_cast<size_t>(std::max<int64_t>(b.elements(), 1)));
    buffers[0] = x;
    buffers[1] = dy;
    std::vector<void*> args;
    for (Values& b : buffers) args.push_back(b.data());
    auto rows = [&](int64_t c) { k->runRows(args.data(), c * p.chunk_rows, std::min(p.rows, (c + 1) * p.chunk_rows)); };
    for (int64_t c = 0; c < p.chunks; ++c) rows(c);
    k->runTail(args.data());
    std::vector<Values> once(buffers.begin() + p.inputs, buffers.begin() + p.inputs + p.outputs);

    for (int way = 0; way < 2; ++way) {
      for (int b = p.inputs; b < static_cast<int>(buffers.size()); ++b) std::fill(buffers[b].begin(), buffers[b].end(), NAN);
      if (way == 0) {
        std::thread even([&] { for (int64_t c = 0; c < p.chunks; c += 2) rows(c); });
        std::thread odd([&] { for (int64_t c = 1; c < p.chunks; c += 2) rows(c); });
        even.join();
        odd.join();
      } else {
        for (int64_t c = p.chunks; c-- > 0;) rows(c);
      }
      k->runTail(args.data());
      for (int o = 0; o < p.outputs; ++o)
        EXPECT_EQ(0, std::memcmp(once[o].data(), buffers[p.inputs + o].data(), once[o].size() * sizeof(float)))
            << "output " << p.buffers[p.inputs + o].name << (way == 0 ? " on two threads" : " in reverse order");
    }
  }
}

// A sum along a region's last dim adds in kSumLanes lanes (lane l: terms l,
// l + 16, …, in order), then the lanes as a halving tree (l + l + 8, then
// + 4, + 2, + 1), then the terms past the last whole 16 in order; a sum
// along another dim adds its terms in order. The order is the sum's alone:
// the same bits whether its terms are computed inside the sum's loop (exp
// inline, log and tanh calls: through libmvec, or plain libm, for which the
// generator offers a 16-lane variant of its own) or read from an input, on
// every x86 level the JIT takes (ctest runs this with -avx512f, without
// libmvec and on SSE too). With the reassoc flag this replaced, LLVM chose
// the order by the cost of the loop's body.
float laneSum(const float* terms, int64_t n) {
  float lanes[kSumLanes] = {};
  const int64_t whole = n / kSumLanes * kSumLanes;
  for (int64_t i = 0; i < whole; ++i) lanes[i % kSumLanes] += terms[i];
  for (int h = kSumLanes / 2; h >= 1; h /= 2)
    for (int l = 0; l < h; ++l) lanes[l] += lanes[l + h];
  float sum = lanes[0];
  for (int64_t i = whole; i < n; ++i) sum += terms[i];
  return sum;
}

// fn(x) as the JIT computes it, element by element (the sums' terms).
Values jitTerms(UnaryFn fn, const Shape& s, const Values& x) {
  Region r("terms");
  r.output("t", r.unary(fn, r.input("x", s)));
  std::string error;
  std::unique_ptr<JitKernel> k = compileX86(r, &error);
  EXPECT_TRUE(k) << error;
  Values t(x.size());
  if (k) k->run({x.data()}, {t.data()});
  return t;
}

TEST(CodegenSums, ASumsOrderIsFixedByTheSumAlone) {
  std::mt19937_64 rng(17);
  constexpr int64_t kB = 3, kJ = 37;  // b: the leading dim (split over threads; not summed here)
  for (UnaryFn fn : {UnaryFn::Exp, UnaryFn::Tanh, UnaryFn::Log}) {
    for (int64_t n : {1, 5, 15, 16, 17, 31, 128, 1003}) {
      const Shape s{{{"b", kB}, {"j", kJ}, {"i", n}}};
      Values x = randomValues(kB * kJ * n, rng, 0.0);
      for (float& v : x) v = fn == UnaryFn::Log ? std::fabs(v) + 0.5f : std::clamp(v, -30.0f, 30.0f);
      const Values terms = jitTerms(fn, s, x);
      for (bool inline_terms : {true, false}) {
        for (const std::string dim : {"i", "j"}) {
          Region r(std::string("order_") + fnName(fn) + "_" + dim + (inline_terms ? "_inline" : "_read"));
          int t = inline_terms ? r.unary(fn, r.input("x", s)) : r.input("t", s);
          r.output("sum", r.reduce(ReduceFn::Sum, t, dim));
          std::string error;
          std::unique_ptr<JitKernel> k = compileX86(r, &error);
          ASSERT_TRUE(k) << error;
          Values sums(static_cast<size_t>(dim == "i" ? kB * kJ : kB * n));
          k->run({inline_terms ? x.data() : terms.data()}, {sums.data()});
          for (size_t at = 0; at < sums.size(); ++at) {
            float want = 0.0f;
            if (dim == "i") {
              want = laneSum(terms.data() + at * n, n);
            } else {
              const int64_t b = static_cast<int64_t>(at) / n, i = static_cast<int64_t>(at) % n;
              for (int64_t j = 0; j < kJ; ++j) want += terms[(b * kJ + j) * n + i];
            }
            ASSERT_EQ(0, std::memcmp(&want, &sums[at], sizeof want))
                << r.name() << ", n = " << n << ", at " << at << ": jit " << sums[at] << ", expected " << want;
          }
        }
      }
    }
  }
}

// A deferred sum whose operand is itself a reduction (x = max over j) with
// an earlier phase of x's shape (the stored z = w - max_j(u), which a sum
// over k reads): the operand adds into its partial only once x's own
// phase has computed it, never in z's phase before it (found in review).
TEST(CodegenSums, AReductionOperandAddsIntoItsPartialAfterItsPhase) {
  std::mt19937_64 rng(13);
  Stats stats;
  for (int64_t b : {1, 7, 3000}) {
    const Shape bjk{{{"b", b}, {"j", 5}, {"k", 6}}}, bk{{{"b", b}, {"k", 6}}};
    Region r("reduce_operand");
    int u = r.input("u", bjk), w = r.input("w", bk), v = r.input("v", bjk);
    int z = r.binary(BinaryFn::Sub, w, r.reduce(ReduceFn::Max, u, "j"));
    r.output("r2", r.reduce(ReduceFn::Sum, z, "k"));
    int x = r.reduce(ReduceFn::Max, v, "j");
    r.output("s", r.reduce(ReduceFn::Sum, x, "b"));
    KernelPlan p = planKernel(r);
    ASSERT_EQ(p.folded.size(), 1u) << printRegion(r);
    ASSERT_EQ(p.folded[0].operand, x);
    for (size_t i = 0; i < p.phases.size(); ++i)
      if (std::count(p.phases[i].partials.begin(), p.phases[i].partials.end(), p.folded[0].node))
        for (size_t k = i + 1; k < p.phases.size(); ++k) EXPECT_NE(p.phases[k].reduction, x) << "phase " << i;
    const int64_t n = b * 30;
    checkRegion(r, {randomValues(n, rng, 0.02), randomValues(b * 6, rng, 0.02), randomValues(n, rng, 0.02)}, &stats);
  }
}

}  // namespace
}  // namespace dtl::codegen::testing
