// A contraction with an epilogue (ir::Node::epilogue, compiler/codegen/
// fold_epilogues.cc): the fast backend (the bias through oneDNN's matmul
// post-op, anything else after the product with its own kernels) against the
// reference backend (the product, then each absorbed node as it ran alone),
// over the layouts the GEMM mapping handles, NaN and ±inf in every operand,
// an empty sum, two threads, and bitwise the same result run after run; relu
// on panels of C (several panels: gemm.h matmulBiasPanels), NaN, ±inf and −0
// as the reference's. And why relu is ours, not a oneDNN post-op: oneDNN's
// turns NaN into 0.
#include <oneapi/dnnl/dnnl.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <tuple>
#include <utility>

#include "runtime/kernels/fast/gemm.h"
#include "runtime/kernels/fast/kernels.h"
#include "tests/unit/backend_test_util.h"

namespace dtl::rt::testing {
namespace {

using ir::Node;
using ir::Op;

Shape sh(std::initializer_list<Dim> d) { return Shape{std::vector<Dim>(d)}; }

// out = a @ b, then + bias (input 2), then each unary fn in `acts`.
Node withEpilogue(Shape out, std::vector<std::string> acts = {}) {
  Node n;
  n.id = 7;
  n.op = Op::Contract;
  n.shape = std::move(out);
  n.inputs = {0, 1, 2};
  n.epilogue.push_back({Op::Binary, "add", 2, 8});
  for (size_t k = 0; k < acts.size(); ++k) n.epilogue.push_back({Op::Unary, acts[k], -1, 9 + static_cast<int>(k)});
  return n;
}

class EpilogueTest : public ::testing::Test {
 protected:
  Buf rand(const Shape& s) { return normal(s, rng_, 1.0f); }
  // Fast against reference; returns fast's result.
  Buf check(const Node& n, Buf& a, Buf& b, Buf& bias) {
    Outcome r = runNode(*ref_, n, {&a, &b, &bias}, ctx_), f = runNode(*fast_, n, {&a, &b, &bias}, ctx_);
    EXPECT_TRUE(r.status.ok) << r.status.message;
    EXPECT_TRUE(f.status.ok) << f.status.message;
    EXPECT_TRUE(close(f.out, r.out, 1e-5)) << n.shape.str() << " from " << a.shape.str() << " @ " << b.shape.str()
                                           << " + " << bias.shape.str();
    return f.out;
  }
  std::unique_ptr<Backend> ref_ = makeReferenceBackend(), fast_ = makeFastBackend();
  std::mt19937 rng_{4321};
  RunContext ctx_;
};

const Dim M{"m", 7}, N{"n", 33}, K{"k", 3}, K1{"kk", 5}, P{"p", 4}, One{"one", 1};

TEST_F(EpilogueTest, BiasAndActivationsMatchTheNodesInEveryLayout) {
  struct Case {
    Shape a, b, bias, out;
  };
  std::vector<Case> cases = {
      {sh({M, K}), sh({K, N}), sh({N}), sh({M, N})},                       // A · B: oneDNN's post-op
      {sh({K, M}), sh({K, N}), sh({N}), sh({M, N})},                       // Aᵀ · B
      {sh({M, K}), sh({N, K}), sh({N}), sh({M, N})},                       // A · Bᵀ
      {sh({K, M}), sh({N, K}), sh({N}), sh({M, N})},                       // Aᵀ · Bᵀ
      {sh({K, M, K1}), sh({K1, N, K}), sh({N}), sh({M, N})},               // both permuted first
      {sh({M, K}), sh({K, P, N}), sh({P, N}), sh({M, P, N})},              // two N names
      {sh({M, K}), sh({K, One, N}), sh({N}), sh({M, One, N})},             // a size-1 N dim
      {sh({M, K}), sh({K, Dim{"w", 512}}), sh({Dim{"w", 512}}), sh({M, Dim{"w", 512}})},  // B rows padded (2 KiB)
      {sh({K, M}), sh({K, Dim{"w", 1024}}), sh({Dim{"w", 1024}}), sh({M, Dim{"w", 1024}})},  // Aᵀ, B padded
      {sh({M, K1, K}), sh({K, Dim{"w", 512}, K1}), sh({Dim{"w", 512}}), sh({M, Dim{"w", 512}})},  // permuted, padded
      {sh({M, K}), sh({K, P, N}), sh({N, P}), sh({M, P, N})},              // bias in another order: after the product
      {sh({M, K}), sh({K, P, N}), sh({N}), sh({M, P, N})},                 // bias over part of N: after the product
      {sh({M, K}), sh({K, N}), sh({N}), sh({N, M})},                       // C permuted: after the product
      {sh({M, Dim{"z", 0}}), sh({Dim{"z", 0}, N}), sh({N}), sh({M, N})},   // an empty sum: the bias
      {sh({Dim{"e", 0}, K}), sh({K, N}), sh({N}), sh({Dim{"e", 0}, N})},   // no rows
  };
  for (const auto& [c, pad] : withAndWithoutPadding(cases))
    for (const std::vector<std::string>& acts : {std::vector<std::string>{}, {"relu"}, {"gelu"}}) {
      SCOPED_TRACE(c.out.str() + (pad ? ", B padded" : ""));
      const RowPadding forced(pad);
      Buf a = rand(c.a), b = rand(c.b), bias = rand(c.bias);
      check(withEpilogue(c.out, acts), a, b, bias);
    }
}

// NaN and ±inf in A (a row), in B (a column) and in the bias reach the same
// elements as in the nodes: the post-op is one f32 add after the product.
TEST_F(EpilogueTest, NonFiniteValuesMatchTheReference) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const Dim Mb{"m", 40}, Nb{"n", 96}, Kb{"k", 64};
  for (const std::vector<std::string>& acts : {std::vector<std::string>{}, {"relu"}}) {
    for (bool transposed : {false, true}) {
      Buf a = rand(transposed ? sh({Kb, Mb}) : sh({Mb, Kb})), b = rand(sh({Kb, Nb})), bias = rand(sh({Nb}));
      auto at = [&](int64_t m, int64_t k) -> float& { return a.f[static_cast<size_t>(transposed ? k * 40 + m : m * 64 + k)]; };
      for (int64_t m = 0; m < 40; ++m)  // positive where B has its infinities: their signs are known
        for (int64_t k : {7, 10, 11}) at(m, k) = std::fabs(at(m, k)) + 0.1f;
      at(1, 5) = nan;
      at(2, 0) = inf;
      at(3, 63) = -inf;
      b.f[7 * 96 + 11] = inf;
      b.f[9 * 96 + 12] = nan;
      b.f[10 * 96 + 13] = -inf;
      b.f[11 * 96 + 13] = inf;  // column 13: inf − inf
      bias.f[20] = nan;
      bias.f[21] = inf;
      bias.f[22] = -inf;
      bias.f[11] = -inf;  // + the column of +inf: NaN
      Buf y = check(withEpilogue(sh({Mb, Nb}), acts), a, b, bias);
      EXPECT_TRUE(std::isnan(y.f[1 * 96 + 0]));
      EXPECT_TRUE(std::isnan(y.f[0 * 96 + 13]));
      EXPECT_TRUE(std::isnan(y.f[5 * 96 + 20]));
      EXPECT_TRUE(std::isnan(y.f[5 * 96 + 11]));
      EXPECT_EQ(y.f[5 * 96 + 21], inf);
      EXPECT_EQ(y.f[5 * 96 + 22], acts.empty() ? -inf : 0.0f);
    }
  }
}

// Runs n on fast with B's rows padded and not (forced): the two results.
std::pair<Buf, Buf> paddedAndNot(Backend& fast, const Node& n, std::vector<Buf*> in, RunContext& ctx) {
  std::vector<Buf> out;
  for (bool pad : {false, true}) {
    const RowPadding forced(pad);
    Outcome o = runNode(fast, n, in, ctx);
    EXPECT_TRUE(o.status.ok) << o.status.message;
    out.push_back(o.out);
  }
  return {out[0], out[1]};
}

// B's rows padded (gemm.cc padsRowsOfB, AMD's rule) or not, the product and
// its bias have the same bits: only where B's rows lie changes, so a host's
// rule — and where malloc put B — changes the speed, never the results. With
// and without the bias, A in both layouts, on one thread and on two; M = 256
// (the MLP's batch: a column split) and 512 × 512 (one call, in place; a
// transposed A's rows padded too, padsRowsOfA, for contract).
TEST_F(EpilogueTest, PaddedRowsOfBGiveTheUnpaddedBits) {
  for (auto [m, w, k] : {std::tuple<int64_t, int64_t, int64_t>{256, 1024, 384}, {512, 512, 128}}) {
    const Dim Mb{"m", m}, W{"w", w}, Kb{"k", k};
    for (bool transposed : {false, true})
      for (int threads : {1, 2}) {
        ctx_.threads = threads;
        SCOPED_TRACE(std::to_string(m) + "×" + std::to_string(w) + (transposed ? ", Aᵀ, " : ", A, ") +
                     std::to_string(threads) + " threads");
        Buf a = rand(transposed ? sh({Kb, Mb}) : sh({Mb, Kb})), b = rand(sh({Kb, W})), bias = rand(sh({W}));
        for (const Node& n : {withEpilogue(sh({Mb, W})), withEpilogue(sh({Mb, W}), {"relu"})}) {
          const auto [plain, padded] = paddedAndNot(*fast_, n, {&a, &b, &bias}, ctx_);
          EXPECT_EQ(std::memcmp(plain.f.data(), padded.f.data(), plain.f.size() * 4), 0)
              << n.epilogue.size() << " post-ops";
        }
        Node product;
        product.op = Op::Contract;
        product.shape = sh({Mb, W});
        product.inputs = {0, 1};
        const auto [plain, padded] = paddedAndNot(*fast_, product, {&a, &b}, ctx_);
        EXPECT_EQ(std::memcmp(plain.f.data(), padded.f.data(), plain.f.size() * 4), 0) << "contract";
      }
  }
}

// The rule itself: only a row-major B of rows a multiple of 2 KiB that
// oneDNN reads in place (a call's 1/M + 1/N large enough) is ever padded;
// forced on or off, the address does not matter; by default only AMD hosts
// pad, and only a B that starts 32-byte aligned (or one not yet placed).
TEST(GemmRowPadding, TheRuleAsMeasured) {
  const uintptr_t aligned = 4096, past16 = 4096 + 16;
  {
    const RowPadding forced(true);
    EXPECT_TRUE(fast::padsRowsOfB('N', 256, 512, 1024, past16));
    EXPECT_TRUE(fast::padsRowsOfB('N', 512, 512, 512, aligned));
    EXPECT_FALSE(fast::padsRowsOfB('T', 256, 512, 1024, aligned)) << "Bᵀ is read along its rows";
    EXPECT_FALSE(fast::padsRowsOfB('N', 256, 500, 1000, aligned)) << "rows not a multiple of 2 KiB";
    EXPECT_FALSE(fast::padsRowsOfB('N', 4096, 4096, 4096, aligned)) << "oneDNN packs B itself";
  }
  {
    const RowPadding forced(false);
    EXPECT_FALSE(fast::padsRowsOfB('N', 256, 512, 1024, aligned));
  }
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool amd = __builtin_cpu_is("amd") != 0;
#else
  const bool amd = false;
#endif
  EXPECT_EQ(fast::padsRowsOfB('N', 256, 512, 1024, aligned), amd);
  EXPECT_EQ(fast::padsRowsOfB('N', 256, 512, 1024, aligned + 32), amd);
  EXPECT_FALSE(fast::padsRowsOfB('N', 256, 512, 1024, past16));
  EXPECT_FALSE(fast::padsRowsOfB('N', 256, 512, 1024, past16 + 32));
  EXPECT_EQ(fast::padsRowsOfB('N', 256, 512, 1024, std::nullopt), amd) << "a B placed later";
  // A transposed A: rows a multiple of 2 KiB, read in place; AMD by default, wherever it starts.
  EXPECT_EQ(fast::padsRowsOfA('T', 512, 512, 512), amd);
  EXPECT_FALSE(fast::padsRowsOfA('N', 512, 512, 512)) << "A is read along its rows";
  EXPECT_FALSE(fast::padsRowsOfA('T', 500, 512, 500)) << "rows not a multiple of 2 KiB";
  EXPECT_FALSE(fast::padsRowsOfA('T', 4096, 4096, 4096)) << "oneDNN packs A itself";
  EXPECT_FALSE(fast::padsRowsOfA('T', 512, 128, 512)) << "too few columns to pay for the copy";
  const RowPadding forced(true);
  EXPECT_TRUE(fast::padsRowsOfA('T', 512, 256, 512));
}

// The cached primitive gives the same bits run after run, on one thread and
// on two (a primitive is made per thread count).
TEST_F(EpilogueTest, BitwiseTheSameRunAfterRunOnOneAndTwoThreads) {
  const Dim Mb{"m", 256}, Nb{"n", 512}, Kb{"k", 384};
  Buf a = rand(sh({Mb, Kb})), b = rand(sh({Kb, Nb})), bias = rand(sh({Nb}));
  const Node n = withEpilogue(sh({Mb, Nb}));
  for (int threads : {1, 2, 1}) {
    ctx_.threads = threads;
    Buf first = check(n, a, b, bias);
    for (int run = 0; run < 3; ++run) {
      Outcome again = runNode(*fast_, n, {&a, &b, &bias}, ctx_);
      ASSERT_TRUE(again.status.ok) << again.status.message;
      EXPECT_EQ(std::memcmp(again.out.f.data(), first.f.data(), first.f.size() * 4), 0) << threads << " threads";
    }
  }
}

// relu over several panels of C (epiloguePanelRows: 2 of 550 rows here),
// with NaN and ±inf reaching rows of both panels and bias columns of −inf
// (relu: +0, not −0) and NaN (kept), on 1 and 2 threads, bitwise the same
// run after run.
TEST_F(EpilogueTest, ReluOnSeveralPanelsMatchesTheReference) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const int64_t m = 1100, n = 1024, k = 16;
  ASSERT_GT(m, fast::epiloguePanelRows(m, n, k)) << "one panel: the test would not cut C";
  const Dim Mb{"m", m}, Nb{"n", n}, Kb{"k", k};
  Buf a = rand(sh({Mb, Kb})), b = rand(sh({Kb, Nb})), bias = rand(sh({Nb}));
  for (int64_t row : {3, 549, 550, 1099}) a.f[static_cast<size_t>(row * k + 5)] = nan;
  a.f[static_cast<size_t>(800 * k + 1)] = -inf;
  bias.f[7] = -inf;
  bias.f[8] = nan;
  bias.f[9] = inf;
  const Node node = withEpilogue(sh({Mb, Nb}), {"relu"});
  for (int threads : {1, 2}) {
    ctx_.threads = threads;
    Buf y = check(node, a, b, bias);
    for (int64_t row : {3, 549, 550, 1099})
      for (int64_t j : {0, 100, 1023}) EXPECT_TRUE(std::isnan(y.f[static_cast<size_t>(row * n + j)])) << row << "," << j;
    for (int64_t row : {0, 551, 1098}) {
      const float c7 = y.f[static_cast<size_t>(row * n + 7)];
      EXPECT_EQ(c7, 0.0f);
      EXPECT_FALSE(std::signbit(c7)) << "relu(-inf) is +0";
      EXPECT_TRUE(std::isnan(y.f[static_cast<size_t>(row * n + 8)]));
      EXPECT_EQ(y.f[static_cast<size_t>(row * n + 9)], inf);
    }
    for (float v : y.f) EXPECT_FALSE(v < 0.0f || (v == 0.0f && std::signbit(v)));
    Outcome again = runNode(*fast_, node, {&a, &b, &bias}, ctx_);
    ASSERT_TRUE(again.status.ok) << again.status.message;
    EXPECT_EQ(std::memcmp(again.out.f.data(), y.f.data(), y.f.size() * 4), 0) << threads << " threads";
  }
}

