// A spec's language model, run forward on one process for `dtlc generate`:
// finds the token-id input and the logits (the first operand of the loss's
// cross_entropy), refuses — located at the spec — a model that is not one
// (or one fed by `tokens`, whose ids no tokenizer here can decode), and
// computes the logits of a window of token ids with the checkpoint's
// parameters through the program's evaluation schedule.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/driver/frontend.h"
#include "core/program.h"
#include "runtime/exec/backend.h"
#include "runtime/exec/executor.h"

namespace dtl::cli {

// Where a language model's pieces are in the graph.
struct LmShape {
  std::string ids;     // the input of token ids, i32[batch, seq]
  int logits = -1;     // node id: f32 with dims batch, seq and vocab (in any order)
  int64_t seq = 0, vocab = 0;
  int64_t seq_stride = 0, vocab_stride = 0;  // in the logits' storage order (batch is 1)
};

// False with located diagnostics in `err` when the spec (compiled to its
// training graph at batch 1) is not a byte-level language model that
// generate can run.
bool findLanguageModel(const driver::Frontend& fe, LmShape& lm, std::string& err);

class LmRunner {
 public:
  // `params` (whole, by path) must outlive the runner.
  LmRunner(const ir::Graph& g, const LmShape& lm, std::map<std::string, std::vector<float>>& params,
           bool reference_kernels);

  // The logits at positions 0 … n-1 of the window `ids` (n ≤ seq, placed at
  // the start; the rest of the window is padding that a causal model's
  // earlier positions never see): n × vocab values, row by row.
  bool logits(const std::vector<int32_t>& ids, std::vector<float>& out, std::string& err);

 private:
  LmShape lm_;
  prog::Program program_;
  std::unique_ptr<rt::Backend> backend_;
  std::unique_ptr<rt::Executor> exec_;
  std::vector<std::vector<int32_t>> zeros_;  // for every input but the ids (the targets)
};

}  // namespace dtl::cli
