// Tensor, sequence and vocabulary parallelism with ranks as threads: on any
// mesh, each rank's program (its local shapes, its collectives) run from its
// piece of the same weights on the same global batch gives the one-process
// loss, and each rank's gradient is its piece of the one-process gradient.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>

#include "compiler/program/plan_program.h"
#include "runtime/exec/param_shards.h"
#include "tests/unit/mesh_threads.h"

namespace dtl::rt {
namespace {

using namespace testing_mesh;

void expectGpt(const std::string& parallel, int world, int dp = 1, bool llama = false) {
  expectOneProcessResults(gptSpec("", 8, 1, llama), gptSpec(parallel, 8, dp, llama), world, 16);
}

TEST(TensorParallel, HeadsAndHiddenOverTwoRanks) { expectGpt("mesh tp = 2; split heads over tp; split hidden over tp", 2); }
TEST(TensorParallel, HeadsAndHiddenOverFourRanks) { expectGpt("mesh tp = 4; split heads over tp; split hidden over tp", 4); }
TEST(TensorParallel, DataTimesTensor) {
  expectGpt("mesh dp = 2, tp = 2; split batch over dp; split heads over tp; split hidden over tp", 4, 2);
}
TEST(TensorParallel, VocabularyOverTwoRanks) { expectGpt("mesh tp = 2; split vocab over tp", 2); }
// An odd vocabulary (GPT-2's 50257 is the case that matters): the first
// vocab mod tp ranks hold one more row of the table and one more class.
TEST(TensorParallel, OddVocabularySplitsUnevenly) {
  for (int tp : {2, 4})
    expectOneProcessResults(gptSpec("", 8, 1, false, "13"),
                            gptSpec("mesh tp = " + std::to_string(tp) + "; split vocab over tp", 8, 1, false, "13"), tp, 13);
}

// Logits in the hundreds: the split loss subtracts the largest logit of the
// row over every rank (a max all-reduce), or exp() would overflow.
TEST(TensorParallel, VocabularyWithLargeLogits) {
  expectOneProcessResults(gptSpec("", 8, 1, false, "16", "large"),
                          gptSpec("mesh tp = 4; split vocab over tp", 8, 1, false, "16", "large"), 4, 16);
}
TEST(TensorParallel, SequenceOverTwoRanks) { expectGpt("mesh tp = 2; split seq over tp", 2); }
// Dropout on the residual branches (replicated over tp) and on the MLP's
// hidden activations (split by `hidden`, the last dim; or by `seq`): every
// rank draws the mask bits of its block's global elements, the ones one
// process draws.
std::string dropoutGpt(const std::string& parallel) {
  std::string spec = gptSpec(parallel, 8, 1);
  const std::string block =
      "layer DropBlock(d: dim, heads: dim, hidden: dim) {\n  ln1 = LayerNorm(d)\n  attn = Attention(d, heads)\n"
      "  ln2 = LayerNorm(d)\n  up = Linear(d, hidden)\n  down = Linear(hidden, d)\n  forward(x) {\n"
      "    let h = x + dropout(attn(ln1(x)), p = 0.2)\n    return h + down(dropout(gelu(up(ln2(h))), p = 0.3))\n  }\n}\n";
  spec.replace(spec.find("TransformerBlock(d, heads, hidden)"), 34, "DropBlock(d, heads, hidden)");
  return block + spec;
}

TEST(TensorParallel, DropoutDropsWhatOneProcessDrops) {
  expectOneProcessResults(dropoutGpt(""), dropoutGpt("mesh tp = 2; split heads over tp; split hidden over tp"), 2, 16);
  expectOneProcessResults(dropoutGpt(""), dropoutGpt("mesh tp = 2; split seq over tp"), 2, 16);
}

// Regression: the split loss's rewrite held a shape by reference across
// node inserts; with the loss at a growth boundary of the node list its
// shapes came out empty. One extra node at a time, across boundaries.
TEST(TensorParallel, SplitLossAtAnyNodeCount) {
  for (int extra = 0; extra < 8; ++extra) {
    auto spec = [&](const std::string& parallel) {
      std::string s = gptSpec(parallel, 8, 1);
      std::string scale;
      for (int i = 0; i < extra; ++i) scale += " * 1.0";
      s.replace(s.find("@ tok.table\n"), 12, "@ tok.table" + scale + "\n");
      return s;
    };
    expectOneProcessResults(spec(""), spec("mesh tp = 2; split vocab over tp"), 2, 16);
  }
}

// Regression: a partial sum added to a partial max (both from a dim split
// over tp) reduced the max and then counted the result tp times.
TEST(TensorParallel, SumPlusMaxOfASplitDim) {
  auto spec = [](const std::string& parallel) {
    return "model M {\n  dim d = 8, hidden = 6, c = 3\n  input x : f32[batch, d]\n  input y : i32[batch]\n"
           "  up = Linear(d, hidden)\n  param v : [hidden, c] init normal(std = 0.5)\n  h = gelu(up(x))\n"
           "  s = h @ v + max(h, over = hidden)\n  loss = cross_entropy(s, y, over = c)\n}\n"
           "data { train { synthetic(seed = 5) } }\ntrain {\n  batch = 4\n  steps = 1\n  optimizer = sgd(lr = 0.1)\n}\n" +
           (parallel.empty() ? "" : "parallel { " + parallel + " }\n");
  };
  expectOneProcessResults(spec(""), spec("mesh tp = 2; split hidden over tp"), 2, 3);
}

// Shard(seq) meets Shard(heads) on a value that has both dims: it is
// exchanged (an all-to-all), not gathered.
std::string exchangeSpec(const std::string& parallel) {
  return "model M {\n  dim f = 8, heads = 4, seq = 6, c = 5\n  input x : f32[batch, seq, f]\n  input y : i32[batch, seq]\n"
         "  param pos : [seq, f] init normal(std = 0.5)\n  param wq : [f, heads] init normal(std = 0.5)\n"
         "  param wk : [f, heads] init normal(std = 0.5)\n  param wc : [heads, c] init normal(std = 0.5)\n"
         "  q = (x + pos) @ wq\n  k = x @ wk\n  logits = tanh(q * k) @ wc\n"
         "  loss = cross_entropy(logits, y, over = c)\n}\n"
         "data { train { synthetic(seed = 1) } }\ntrain {\n  batch = 8\n  steps = 1\n  optimizer = sgd(lr = 0.1)\n}\n" +
         (parallel.empty() ? "" : "parallel { " + parallel + " }\n");
}

TEST(TensorParallel, TwoShardsMeetThroughAnAllToAll) {
  for (int tp : {2, 3}) {  // 3: seq 6 evenly, heads 4 unevenly (2 + 1 + 1)
    const std::string rules = "mesh tp = " + std::to_string(tp) + "; split seq over tp; split heads over tp";
    auto fe = compile(exchangeSpec(rules), tp);
    int exchanges = 0;
    for (const ir::Node& n : fe->graph().nodes) exchanges += n.op == ir::Op::AllToAll;
    EXPECT_GT(exchanges, 0) << tp;
    expectOneProcessResults(exchangeSpec(""), exchangeSpec(rules), tp, 5);
  }
}

TEST(TensorParallel, LlamaBlockHeadsAndHidden) {
  expectGpt("mesh tp = 2; split heads over tp; split hidden over tp", 2, 1, true);
}

// Every pair of rules over a dp × tp mesh (a dim over tp, another over dp,
// with or without the batch over dp): whatever meets whatever, the numbers
// are one process's. Pairs the checks refuse (one tensor split by two dims
// over one axis) are left out.
struct Layout {
  std::string parallel;
  int dp_batch;  // how many ranks the batch is split over
};

class Layouts : public ::testing::TestWithParam<Layout> {};

TEST_P(Layouts, GiveOneProcessResults) {
  expectOneProcessResults(gptSpec("", 8, 1), gptSpec(GetParam().parallel, 8, GetParam().dp_batch), 4, 16);
}

std::vector<Layout> pairsOfRules() {
  const std::vector<std::string> dims = {"heads", "hidden", "d", "seq", "vocab", "head_dim"};
  std::vector<Layout> out;
  for (bool batch : {false, true})
    for (const std::string& a : dims)
      for (const std::string& b : dims) {
        if (a == b || (batch && (b == "seq" || b == "vocab"))) continue;  // tokens: [batch, seq]; refused
        std::string p = "mesh dp = 2, tp = 2; " + std::string(batch ? "split batch over dp; " : "") + "split " + a +
                        " over tp; split " + b + " over dp";
        out.push_back({p, batch ? 2 : 1});
      }
  return out;
}

INSTANTIATE_TEST_SUITE_P(PairsOfRules, Layouts, ::testing::ValuesIn(pairsOfRules()), [](const auto& info) {
  std::string name;
  for (char c : info.param.parallel.substr(info.param.parallel.find(';') + 2))
    name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
});

}  // namespace
}  // namespace dtl::rt

