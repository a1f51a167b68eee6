// The front end end to end, in-process: the samples, the stdlib layers,
// GPT-2 small's exact parameter count, overrides and the mesh.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "compiler/driver/frontend.h"
#include "compiler/sema/print_sema.h"
#include "tools/dtlc/cli.h"

namespace dtl {
namespace {

namespace fs = std::filesystem;
const std::string kRoot = DTL_SOURCE_DIR;

int check(const std::vector<std::string>& args, std::string& out, std::string& err) {
  std::vector<std::string> a = {"check"};
  a.insert(a.end(), args.begin(), args.end());
  return cli::runCli(a, out, err);
}

const sema::ParamInfo* findParam(const sema::Model& m, const std::string& path) {
  for (const auto& p : m.params)
    if (p.path == path) return &p;
  return nullptr;
}

TEST(Frontend, EverySampleChecks) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(kRoot + "/samples")) {
    if (e.path().extension() != ".dtl") continue;
    std::string out, err;
    EXPECT_EQ(check({e.path().string()}, out, err), 0) << e.path() << "\n" << err;
    EXPECT_NE(out.find("total: "), std::string::npos) << out;
    ++n;
  }
  EXPECT_GE(n, 4);
}

TEST(Frontend, Gpt2SmallHasExactlyGpt2sParameterCount) {
  driver::Frontend fe;
  ASSERT_EQ(fe.run(kRoot + "/samples/gpt2_small.dtl", {}), 0) << fe.diagnostics().render();
  const sema::Model& m = fe.spec().model;
  EXPECT_EQ(m.parameters, 124439808);
  EXPECT_EQ(m.parameter_bytes, 124439808ll * 4);
  const sema::ParamInfo* wq = findParam(m, "blocks.attn.wq");
  ASSERT_NE(wq, nullptr);
  EXPECT_EQ(wq->shape.str(), "[layers=12, d=768, heads=12, head_dim=64]");
  const sema::ParamInfo* up = findParam(m, "blocks.mlp.up.weight");
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->shape.str(), "[layers=12, d=768, hidden=3072]");
}

TEST(Frontend, JsonSummaryHasTheDocumentedKeys) {
  std::string out, err;
  ASSERT_EQ(check({kRoot + "/samples/gpt2_small.dtl", "--format", "json", "--world", "8"}, out, err), 0) << err;
  for (const char* key : {"\"model\":\"Gpt2Small\"", "\"parameters\":124439808", "\"parameter_bytes\":497759232",
                          "\"params\":[", "\"path\":\"blocks.attn.wq\"",
                          "\"shape\":[[\"layers\",12],[\"d\",768],[\"heads\",12],[\"head_dim\",64]]",
                          "\"elements\":7077888", "\"inputs\":[", "\"mesh\":{\"world\":8",
                          "{\"name\":\"dp\",\"size\":2,\"auto\":true}"})
    EXPECT_NE(out.find(key), std::string::npos) << key << "\n" << out.substr(0, 400);
}

// Each stdlib layer, instantiated by a tiny model that uses its forward.
TEST(Frontend, EveryStdlibLayerChecks) {
  struct Case {
    const char* layer;
    const char* inst;
    const char* input;
    const char* use;
    int64_t params;
  };
  const Case cases[] = {
      {"Linear", "Linear(d, e)", "f32[batch, d]", "sum(l(x))", 8 * 6 + 6},
      {"Linear", "Linear(d, e, use_bias = false)", "f32[batch, d]", "sum(l(x))", 8 * 6},
      {"Embedding", "Embedding(v, d)", "i32[batch, s]", "sum(l(x))", 10 * 8},
      {"LayerNorm", "LayerNorm(d)", "f32[batch, d]", "sum(l(x))", 16},
      {"LayerNorm", "LayerNorm(d, affine = false)", "f32[batch, d]", "sum(l(x))", 0},
      {"RMSNorm", "RMSNorm(d)", "f32[batch, d]", "sum(l(x))", 8},
      {"Mlp", "Mlp(d, e)", "f32[batch, d]", "sum(l(x))", 8 * 6 + 6 + 6 * 8 + 8},
      {"SwiGlu", "SwiGlu(d, e)", "f32[batch, d]", "sum(l(x))", 3 * 8 * 6},
      {"Attention", "Attention(d, h)", "f32[batch, s, d]", "sum(l(x))", 4 * 64 + 3 * 8 + 8},
      {"TransformerBlock", "TransformerBlock(d, h, e)", "f32[batch, s, d]", "sum(l(x))",
       16 + (4 * 64 + 3 * 8 + 8) + 16 + (8 * 6 + 6 + 6 * 8 + 8)},
  };
  for (const Case& c : cases) {
    std::string spec = std::string("model M {\n  dim d = 8, e = 6, v = 10, s = 5, h = 2\n  input x : ") + c.input +
                       "\n  l = " + c.inst + "\n  loss = " + c.use + "\n}\n";
    driver::Frontend fe;
    EXPECT_EQ(fe.runText("m.dtl", spec, {}), 0) << c.inst << "\n" << fe.diagnostics().render();
    EXPECT_EQ(fe.spec().model.parameters, c.params) << c.inst;
  }
}

