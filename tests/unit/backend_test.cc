// The fast backend against the reference backend, one hand-built node per
// case: every op kind forward and backward, the layouts the GEMM mapping
// must handle (transposed operands, two shared names in either order, outer
// products, size-1 dims, odd sizes), broadcasting, reductions over middle
// dims, user-data errors and dropout masks. Floats agree to ~1e-5 relative
// (f32 against double), integers exactly.
#include <cstring>
#include "tests/unit/backend_test_util.h"

#include <bit>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/kernels/fast/gemm.h"

namespace dtl::rt::testing {
namespace {

using ir::Node;
using ir::Op;

Shape sh(std::initializer_list<Dim> d) { return Shape{std::vector<Dim>(d)}; }

Node node(Op op, Shape s, DType t = DType::F32, std::string fn = "", std::vector<std::string> names = {}) {
  Node n;
  n.id = 7;
  n.op = op;
  n.shape = std::move(s);
  n.dtype = t;
  n.fn = std::move(fn);
  n.names = std::move(names);
  return n;
}

const Dim A{"a", 3}, B{"b", 7}, C{"c", 33}, One{"one", 1}, K2{"k", 5}, H{"h", 2};

class BackendTest : public ::testing::Test {
 protected:
  // Runs n on both backends and expects success and agreement; returns the
  // reference result.
  Buf check(const Node& n, std::vector<Buf*> in, double rtol = 1e-5) {
    Outcome r = runNode(*ref_, n, in, ctx_), f = runNode(*fast_, n, in, ctx_);
    EXPECT_TRUE(r.status.ok) << r.status.message;
    EXPECT_TRUE(f.status.ok) << f.status.message;
    EXPECT_TRUE(close(f.out, r.out, rtol)) << ir::opName(n.op) << " " << n.fn << " " << n.shape.str();
    // The executor does not zero its buffers: both backends must write every
    // output element whatever the buffer held before.
    for (Backend* be : {ref_.get(), fast_.get()}) {
      Outcome p = runPoisoned(*be, n, in);
      if (!p.status.ok) continue;
      EXPECT_TRUE(close(p.out, be == ref_.get() ? r.out : f.out, 0, 0))
          << be->name() << " leaves output elements unwritten: " << ir::opName(n.op) << " " << n.fn << " "
          << n.shape.str();
    }
    return r.out;
  }
  // runNode into an output buffer full of garbage (NaN, or a large integer).
  Outcome runPoisoned(Backend& be, const Node& n, std::vector<Buf*> in) {
    std::vector<TensorView> views;
    for (Buf* b : in) views.push_back(b->view());
    std::vector<const TensorView*> ptrs;
    for (const TensorView& v : views) ptrs.push_back(&v);
    Outcome o{{}, Buf(n.shape, n.dtype)};
    o.out.f.assign(o.out.f.size(), std::nanf(""));
    o.out.i.assign(o.out.i.size(), 0x5eadbeef);
    TensorView out = o.out.view();
    o.status = be.run(n, ptrs, out, ctx_);
    return o;
  }
  // Both backends must fail with the same message.
  void checkFails(const Node& n, std::vector<Buf*> in, const std::string& needle) {
    Outcome r = runNode(*ref_, n, in, ctx_), f = runNode(*fast_, n, in, ctx_);
    EXPECT_FALSE(r.status.ok);
    EXPECT_FALSE(f.status.ok);
    EXPECT_EQ(f.status.message, r.status.message);
    EXPECT_NE(r.status.message.find(needle), std::string::npos) << r.status.message;
  }
  Buf rand(const Shape& s, float scale = 1.0f) { return normal(s, rng_, scale); }