// matmulBiasPanels hands each row of C to `after` exactly once, in equal
// panels, after the GEMM wrote it, whatever the panel height; a transposed
// A is one panel.
TEST(EpiloguePanels, EveryRowOnceInEqualPanels) {
  const int64_t m = 10, n = 3, k = 2;
  std::vector<float> a(static_cast<size_t>(m * k), 1.0f), b(static_cast<size_t>(k * n), 2.0f), bias(3, 0.5f);
  for (int64_t rows : {1, 3, 4, 7, 10, 64}) {
    std::vector<float> c(static_cast<size_t>(m * n), -1.0f);
    std::vector<std::pair<int64_t, int64_t>> seen;  // (first element, elements)
    const fast::PanelFn after = [&](float* p, int64_t elements) {
      seen.emplace_back(p - c.data(), elements);
      for (int64_t i = 0; i < elements; ++i) EXPECT_EQ(p[i], 4.5f);  // written before `after` runs
    };
    std::string err;
    ASSERT_TRUE(fast::matmulBiasPanels('N', 'N', m, n, k, a.data(), b.data(), n, bias.data(), c.data(), rows, after, &err))
        << err;
    const int64_t panels = (m + std::min(rows, m) - 1) / std::min(rows, m);
    ASSERT_EQ(static_cast<int64_t>(seen.size()), panels) << rows;
    int64_t next = 0;
    for (auto [first, elements] : seen) {
      EXPECT_EQ(first, next);
      EXPECT_EQ(elements % n, 0);
      EXPECT_LE(elements / n, (m + panels - 1) / panels);
      next += elements;
    }
    EXPECT_EQ(next, m * n);
    seen.clear();
    ASSERT_TRUE(fast::matmulBiasPanels('T', 'N', m, n, k, a.data(), b.data(), n, bias.data(), c.data(), rows, after, &err))
        << err;
    EXPECT_EQ(seen.size(), 1u);
  }
}

