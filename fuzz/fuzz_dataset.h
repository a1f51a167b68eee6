// For the data-file targets: after a probe accepts a file, the source's
// reader must read it and the loader (Dataset::open) load it and copy its
// first and last samples. The probe and the reader promise to judge a file
// alike ("Each reader validates the file with its probe first"), so a reader
// error on a file the probe accepted, and nobody changed, is a bug; the
// loader may still refuse the values (a NaN, a negative label).
#pragma once

#include <string>
#include <vector>

#include "fuzz/fuzz_file.h"
#include "runtime/data/loader.h"
#include "runtime/data/probe.h"
#include "runtime/data/sources.h"

namespace dtl::fuzz {

inline bool startsWith(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// The source's reader on its own (what Dataset::open calls first).
inline rt::data::Status readSource(const rt::data::FieldSpec& f) {
  namespace d = rt::data::detail;
  d::Column c;
  d::SourceCache cache;
  if (f.source == "idx") return d::readIdx(f, c);
  if (f.source == "npy") return d::readNpy(f, c);
  if (f.source == "safetensors") return d::readSafetensors(f, c);
  if (f.source == "csv") return d::readCsv(f, c);
  if (f.source == "text") return d::readText(f, cache, c);
  return d::readTokens(f, cache, c);
}

// `field` has source, path and the source's options set; the probe's result
// gives the input's dims. `integer` feeds an i32 input instead of f32.
inline void loadAccepted(rt::data::FieldSpec field, const rt::data::ProbeResult& probe, bool integer) {
  if (!probe.ok) {
    if (probe.error.empty()) broken("a probe failed without a message");
    // guarded()'s messages for an exception: the file's bytes cannot forge this prefix.
    if (startsWith(probe.error, field.path + ": internal error") || startsWith(probe.error, field.path + ": ran out of memory"))
      broken("probe: " + probe.error);
    return;
  }
  field.name = "x";
  field.sample_dims = probe.info.sample_dims;
  field.integer = integer;
  rt::data::Status s = readSource(field);
  if (!s.ok) broken("the probe accepted the file but the " + field.source + " reader says: " + s.message);
  rt::data::Dataset ds;
  s = rt::data::Dataset::open({field}, ds);
  if (!s.ok) return;  // the values: checkIntegers, checkFinite
  if (ds.samples() != probe.info.samples)
    broken("probe counts " + std::to_string(probe.info.samples) + " samples, the loader " + std::to_string(ds.samples()));
  rt::data::Batch b = ds.makeBatch(2);
  ds.copySample(0, b, 0);
  ds.copySample(ds.samples() - 1, b, 1);
}

}  // namespace dtl::fuzz
