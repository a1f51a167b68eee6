// Stage 4: instantiate the model. Evaluates dims, binds layer arguments,
// creates every parameter (named by path, stacked under `repeat`), and infers
// the named shape and element type of every expression by evaluating the
// model's bindings and each forward it calls.
#pragma once

#include "compiler/sema/program.h"
#include "compiler/sema/spec.h"
#include "core/graph.h"

namespace dtl::sema {

// `batch` is the per-rank micro-batch (train.batch) for shape checking.
// With `graph`, the same evaluation also lowers the model to the forward
// training graph: every tensor operation becomes a node, `repeat` stacks are
// unrolled copy by copy (each copy slicing its parameters), layer calls are
// inlined.
void instantiateModel(const Program& prog, int64_t batch, Model& out, diag::Diagnostics& diags,
                      ir::Graph* graph = nullptr);

}  // namespace dtl::sema
