// Tensor, sequence and vocabulary parallelism with ranks as threads: on any
// mesh, each rank's program (its local shapes, its collectives) run from its
// piece of the same weights on the same global batch gives the one-process
// loss, and each rank's gradient is its piece of the one-process gradient.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <random>
#include <thread>

#include "compiler/driver/frontend.h"
#include "compiler/program/plan_program.h"
#include "runtime/comm/communicator.h"
#include "runtime/exec/executor.h"
#include "runtime/exec/param_shards.h"

namespace dtl::rt {
namespace {

// A two-layer GPT (the stdlib TransformerBlock, a tied output layer), or a
// LLaMA-style one (RMSNorm, SwiGlu), with `parallel` as its parallel block.
std::string gptSpec(const std::string& parallel, int global_batch, int world_batch_split, bool llama = false,
                    const std::string& vocab = "16", const std::string& extra = "") {
  std::string block = llama ? "LlamaBlock(d, heads, hidden)" : "TransformerBlock(d, heads, hidden)";
  std::string norm = llama ? "RMSNorm(d)" : "LayerNorm(d)";
  const std::string llama_block =
      "layer LlamaBlock(d: dim, heads: dim, hidden: dim) {\n  n1 = RMSNorm(d)\n  attn = Attention(d, heads, use_bias = false)\n"
      "  n2 = RMSNorm(d)\n  mlp = SwiGlu(d, hidden)\n"
      "  forward(x) {\n    let h = x + attn(n1(x))\n    return h + mlp(n2(h))\n  }\n}\n";
  return (llama ? llama_block : "") + "model G {\n  dim vocab = " + vocab + ", seq = 8, d = 16, heads = 4, hidden = 32, layers = 2\n"
         "  input tokens : i32[batch, seq]\n  input targets : i32[batch, seq]\n"
         "  tok = Embedding(vocab, d)\n  param pos : [seq, d] init normal(std = 0.02)\n"
         "  blocks = repeat(layers) " + block + "\n  ln_f = " + norm + "\n" +
         "  logits = ln_f(blocks(tok(tokens) + pos)) @ tok.table" + (extra.empty() ? "" : " * 300.0") + "\n"
         "  loss = cross_entropy(logits, targets, over = vocab)\n}\n"
         "data { train { synthetic(seed = 5) } }\n"
         "train {\n  batch = " + std::to_string(global_batch / world_batch_split) +
         "\n  steps = 1\n  optimizer = sgd(lr = 0.1)\n}\n" + (parallel.empty() ? "" : "parallel { " + parallel + " }\n");
}

std::unique_ptr<driver::Frontend> compile(const std::string& text, int world) {
  auto fe = std::make_unique<driver::Frontend>();
  driver::FrontendOptions o;
  o.world = world;
  int rc = fe->runText("tp.dtl", text, o, world > 1 ? driver::Stop::Plan : driver::Stop::Grad);
  EXPECT_EQ(rc, 0) << fe->diagnostics().render();
  EXPECT_TRUE(fe->layoutErrors().empty()) << (fe->layoutErrors().empty() ? "" : fe->layoutErrors()[0]);
  return fe;
}

// Whole tensors: the weights and the global batch, the same for every run.
struct Problem {
  std::map<std::string, std::vector<float>> params;
  std::map<std::string, std::vector<float>> floats;
  std::map<std::string, std::vector<int32_t>> ints;
  std::map<std::string, Shape> input_shape;
};

Problem problem(const ir::Graph& g, int32_t int_range) {
  Problem p;
  std::mt19937 rng(23);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  for (const ir::Node& n : g.nodes) {
    const size_t count = static_cast<size_t>(n.shape.elements().value_or(0));
    if (n.op == ir::Op::Param) {
      auto& v = p.params[n.name];
      v.resize(count);
      for (float& e : v) e = normal(rng);
    } else if (n.op == ir::Op::Input) {
      p.input_shape[n.name] = n.shape;
      if (isInteger(n.dtype)) {
        auto& v = p.ints[n.name];
        for (size_t i = 0; i < count; ++i) v.push_back(static_cast<int32_t>(rng() % static_cast<uint32_t>(int_range)));
      } else {
        auto& v = p.floats[n.name];
        v.resize(count);
        for (float& e : v) e = normal(rng);
      }
    }
  }
  return p;
}

struct RankResult {
  float loss = 0;
  std::map<std::string, std::vector<float>> grads;  // this rank's pieces
  std::string error;
};

// One rank: its pieces of the weights and of the global batch through its program.
RankResult runRank(const driver::Frontend& fe, const Problem& p, int rank,
                   const std::map<std::string, comm::Communicator*>& comms) {
  RankResult r;
  const ir::Graph& g = fe.graph();
  const prog::Program program = program::planProgram(g, fe.layout(), layout::meshCoords(fe.layout().mesh, rank));
  std::unique_ptr<Backend> backend = makeFastBackend();
  Executor ex(program, *backend);
  for (const auto& [axis, c] : comms) ex.setCommunicator(axis, c);
  std::map<std::string, std::vector<float>> pieces;
  std::map<std::string, std::vector<int32_t>> int_pieces;
  for (const ir::Node& n : g.nodes) {
    ShardOf s{n.shape, program.placement[static_cast<size_t>(n.id)], program.mesh, program.coords};
    if (n.op == ir::Op::Param) {
      pieces[n.name] = takeLocal(p.params.at(n.name).data(), s);
      ex.bindParam(n.name, pieces[n.name].data());
    } else if (n.op == ir::Op::Input && p.floats.count(n.name)) {
      std::vector<float> v = takeLocal(p.floats.at(n.name).data(), s);
      ex.setInput(n.name, v.data(), static_cast<int64_t>(v.size()));
    } else if (n.op == ir::Op::Input) {  // i32 values are moved as 4-byte words
      const auto* words = reinterpret_cast<const float*>(p.ints.at(n.name).data());
      std::vector<float> v = takeLocal(words, s);
      ex.setInput(n.name, v.data(), static_cast<int64_t>(v.size()));
    }
  }
  RunContext ctx;
  ctx.training = true;
  KernelStatus st = ex.run(true, ctx);
  if (!st.ok) {
    r.error = st.message;
    return r;
  }
  r.loss = ex.value(g.loss);
  for (const auto& [path, id] : program.grads) {
    const float* gr = ex.grad(path);
    const int64_t n = program[id].shape.elements().value_or(0);
    if (gr) r.grads[path].assign(gr, gr + n);
  }
  return r;
}

// Every rank of the mesh as a thread, with a shared-memory group per axis
// (the ranks that differ only in that axis' coordinate).
std::vector<RankResult> runMesh(const driver::Frontend& fe, const Problem& p) {
  const std::vector<layout::MeshAxis>& mesh = fe.layout().mesh;
  int world = 1;
  for (const layout::MeshAxis& a : mesh) world *= static_cast<int>(a.size);
  std::vector<RankResult> out(static_cast<size_t>(world));
  auto store = comm::makeMemoryStore();
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      const std::vector<int64_t> coords = layout::meshCoords(mesh, r);
      std::vector<std::unique_ptr<comm::Communicator>> owned;
      std::map<std::string, comm::Communicator*> comms;
      for (size_t a = 0; a < mesh.size(); ++a) {
        if (mesh[a].size <= 1) continue;
        std::string group = mesh[a].name + "/";
        for (size_t b = 0; b < mesh.size(); ++b) group += b == a ? "*" : std::to_string(coords[b]);
        comm::Status s;
        owned.push_back(comm::makeShmCommunicator(
            comm::GroupOptions{store, group + "/", static_cast<int>(coords[a]), static_cast<int>(mesh[a].size),
                               std::chrono::seconds(60)},
            s));
        if (!s.ok) {
          out[static_cast<size_t>(r)].error = s.message;
          return;
        }
        comms[mesh[a].name] = owned.back().get();
      }
      out[static_cast<size_t>(r)] = runRank(fe, p, r, comms);
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

// `parallel` on `world` ranks against one process, from the same weights on
// the same global batch.
void expectOneProcessResults(const std::string& one_spec, const std::string& many_spec, int world, int32_t int_range) {
  auto one = compile(one_spec, 1);
  auto many = compile(many_spec, world);
  ASSERT_TRUE(one && many);
  Problem p = problem(one->graph(), int_range);
  const std::vector<RankResult> ref = runMesh(*one, p);
  ASSERT_TRUE(ref[0].error.empty()) << ref[0].error;
  const std::vector<RankResult> ranks = runMesh(*many, p);
  // Rounding noise is relative to the model's gradients: the key bias's exact
  // gradient is zero (softmax ignores a shift shared by all keys), so both
  // runs give noise there, at the scale of the others.
  double floor = 0;
  for (const auto& [path, g] : ref[0].grads)
    for (float v : g) floor = std::max(floor, 1e-3 * std::fabs(static_cast<double>(v)));
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankResult& got = ranks[r];
    ASSERT_TRUE(got.error.empty()) << "rank " << r << ": " << got.error;
    EXPECT_NEAR(got.loss, ref[0].loss, 1e-5 * std::fabs(ref[0].loss)) << "rank " << r;
    const prog::Program program =
        program::planProgram(many->graph(), many->layout(), layout::meshCoords(many->layout().mesh, static_cast<int64_t>(r)));
    for (const auto& [path, id] : program.grads) {
      int param = -1;
      for (const ir::Node& n : program.nodes)
        if (n.op == ir::Op::Param && n.name == path) param = n.id;
      ASSERT_GE(param, 0);
      ShardOf s{many->graph()[param].shape, program.placement[static_cast<size_t>(param)], program.mesh, program.coords};
      const std::vector<float> want = takeLocal(ref[0].grads.at(path).data(), s);
      const std::vector<float>& have = got.grads.at(path);
      ASSERT_EQ(have.size(), want.size()) << "rank " << r << ", gradient of " << path;
      double worst = 0, scale = std::max(floor, 1e-12);
      for (size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, static_cast<double>(std::fabs(have[i] - want[i])));
        scale = std::max(scale, static_cast<double>(std::fabs(want[i])));
      }
      EXPECT_LT(worst / scale, 1e-5) << "rank " << r << ", gradient of " << path << " (its piece)";
    }
  }
}

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
