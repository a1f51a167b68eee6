// Checksums of checkpoint tensors: computed at save, compared at load.
#include "runtime/io/checksums.h"

#include "core/hash.h"
#include "core/xxhash.h"

namespace dtl::rt::io {

namespace {

constexpr const char* kMark = "checksums";
constexpr const char* kAlgorithm = "xxh64";

std::string key(const std::string& name) { return std::string(kAlgorithm) + ":" + name; }

Status check(const std::string& path, const std::string& what, const void* data, size_t bytes,
             const std::map<std::string, std::string>& meta, const std::string& name) {
  auto it = meta.find(key(name));
  if (it == meta.end())
    return Status::error(path + ": " + what + "has no checksum (\"" + key(name) + "\" is missing from the metadata)" +
                         ": the file is corrupt or was not written by dtl");
  std::string now = hex64(xxh64(data, bytes, 0));
  if (it->second != now)
    return Status::error(path + ": " + what + "does not match its checksum (stored " + it->second + ", computed " +
                         now + "): the file is corrupt");
  return {};
}

}  // namespace

void addChecksums(const std::vector<TensorBlob>& tensors, const std::map<std::string, std::string>& texts,
                  std::map<std::string, std::string>& meta) {
  meta[kMark] = kAlgorithm;
  for (const TensorBlob& t : tensors) meta[key(t.name)] = hex64(xxh64(t.bytes.data(), t.bytes.size(), 0));
  for (const auto& [name, text] : texts) meta[key(name)] = hex64(xxh64(text));
}

// Any checksum key counts, so that a flipped bit in the mark cannot turn
// checking off (verifyChecksums then refuses the file).
bool hasChecksums(const std::map<std::string, std::string>& meta) {
  if (meta.count(kMark)) return true;
  for (const auto& [k, v] : meta)
    if (k.rfind(std::string(kAlgorithm) + ":", 0) == 0) return true;
  return false;
}

Status verifyChecksums(const std::string& path, const std::vector<TensorBlob>& tensors,
                       const std::map<std::string, std::string>& meta) {
  auto mark = meta.find(kMark);
  if (mark == meta.end() || mark->second != kAlgorithm)
    return Status::error(path + ": unknown checksum algorithm \"" + (mark == meta.end() ? "" : mark->second) +
                         "\" (this build checks " + kAlgorithm + ")");
  for (const TensorBlob& t : tensors)
    if (Status s = check(path, "tensor `" + t.name + "` ", t.bytes.data(), t.bytes.size(), meta, t.name); !s.ok)
      return s;
  return {};
}

Status verifyTextChecksum(const std::string& path, const std::string& name, const std::string& text,
                          const std::map<std::string, std::string>& meta) {
  return check(path, "", text.data(), text.size(), meta, name);
}

}  // namespace dtl::rt::io
