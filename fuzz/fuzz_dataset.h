// For the data-file targets: after a probe accepts a file, the loader must
// load it (Dataset::open) and copy its first and last samples. The probe and
// the loader promise to judge a file alike ("Each reader validates the file
// with its probe first"), so a loader error that says the file changed, or an
// internal error, on a file the probe accepted and nobody touched, is a bug.
#pragma once

#include <string>
#include <vector>

#include "fuzz/fuzz_file.h"
#include "runtime/data/loader.h"
#include "runtime/data/probe.h"

namespace dtl::fuzz {

// `field` has source, path and the source's options set; the probe's result
// gives the input's dims. `integer` feeds an i32 input instead of f32.
inline void loadAccepted(rt::data::FieldSpec field, const rt::data::ProbeResult& probe, bool integer) {
  if (!probe.ok) {
    if (probe.error.empty()) broken("a probe failed without a message");
    if (probe.error.find("internal error") != std::string::npos) broken("probe: " + probe.error);
    return;
  }
  field.name = "x";
  field.sample_dims = probe.info.sample_dims;
  field.integer = integer;
  rt::data::Dataset ds;
  rt::data::Status s = rt::data::Dataset::open({field}, ds);
  if (!s.ok) {
    for (const char* bug : {"changed", "internal error", "disappeared", "ran out of memory", "cannot be loaded"})
      if (s.message.find(bug) != std::string::npos) broken("the probe accepted the file but the loader says: " + s.message);
    return;
  }
  if (ds.samples() != probe.info.samples)
    broken("probe counts " + std::to_string(probe.info.samples) + " samples, the loader " + std::to_string(ds.samples()));
  rt::data::Batch b = ds.makeBatch(2);
  ds.copySample(0, b, 0);
  ds.copySample(ds.samples() - 1, b, 1);
}

}  // namespace dtl::fuzz