TEST(Frontend, ModelOverrideChangesShapes) {
  driver::Frontend fe;
  driver::FrontendOptions opt;
  opt.sets = {"model.h1=256", "train.epochs=1", "parallel.bucket=1 MiB"};
  ASSERT_EQ(fe.run(kRoot + "/samples/fashion_mnist_mlp.dtl", opt), 0) << fe.diagnostics().render();
  EXPECT_EQ(findParam(fe.spec().model, "fc1.weight")->shape.str(), "[pixels=784, h1=256]");
  EXPECT_EQ(fe.spec().train.epochs.value_or(0), 1);
  EXPECT_EQ(fe.spec().parallel.bucket_bytes, 1 << 20);
}

// `epochs` and `steps` are two ways to write the run's length: overriding
// one replaces the other, so `--set train.epochs=1` shortens any sample.
TEST(Frontend, EpochsAndStepsOverridesReplaceEachOther) {
  driver::Frontend by_steps;  // char_gpt trains for `steps = 500`
  driver::FrontendOptions opt;
  opt.sets = {"train.epochs=1"};
  ASSERT_EQ(by_steps.run(kRoot + "/samples/char_gpt.dtl", opt), 0) << by_steps.diagnostics().render();
  EXPECT_EQ(by_steps.spec().train.epochs.value_or(0), 1);
  EXPECT_FALSE(by_steps.spec().train.steps.has_value());
  driver::Frontend by_epochs;  // fashion_mnist_mlp trains for `epochs = 10`
  opt.sets = {"train.steps=7"};
  ASSERT_EQ(by_epochs.run(kRoot + "/samples/fashion_mnist_mlp.dtl", opt), 0) << by_epochs.diagnostics().render();
  EXPECT_EQ(by_epochs.spec().train.steps.value_or(0), 7);
  EXPECT_FALSE(by_epochs.spec().train.epochs.has_value());
}

// A checkpoint folder is an output: kept as written, relative to the working
// folder (as `--resume` is), not joined to the spec's folder like data paths.
TEST(Frontend, CheckpointFolderIsKeptAsWritten) {
  auto spec = [](const std::string& folder) {
    return "model M {\n  dim d = 4\n  input x : f32[batch, d]\n  loss = mean(x)\n}\n"
           "train {\n  optimizer = sgd(lr = 0.1)\n  checkpoint \"" + folder + "\" every 1 epoch\n}\n";
  };
  driver::Frontend fe;
  ASSERT_EQ(fe.runText("/elsewhere/m.dtl", spec("runs/x"), {}), 0) << fe.diagnostics().render();
  EXPECT_EQ(fe.spec().train.checkpoint_dir, "runs/x");
  driver::Frontend empty;
  EXPECT_EQ(empty.runText("m.dtl", spec(""), {}), 1);
  EXPECT_NE(empty.diagnostics().render().find("`checkpoint` needs a folder, not an empty string"), std::string::npos)
      << empty.diagnostics().render();
  // No folder: the run folder takes the checkpoints (`dtlc run --out`, runs/<spec name>).
  driver::Frontend none;
  const std::string text = "model M {\n  dim d = 4\n  input x : f32[batch, d]\n  loss = mean(x)\n}\n"
                           "train {\n  optimizer = sgd(lr = 0.1)\n  checkpoint every 2 steps keep 3\n}\n";
  ASSERT_EQ(none.runText("m.dtl", text, {}), 0) << none.diagnostics().render();
  EXPECT_EQ(none.spec().train.checkpoint_dir, "");
  EXPECT_TRUE(none.spec().train.checkpoint_every.present);
  EXPECT_EQ(none.spec().train.checkpoint_every.count, 2);
  EXPECT_EQ(none.spec().train.checkpoint_keep, 3);
}

TEST(Frontend, OverrideErrorsPointAtTheOverride) {
  driver::Frontend fe;
  driver::FrontendOptions opt;
  opt.sets = {"train.batch=0"};
  EXPECT_EQ(fe.run(kRoot + "/samples/fashion_mnist_mlp.dtl", opt), 1);
  EXPECT_EQ(fe.diagnostics().render(),
            "--set train.batch:1:1: error: `train.batch` must be at least 1, got 0\n  0\n  ^\n1 error generated.\n");
}