// The epilogue's in-place relu is the reference's, bit for bit: NaN kept,
// −0 and −inf to +0, denormals and +inf kept.
TEST(EpiloguePanels, ReluInPlaceIsTheReferencesSelect) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {std::nanf(""), -std::nanf(""), -0.0f, 0.0f, -inf, inf, -1.0f, 1.0f,
                          std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::max(), -std::numeric_limits<float>::max()};
  for (int i = 0; i < 40; ++i) x.push_back(static_cast<float>(i - 20) * 0.37f);  // vector body and tail
  Buf in(sh({Dim{"i", static_cast<int64_t>(x.size())}}), DType::F32);
  in.f = x;
  Node relu;
  relu.op = Op::Unary;
  relu.fn = "relu";
  relu.shape = in.shape;
  relu.inputs = {0};
  Outcome want = runNode(*makeReferenceBackend(), relu, {&in}, RunContext{});
  ASSERT_TRUE(want.status.ok) << want.status.message;
  std::vector<float> y = x;
  fast::reluInPlace(y.data(), static_cast<int64_t>(y.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(want.out.f[i])) {
      EXPECT_TRUE(std::isnan(y[i])) << i;
    } else {
      EXPECT_EQ(std::memcmp(&y[i], &want.out.f[i], 4), 0) << i << ": " << x[i] << " → " << y[i] << ", want " << want.out.f[i];
    }
  }
  EXPECT_FALSE(std::signbit(y[2])) << "relu(-0) is +0, as the reference's x <= 0 ? 0 : x";
}