  std::unique_ptr<Backend> ref_ = makeReferenceBackend(), fast_ = makeFastBackend();
  std::mt19937 rng_{1234};
  RunContext ctx_;
};

TEST_F(BackendTest, UnaryAndUnaryGrad) {
  Shape s = sh({A, One, B});
  for (const char* fn : {"relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid", "exp", "log", "sqrt", "rsqrt", "neg",
                         "abs"}) {
    Buf x = rand(s, 2.0f), dy = rand(s);
    if (std::string(fn) == "log" || std::string(fn).find("sqrt") != std::string::npos)
      for (float& v : x.f) v = std::fabs(v) + 0.1f;
    check(node(Op::Unary, s, DType::F32, fn), {&x});
    check(node(Op::UnaryGrad, s, DType::F32, fn), {&x, &dy});
  }
  Buf xi = ints(s, rng_, -9, 9);
  check(node(Op::Unary, s, DType::I32, "neg"), {&xi});
  check(node(Op::Unary, s, DType::I32, "abs"), {&xi});
}

TEST_F(BackendTest, BinaryBroadcastsByName) {
  const Shape full = sh({H, A, B});
  struct Case {
    Shape a, b, out;
  };
  std::vector<Case> cases = {
      {full, full, full},                                     // same shape
      {full, Shape{}, full},                                  // scalar b
      {Shape{}, full, full},                                  // scalar a
      {full, sh({B}), full},                                  // bias over leading dims
      {sh({A, B}), full, full},                               // a broadcast over h
      {full, sh({B, A}), full},                               // transposed operand
      {sh({A}), sh({B}), sh({A, B})},                         // union of names
      {sh({A, One, B}), sh({One, B}), sh({A, One, B})},       // size-1 dims
      {sh({C, Dim{"d", 1}}), sh({C}), sh({C, Dim{"d", 1}})},  // odd size 33
  };
  for (const Case& c : cases)
    for (const char* fn : {"add", "sub", "mul", "div", "lt", "eq", "ge"}) {
      Buf a = rand(c.a), b = rand(c.b);
      if (std::string(fn) == "eq") b.f.assign(b.f.size(), a.f.empty() ? 0 : a.f[0]);
      bool cmp = std::string(fn).size() == 2;
      check(node(Op::Binary, c.out, cmp ? DType::Bool : DType::F32, fn), {&a, &b});
    }
  Buf ia = ints(full, rng_, -5, 5), ib = ints(sh({B}), rng_, -2, 2);
  for (const char* fn : {"add", "sub", "mul", "div", "gt", "ne"})
    check(node(Op::Binary, full, std::string(fn).size() == 2 ? DType::Bool : DType::I32, fn), {&ia, &ib});
}

TEST_F(BackendTest, ConstSliceAlignReduceToReshape) {
  Node k = node(Op::Const, Shape{});
  k.scalar = 0.125;
  check(k, {});
  Node ki = node(Op::Const, Shape{}, DType::I32);
  ki.scalar = 3;
  check(ki, {});

  Buf stacked = rand(sh({Dim{"layers", 3}, A, B}));
  Node sl = node(Op::Slice, sh({A, B}), DType::F32, "", {"layers"});
  sl.index = 2;
  Buf copy = check(sl, {&stacked});
  Node sg = node(Op::SliceGrad, stacked.shape, DType::F32, "", {"layers"});
  sg.index = 1;
  check(sg, {&copy});
  // Several copies at once: all of them, a run in the middle, a middle dim.
  const Dim L{"layers", 4};
  Buf c0 = rand(sh({A, B})), c1 = rand(sh({A, B})), c2 = rand(sh({A, B})), c3 = rand(sh({A, B}));
  Node all = node(Op::SliceGrad, sh({L, A, B}), DType::F32, "", {"layers"});
  Buf gathered = check(all, {&c0, &c1, &c2, &c3});
  EXPECT_EQ(gathered.f[static_cast<size_t>(2 * A.size * B.size + 5)], c2.f[5]);
  Node mid = node(Op::SliceGrad, sh({L, A, B}), DType::F32, "", {"layers"});
  mid.index = 1;
  check(mid, {&c1, &c2});
  Buf m0 = rand(sh({A, B})), m1 = rand(sh({A, B}));
  Node inner = node(Op::SliceGrad, sh({A, Dim{"layers", 2}, B}), DType::F32, "", {"layers"});
  check(inner, {&m0, &m1});

  Buf x = rand(sh({A, One, B, Dim{"c", 3}}));
  check(node(Op::Align, sh({Dim{"c", 3}, A, One, B})), {&x});  // permutation
  check(node(Op::Align, sh({B, One, Dim{"c", 3}, A})), {&x});
  const Dim R{"r", 67}, S{"s", 130};  // tiled transposes with partial tiles
  Buf big = rand(sh({H, R, S}));
  check(node(Op::Align, sh({S, H, R})), {&big});
  check(node(Op::Align, sh({H, S, R})), {&big});
  check(node(Op::Align, sh({S, R, H})), {&big});
  Buf bias = rand(sh({B}));
  check(node(Op::Align, sh({H, A, B})), {&bias});  // broadcast
  Buf xi = ints(sh({A, B}), rng_, -100, 100);
  check(node(Op::Align, sh({B, A}), DType::I32), {&xi});

  check(node(Op::ReduceTo, sh({B})), {&x});
  check(node(Op::ReduceTo, sh({Dim{"c", 3}, A})), {&x});
  check(node(Op::ReduceTo, Shape{}), {&x});
  check(node(Op::ReduceTo, sh({B, One, A, Dim{"c", 3}})), {&x});  // a pure permutation
  check(node(Op::Reshape, sh({Dim{"ab", 21}, Dim{"c", 3}})), {&x});
}

TEST_F(BackendTest, ContractLayouts) {
  const Dim M{"m", 7}, N{"n", 33}, K{"k", 3}, K1{"kk", 5};
  struct Case {
    Shape a, b, out;
  };
  std::vector<Case> cases = {
      {sh({M, K}), sh({K, N}), sh({M, N})},                      // A · B
      {sh({K, M}), sh({K, N}), sh({M, N})},                      // Aᵀ · B
      {sh({M, K}), sh({N, K}), sh({M, N})},                      // A · Bᵀ
      {sh({K, M}), sh({N, K}), sh({M, N})},                      // Aᵀ · Bᵀ
      {sh({M, K, K1}), sh({K, K1, N}), sh({M, N})},              // two shared, same order
      {sh({M, K, K1}), sh({K1, K, N}), sh({M, N})},              // two shared, other order
      {sh({K, M, K1}), sh({K1, N, K}), sh({M, N})},              // neither in place
      {sh({H, M, K}), sh({K, Dim{"p", 4}, N}), sh({H, M, Dim{"p", 4}, N})},
      {sh({M}), sh({N}), sh({M, N})},                            // outer product (K = 1)
      {sh({K, K1}), sh({K1, K}), Shape{}},                       // full contraction
      {sh({K}), sh({K, N}), sh({N})},                            // vector · matrix
      {sh({One, M, One, K}), sh({K, One, N}), sh({One, M, N})},  // size-1 dims (shared too)
      {sh({M, K}), sh({K, N}), sh({N, M})},                      // output in another order
      {sh({K, K1, M}), sh({K, K1, N}), sh({N, M})},              // a weight gradient in [N, M]: b · a
      {sh({K, M}), sh({N, K}), sh({N, M})},                      // [N, M] from Aᵀ, Bᵀ
      {sh({H, M, K}), sh({K, N}), sh({N, H, M})},                // [N, M…] with two M dims
      {sh({Dim{"x", 1}, K}), sh({K, Dim{"y", 1}}), sh({Dim{"x", 1}, Dim{"y", 1}})},
      {sh({M, K}), sh({K, Dim{"w", 512}}), sh({M, Dim{"w", 512}})},           // B rows padded (2 KiB stride)
      {sh({M, K1, K}), sh({K, Dim{"w", 512}, K1}), sh({M, Dim{"w", 512}})},  // permuted, then padded
  };
  for (const auto& [c, pad] : withAndWithoutPadding(cases)) {
    const RowPadding forced(pad);
    Buf a = rand(c.a), b = rand(c.b);
    check(node(Op::Contract, c.out), {&a, &b});
  }
}

// A contraction that adds its product into a base (the accumulate-into-
// contraction pass): the reference equals its unfused add(base, a @ b) bit
// for bit; fast agrees with it within the GEMM tolerance, through the GEMM's
// beta = 1 (C laid out as the output, directly or with the operands
// swapped), through a permuted C added after, and over an empty sum (base +
// 0: −0 becomes +0); NaN and ±inf in the base carry through; in place (the
// base is the output's memory, as the planner lays it out) gives the same
// bits as out of place.
TEST_F(BackendTest, ContractIntoABase) {
  const Dim M{"m", 7}, N{"n", 33}, K{"k", 19}, Z{"z", 0};
  struct Case {
    Shape a, b, out;
  };
  const std::vector<Case> cases = {
      {sh({M, K}), sh({K, N}), sh({M, N})},          // C is the output: beta = 1
      {sh({K, M}), sh({N, K}), sh({N, M})},          // [N, M]: b · a, still beta = 1
      {sh({H, M, K}), sh({K, N}), sh({M, N, H})},    // C permuted into the output, then added
      {sh({M, Z}), sh({Z, N}), sh({M, N})},          // an empty sum
      {sh({M, K}), sh({K, Dim{"w", 512}}), sh({M, Dim{"w", 512}})},  // B rows padded
  };
  for (const auto& [c, pad] : withAndWithoutPadding(cases)) {
    SCOPED_TRACE(c.out.str() + " from " + c.a.str() + " @ " + c.b.str() + (pad ? ", B padded" : ""));
    const RowPadding forced(pad);
    Buf a = rand(c.a), b = rand(c.b), base = rand(c.out);
    base.f[0] = std::nanf("");
    base.f[1] = INFINITY;
    base.f[2] = -INFINITY;
    base.f[3] = -0.0f;
    Node into = node(Op::Contract, c.out);
    Buf got = check(into, {&a, &b, &base});
    Outcome product = runNode(*ref_, node(Op::Contract, c.out), {&a, &b}, ctx_);
    Outcome unfused = runNode(*ref_, node(Op::Binary, c.out, DType::F32, "add"), {&base, &product.out}, ctx_);
    ASSERT_TRUE(product.status.ok && unfused.status.ok);
    for (size_t k = 0; k < got.f.size(); ++k) {
      ASSERT_EQ(std::isnan(got.f[k]), std::isnan(unfused.out.f[k])) << "element " << k;
      if (!std::isnan(got.f[k]))
        ASSERT_EQ(std::bit_cast<uint32_t>(got.f[k]), std::bit_cast<uint32_t>(unfused.out.f[k])) << "element " << k;
    }
    Outcome fused = runNode(*fast_, into, {&a, &b, &base}, ctx_);
    ASSERT_TRUE(fused.status.ok) << fused.status.message;
    EXPECT_TRUE(std::isnan(fused.out.f[0]));
    EXPECT_EQ(fused.out.f[1], INFINITY);
    EXPECT_EQ(fused.out.f[2], -INFINITY);
    if (c.a.has("z")) EXPECT_FALSE(std::signbit(fused.out.f[3])) << "-0 + 0 is +0";
    Buf inplace = base;
    TensorView a_v = a.view(), b_v = b.view(), io = inplace.view();
    KernelStatus st = fast_->run(into, {&a_v, &b_v, &io}, io, ctx_);
    ASSERT_TRUE(st.ok) << st.message;
    for (size_t k = 0; k < inplace.f.size(); ++k) {
      ASSERT_EQ(std::isnan(inplace.f[k]), std::isnan(fused.out.f[k])) << "element " << k;
      if (!std::isnan(inplace.f[k]))
        ASSERT_EQ(std::bit_cast<uint32_t>(inplace.f[k]), std::bit_cast<uint32_t>(fused.out.f[k])) << "element " << k;
    }
  }
  // A base in another order than the output is refused, not misread (the
  // reference aborts on it: a graph the pass cannot make).
  Buf a = rand(sh({M, K})), b = rand(sh({K, N})), transposed = rand(sh({N, M}));
  Outcome bad = runNode(*fast_, node(Op::Contract, sh({M, N})), {&a, &b, &transposed}, ctx_);
  EXPECT_FALSE(bad.status.ok);
  EXPECT_NE(bad.status.message.find("base"), std::string::npos) << bad.status.message;
}

TEST_F(BackendTest, ContractLargeOddSizes) {
  const Dim M{"m", 67}, N{"n", 129}, K{"k", 257};
  Buf a = rand(sh({K, M})), b = rand(sh({N, K}));
  check(node(Op::Contract, sh({M, N})), {&a, &b});
}

TEST_F(BackendTest, ReductionsMaxGradArgmax) {
  Buf x = rand(sh({A, B, Dim{"c", 3}}));
  for (const char* fn : {"sum", "mean", "max"}) {
    check(node(Op::Reduce, sh({A, Dim{"c", 3}}), DType::F32, fn, {"b"}), {&x});
    check(node(Op::Reduce, sh({B}), DType::F32, fn, {"c", "a"}), {&x});
    check(node(Op::Reduce, Shape{}, DType::F32, fn, {}), {&x});
  }
  Buf xi = ints(sh({A, B}), rng_, -50, 50);
  check(node(Op::Reduce, sh({A}), DType::I32, "sum", {"b"}), {&xi});
  check(node(Op::Reduce, sh({B}), DType::I32, "max", {"a"}), {&xi});
  Buf dy = rand(sh({A, Dim{"c", 3}}));
  x.f[5] = x.f[5 + 3];  // a tie: the first maximum takes the gradient
  check(node(Op::MaxGrad, x.shape, DType::F32, "", {"b"}), {&x, &dy});
  check(node(Op::Argmax, sh({A, Dim{"c", 3}}), DType::I32, "", {"b"}), {&x});
  check(node(Op::Argmax, sh({A, B}), DType::I32, "", {"c"}), {&x});
}

TEST_F(BackendTest, SoftmaxOverLastAndMiddleDims) {
  Shape s = sh({A, C, B});
  Buf x = rand(s, 3.0f), dy = rand(s);
  for (const char* over : {"b", "c", "a"}) {
    Buf y = check(node(Op::Softmax, s, DType::F32, "", {over}), {&x});
    check(node(Op::SoftmaxGrad, s, DType::F32, "", {over}), {&y, &dy});
    Buf ly = check(node(Op::LogSoftmax, s, DType::F32, "", {over}), {&x});
    check(node(Op::LogSoftmaxGrad, s, DType::F32, "", {over}), {&ly, &dy});
  }
}

TEST_F(BackendTest, NormalizeAndRmsOverNameSets) {
  Shape s = sh({A, C, B});
  Buf x = rand(s, 2.0f), dy = rand(s);
  for (auto over : std::vector<std::vector<std::string>>{{"b"}, {"c", "b"}, {"c"}, {"b", "a"}}) {
    for (Op op : {Op::Normalize, Op::RmsNormalize}) {
      Node n = node(op, s, DType::F32, "", over);
      n.scalar = 1e-5;
      check(n, {&x});
      Node g = node(op == Op::Normalize ? Op::NormalizeGrad : Op::RmsNormalizeGrad, s, DType::F32, "", over);
      g.scalar = 1e-5;
      check(g, {&x, &dy});
    }
  }
}

TEST_F(BackendTest, EmbedAndScatterAddGrad) {
  const Dim V{"vocab", 11}, D{"d", 33};
  Buf table = rand(sh({V, D})), ids = ints(sh({H, B}), rng_, 0, 10);
  ids.i[0] = ids.i[1] = 4;  // repeated ids accumulate
  check(node(Op::Embed, sh({H, B, D})), {&table, &ids});
  Buf dy = rand(sh({H, B, D}));
  check(node(Op::EmbedGrad, table.shape), {&ids, &dy});
  ids.i[3] = 11;
  checkFails(node(Op::Embed, sh({H, B, D})), {&table, &ids}, "id 11 at (h 0, b 3)");
  checkFails(node(Op::EmbedGrad, table.shape), {&ids, &dy}, "out of range");
}

// The scatter-into form (compiler/passes/scatter_into_gradient.h): the rows
// the ids select added into a dense gradient equal the unfused
// add(base, embed_grad) bit for bit, NaN and inf included; rows no id
// selects keep base's bits (-0 too); in place when base is the output.
TEST_F(BackendTest, EmbedGradIntoADenseGradient) {
  const Dim V{"vocab", 11}, D{"d", 33};
  Buf ids = ints(sh({H, B}), rng_, 0, 9), dy = rand(sh({H, B, D})), base = rand(sh({V, D}));
  ids.i[0] = ids.i[1] = ids.i[5] = 4;  // a row selected three times
  base.f[4 * 33 + 2] = std::nanf("");   // in a selected row
  dy.f[7] = INFINITY;
  base.f[10 * 33 + 1] = -0.0f;          // row 10: no id selects it
  base.f[10 * 33 + 2] = -INFINITY;
  Node into = node(Op::EmbedGrad, base.shape);
  Buf got = check(into, {&ids, &dy, &base});
  // The fast kernel against the fast unfused pair, bit for bit (the
  // reference, in double, agrees within check()'s tolerance above).
  Outcome sum = runNode(*fast_, node(Op::EmbedGrad, base.shape), {&ids, &dy}, ctx_);
  Outcome unfused = runNode(*fast_, node(Op::Binary, base.shape, DType::F32, "add"), {&base, &sum.out}, ctx_);
  Outcome fused = runNode(*fast_, into, {&ids, &dy, &base}, ctx_);
  for (size_t k = 0; k < fused.out.f.size(); ++k) {
    const float want = k / 33 == 10 ? base.f[k] : unfused.out.f[k];
    ASSERT_EQ(std::isnan(fused.out.f[k]), std::isnan(want)) << "element " << k;
    if (!std::isnan(want)) ASSERT_EQ(std::bit_cast<uint32_t>(fused.out.f[k]), std::bit_cast<uint32_t>(want)) << k;
  }
  EXPECT_TRUE(std::isnan(got.f[4 * 33 + 2]));
  EXPECT_TRUE(std::signbit(got.f[10 * 33 + 1]) && std::signbit(fused.out.f[10 * 33 + 1]));
  EXPECT_EQ(fused.out.f[10 * 33 + 2], -INFINITY);
  // In place: the program computes the base into the output's memory.
  Buf inplace = base;
  TensorView ids_v = ids.view(), dy_v = dy.view(), io = inplace.view();
  KernelStatus st = fast_->run(into, {&ids_v, &dy_v, &io}, io, ctx_);
  ASSERT_TRUE(st.ok) << st.message;
  for (size_t k = 0; k < inplace.f.size(); ++k)
    if (!std::isnan(fused.out.f[k])) ASSERT_EQ(std::bit_cast<uint32_t>(inplace.f[k]), std::bit_cast<uint32_t>(fused.out.f[k])) << k;
  ids.i[3] = 11;
  checkFails(into, {&ids, &dy, &base}, "out of range");
}

// Attention (a node of several results): attention_test.cc.

TEST_F(BackendTest, CrossEntropyFusedWithLogSoftmax) {
  const Dim cls{"classes", 10};
  Buf dloss(Shape{}, DType::F32);
  dloss.f[0] = 0.75f;
  // classes last; then classes in the middle with labels in another order.
  Buf logits = rand(sh({A, B, cls}), 3.0f), labels = ints(sh({A, B}), rng_, 0, 9);
  check(node(Op::CrossEntropy, Shape{}, DType::F32, "", {"classes"}), {&logits, &labels});
  check(node(Op::CrossEntropyGrad, logits.shape, DType::F32, "", {"classes"}), {&logits, &labels, &dloss});
  Buf mid = rand(sh({A, cls, B}), 3.0f), lab2 = ints(sh({B, A}), rng_, 0, 9);
  check(node(Op::CrossEntropy, Shape{}, DType::F32, "", {"classes"}), {&mid, &lab2});
  check(node(Op::CrossEntropyGrad, mid.shape, DType::F32, "", {"classes"}), {&mid, &lab2, &dloss});
  lab2.i[4] = -1;
  checkFails(node(Op::CrossEntropy, Shape{}, DType::F32, "", {"classes"}), {&mid, &lab2}, "label -1 at (b 1, a 1)");
  checkFails(node(Op::CrossEntropyGrad, mid.shape, DType::F32, "", {"classes"}), {&mid, &lab2, &dloss},
             "labels must be in [0, 10)");
}

// Cross-entropy's rows are shared over the threads: the loss and the
// gradient are the same bits on one thread and on two (NaN and inf rows too).
TEST_F(BackendTest, CrossEntropyOnTwoThreadsIsBitwiseOneThreads) {
  const Dim cls{"classes", 301}, rows{"rows", 37};
  Buf dloss(Shape{}, DType::F32);
  dloss.f[0] = 1.0f;
  Buf logits = rand(sh({rows, cls}), 4.0f), labels = ints(sh({rows}), rng_, 0, 300);
  logits.f[5 * 301 + 7] = std::nanf("");
  logits.f[9 * 301 + 2] = INFINITY;
  const Node loss = node(Op::CrossEntropy, Shape{}, DType::F32, "", {"classes"});
  const Node grad = node(Op::CrossEntropyGrad, logits.shape, DType::F32, "", {"classes"});
  std::vector<Outcome> out;
  for (int threads : {1, 2}) {
    ctx_.threads = threads;
    out.push_back(runNode(*fast_, loss, {&logits, &labels}, ctx_));
    out.push_back(runNode(*fast_, grad, {&logits, &labels, &dloss}, ctx_));
  }
  ctx_.threads = 1;
  for (size_t k = 0; k < 2; ++k) {
    ASSERT_TRUE(out[k].status.ok && out[k + 2].status.ok);
    ASSERT_EQ(out[k].out.f.size(), out[k + 2].out.f.size());
    EXPECT_EQ(std::memcmp(out[k].out.f.data(), out[k + 2].out.f.data(), out[k].out.f.size() * 4), 0) << k;
  }
  EXPECT_TRUE(std::isnan(out[0].out.f[0]));  // a NaN logit makes the mean loss NaN
  EXPECT_TRUE(std::isnan(out[1].out.f[5 * 301]) && !std::isnan(out[1].out.f[4 * 301]));  // only its row's gradient
}

TEST_F(BackendTest, DropoutMasksAgreeAndFollowTheSeed) {
  Shape s = sh({A, C, B});
  Buf x = rand(s);
  for (float& v : x.f) v = std::fabs(v) + 1.0f;  // never 0, so a 0 output means dropped
  Node d = node(Op::Dropout, s);
  d.id = 3;      // not the seed: the layout renumbers nodes
  d.index = 42;  // the lowering id every mesh shares
  d.scalar = 0.3;
  ctx_.seed = 99;
  Buf y = check(d, {&x});
  int64_t dropped = 0;
  for (float v : y.f) dropped += v == 0.0f;
  EXPECT_GT(dropped, y.size() / 5);
  EXPECT_LT(dropped, y.size() * 2 / 5);
  Outcome f = runNode(*fast_, d, {&x}, ctx_);
  for (int64_t k = 0; k < y.size(); ++k) EXPECT_EQ(f.out.f[k] == 0.0f, y.f[k] == 0.0f) << k;
  Node g = node(Op::DropoutGrad, s);  // the same mask, found through the forward id
  g.id = 80;
  g.index = 42;
  g.scalar = 0.3;
  Buf dy = check(g, {&x});
  for (int64_t k = 0; k < y.size(); ++k) EXPECT_EQ(dy.f[k] == 0.0f, y.f[k] == 0.0f);
  ctx_.seed = 100;  // another step: another mask
  Outcome other = runNode(*fast_, d, {&x}, ctx_);
  int64_t differ = 0;
  for (int64_t k = 0; k < y.size(); ++k) differ += (other.out.f[k] == 0.0f) != (y.f[k] == 0.0f);
  EXPECT_GT(differ, 0);
  // A rank's block (offset = where it starts) draws the whole tensor's bits there.
  ctx_.seed = 99;
  const int64_t rows = s.dims[0].size, per = y.size() / rows;
  Shape tail_shape = s;
  tail_shape.dims[0].size = rows - 1;
  Buf tail = rand(tail_shape);
  for (int64_t k = 0; k < tail.size(); ++k) tail.f[k] = x.f[per + k];
  Node block = d;
  block.shape = tail_shape;
  block.offset = per;
  Buf yt = check(block, {&tail});
  for (int64_t k = 0; k < yt.size(); ++k) EXPECT_EQ(yt.f[k] == 0.0f, y.f[per + k] == 0.0f) << k;
  ctx_.training = false;
  check(d, {&x});
  EXPECT_EQ(dropoutSeed(99, 42), dropoutSeed(99, 42));
  EXPECT_NE(dropoutSeed(99, 42), dropoutSeed(99, 43));
}

TEST_F(BackendTest, CastAndArange) {
  Shape s = sh({A, B});
  Buf x = rand(s, 100.0f);
  x.f[0] = 0.0f;
  x.f[1] = std::nanf("");
  x.f[2] = 3e9f;    // beyond int32: wraps
  x.f[3] = -1e30f;  // saturates to int64's minimum first
  for (DType t : {DType::I32, DType::Bool, DType::BF16, DType::F16, DType::U8}) check(node(Op::Cast, s, t), {&x});
  Buf xi = ints(s, rng_, -1000, 1000);
  for (DType t : {DType::F32, DType::U8, DType::Bool}) check(node(Op::Cast, s, t), {&xi});
  check(node(Op::Arange, sh({C}), DType::I32), {});
}

TEST_F(BackendTest, ContractWithTwoThreads) {
  const Dim M{"m", 64}, N{"n", 96}, K{"k", 80};
  Buf a = rand(sh({M, K})), b = rand(sh({K, N}));
  ctx_.threads = 2;
  check(node(Op::Contract, sh({M, N})), {&a, &b});
  ctx_.threads = 1;
  check(node(Op::Contract, sh({M, N})), {&a, &b});
}

// `count` N(0, 1) floats from `rng`, for the SGEMM tests below.
std::vector<float> normalFloats(std::mt19937& rng, int64_t count) {
  std::normal_distribution<float> nd;
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = nd(rng);
  return v;
}

// A product with few rows on 2 and 3 threads runs as one single-threaded
// call per block of columns (gemm.cc): within f32 rounding of a double sum,
// a NaN in A reaching its whole row of C, and the same bits on every call
// with the same thread count. Shapes: blocks of 64-multiples and not (N 160
// in two blocks of 80, N 200 in 64, 64, 72), B as stored and transposed,
// C overwritten and accumulated into.
TEST(FastSgemm, ColumnBlocksMatchADoubleSumAndRepeatBitwise) {
  struct Shape3 {
    char tb;
    int64_t n, k;
  };
  std::mt19937 rng(11);
  auto randv = [&](int64_t count) { return normalFloats(rng, count); };
  const int64_t m = 256;
  for (Shape3 sh : {Shape3{'N', 1000, 300}, {'T', 1024, 1024}, {'N', 160, 1024}, {'T', 200, 1024}}) {
    std::vector<float> a = randv(m * sh.k), b = randv(sh.k * sh.n), c0 = randv(m * sh.n);
    a[static_cast<size_t>(7 * sh.k + 3)] = std::nanf("");
    const int64_t ldb = sh.tb == 'N' ? sh.n : sh.k;
    for (float beta : {0.0f, 1.0f})
      for (int threads : {1, 2, 3}) {
        fast::setGemmThreads(threads);
        std::vector<float> c = c0, again = c0;
        std::string err;
        ASSERT_TRUE(fast::sgemm('N', sh.tb, m, sh.n, sh.k, 1.0f, a.data(), sh.k, b.data(), ldb, beta, c.data(), sh.n, &err))
            << err;
        ASSERT_TRUE(fast::sgemm('N', sh.tb, m, sh.n, sh.k, 1.0f, a.data(), sh.k, b.data(), ldb, beta, again.data(), sh.n,
                                &err))
            << err;
        EXPECT_EQ(std::memcmp(c.data(), again.data(), c.size() * sizeof(float)), 0)
            << "N " << sh.n << ", " << threads << " threads: two calls, other bits";
        for (int64_t i = 0; i < m; i += 7)  // every 7th row (7 holds the NaN) against a double sum
          for (int64_t j = 0; j < sh.n; ++j) {
            double sum = beta * static_cast<double>(c0[static_cast<size_t>(i * sh.n + j)]), size = std::fabs(sum);
            for (int64_t p = 0; p < sh.k; ++p) {
              const double x = a[static_cast<size_t>(i * sh.k + p)];
              const double y = b[static_cast<size_t>(sh.tb == 'N' ? p * ldb + j : j * ldb + p)];
              sum += x * y;
              size += std::fabs(x * y);
            }
            const float got = c[static_cast<size_t>(i * sh.n + j)];
            if (i == 7) {
              ASSERT_TRUE(std::isnan(got)) << "row 7, column " << j;
            } else {
              ASSERT_NEAR(got, sum, 1e-5 * size + 1e-6) << "N " << sh.n << " row " << i << " column " << j << ", "
                                                         << threads << " threads, beta " << beta;
            }
          }
      }
  }
  fast::setGemmThreads(1);
}

// A product with a dim of at most 16 on 2 and 3 threads runs as one
// single-threaded call per block of C's rows, or of its columns when C is
// wider than tall (gemm.cc skinnyThreads): the MLP's logits and their two
// gradients ('NN' N 10, 'NT' K 10, 'TN' N 10), a wide one (M 10), sgemm
// and matmulBias. Within f32 rounding of a double sum, a NaN in A reaching
// exactly what it should, the same bits on every call.
TEST(FastSgemm, SkinnyBlocksMatchADoubleSumAndRepeatBitwise) {
  struct Case {
    char ta, tb;
    int64_t m, n, k;
  };
  std::mt19937 rng(12);
  auto randv = [&](int64_t count) { return normalFloats(rng, count); };
  for (Case cs : {Case{'N', 'N', 256, 10, 1024}, {'N', 'T', 256, 1024, 10}, {'T', 'N', 1024, 10, 256},
                  {'N', 'N', 10, 1000, 300}, {'T', 'T', 10, 1000, 300}, {'N', 'N', 37, 3, 9000}}) {
    const int64_t lda = cs.ta == 'N' ? cs.k : cs.m, ldb = cs.tb == 'N' ? cs.n : cs.k;
    auto opA = [&](const std::vector<float>& a, int64_t i, int64_t p) {
      return a[static_cast<size_t>(cs.ta == 'N' ? i * lda + p : p * lda + i)];
    };
    auto opB = [&](const std::vector<float>& b, int64_t p, int64_t j) {
      return b[static_cast<size_t>(cs.tb == 'N' ? p * ldb + j : j * ldb + p)];
    };
    std::vector<float> a = randv(cs.m * cs.k), b = randv(cs.k * cs.n), c0 = randv(cs.m * cs.n), bias = randv(cs.n);
    const int64_t nan_row = cs.m / 2 + 1;  // A(nan_row, 3) is NaN: C's row nan_row is NaN, every other row finite
    a[static_cast<size_t>(cs.ta == 'N' ? nan_row * lda + 3 : 3 * lda + nan_row)] = std::nanf("");
    for (int with_bias : {0, 1})
      for (float beta : {0.0f, 1.0f}) {
        if (with_bias && beta != 0.0f) continue;  // matmulBias overwrites C
        for (int threads : {1, 2, 3}) {
          fast::setGemmThreads(threads);
          std::vector<float> c = c0, again = c0;
          std::string err;
          for (std::vector<float>* out : {&c, &again})
            ASSERT_TRUE(with_bias ? fast::matmulBias(cs.ta, cs.tb, cs.m, cs.n, cs.k, a.data(), b.data(), ldb,
                                                     bias.data(), out->data(), &err)
                                  : fast::sgemm(cs.ta, cs.tb, cs.m, cs.n, cs.k, 1.0f, a.data(), lda, b.data(), ldb,
                                                beta, out->data(), cs.n, &err))
                << err;
          const std::string what = std::string(1, cs.ta) + cs.tb + " " + std::to_string(cs.m) + "x" +
                                   std::to_string(cs.n) + "x" + std::to_string(cs.k) + ", " +
                                   std::to_string(threads) + " threads, beta " + std::to_string(beta) +
                                   (with_bias ? ", bias" : "");
          ASSERT_EQ(fast::skinnyGemmThreads(cs.m, cs.n, cs.k), threads) << what << ": the split is taken";
          ASSERT_EQ(std::memcmp(c.data(), again.data(), c.size() * sizeof(float)), 0)
              << what << ": two calls, other bits";
          for (int64_t i = 0; i < cs.m; ++i)
            for (int64_t j = 0; j < cs.n; ++j) {
              double sum = beta * static_cast<double>(c0[static_cast<size_t>(i * cs.n + j)]), size = std::fabs(sum);
              for (int64_t p = 0; p < cs.k; ++p) {
                const double x = opA(a, i, p), y = opB(b, p, j);
                sum += x * y;
                size += std::fabs(x * y);
              }
              if (with_bias) sum += bias[static_cast<size_t>(j)], size += std::fabs(bias[static_cast<size_t>(j)]);
              const float got = c[static_cast<size_t>(i * cs.n + j)];
              if (i == nan_row) {
                ASSERT_TRUE(std::isnan(got)) << what << ": row " << i << ", column " << j;
              } else {
                ASSERT_NEAR(got, sum, 1e-5 * size + 1e-6) << what << ": row " << i << ", column " << j;
              }
            }
        }
      }
  }
  fast::setGemmThreads(2);  // the rule's edges: no dim ≤ 16, or too few flops to split
  EXPECT_EQ(fast::skinnyGemmThreads(256, 17, 1024), 1);
  EXPECT_EQ(fast::skinnyGemmThreads(16, 16, 16), 1);
  fast::setGemmColumnSplit(false);
  EXPECT_EQ(fast::skinnyGemmThreads(256, 10, 1024), 1);
  fast::setGemmColumnSplit(true);
  fast::setGemmThreads(1);
}

// The executor computes each copy's gradient straight into its block of the
// slice_grad's output; both backends must then leave those blocks intact and
// still fill the others.
TEST_F(BackendTest, SliceGradWithCopiesAlreadyInPlace) {
  const Dim L{"layers", 4};
  const Shape full = sh({L, A, B});
  std::vector<Buf> copies;
  for (int c = 0; c < 4; ++c) copies.push_back(rand(sh({A, B})));
  Node all = node(Op::SliceGrad, full, DType::F32, "", {"layers"});
  std::vector<Buf*> in;
  for (Buf& c : copies) in.push_back(&c);
  Buf want = check(all, in);
  const int64_t per = A.size * B.size;
  for (Backend* be : {ref_.get(), fast_.get()}) {
    Buf out(full, DType::F32);
    out.f.assign(out.f.size(), std::nanf(""));
    std::vector<TensorView> views;
    for (int c = 0; c < 4; ++c) {
      views.push_back(copies[static_cast<size_t>(c)].view());
      if (c == 1 || c == 3) {  // these two were computed in place
        std::copy(copies[static_cast<size_t>(c)].f.begin(), copies[static_cast<size_t>(c)].f.end(),
                  out.f.begin() + c * per);
        views.back().data = out.f.data() + c * per;
      }
    }
    std::vector<const TensorView*> ptrs;
    for (const TensorView& v : views) ptrs.push_back(&v);
    TensorView ov = out.view();
    KernelStatus st = be->run(all, ptrs, ov, ctx_);
    ASSERT_TRUE(st.ok) << st.message;
    EXPECT_TRUE(close(out, want, 0, 0)) << be->name();
  }
}

TEST_F(BackendTest, InputParamUpdateAreNotKernels) {
  for (Op op : {Op::Input, Op::Param, Op::Update}) {
    Outcome r = runNode(*ref_, node(op, Shape{}), {}, ctx_), f = runNode(*fast_, node(op, Shape{}), {}, ctx_);
    EXPECT_FALSE(r.status.ok);
    EXPECT_FALSE(f.status.ok);
  }
}

}  // namespace
}  // namespace dtl::rt::testing
