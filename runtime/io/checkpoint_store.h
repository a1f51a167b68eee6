// Checkpoints of a training run in one directory: DIR/step-00000123/ holds
// params.safetensors, optimizer.safetensors and state.json, and DIR/index.json
// names the latest complete one. Tensors are keyed by parameter path (optimizer
// state as PATH.exp_avg etc.), so a checkpoint loads on any mesh. Every tensor
// and state.json carry a checksum (io/checksums.h), checked on every load. The
// store itself does not interpret names, bytes or the state JSON.
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

// What loadNewestIntact found.
struct LoadReport {
  std::string name;                  // the checkpoint loaded
  std::vector<std::string> skipped;  // why each newer one was passed over, newest first
  std::string warning;               // set when it was loaded unverified (written without checksums)
};

// When save drops the checkpoints beyond `keep`: at once, or at prune().
enum class Prune { Now, Later };

class CheckpointStore {
 public:
  // keep: how many checkpoints to keep, newest first; 0 keeps all. One
  // process writes a directory at a time (global rank 0, holding its
  // DirLock: dir_lock.h).
  CheckpointStore(std::string dir, int64_t keep);

  // Saves `c` as DIR/step-NNNNNNNN and makes it the latest. A crash or failure
  // at any point leaves the previous latest checkpoint intact and loadable;
  // index.json never names a partial checkpoint. Saving a step that already
  // exists replaces it. An error after index.json was rewritten (pruning)
  // says that the checkpoint itself was saved. With Prune::Later nothing is
  // dropped until prune(): the trainer keeps the older checkpoints until the
  // new one has led to a finite loss.
  Status save(const CheckpointContents& c, Prune prune = Prune::Now) const;

  // Drops the oldest checkpoints beyond `keep` (those save(…, Prune::Later) kept).
  Status prune() const;

  // Takes `name` out of index.json and moves its folder to DIR/diverged-NAME
  // (replacing an older one there), e.g. the checkpoint a diverging run saved
  // just before its loss became NaN; `moved_to` gets the new path.
  Status withdraw(const std::string& name, std::string& moved_to) const;

  // Loads DIR/NAME, checking every checksum. `warning` (if given) is set when
  // the checkpoint has no checksums (written by an older dtl): it is loaded
  // unverified. On error `out` is untouched and the message names the file
  // and the tensor.
  static Status load(const std::string& dir, const std::string& name, CheckpointContents& out,
                     std::string* warning = nullptr);

  // Loads the checkpoint index.json names as latest.
  static Status loadLatest(const std::string& dir, CheckpointContents& out);

  // Loads the newest checkpoint that verifies, newest first by index.json
  // (by step when index.json is unreadable: a note in report.skipped); the
  // error, when none does, lists why each failed.
  static Status loadNewestIntact(const std::string& dir, CheckpointContents& out, LoadReport& report);

  // The checkpoints index.json lists, oldest first (the last is the latest).
  static Status list(const std::string& dir, std::vector<std::string>& names);

 private:
  std::string dir_;
  int64_t keep_;
};

}  // namespace dtl::rt::io
