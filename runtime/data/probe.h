// Cheap inspection of data files for `dtlc check`: reads headers (and streams
// through compressed or text data where sizes are not in a header) to report
// sample count, per-sample shape and element type, without loading the data.
// No function throws; failures come back as ProbeResult::error.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dtl::rt::data {

enum class ElemKind { Float, Int };  // what the values are

struct SampleInfo {
  int64_t samples = 0;               // first axis
  std::vector<int64_t> sample_dims;  // the rest of the shape (empty = scalar per sample)
  int64_t sample_elements = 1;       // product of sample_dims
  // Element type as stored: "u8", "i8", "i16", "u16", "i32", "u32", "i64", "u64",
  // "f16", "bf16", "f32", "f64", "bool" (safetensors), "f8e4m3", "f8e5m2".
  // text() and tokens() report "i32", the type they yield.
  std::string dtype;
  ElemKind kind = ElemKind::Float;
};

// error: a full sentence naming the file and what is wrong (expected vs. found).
struct ProbeResult {
  bool ok = false;
  std::string error;
  SampleInfo info;
  // A gzip IDX or npy file's data (the bytes after its header that the header
  // describes) in the host's byte order, inflated by this probe for the
  // loader to adopt (keepInflatedData): null unless kept.
  std::shared_ptr<const std::vector<unsigned char>> inflated;
};

// `dtlc run` probes its data files while it checks the spec, then loads
// them: a gzip file's probe inflates it whole to check its size and CRC, and
// the loader inflated it again (Fashion-MNIST's 47 MB of images: 0.2 s of a
// 7 s run). With this on, the probes of gzip IDX and npy files keep the data
// they inflate (ProbeResult::inflated) and the loader takes it. Off by
// default: `dtlc check` alone never holds a dataset in memory. Turning it
// off lets go of whatever no loader adopted.
void keepInflatedData(bool keep);
bool keepingInflatedData();

// Keeping on for a scope (a `dtlc run`, a test), off again when it ends.
struct KeepInflatedData {
  KeepInflatedData() { keepInflatedData(true); }
  ~KeepInflatedData() { keepInflatedData(false); }
  KeepInflatedData(const KeepInflatedData&) = delete;
  KeepInflatedData& operator=(const KeepInflatedData&) = delete;
};

struct CsvOptions {
  std::vector<int64_t> columns;  // 0-based; empty = all columns of the first data row
  bool header = true;            // the first non-empty line after `skip` is a header
  int64_t skip = 0;              // raw lines dropped before anything else (metadata lines)
  char delimiter = ',';          // ' ' means "any run of spaces or tabs"; with ',' a file whose
                                 // first data row has no comma is read as whitespace-separated too
};

// MNIST IDX, plain or .gz. Trailing bytes after the data are tolerated.
ProbeResult probeIdx(const std::string& path);
// NumPy .npy v1/v2/v3, little-endian numeric dtypes, C order only.
ProbeResult probeNpy(const std::string& path);
// One tensor of a safetensors file.
ProbeResult probeSafetensors(const std::string& path, const std::string& key);
// Numeric CSV, plain or .gz; dtype "f32". Reports file:line of the first bad row.
ProbeResult probeCsv(const std::string& path, const CsvOptions& opt);
// A byte stream cut into windows of seq+1 bytes that overlap by one:
// samples = (bytes - 1) / seq, sample_dims = {seq}.
ProbeResult probeText(const std::string& path, int64_t seq);
// A flat binary token file ("u16", "u32" or "i32", little-endian), windowed like
// probeText. Decompressed only when the name ends in ".gz" (see GzReader::open).
ProbeResult probeTokens(const std::string& path, const std::string& dtype, int64_t seq);

}  // namespace dtl::rt::data
