// The parameters of a trained checkpoint, for the commands that use a model
// after training (`dtlc generate`, `dtlc export`): DIR is either a
// checkpoint folder as the spec names it (runs/x: its newest checkpoint that
// verifies) or one checkpoint in it (runs/x/step-00000500). Every tensor is
// checked against its checksum and against the spec's parameters.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "compiler/sema/spec.h"

namespace dtl::cli {

struct LoadedParams {
  std::string checkpoint;  // the checkpoint folder loaded, e.g. runs/x/step-00000500
  std::map<std::string, std::vector<float>> values;  // by parameter path, whole, in storage order
  std::vector<std::string> warnings;  // newer checkpoints passed over; an unverified (pre-checksum) load
};

// False with `err` naming the problem ("PREFIX DIR: …", one line per
// mismatch; PREFIX e.g. "dtlc generate: --checkpoint "): no checkpoint
// there, a corrupt one, or tensors that are not the spec's parameters
// (missing, extra, another shape: another spec or other --set's).
bool loadCheckpointParams(const std::string& prefix, const std::string& dir, const sema::Model& model,
                          LoadedParams& out, std::string& err);

}  // namespace dtl::cli
