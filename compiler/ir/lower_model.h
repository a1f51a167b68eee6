// Stage 8, lowering: the checked model to the forward training graph
// (core/graph.h). Reads what sema recorded (sema::Model, its `ops` trace);
// never the spec's syntax. `dtlc check --emit=ir` prints the result.
#pragma once

#include "compiler/diag/diagnostics.h"
#include "compiler/sema/spec.h"
#include "core/graph.h"

namespace dtl::ir {

// Every tensor operation becomes a node, `repeat` stacks are unrolled copy by
// copy (each copy slicing its parameters), layer calls are inlined. `model`
// must have been checked without errors; `sources` names the file in each
// node's `where`. A stack that unrolls past the lowering cap is an error in
// `diags` (the graph is then incomplete). `batch` is the graph's size of the
// predeclared `batch` dim, the global batch (sema checks shapes at
// train.batch, one rank's micro-batch; the graph is the same for every mesh).
Graph lowerModel(const sema::Model& model, int64_t batch, const diag::SourceManager& sources,
                 diag::Diagnostics& diags);

}  // namespace dtl::ir
