// libFuzzer target: safetensors, both readers of it. The input is a file's
// bytes:
//  1. rt::io::readSafetensors (runtime/io/safetensors.cc), the checkpoint
//     reader, which validates the whole header as Python's safetensors does.
//     A file it accepts must survive writeSafetensors → readSafetensors
//     unchanged, and the data probe must accept each of its tensors that has
//     samples and values (no dimension 0) with the same shape and dtype.
//  2. rt::data::probeSafetensors and the loader's readSafetensors
//     (runtime/data/probe.cc, sources_binary.cc) for the key "x", the data
//     source `safetensors(path, key = "x")`.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fuzz/fuzz_dataset.h"
#include "runtime/io/safetensors.h"

namespace {

using dtl::fuzz::broken;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

// The data probe's dtype name for a safetensors tag ("F8_E4M3" → "f8e4m3").
std::string probeDtype(const std::string& tag) {
  std::string s;
  for (char c : lower(tag))
    if (c != '_') s += c;
  return s;
}

void checkRoundTrip(const std::vector<dtl::rt::io::TensorBlob>& tensors, const std::map<std::string, std::string>& meta) {
  using namespace dtl;
  const std::string copy = fuzz::scratchDir() + "/copy.safetensors";
  rt::io::Status s = rt::io::writeSafetensors(copy, tensors, meta);
  if (!s.ok) broken("a file readSafetensors accepted cannot be written back: " + s.message);
  std::vector<rt::io::TensorBlob> again;
  std::map<std::string, std::string> meta_again;
  s = rt::io::readSafetensors(copy, again, &meta_again);
  if (!s.ok) broken("the written copy does not read back: " + s.message);
  if (meta_again != meta) broken("the copy's metadata differs");
  if (again.size() != tensors.size()) broken("the copy has another number of tensors");
  for (size_t k = 0; k < again.size(); ++k) {
    const auto &a = tensors[k], &b = again[k];
    if (a.name != b.name || a.dtype != b.dtype || a.shape != b.shape || a.bytes != b.bytes)
      broken("the copy's tensor " + std::to_string(k) + " ('" + a.name + "') differs");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtl;
  const std::string path = fuzz::writeInput("input.safetensors", data, size);

  std::vector<rt::io::TensorBlob> tensors;
  std::map<std::string, std::string> meta;
  rt::io::Status s = rt::io::readSafetensors(path, tensors, &meta);
  if (!s.ok && (!tensors.empty() || !meta.empty())) broken("a failed read left tensors or metadata behind");
  if (s.ok) {
    checkRoundTrip(tensors, meta);
    // The probe reads .gz too: bytes that start like gzip are not its plain file.
    bool gzip_magic = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
    for (size_t k = 0; k < tensors.size() && k < 8 && !gzip_magic; ++k) {
      const rt::io::TensorBlob& t = tensors[k];
      if (t.shape.empty() || t.bytes.empty()) continue;  // no samples, or samples of no values
      rt::data::ProbeResult p = rt::data::probeSafetensors(path, t.name);
      if (!p.ok) broken("readSafetensors accepts tensor '" + t.name + "', the data probe does not: " + p.error);
      std::vector<int64_t> dims(t.shape.begin() + 1, t.shape.end());
      if (p.info.samples != t.shape[0] || p.info.sample_dims != dims || p.info.dtype != probeDtype(t.dtype))
        broken("the data probe sees tensor '" + t.name + "' with another shape or dtype (" + p.info.dtype + ")");
    }
  }

  rt::data::FieldSpec f;
  f.source = "safetensors";
  f.path = path;
  f.key = "x";
  fuzz::loadAccepted(f, rt::data::probeSafetensors(path, f.key), size > 0 && (data[size - 1] & 1));
  return 0;
}
