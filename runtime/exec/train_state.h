// state.json of a checkpoint: where training stands (step, data cursor) and
// what it must match to continue (model, seed). Written by the trainer, read
// back with every field checked, so a corrupt or hand-edited file stops the
// resume with a message naming the field, never an abort or a silent misread.
#pragma once

#include <cstdint>
#include <string>

namespace dtl::rt {

struct TrainState {
  int64_t step = 0;           // optimiser steps taken
  int64_t epoch = 0;          // the data cursor: epoch, and global batches into it
  int64_t step_in_epoch = 0;  //   (of `global_batch` samples each)
  int64_t seed = 0;
  std::string model;
  int64_t global_batch = 0;  // 0: not recorded (then this run's)
  int64_t world = 1;
  int64_t skipped_steps = 0;  // of `step`, skipped for a non-finite gradient: the optimiser took step − this
};

std::string trainStateJson(const TrainState& s);

// What the resuming run expects the state to agree with.
struct TrainStateExpect {
  int64_t step = 0;  // the checkpoint folder's
  std::string model;
  int64_t seed = 0;
  int64_t samples = 0;       // in the train split
  int64_t global_batch = 1;  // this run's, for a state that does not record its own
};

// Parses `text` and checks each field's type and range and its agreement
// with `expect`; false with `err` set to e.g. "\"epoch\" is -5; it must be
// an integer from 0".
bool parseTrainState(const std::string& text, const TrainStateExpect& expect, TrainState& out, std::string& err);

}  // namespace dtl::rt
