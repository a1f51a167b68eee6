// Stage 5: instantiate the model. Evaluates dims, binds layer arguments,
// creates every parameter (named by path, stacked under `repeat`), and infers
// the named shape and element type of every expression by evaluating the
// model's bindings and each forward it calls. Checks only: the tensor
// operations it evaluated are left in `Model::ops` for lowering
// (compiler/ir/lower_model.h).
#pragma once

#include "compiler/sema/program.h"
#include "compiler/sema/spec.h"

namespace dtl::sema {

// `batch` is the per-rank micro-batch (train.batch) for shape checking.
void instantiateModel(const Program& prog, int64_t batch, Model& out, diag::Diagnostics& diags);

}  // namespace dtl::sema