// Runs a node whose epilogue writes nodes of their own storage (PostOp::own):
// out[0] the node's value, then one buffer per `own` shape (null: not computed).
Outcomes runOwn(Backend& be, const Node& n, std::vector<Buf*> in, std::vector<std::optional<Shape>> own,
                const RunContext& ctx) {
  std::vector<TensorView> views;
  for (Buf* b : in) views.push_back(b->view());
  std::vector<const TensorView*> ptrs;
  for (const TensorView& v : views) ptrs.push_back(&v);
  Outcomes o;
  o.out.emplace_back(n.shape, n.dtype);
  for (const std::optional<Shape>& s : own) o.out.emplace_back(s ? *s : Shape{}, DType::F32);
  for (Buf& b : o.out) b.f.assign(b.f.size(), std::nanf(""));  // an element left unwritten shows
  std::vector<TensorView> outs;
  for (Buf& b : o.out) outs.push_back(b.view());
  std::vector<TensorView*> out_ptrs = {&outs[0]};
  for (size_t k = 0; k < own.size(); ++k) out_ptrs.push_back(own[k] ? &outs[k + 1] : nullptr);
  o.status = be.runResults(n, ptrs, out_ptrs, ctx);
  return o;
}

bool sameBits(const Buf& a, const Buf& b) {  // (an empty buffer may have no memory: no memcmp of null)
  return a.f.size() == b.f.size() && (a.f.empty() || std::memcmp(a.f.data(), b.f.data(), a.f.size() * 4) == 0);
}

