// The checksums a checkpoint carries: an XXH64 (core/xxhash.h) of every
// tensor's bytes, kept in its safetensors file's metadata as
// "xxh64:NAME" = 16 hex digits, and of state.json, kept in params.safetensors
// as "xxh64:state.json". "checksums" = "xxh64" marks a file that has them;
// a file without the mark was written before dtl checked (loaded unverified).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "runtime/io/safetensors.h"
#include "runtime/io/status.h"

namespace dtl::rt::io {

inline constexpr const char* kStateFile = "state.json";

// Adds the mark and a checksum per tensor (and one per extra named text) to `meta`.
void addChecksums(const std::vector<TensorBlob>& tensors, const std::map<std::string, std::string>& texts,
                  std::map<std::string, std::string>& meta);

// Whether `meta` carries checksums at all (the mark, or any checksum).
bool hasChecksums(const std::map<std::string, std::string>& meta);

// Checks each tensor against its checksum in `meta`; the first mismatch or
// missing checksum is an error naming `path` and the tensor:
// "…/params.safetensors: tensor `l1.weight` does not match its checksum
// (stored …, computed …): the file is corrupt".
Status verifyChecksums(const std::string& path, const std::vector<TensorBlob>& tensors,
                       const std::map<std::string, std::string>& meta);

// The same for a whole file's text, checksummed under `name` in `meta`:
// "…/state.json: does not match its checksum (…)".
Status verifyTextChecksum(const std::string& path, const std::string& name, const std::string& text,
                          const std::map<std::string, std::string>& meta);

}  // namespace dtl::rt::io
