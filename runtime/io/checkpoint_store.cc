// CheckpointStore::save, in crash-safe order:
//   1. write the three files into DIR/.tmp-step-N-<pid>/, each fsynced, then
//      fsync that folder; each tensor's checksum (and state.json's) goes into
//      the safetensors metadata (checksums.h);
//   2. move the folder into place as DIR/step-N (swapping atomically with an
//      older step-N if there is one, via renameat2 RENAME_EXCHANGE; where the
//      file system lacks it, the old one is moved aside first, which leaves a
//      short window without step-N), fsync DIR;
//   3. rewrite DIR/index.json atomically to name it as latest, dropping the
//      oldest names beyond `keep`;
//   4. delete the dropped folders (renamed to .trash-… first, so a folder named
//      step-* is always complete).
// A crash before 3 leaves index.json naming the previous checkpoint; leftovers
// (.tmp-*, .trash-*) are removed by the next save.
// One job writes a folder at a time: the trainer holds DIR/.lock (dir_lock.h),
// which this file never touches.
#include "runtime/io/checkpoint_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "runtime/data/literal.h"
#include "runtime/io/checkpoint_index.h"
#include "runtime/io/checksums.h"
#include "runtime/io/file_ops.h"

namespace dtl::rt::io {

namespace {

using index::joinPath;

bool isJson(const std::string& text, std::string& err) {
  data::Literal v;
  return data::parseLiteral(text, data::Syntax::Json, v, err);
}

// Leftovers of an interrupted save: temp folders, trash, temp index files.
void removeLeftovers(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> doomed;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind(".tmp-step-", 0) == 0 || name.rfind(".trash-", 0) == 0 || name.rfind("index.json.tmp-", 0) == 0)
      doomed.push_back(entry.path().string());
  }
  for (const auto& p : doomed) removeTreeQuietly(p);
}

// Each file's metadata carries its tensors' checksums; params.safetensors' also state.json's.
Status writeFolder(const std::string& folder, const CheckpointContents& c) {
  std::map<std::string, std::string> meta = {{"format", "pt"}, {"step", std::to_string(c.step)}};
  std::map<std::string, std::string> params_meta = meta, optimizer_meta = meta;
  addChecksums(c.params, {{kStateFile, c.state_json}}, params_meta);
  addChecksums(c.optimizer, {}, optimizer_meta);
  Status s = makeDirs(folder);
  if (s.ok) s = writeSafetensors(joinPath(folder, "params.safetensors"), c.params, params_meta);
  if (s.ok) s = writeSafetensors(joinPath(folder, "optimizer.safetensors"), c.optimizer, optimizer_meta);
  if (s.ok) s = writeFileAtomic(joinPath(folder, kStateFile), {{c.state_json.data(), c.state_json.size()}});
  if (s.ok) s = syncDir(folder);
  return s;
}

// Moves the finished `tmp` folder to `final`, replacing an older one atomically where the file system allows.
Status installFolder(const std::string& dir, const std::string& tmp, const std::string& name) {
  std::string final_path = joinPath(dir, name);
  struct stat st;
  if (::stat(final_path.c_str(), &st) != 0) {
    Status s = renamePath(tmp, final_path);
    return s.ok ? syncDir(dir) : s;
  }
  bool unsupported = false;
  Status s = exchangePaths(tmp, final_path, &unsupported);
  if (s.ok) {
    removeTreeQuietly(tmp);  // now the old contents
    return syncDir(dir);
  }
  if (!unsupported) return s;
  // No atomic exchange (some network file systems): a short window without `final`.
  std::string trash = joinPath(dir, ".trash-" + name + "-" + std::to_string(::getpid()));
  if (s = renamePath(final_path, trash); !s.ok) return s;
  if (s = renamePath(tmp, final_path); !s.ok) {
    ::rename(trash.c_str(), final_path.c_str());
    return s;
  }
  removeTreeQuietly(trash);
  return syncDir(dir);
}