// A gelu whose gradient reads its pre-activation (fold_epilogues.cc rule 3b):
// the fast backend computes it from each panel of C into its own storage and
// C keeps bias + product, the bits of the contraction with its bias epilogue
// and of the gelu node after it; the reference's within the GEMM's bounds.
// Over several panels, layouts that run it after the product (C permuted, a
// bias in another order), NaN and ±inf, on 1 and 2 threads.
TEST_F(EpilogueTest, ActivationIntoItsOwnStorageIsTheUnaryNodesBits) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  // N odd: panels of 550 × 1001 floats, no multiple of a vector's width.
  const Dim Mb{"m", 1100}, Nb{"n", 1001}, Kb{"k", 16};
  ASSERT_GT(1100, fast::epiloguePanelRows(1100, 1001, 16)) << "one panel: the test would not cut C";
  struct Case {
    Shape a, b, bias, out;
  };
  const std::vector<Case> cases = {
      {sh({Mb, Kb}), sh({Kb, Nb}), sh({Nb}), sh({Mb, Nb})},      // panels of C
      {sh({M, K}), sh({K, P, N}), sh({N, P}), sh({M, P, N})},    // bias in another order: after the product
      {sh({M, K}), sh({K, N}), sh({N}), sh({N, M})},             // C permuted: after the product
      {sh({Dim{"e", 0}, K}), sh({K, N}), sh({N}), sh({Dim{"e", 0}, N})},  // no rows
  };
  for (const std::string act : {"gelu", "gelu_tanh", "silu", "tanh", "sigmoid"})
    for (const Case& c : cases)
      for (int threads : {1, 2}) {
        ctx_.threads = threads;
        Buf a = rand(c.a), b = rand(c.b), bias = rand(c.bias);
        if (a.f.size() > 40) a.f[3] = nan, a.f[40] = inf;
        if (bias.f.size() > 9) bias.f[7] = -inf, bias.f[9] = inf;
        Node n = withEpilogue(c.out);
        n.epilogue.push_back({Op::Unary, act, -1, 9, /*own=*/true});
        Outcomes f = runOwn(*fast_, n, {&a, &b, &bias}, {c.out}, ctx_);
        Outcomes r = runOwn(*ref_, n, {&a, &b, &bias}, {c.out}, ctx_);
        ASSERT_TRUE(f.status.ok) << f.status.message;
        ASSERT_TRUE(r.status.ok) << r.status.message;
        // The bias epilogue alone, then the unary node on its result.
        Outcome pre = runNode(*fast_, withEpilogue(c.out), {&a, &b, &bias}, ctx_);
        Node unary;
        unary.id = 9;
        unary.op = Op::Unary;
        unary.fn = act;
        unary.inputs = {7};
        unary.shape = c.out;
        Outcome y = runNode(*fast_, unary, {&pre.out}, ctx_);
        EXPECT_TRUE(sameBits(f.out[0], pre.out)) << act << " " << c.out.str() << ": C is not bias + product";
        EXPECT_TRUE(sameBits(f.out[1], y.out)) << act << " " << c.out.str() << " on " << threads << " threads";
        EXPECT_TRUE(close(f.out[0], r.out[0], 1e-5)) << act << " " << c.out.str();
        EXPECT_TRUE(close(f.out[1], r.out[1], 1e-5)) << act << " " << c.out.str();
        // run() has no storage to give the activation: it says so.
        Outcome one = runNode(*fast_, n, {&a, &b, &bias}, ctx_), ref_one = runNode(*ref_, n, {&a, &b, &bias}, ctx_);
        EXPECT_FALSE(one.status.ok);
        EXPECT_FALSE(ref_one.status.ok);
        EXPECT_NE(one.status.message.find("runResults"), std::string::npos) << one.status.message;
      }
}

