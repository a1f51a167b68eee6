// Checkpoints of a training run in one directory: DIR/step-00000123/ holds
// params.safetensors, optimizer.safetensors and state.json, and DIR/index.json
// names the latest complete one. Tensors are keyed by parameter path (optimizer
// state as PATH.exp_avg etc.), so a checkpoint loads on any mesh; the store
// itself does not interpret names, bytes or the state JSON.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/io/safetensors.h"
#include "runtime/io/status.h"

namespace dtl::rt::io {

struct CheckpointContents {
  std::vector<TensorBlob> params;
  std::vector<TensorBlob> optimizer;
  std::string state_json;  // step, epoch, data cursor, rng state: opaque JSON text from the trainer
  int64_t step = 0;        // optimiser steps taken; names the folder
};

// "step-00000123"
std::string checkpointName(int64_t step);

class CheckpointStore {
 public:
  // keep: how many checkpoints to keep, newest first; 0 keeps all. One
  // process writes a directory at a time (rank 0).
  CheckpointStore(std::string dir, int64_t keep);

  // Saves `c` as DIR/step-NNNNNNNN and makes it the latest. A crash or failure
  // at any point leaves the previous latest checkpoint intact and loadable;
  // index.json never names a partial checkpoint. Saving a step that already
  // exists replaces it. An error after index.json was rewritten (pruning)
  // says that the checkpoint itself was saved.
  Status save(const CheckpointContents& c) const;

  // Loads the checkpoint index.json names as latest.
  static Status loadLatest(const std::string& dir, CheckpointContents& out);

  // The checkpoints index.json lists, oldest first (the last is the latest).
  static Status list(const std::string& dir, std::vector<std::string>& names);

 private:
  std::string dir_;
  int64_t keep_;
};

}  // namespace dtl::rt::io