// Step 3: index.json names `name` as latest, after the others in save order,
// keeping `keep` names (0: all); `dropped` gets the names left out.
Status updateIndex(const std::string& dir, const std::string& name, int64_t keep, std::vector<std::string>& dropped) {
  std::vector<std::string> names;
  if (!index::read(dir, names).ok) names = index::scan(dir);
  names.erase(std::remove(names.begin(), names.end(), name), names.end());
  names.push_back(name);
  if (keep > 0 && static_cast<int64_t>(names.size()) > keep) {
    auto cut = names.begin() + static_cast<std::ptrdiff_t>(names.size() - static_cast<size_t>(keep));
    dropped.assign(names.begin(), cut);
    names.erase(names.begin(), cut);
  }
  Status s = index::write(dir, names);
  if (s.ok) return s;
  std::vector<std::string> now;  // the rename may have happened, and only the directory fsync failed
  if (index::read(dir, now).ok && now.back() == name)
    return Status::error(dir + ": checkpoint " + name + " saved, but may not survive a power loss: " + s.message);
  return Status::error(dir + ": checkpoint " + name +
                       " was written but index.json was not updated, so the previous checkpoint stays the latest: " +
                       s.message);
}

// Step 4: each dropped folder is renamed to .trash-… (atomic), then deleted.
Status removeDropped(const std::string& dir, const std::string& name, const std::vector<std::string>& dropped) {
  for (const std::string& old : dropped) {
    std::string folder = joinPath(dir, old), trash = joinPath(dir, ".trash-" + old + "-" + std::to_string(::getpid()));
    struct stat st;
    if (::stat(folder.c_str(), &st) != 0) continue;  // already gone
    if (Status r = renamePath(folder, trash); !r.ok)
      return Status::error(dir + ": checkpoint " + name + " saved, but removing the old checkpoint " + old +
                           " failed: " + r.message);
    removeTreeQuietly(trash);
  }
  return {};
}

}  // namespace

std::string checkpointName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", static_cast<long long>(step));
  return buf;
}

CheckpointStore::CheckpointStore(std::string dir, int64_t keep) : dir_(std::move(dir)), keep_(keep) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  if (dir_.empty()) dir_ = ".";
}

Status CheckpointStore::save(const CheckpointContents& c, Prune prune) const {
  if (c.step < 0)
    return Status::error(dir_ + ": checkpoint not saved: the step must not be negative, got " + std::to_string(c.step));
  std::string name = checkpointName(c.step);
  std::string fail = dir_ + ": checkpoint " + name + " not saved: ";
  if (keep_ < 0) return Status::error(fail + "keep must be 0 (keep all) or more, got " + std::to_string(keep_));
  std::string err;
  if (!isJson(c.state_json, err)) return Status::error(fail + "the trainer state is not valid JSON (" + err + ")");
  if (Status s = makeDirs(dir_); !s.ok) return Status::error(fail + s.message);
  removeLeftovers(dir_);

  std::string tmp = joinPath(dir_, ".tmp-" + name + "-" + std::to_string(::getpid()));
  Status s = writeFolder(tmp, c);
  if (s.ok) s = installFolder(dir_, tmp, name);
  if (!s.ok) {
    removeTreeQuietly(tmp);
    return Status::error(fail + s.message);
  }

  std::vector<std::string> dropped;
  if (s = updateIndex(dir_, name, prune == Prune::Now ? keep_ : 0, dropped); !s.ok) return s;
  return removeDropped(dir_, name, dropped);
}

Status CheckpointStore::prune() const {
  std::vector<std::string> names, dropped;
  if (keep_ <= 0 || !index::read(dir_, names).ok || static_cast<int64_t>(names.size()) <= keep_) return {};
  if (Status s = updateIndex(dir_, names.back(), keep_, dropped); !s.ok) return s;
  return removeDropped(dir_, names.back(), dropped);
}

Status CheckpointStore::withdraw(const std::string& name, std::string& moved_to) const {
  std::vector<std::string> names;
  if (!index::read(dir_, names).ok) names = index::scan(dir_);
  names.erase(std::remove(names.begin(), names.end(), name), names.end());
  std::string fail = dir_ + ": cannot set checkpoint " + name + " aside: ";
  if (Status s = index::write(dir_, names); !s.ok) return Status::error(fail + s.message);
  moved_to = joinPath(dir_, "diverged-" + name);
  removeTreeQuietly(moved_to);
  if (Status s = renamePath(joinPath(dir_, name), moved_to); !s.ok) return Status::error(fail + s.message);
  return syncDir(dir_);
}

}  // namespace dtl::rt::io
