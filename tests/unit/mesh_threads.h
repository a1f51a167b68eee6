// Ranks as threads (tests): every rank of a mesh runs its own program over a
// shared-memory group per axis, from its pieces of the same weights and the
// same global batch, so a layout can be compared with one process: the loss,
// and each rank's gradient against its piece of the one-process gradient —
// the piece its optimiser updates (the parameter's, or with ZeRO a flat
// piece of it).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/driver/frontend.h"
#include "runtime/comm/communicator.h"

namespace dtl::rt::testing_mesh {

// A two-layer GPT (the stdlib TransformerBlock, a tied output layer), or a
// LLaMA-style one (RMSNorm, SwiGlu), with `parallel` as its parallel block;
// `extra` non-empty scales the logits by 300.
std::string gptSpec(const std::string& parallel, int global_batch, int world_batch_split, bool llama = false,
                    const std::string& vocab = "16", const std::string& extra = "");

std::unique_ptr<driver::Frontend> compile(const std::string& text, int world);

// Whole tensors: the weights and the global batch, the same for every run.
struct Problem {
  std::map<std::string, std::vector<float>> params;
  std::map<std::string, std::vector<float>> floats;
  std::map<std::string, std::vector<int32_t>> ints;
  std::map<std::string, Shape> input_shape;
};
Problem problem(const ir::Graph& g, int32_t int_range);

struct RankResult {
  float loss = 0;
  std::map<std::string, std::vector<float>> grads;  // this rank's pieces
  std::string error;
};

std::vector<RankResult> runMesh(const driver::Frontend& fe, const Problem& p);

// `many_spec` on `world` ranks against `one_spec` on one process, from the
// same weights on the same global batch (loss and gradients within 1e-5).
void expectOneProcessResults(const std::string& one_spec, const std::string& many_spec, int world, int32_t int_range);

}  // namespace dtl::rt::testing_mesh
