// The POSIX file operations the io writers share: write-then-rename atomic
// files, directory fsync, mkdir -p, rename and exchange, each failure a Status
// naming the path with its errno text. A test hook can fail any step on demand.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "runtime/io/status.h"

namespace dtl::rt::io {

// Called before each step that can make a write fail, with the step's name
// ("mkdir", "open", "write", "fsync", "close", "rename", "exchange", "fsync-dir")
// and its path. Return 0 to go ahead, or an errno value to fail the step with
// it. Cleanup after a failure does not consult the hook. Not thread-safe;
// for tests only. An empty hook (the default) injects nothing.
using FaultHook = std::function<int(const std::string& op, const std::string& path)>;
void setFaultHookForTesting(FaultHook hook);

// "PATH: cannot WHAT: <strerror(err)>"
Status ioError(const std::string& path, const std::string& what, int err);

// The directory holding `path` ("." when it has no slash).
std::string parentDir(const std::string& path);

struct Chunk {
  const void* data;
  size_t size;
};

// Writes the chunks, in order, to `path` atomically: into `path.tmp-<pid>`,
// fsynced and closed, renamed over `path`, then the parent directory fsynced.
// On failure the temp file is removed and `path` is untouched.
Status writeFileAtomic(const std::string& path, const std::vector<Chunk>& chunks);

Status syncDir(const std::string& dir);                             // fsync of a directory
Status makeDirs(const std::string& dir);                            // mkdir -p
Status renamePath(const std::string& from, const std::string& to);  // rename(2)
// Swaps two existing paths in one step (renameat2 RENAME_EXCHANGE). When the
// file system cannot, returns an error and sets *unsupported.
Status exchangePaths(const std::string& a, const std::string& b, bool* unsupported);
void removeTreeQuietly(const std::string& path);  // rm -rf, errors ignored

// Reads a whole (small) file into `out`.
Status readWholeFile(const std::string& path, std::string& out);

}  // namespace dtl::rt::io