namespace dtl::rt {
namespace {

// Megatron-LM's f/g pair, per layer per step: one all-reduce of [batch,
// seq, d] after attention and one after the MLP in the forward pass, one
// before each layer norm's backward — and nothing else over tp (the norms'
// and row-parallel biases' gradients come out equal on every tp rank).
void expectMegatronCollectives(bool llama) {
  auto fe = compile(gptSpec("mesh tp = 2; split heads over tp; split hidden over tp", 8, 1, llama), 2);
  const ir::Graph& g = fe->graph();
  int activations = 0, other = 0;
  for (const ir::Node& n : g.nodes) {
    if (!ir::isConversion(n.op) || n.op == ir::Op::LocalSlice) continue;
    const bool residual = n.op == ir::Op::AllReduce && n.shape.str() == "[batch=8, seq=8, d=16]";
    (residual ? activations : other) += 1;
    EXPECT_TRUE(residual) << "%" << n.id << " " << ir::opName(n.op) << " " << n.shape.str() << ": " << n.fn;
  }
  EXPECT_EQ(activations, 4 * 2) << "2 layers";
  EXPECT_EQ(other, 0);
}

TEST(TensorParallel, MegatronCollectivesOnAGpt) { expectMegatronCollectives(false); }

// Attention's several results (out and log-sum-exp; dq, dk, dv) and their
// views are split by heads like its inputs, and each rank's program holds
// its heads of every result in the node's one slot.
TEST(TensorParallel, AttentionResultsSplitByHeads) {
  auto fe = compile(gptSpec("mesh tp = 2; split heads over tp; split hidden over tp", 8, 1), 2);
  const ir::Graph& g = fe->graph();
  const prog::Program p = program::planProgram(g, fe->layout(), {1});
  int nodes = 0, views = 0;
  for (const ir::Node& n : g.nodes) {
    const bool several = n.op == ir::Op::Attention || n.op == ir::Op::AttentionGrad;
    if (!several && n.op != ir::Op::Result) continue;
    (several ? nodes : views) += 1;
    const layout::Placement& pl = fe->layout().of[static_cast<size_t>(n.id)][0];
    EXPECT_TRUE(pl.kind == layout::Placement::Shard && pl.dim == "heads") << ir::printNode(n);
    for (int64_t k = 0; k <= static_cast<int64_t>(p[n.id].results.size()); ++k) {
      const Shape& local = ir::resultOf(p[n.id], k).shape;
      EXPECT_EQ(local.dims[static_cast<size_t>(local.find("heads"))].size, 2) << ir::printNode(p[n.id]);  // 4 heads over 2 ranks
    }
    if (n.op == ir::Op::Result) {
      EXPECT_EQ(p.train.storage[static_cast<size_t>(n.id)].kind, prog::Storage::Alias);
      EXPECT_EQ(p.train.storage[static_cast<size_t>(n.id)].offset, ir::resultOffset(p[n.inputs[0]], n.index));
    }
  }
  EXPECT_EQ(nodes, 2 * 2) << "2 layers, forward and backward";
  EXPECT_EQ(views, 3 * 2) << "per layer: the lse, dk and dv";
}

// Sequence parallelism (Korthikanti et al. 2022): `split seq over tp` after
// the heads and hidden rules. Per layer, forward: an all-gather of [batch,
// seq, d] into attention and into the MLP, a reduce-scatter out of each;
// the same in the backward pass; besides them only the reductions of the
// gradients the sequence shards sum (norms, row-parallel biases, the
// replicated embedding) and the loss.
TEST(TensorParallel, SequenceParallelCollectives) {
  auto fe = compile(gptSpec("mesh tp = 2; split heads over tp; split hidden over tp; split seq over tp", 8, 1), 2);
  int gathers = 0, scatters = 0, norms = 0;
  const ir::Graph& g = fe->graph();
  for (const ir::Node& n : g.nodes) {
    if (!ir::isConversion(n.op) || n.op == ir::Op::LocalSlice) continue;
    const bool activation = n.shape.str() == "[batch=8, seq=8, d=16]";
    const bool gradient = n.op == ir::Op::AllReduce && n.fn.rfind("the optimiser updates", 0) == 0;
    if (n.op == ir::Op::AllGather && activation) ++gathers;
    else if (n.op == ir::Op::ReduceScatter && activation) ++scatters;
    else if (gradient) norms += n.fn.find(".ln") != std::string::npos;
    else if (n.id != g[g.loss].inputs.at(0) && n.id != g.loss) ADD_FAILURE() << "%" << n.id << " " << ir::opName(n.op) << " " << n.shape.str() << ": " << n.fn;
  }
  EXPECT_EQ(gathers, 2 * 2 * 2) << "2 layers, 2 per layer forward and backward";
  EXPECT_EQ(scatters, 2 * 2 * 2);
  EXPECT_GT(norms, 0) << "the norms' gradients are sums over the sequence shards";
}

TEST(TensorParallel, SequenceParallelGivesOneProcessResults) {
  expectGpt("mesh tp = 2; split heads over tp; split hidden over tp; split seq over tp", 2);
  expectGpt("mesh dp = 2, tp = 2; split batch over dp; split heads over tp; split hidden over tp; split seq over tp", 4, 2);
  expectOneProcessResults(dropoutGpt(""), dropoutGpt("mesh tp = 2; split heads over tp; split hidden over tp; split seq over tp"), 2, 16);
}
TEST(TensorParallel, MegatronCollectivesOnALlamaBlock) { expectMegatronCollectives(true); }

}  // namespace
}  // namespace dtl::rt
