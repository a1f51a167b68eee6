// DIR/index.json of a checkpoint folder, for the checkpoint store's own files
// (checkpoint_store.cc, checkpoint_load.cc): the names of the complete
// checkpoints in save order, the latest last. Not a public interface.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/io/status.h"

namespace dtl::rt::io::index {

std::string joinPath(const std::string& dir, const std::string& name);

// "step-" then digits; sets *step.
bool parseName(const std::string& name, int64_t* step);

// index.json's names, oldest first, the latest last; an error says what is wrong with the file.
Status read(const std::string& dir, std::vector<std::string>& names);

// The step-* folders in `dir` by step, for an index that is missing or unreadable.
std::vector<std::string> scan(const std::string& dir);

// Rewrites index.json atomically to list `names` (the last is the latest);
// removes it when `names` is empty.
Status write(const std::string& dir, const std::vector<std::string>& names);

}  // namespace dtl::rt::io::index
