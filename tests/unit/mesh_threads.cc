// mesh_threads.h: ranks as threads, against one process.
#include "tests/unit/mesh_threads.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <random>
#include <thread>

#include "compiler/program/plan_program.h"
#include "runtime/exec/executor.h"
#include "runtime/exec/param_shards.h"

namespace dtl::rt::testing_mesh {


// A two-layer GPT (the stdlib TransformerBlock, a tied output layer), or a
// LLaMA-style one (RMSNorm, SwiGlu), with `parallel` as its parallel block.
std::string gptSpec(const std::string& parallel, int global_batch, int world_batch_split, bool llama,
                    const std::string& vocab, const std::string& extra) {
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

// One rank: its pieces of the weights and of the global batch through its program.
namespace {

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

}  // namespace

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
      int update = -1;  // its placement is the piece the gradient is of
      for (const ir::Node& n : program.nodes)
        if (n.op == ir::Op::Update && n.name == path) update = n.id;
      ASSERT_GE(update, 0);
      ShardOf s{many->graph()[update].shape, program.placement[static_cast<size_t>(update)], program.mesh, program.coords};
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


}  // namespace dtl::rt::testing_mesh
