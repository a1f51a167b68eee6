// Internal to the loader: the in-memory form of one file source (a Column of
// host-endian elements with a sample layout) and the readers that fill it.
// Each reader validates the file with its probe first, so the loader and
// `dtlc check` report a bad file with the same sentence.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/data/gzip_reader.h"
#include "runtime/data/loader.h"

namespace dtl::rt::data::detail {

enum class Elem : uint8_t { U8, I8, U16, I16, U32, I32, U64, I64, F16, BF16, F32, F64, F8E4M3, F8E5M2 };

int64_t elemSize(Elem e);
// From a probe's dtype name ("u8", "bf16", "bool" → U8, ...); false if unknown.
bool elemFromName(const std::string& name, Elem& out);
const char* elemName(Elem e);
bool elemIsInteger(Elem e);

// Exact conversions of the narrow float formats.
float halfToFloat(uint16_t h);
float bf16ToFloat(uint16_t h);
float f8e4m3ToFloat(uint8_t v);  // OCP E4M3FN: no infinities, S.1111.111 is NaN
float f8e5m2ToFloat(uint8_t v);

// Sample i is elements [offset + i·stride, offset + i·stride + elements) of
// the flat array. Windowed sources (text, tokens) share one array between
// their tokens (offset 0) and targets (offset 1) columns with stride = seq.
struct Column {
  std::shared_ptr<const std::vector<unsigned char>> bytes;
  Elem elem = Elem::U8;
  int64_t samples = 0;
  int64_t elements = 1;  // per sample
  int64_t stride = 1;
  int64_t offset = 0;
  std::vector<int64_t> file_dims;  // per-sample dims as the file has them (for messages)
  // csv only, for messages: each sample's line in the file, and each
  // element's column (from 0) and header title ("" without a header).
  std::vector<int64_t> lines, columns;
  std::vector<std::string> titles;

  template <class T>
  T at(int64_t k) const {  // element k of the flat array, host-endian
    T v;
    std::memcpy(&v, bytes->data() + k * static_cast<int64_t>(sizeof(T)), sizeof(T));
    return v;
  }
  // Sample i's elements as the file stores them (host-endian), for a caller
  // that feeds that type unchanged and so needs no trip through double.
  const unsigned char* sampleBytes(int64_t i) const {
    return bytes->data() + (offset + i * stride) * elemSize(elem);
  }
  double value(int64_t k) const;  // element k as a double (exact for all but 64-bit ints > 2^53)
  // Writes sample i's elements as doubles into out[0..elements).
  void sample(int64_t i, double* out) const;
};

// Shares a windowed source's array between the tokens and targets fields.
struct SourceCache {
  std::vector<std::pair<std::string, std::shared_ptr<const std::vector<unsigned char>>>> arrays;
  std::shared_ptr<const std::vector<unsigned char>> find(const std::string& key) const {
    for (const auto& [k, v] : arrays)
      if (k == key) return v;
    return nullptr;
  }
};

// Reads one file field. On failure returns a sentence naming the file (the
// caller adds the field name). Only std::bad_alloc escapes; Dataset::open catches it.
Status readIdx(const FieldSpec& f, Column& out);
Status readNpy(const FieldSpec& f, Column& out);
Status readSafetensors(const FieldSpec& f, Column& out);
Status readCsv(const FieldSpec& f, Column& out);
Status readText(const FieldSpec& f, SourceCache& cache, Column& out);
Status readTokens(const FieldSpec& f, SourceCache& cache, Column& out);

// A float field's transforms (`/ c`, `* c`, …) applied in order, in double.
double applyTransforms(const std::vector<Transform>& ts, double v);
// Every value a float field would feed (after its transforms, rounded to f32)
// must be finite: the first NaN or ±inf is an error naming the file and where
// in it (csv: line and column; the array formats: sample and element).
Status checkFinite(const FieldSpec& f, const Column& c);

// Reads exactly `bytes` more bytes from `r` into `out`; a short or failed
// read becomes a sentence naming the file (it changed since the probe).
Status readExact(GzReader& r, int64_t bytes, std::vector<unsigned char>& out);
// A failed probe's sentence as a Status.
Status fromProbe(const ProbeResult& p);

}  // namespace dtl::rt::data::detail
