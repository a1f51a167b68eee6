// The x86 kernels' object cache: one file per compiled kernel, named by its
// key (a hash of the region's text, the host CPU and features, the LLVM
// version, the generator's version and the compile flags: jit_x86.cc), so
// a key names exactly one object. A file is a small header (magic, length,
// checksum of the object) and the object; one that does not check out is
// ignored (and rewritten by whoever compiles it again). Writes go to a
// temporary file renamed into place, so ranks sharing the folder never see
// half a file; past `max_bytes` the least recently used files are removed.
// A cache never fails a run: what cannot be read or written is skipped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dtl::codegen {

struct ObjectCache {
  std::string dir;  // "" = no cache
  int64_t max_bytes = int64_t{256} << 20;
};

// $XDG_CACHE_HOME/dtl, else $HOME/.cache/dtl; "" when neither is set.
std::string defaultCacheDir();

// The object stored under `key` when its file is whole (and marks it used).
std::optional<std::string> readCachedObject(const ObjectCache& c, const std::string& key);

// Stores the object under `key` (creating the folder), then trims the folder to max_bytes.
void writeCachedObject(const ObjectCache& c, const std::string& key, const std::string& object);

}  // namespace dtl::codegen
