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
// The most bytes one tensor may hold (1 PiB): past it a size is a mistake.
constexpr int64_t kMaxTensorBytes = int64_t{1} << 50;
// Stage 5d: every parameter, input and named value, and the parameters
// together, fit in kMaxTensorBytes; else an error at the culprit dim.
void checkSizes(const Program& prog, const Model& model, const TrainSpec& train, diag::Diagnostics& diags);
// Stage 6, on the checked spec: each split rule and setting this build cannot
// run yet, once at its source — Error for plan and run, Warning for check.
void checkUnbuilt(const Spec& spec, diag::Severity severity, diag::Diagnostics& diags);

}  // namespace dtl::sema
