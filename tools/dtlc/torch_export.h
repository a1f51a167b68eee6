// dtl's GPT as a nanoGPT-style PyTorch module's state_dict (`dtlc export
// --format torch`). The model must be built from the standard library as
// samples/char_gpt.dtl is: a token Embedding, a learned position table
// [seq, d], a `repeat` stack of TransformerBlock, a final LayerNorm and an
// output tied to the token table (or a bias-free Linear head). Names and
// layouts (nn.Linear weights [out, in], heads merged; docs/running.md):
//   transformer.wte.weight [vocab, d]     transformer.wpe.weight [seq, d]
//   transformer.h.N.ln_1.weight/bias      transformer.h.N.attn.c_attn.weight [3d, d] (q, k, v rows) / bias [3d]
//   transformer.h.N.attn.c_proj.weight [d, d] / bias   transformer.h.N.ln_2.weight/bias
//   transformer.h.N.mlp.c_fc.weight [hidden, d] / bias  transformer.h.N.mlp.c_proj.weight [d, hidden] / bias
//   transformer.ln_f.weight/bias          lm_head.weight [vocab, d]
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compiler/driver/frontend.h"

namespace dtl::cli {

struct TorchTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// nanoGPT's GPTConfig, as the model has it.
struct GptConfig {
  int64_t n_layer = 0, n_head = 0, n_embd = 0, n_hidden = 0, vocab_size = 0, block_size = 0;
  bool tied = true;  // lm_head.weight is transformer.wte.weight
};

// Maps `values` (whole parameters by path, for fe's model compiled to its
// forward graph) to the state_dict in the order above. False with located
// diagnostics in `err` when a parameter or an operation of the model has no
// place in nanoGPT's.
bool torchGpt(const driver::Frontend& fe, const std::map<std::string, std::vector<float>>& values,
              std::vector<TorchTensor>& out, GptConfig& config, std::string& err);

}  // namespace dtl::cli