Node crossEntropy(const std::string& classes) {
  Node n;
  n.id = 7;
  n.op = Op::CrossEntropy;
  n.names = {classes};
  n.inputs = {0, 1, 2};
  n.epilogue.push_back({Op::CrossEntropyGrad, "", 2, 9, /*own=*/true});
  return n;
}

// A cross-entropy that computes its gradient (fold_epilogues.cc rule 4): the
// loss is the cross_entropy node's bits and the gradient the
// cross_entropy_grad node's, from one read of the logits; in rows (classes
// last) and in a layout read through scratch (classes first), with NaN and
// ±inf logits, dy 1 and 0.25, on 1 and 2 threads; the loss alone when the
// schedule computes no gradient; a bad label fails as the node does.
TEST_F(EpilogueTest, CrossEntropyWithItsGradientIsTheTwoNodesBits) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const Dim R{"row", 37}, C{"vocab", 301}, B{"b", 3};
  for (const Shape& shape : {sh({R, C}), sh({C, B, R}), sh({B, R, Dim{"vocab", 1}})})
    for (float dy : {1.0f, 0.25f})
      for (int threads : {1, 2}) {
        ctx_.threads = threads;
        Buf logits = rand(shape), d(Shape{}, DType::F32);
        d.f = {dy};
        Shape label_shape;
        for (const Dim& x : shape.dims)
          if (x.name != "vocab") label_shape.dims.push_back(x);
        Buf labels = ints(label_shape, rng_, 0, static_cast<int>(shape.dims[static_cast<size_t>(shape.find("vocab"))].size) - 1);
        logits.f[5] = nan;
        logits.f[logits.f.size() / 3] = inf;
        logits.f[logits.f.size() / 2] = -inf;
        Node n = crossEntropy("vocab");
        n.shape = Shape{};
        Outcomes f = runOwn(*fast_, n, {&logits, &labels, &d}, {shape}, ctx_);
        Outcomes r = runOwn(*ref_, n, {&logits, &labels, &d}, {shape}, ctx_);
        ASSERT_TRUE(f.status.ok) << f.status.message;
        ASSERT_TRUE(r.status.ok) << r.status.message;
        Node loss = n, grad;
        loss.epilogue.clear();
        loss.inputs = {0, 1};
        grad.id = 9;
        grad.op = Op::CrossEntropyGrad;
        grad.names = {"vocab"};
        grad.inputs = {0, 1, 2};
        grad.shape = shape;
        Outcome l = runNode(*fast_, loss, {&logits, &labels}, ctx_), g = runNode(*fast_, grad, {&logits, &labels, &d}, ctx_);
        ASSERT_TRUE(l.status.ok && g.status.ok) << l.status.message << g.status.message;
        EXPECT_TRUE(sameBits(f.out[0], l.out)) << shape.str() << ": " << f.out[0].f[0] << " vs " << l.out.f[0];
        EXPECT_TRUE(sameBits(f.out[1], g.out)) << shape.str() << " dy " << dy << " on " << threads << " threads";
        Outcome rl = runNode(*ref_, loss, {&logits, &labels}, ctx_), rg = runNode(*ref_, grad, {&logits, &labels, &d}, ctx_);
        EXPECT_TRUE(sameBits(r.out[0], rl.out)) << shape.str();
        EXPECT_TRUE(sameBits(r.out[1], rg.out)) << shape.str();
        EXPECT_TRUE(close(f.out[1], r.out[1], 1e-5)) << shape.str();
        // Evaluation: no gradient to write.
        for (Backend* be : {fast_.get(), ref_.get()}) {
          Outcomes alone = runOwn(*be, n, {&logits, &labels, &d}, {std::nullopt}, ctx_);
          ASSERT_TRUE(alone.status.ok) << alone.status.message;
          EXPECT_TRUE(sameBits(alone.out[0], be == fast_.get() ? l.out : rl.out)) << be->name();
        }
        labels.i[2] = -1;
        for (Backend* be : {fast_.get(), ref_.get()}) {
          Outcomes bad = runOwn(*be, n, {&logits, &labels, &d}, {shape}, ctx_);
          Outcome node = runNode(*be, loss, {&logits, &labels}, ctx_);
          EXPECT_FALSE(bad.status.ok) << be->name();
          EXPECT_EQ(bad.status.message, node.status.message) << be->name();
        }
      }
}

