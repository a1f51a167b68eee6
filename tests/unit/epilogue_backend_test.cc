// A contraction with an epilogue (ir::Node::epilogue, compiler/codegen/
// fold_epilogues.cc): the fast backend (the bias through oneDNN's matmul
// post-op, anything else after the product with its own kernels) against the
// reference backend (the product, then each absorbed node as it ran alone),
// over the layouts the GEMM mapping handles, NaN and ±inf in every operand,
// an empty sum, two threads, and bitwise the same result run after run. And
// why no activation is a oneDNN post-op: its relu turns NaN into 0.
#include <oneapi/dnnl/dnnl.hpp>

#include <cmath>
#include <cstring>
#include <limits>

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
      {sh({M, K}), sh({K, Dim{"w", 512}}), sh({Dim{"w", 512}}), sh({M, Dim{"w", 512}})},
      {sh({M, K}), sh({K, P, N}), sh({N, P}), sh({M, P, N})},              // bias in another order: after the product
      {sh({M, K}), sh({K, P, N}), sh({N}), sh({M, P, N})},                 // bias over part of N: after the product
      {sh({M, K}), sh({K, N}), sh({N}), sh({N, M})},                       // C permuted: after the product
      {sh({M, Dim{"z", 0}}), sh({Dim{"z", 0}, N}), sh({N}), sh({M, N})},   // an empty sum: the bias
      {sh({Dim{"e", 0}, K}), sh({K, N}), sh({N}), sh({Dim{"e", 0}, N})},   // no rows
  };
  for (const Case& c : cases)
    for (const std::vector<std::string>& acts : {std::vector<std::string>{}, {"relu"}, {"gelu"}}) {
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

// Why fold_epilogues.cc gives x86 no activation: oneDNN 2.6's relu post-op
// (alpha 0) is max(x, 0), which turns a NaN into 0 — ours keeps it. Should a
// oneDNN keep it, this fails: the relu may then join the epilogue.
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
  EXPECT_EQ(c[0], 0.0f) << "oneDNN's relu kept a NaN: fold_epilogues.cc may let relu join the epilogue";
  EXPECT_EQ(c[1], 0.0f);
  EXPECT_EQ(c[2], 2.0f);
  EXPECT_EQ(c[3], 0.0f);
}

}  // namespace
}  // namespace dtl::rt::testing
