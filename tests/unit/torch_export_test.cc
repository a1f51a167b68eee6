// torchGpt: every nanoGPT tensor holds the dtl elements the layout says
// (nn.Linear [out, in], heads merged h·head_dim + e, q/k/v stacked by rows,
// layer N of each stacked parameter), without PyTorch (parity.export_torch
// checks the logits with it); and what it refuses.
#include "tools/dtlc/torch_export.h"

#include <gtest/gtest.h>

namespace dtl::cli {
namespace {

const char* kGpt = R"(
model G {
  dim vocab = 7, seq = 5, d = 6, heads = 2, hidden = 10, layers = 3
  input tokens  : i32[batch, seq]
  input targets : i32[batch, seq]
  tok    = Embedding(vocab, d)
  param pos : [seq, d] init normal(std = 0.01)
  blocks = repeat(layers) TransformerBlock(d, heads, hidden)
  ln_f   = LayerNorm(d)
  HEAD
  loss   = cross_entropy(logits, targets, over = vocab)
}
)";

struct Exported {
  std::map<std::string, TorchTensor> by_name;
  std::vector<std::string> order;
  GptConfig config;
  std::string err;
  bool ok = false;
};

// Every parameter filled with distinct values: element k of the p-th is p·1000 + k.
Exported exportText(const std::string& head, std::map<std::string, std::vector<float>>& values) {
  std::string text = kGpt;
  text.replace(text.find("HEAD"), 4, head);
  driver::Frontend fe;
  Exported e;
  EXPECT_EQ(fe.runText("g.dtl", text, {}, driver::Stop::Ir), 0) << fe.diagnostics().render();
  for (size_t p = 0; p < fe.spec().model.params.size(); ++p) {
    const sema::ParamInfo& info = fe.spec().model.params[p];
    std::vector<float>& v = values[info.path];
    v.resize(static_cast<size_t>(info.shape.elements().value_or(0)));
    for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(p * 1000 + k);
  }
  std::vector<TorchTensor> out;
  e.ok = torchGpt(fe, values, out, e.config, e.err);
  for (TorchTensor& t : out) {
    e.order.push_back(t.name);
    e.by_name[t.name] = std::move(t);
  }
  return e;
}

TEST(TorchExport, EveryElementIsWhereNanoGptReadsIt) {
  std::map<std::string, std::vector<float>> v;
  Exported e = exportText("logits = ln_f(blocks(tok(tokens) + pos)) @ tok.table", v);
  ASSERT_TRUE(e.ok) << e.err;
  const int64_t d = 6, H = 2, hd = 3, hidden = 10, L = 3;
  EXPECT_EQ(e.config.n_layer, L);
  EXPECT_EQ(e.config.n_head, H);
  EXPECT_EQ(e.config.n_hidden, hidden);
  EXPECT_EQ(e.config.block_size, 5);
  EXPECT_TRUE(e.config.tied);
  EXPECT_EQ(e.order.size(), 2u + 12u * L + 3u);
  EXPECT_EQ(e.order.front(), "transformer.wte.weight");
  EXPECT_EQ(e.order.back(), "lm_head.weight");
  EXPECT_EQ(e.by_name["lm_head.weight"].data, v["tok.table"]);
  EXPECT_EQ(e.by_name["transformer.wpe.weight"].data, v["pos"]);
  const int64_t l = 2;  // the last layer: the stacked offset matters
  const TorchTensor& qkv = e.by_name["transformer.h.2.attn.c_attn.weight"];
  ASSERT_EQ(qkv.shape, (std::vector<int64_t>{3 * d, d}));
  const char* w[3] = {"blocks.attn.wq", "blocks.attn.wk", "blocks.attn.wv"};
  for (int m = 0; m < 3; ++m)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t x = 0; x < hd; ++x)
        for (int64_t i = 0; i < d; ++i)  // dtl: [layers, d, heads, head_dim]
          ASSERT_EQ(qkv.data[static_cast<size_t>((m * d + h * hd + x) * d + i)],
                    v[w[m]][static_cast<size_t>(((l * d + i) * H + h) * hd + x)])
              << w[m] << " h " << h << " e " << x << " i " << i;
  const TorchTensor& bias = e.by_name["transformer.h.2.attn.c_attn.bias"];
  EXPECT_EQ(bias.data[static_cast<size_t>(d + 4)], v["blocks.attn.bk"][static_cast<size_t>(l * d + 4)]);
  const TorchTensor& proj = e.by_name["transformer.h.2.attn.c_proj.weight"];
  for (int64_t o = 0; o < d; ++o)
    for (int64_t k = 0; k < d; ++k)  // dtl wo: [layers, heads, head_dim, d]; k = h·head_dim + e
      ASSERT_EQ(proj.data[static_cast<size_t>(o * d + k)], v["blocks.attn.wo"][static_cast<size_t>((l * d + k) * d + o)]);
  const TorchTensor& fc = e.by_name["transformer.h.2.mlp.c_fc.weight"];
  ASSERT_EQ(fc.shape, (std::vector<int64_t>{hidden, d}));
  for (int64_t j = 0; j < hidden; ++j)
    for (int64_t i = 0; i < d; ++i)
      ASSERT_EQ(fc.data[static_cast<size_t>(j * d + i)], v["blocks.mlp.up.weight"][static_cast<size_t>((l * d + i) * hidden + j)]);
  const TorchTensor& down = e.by_name["transformer.h.2.mlp.c_proj.weight"];
  ASSERT_EQ(down.shape, (std::vector<int64_t>{d, hidden}));
  for (int64_t o = 0; o < d; ++o)
    for (int64_t j = 0; j < hidden; ++j)
      ASSERT_EQ(down.data[static_cast<size_t>(o * hidden + j)],
                v["blocks.mlp.down.weight"][static_cast<size_t>((l * hidden + j) * d + o)]);
  EXPECT_EQ(e.by_name["transformer.h.2.ln_2.bias"].data,
            std::vector<float>(v["blocks.ln2.bias"].begin() + l * d, v["blocks.ln2.bias"].begin() + (l + 1) * d));
}

TEST(TorchExport, ABiasFreeHeadIsTransposed) {
  std::map<std::string, std::vector<float>> v;
  Exported e = exportText("head = Linear(d, vocab, use_bias = false)\n  logits = head(ln_f(blocks(tok(tokens) + pos)))", v);
  ASSERT_TRUE(e.ok) << e.err;
  EXPECT_FALSE(e.config.tied);
  const TorchTensor& head = e.by_name["lm_head.weight"];
  ASSERT_EQ(head.shape, (std::vector<int64_t>{7, 6}));
  for (int64_t c = 0; c < 7; ++c)
    for (int64_t i = 0; i < 6; ++i)
      ASSERT_EQ(head.data[static_cast<size_t>(c * 6 + i)], v["head.weight"][static_cast<size_t>(i * 7 + c)]);
}

TEST(TorchExport, AHeadWithABiasIsRefused) {
  std::map<std::string, std::vector<float>> v;
  Exported e = exportText("head = Linear(d, vocab)\n  logits = head(ln_f(blocks(tok(tokens) + pos)))", v);
  EXPECT_FALSE(e.ok);
  EXPECT_NE(e.err.find("g.dtl:2:7: error: dtlc export: `head.bias` is a bias of a Linear layer; nanoGPT's lm_head "
                       "has none (use_bias = false)"),
            std::string::npos)
      << e.err;
}

}  // namespace
}  // namespace dtl::cli