// Why relu is ours on x86 (fold_epilogues.cc), not oneDNN's post-op: oneDNN
// 2.6's relu post-op (alpha 0) is max(x, 0), which turns a NaN into 0 —
// ours keeps it. Should a oneDNN keep it, this fails: its post-op could then
// replace the panels' relu.
TEST(OneDnnPostOps, ReluTurnsNaNIntoZero) {
  using dnnl::memory;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(eng);
  const memory::data_type f32 = memory::data_type::f32;
  const memory::desc a_md({4, 1}, f32, memory::format_tag::ab), b_md({1, 4}, f32, memory::format_tag::ab);
  const memory::desc bias_md({1, 4}, f32, memory::format_tag::ab), c_md({4, 4}, f32, memory::format_tag::ab);
  dnnl::post_ops ops;
  ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  dnnl::matmul mm(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, bias_md, c_md), attr, eng));
  std::vector<float> a(4, 1.0f), b(4, 0.0f), bias = {std::nanf(""), -1.0f, 2.0f, -std::numeric_limits<float>::infinity()};
  std::vector<float> c(16, 5.0f);
  memory am(a_md, eng, a.data()), bm(b_md, eng, b.data()), biasm(bias_md, eng, bias.data()), cm(c_md, eng, c.data());
  mm.execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_BIAS, biasm}, {DNNL_ARG_DST, cm}});
  stream.wait();
  EXPECT_EQ(c[0], 0.0f) << "oneDNN's relu kept a NaN: its post-op could replace the panels' relu";
  EXPECT_EQ(c[1], 0.0f);
  EXPECT_EQ(c[2], 2.0f);
  EXPECT_EQ(c[3], 0.0f);
}

}  // namespace
}  // namespace dtl::rt::testing
