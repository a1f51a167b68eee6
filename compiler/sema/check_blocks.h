// Stage 5: the data, train and parallel blocks, each checked against the
// instantiated model. One function per block; each fills its part of Spec.
#pragma once

#include "compiler/sema/program.h"
#include "compiler/sema/spec.h"

namespace dtl::sema {

// Before the model: train.batch sizes the `batch` dim.
void checkTrain(const Program& prog, TrainSpec& out, diag::Diagnostics& diags);
void checkData(const Program& prog, const Model& model, DataSpec& out, diag::Diagnostics& diags);
// `world` is --world N, or 0 when unknown.
void checkParallel(const Program& prog, const Model& model, TrainSpec& train, int64_t world,
                   ParallelSpec& out, diag::Diagnostics& diags);

}  // namespace dtl::sema