TEST(Frontend, UnknownOverrideIsAUsageError) {
  std::string out, err;
  EXPECT_EQ(check({kRoot + "/samples/fashion_mnist_mlp.dtl", "--set", "model.hiden=3"}, out, err), 2);
  EXPECT_EQ(err, "dtlc check: --set model.hiden=3: model `FashionMlp` declares no dim `hiden`\n");
  err.clear();
  EXPECT_EQ(check({kRoot + "/samples/fashion_mnist_mlp.dtl", "--set", "model.h=3"}, out, err), 2);
  EXPECT_NE(err.find("did you mean `h1`?"), std::string::npos) << err;
}

TEST(Frontend, WorldResolvesAutoAndChecksTheProduct) {
  driver::Frontend a;
  driver::FrontendOptions opt;
  opt.world = 8;
  ASSERT_EQ(a.run(kRoot + "/samples/gpt2_small.dtl", opt), 0) << a.diagnostics().render();
  EXPECT_EQ(a.spec().parallel.mesh[0].size, 2);  // dp = 8 / (tp 2 × pp 2)
  driver::Frontend b;
  opt.world = 6;
  EXPECT_EQ(b.run(kRoot + "/samples/gpt2_small.dtl", opt), 1);
  EXPECT_NE(b.diagnostics().render().find("does not divide by the fixed axes"), std::string::npos);
}

TEST(Frontend, NoParallelBlockMeansDataParallel) {
  driver::Frontend fe;
  driver::FrontendOptions opt;
  opt.world = 3;
  ASSERT_EQ(fe.run(kRoot + "/samples/synthetic_mlp.dtl", opt), 0);
  ASSERT_EQ(fe.spec().parallel.mesh.size(), 1u);
  EXPECT_EQ(fe.spec().parallel.mesh[0].name, "dp");
  EXPECT_EQ(fe.spec().parallel.mesh[0].size, 3);
  ASSERT_EQ(fe.spec().parallel.splits.size(), 1u);
  EXPECT_EQ(fe.spec().parallel.splits[0].dim, "batch");
}

TEST(Frontend, ImportsResolveRelativeToTheSpec) {
  fs::path dir = fs::temp_directory_path() / ("dtl_import_" + std::to_string(::getpid()));
  fs::create_directories(dir / "lib");
  std::ofstream(dir / "lib" / "blocks.dtl") << "layer Twice(d: dim) {\n  inner = Linear(d, d2)\n  dim d2 = d\n"
                                               "  forward(x) = inner(x)\n}\n";
  std::ofstream(dir / "spec.dtl") << "import \"lib/blocks.dtl\"\nmodel M {\n  dim d = 4\n  input x : f32[batch, d]\n"
                                     "  t = Twice(d)\n  loss = mean(t(x))\n}\n";
  driver::Frontend fe;
  EXPECT_EQ(fe.run((dir / "spec.dtl").string(), {}), 0) << fe.diagnostics().render();
  EXPECT_EQ(fe.spec().model.parameters, 4 * 4 + 4);
  fs::remove_all(dir);
}

TEST(Frontend, TiedWeightsCountOnce) {
  const char* spec =
      "model M {\n  dim v = 10, d = 4, s = 3\n  input t : i32[batch, s]\n  tok = Embedding(v, d)\n"
      "  logits = tok(t) @ tok.table\n  loss = cross_entropy(logits, t, over = v)\n}\n";
  driver::Frontend fe;
  ASSERT_EQ(fe.runText("m.dtl", spec, {}), 0) << fe.diagnostics().render();
  EXPECT_EQ(fe.spec().model.parameters, 40);
  ASSERT_EQ(fe.spec().model.values.size(), 2u);
  EXPECT_EQ(fe.spec().model.values[0].shape.names(), "[batch, s, v]");
}

TEST(Frontend, EmitStagesAreDeterministic) {
  for (const char* emit : {"--emit=ast", "--emit=sema"}) {
    std::string out1, out2, err;
    ASSERT_EQ(check({kRoot + "/samples/char_gpt.dtl", emit}, out1, err), 0) << err;
    ASSERT_EQ(check({kRoot + "/samples/char_gpt.dtl", emit}, out2, err), 0) << err;
    EXPECT_EQ(out1, out2);
    EXPECT_GT(out1.size(), 200u);
  }
  std::string out, err;
  check({kRoot + "/samples/char_gpt.dtl", "--emit=sema"}, out, err);
  EXPECT_NE(out.find("value logits : f32[batch=32, seq=64, vocab=256]"), std::string::npos) << out;
}

}  // namespace
}  // namespace dtl
