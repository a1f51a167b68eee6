// CheckpointStore::save, in crash-safe order:
//   1. write the three files into DIR/.tmp-step-N-<pid>/, each fsynced, then
//      fsync that folder;
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
#include "runtime/io/checkpoint_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "core/json.h"
#include "runtime/data/literal.h"
#include "runtime/io/file_ops.h"

namespace dtl::rt::io {

namespace {

using data::Literal;

std::string joinPath(const std::string& dir, const std::string& name) { return dir + "/" + name; }

// "step-" then digits; sets *step.
bool parseName(const std::string& name, int64_t* step) {
  if (name.size() < 6 || name.size() > 5 + 18 || name.compare(0, 5, "step-") != 0) return false;
  int64_t v = 0;
  for (size_t k = 5; k < name.size(); ++k) {
    if (name[k] < '0' || name[k] > '9') return false;
    v = v * 10 + (name[k] - '0');
  }
  *step = v;
  return true;
}

bool isJson(const std::string& text, std::string& err) {
  Literal v;
  return data::parseLiteral(text, data::Syntax::Json, v, err);
}

// index.json's names, oldest first, the latest last.
Status readIndex(const std::string& dir, std::vector<std::string>& names) {
  names.clear();
  std::string path = joinPath(dir, "index.json"), text;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 && errno == ENOENT)
    return Status::error(path + ": not found (no checkpoint has been completed in " + dir + ")");
  if (Status s = readWholeFile(path, text); !s.ok) return s;
  Literal root;
  std::string err;
  if (!data::parseLiteral(text, data::Syntax::Json, root, err))
    return Status::error(path + ": corrupt: not valid JSON (" + err + ")");
  const Literal* latest = root.get("latest");
  const Literal* list = root.get("checkpoints");
  int64_t step = 0;
  if (!latest || latest->type != Literal::Type::String || !parseName(latest->s, &step) || !list ||
      list->type != Literal::Type::List)
    return Status::error(path + ": corrupt: expected {\"latest\": \"step-…\", \"checkpoints\": [\"step-…\", …]}");
  for (const Literal& n : list->items) {
    if (n.type != Literal::Type::String || !parseName(n.s, &step))
      return Status::error(path + ": corrupt: \"checkpoints\" holds something other than \"step-…\" names");
    if (n.s != latest->s && std::find(names.begin(), names.end(), n.s) == names.end()) names.push_back(n.s);
  }
  if (names.size() + 1 != list->items.size())
    return Status::error(path + ": corrupt: \"latest\" (" + latest->s +
                         ") is not listed once in \"checkpoints\", or a name is listed twice");
  names.push_back(latest->s);
  return {};
}

// The complete checkpoints in `dir` by step, for an index that is missing or unreadable.
std::vector<std::string> scanCheckpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    int64_t step = 0;
    if (parseName(name, &step) && entry.is_directory(ec)) found.emplace_back(step, name);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> names;
  for (auto& f : found) names.push_back(std::move(f.second));
  return names;
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

std::string indexJson(const std::vector<std::string>& names) {
  json::Writer w(/*pretty=*/true);
  w.beginObject().key("latest").value(names.back()).key("checkpoints").beginArray();
  for (const auto& n : names) w.value(n);
  w.endArray().endObject();
  return w.str() + "\n";
}

Status writeFolder(const std::string& folder, const CheckpointContents& c) {
  std::map<std::string, std::string> meta = {{"format", "pt"}, {"step", std::to_string(c.step)}};
  Status s = makeDirs(folder);
  if (s.ok) s = writeSafetensors(joinPath(folder, "params.safetensors"), c.params, meta);
  if (s.ok) s = writeSafetensors(joinPath(folder, "optimizer.safetensors"), c.optimizer, meta);
  if (s.ok) s = writeFileAtomic(joinPath(folder, "state.json"), {{c.state_json.data(), c.state_json.size()}});
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
  if (!readIndex(dir, names).ok) names = scanCheckpoints(dir);
  names.erase(std::remove(names.begin(), names.end(), name), names.end());
  names.push_back(name);
  if (keep > 0 && static_cast<int64_t>(names.size()) > keep) {
    auto cut = names.begin() + static_cast<std::ptrdiff_t>(names.size() - static_cast<size_t>(keep));
    dropped.assign(names.begin(), cut);
    names.erase(names.begin(), cut);
  }
  std::string index = indexJson(names);
  Status s = writeFileAtomic(joinPath(dir, "index.json"), {{index.data(), index.size()}});
  if (s.ok) return s;
  std::vector<std::string> now;  // the rename may have happened, and only the directory fsync failed
  if (readIndex(dir, now).ok && now.back() == name)
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

Status CheckpointStore::save(const CheckpointContents& c) const {
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
  if (s = updateIndex(dir_, name, keep_, dropped); !s.ok) return s;
  return removeDropped(dir_, name, dropped);
}

Status CheckpointStore::list(const std::string& dir, std::vector<std::string>& names) { return readIndex(dir, names); }

Status CheckpointStore::loadLatest(const std::string& dir, CheckpointContents& out) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0)
    return errno == ENOENT ? Status::error(dir + ": cannot resume: the directory does not exist")
                           : ioError(dir, "resume", errno);
  if (!S_ISDIR(st.st_mode)) return Status::error(dir + ": cannot resume: not a directory");
  std::vector<std::string> names;
  if (Status s = readIndex(dir, names); !s.ok) return s;
  const std::string& name = names.back();
  std::string folder = joinPath(dir, name);
  if (::stat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::error(folder + ": index.json names it as the latest checkpoint but it is missing");

  CheckpointContents c;
  parseName(name, &c.step);
  std::map<std::string, std::string> meta;
  std::string path = joinPath(folder, "params.safetensors");
  if (Status s = readSafetensors(path, c.params, &meta); !s.ok) return s;
  if (meta.count("step") && meta["step"] != std::to_string(c.step))
    return Status::error(path + ": holds step " + meta["step"] + " but its folder says " + std::to_string(c.step));
  if (Status s = readSafetensors(joinPath(folder, "optimizer.safetensors"), c.optimizer); !s.ok) return s;
  path = joinPath(folder, "state.json");
  if (Status s = readWholeFile(path, c.state_json); !s.ok) return s;
  std::string err;
  if (!isJson(c.state_json, err)) return Status::error(path + ": corrupt: not valid JSON (" + err + ")");
  out = std::move(c);
  return {};
}

}  // namespace dtl::rt::io
