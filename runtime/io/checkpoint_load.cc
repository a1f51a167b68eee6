// Loading checkpoints: one by name with every checksum checked, the latest,
// or the newest that verifies (what --resume takes: a corrupt newest
// checkpoint is named and passed over, never loaded).
#include <sys/stat.h>

#include <cerrno>

#include "runtime/data/literal.h"
#include "runtime/io/checkpoint_index.h"
#include "runtime/io/checkpoint_store.h"
#include "runtime/io/checksums.h"
#include "runtime/io/file_ops.h"

namespace dtl::rt::io {

namespace {

using index::joinPath;

Status checkResumeDir(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0)
    return errno == ENOENT ? Status::error(dir + ": cannot resume: the directory does not exist")
                           : ioError(dir, "resume", errno);
  if (!S_ISDIR(st.st_mode)) return Status::error(dir + ": cannot resume: not a directory");
  return {};
}

// One safetensors file of a checkpoint: read, and checked against its
// checksums when the checkpoint has them (`checksummed`).
Status readChecked(const std::string& path, bool checksummed, std::vector<TensorBlob>& out,
                   std::map<std::string, std::string>& meta) {
  if (Status s = readSafetensors(path, out, &meta); !s.ok) return s;
  if (checksummed != hasChecksums(meta))
    return Status::error(path + (checksummed ? ": has no checksums, but params.safetensors beside it has"
                                             : ": has checksums, but params.safetensors beside it has none") +
                         ": the file is corrupt or comes from another checkpoint");
  return checksummed ? verifyChecksums(path, out, meta) : Status{};
}

}  // namespace

Status CheckpointStore::list(const std::string& dir, std::vector<std::string>& names) { return index::read(dir, names); }

Status CheckpointStore::load(const std::string& dir, const std::string& name, CheckpointContents& out,
                             std::string* warning) {
  std::string folder = joinPath(dir, name);
  struct stat st;
  if (::stat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::error(folder + ": index.json names it as a checkpoint but it is missing");
  CheckpointContents c;
  index::parseName(name, &c.step);
  std::map<std::string, std::string> meta, optimizer_meta;
  std::string path = joinPath(folder, "params.safetensors");
  if (Status s = readSafetensors(path, c.params, &meta); !s.ok) return s;
  bool checksummed = hasChecksums(meta);
  if (checksummed)
    if (Status s = verifyChecksums(path, c.params, meta); !s.ok) return s;
  if (meta.count("step") && meta["step"] != std::to_string(c.step))
    return Status::error(path + ": holds step " + meta["step"] + " but its folder says " + std::to_string(c.step));
  path = joinPath(folder, "optimizer.safetensors");
  if (Status s = readChecked(path, checksummed, c.optimizer, optimizer_meta); !s.ok) return s;
  path = joinPath(folder, kStateFile);
  if (Status s = readWholeFile(path, c.state_json); !s.ok) return s;
  if (checksummed)
    if (Status s = verifyTextChecksum(path, kStateFile, c.state_json, meta); !s.ok) return s;
  data::Literal v;
  std::string err;
  if (!data::parseLiteral(c.state_json, data::Syntax::Json, v, err))
    return Status::error(path + ": corrupt: not valid JSON (" + err + ")");
  if (warning)
    *warning = checksummed ? "" : folder + ": written without checksums (by an older dtl), so loaded unverified";
  out = std::move(c);
  return {};
}

Status CheckpointStore::loadLatest(const std::string& dir, CheckpointContents& out) {
  if (Status s = checkResumeDir(dir); !s.ok) return s;
  std::vector<std::string> names;
  if (Status s = index::read(dir, names); !s.ok) return s;
  struct stat st;
  std::string folder = joinPath(dir, names.back());
  if (::stat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::error(folder + ": index.json names it as the latest checkpoint but it is missing");
  return load(dir, names.back(), out);
}

Status CheckpointStore::loadNewestIntact(const std::string& dir, CheckpointContents& out, LoadReport& report) {
  report = {};
  if (Status s = checkResumeDir(dir); !s.ok) return s;
  std::vector<std::string> names;
  if (Status s = index::read(dir, names); !s.ok) {
    names = index::scan(dir);
    if (names.empty()) return s;
    report.skipped.push_back(s.message + "; trying the step-* folders by step instead");
  }
  for (size_t k = names.size(); k-- > 0;) {
    Status s = load(dir, names[k], out, &report.warning);
    if (s.ok) {
      report.name = names[k];
      return s;
    }
    report.skipped.push_back(names[k] + ": " + s.message);
  }
  std::string why;
  for (const std::string& m : report.skipped) why += "\n  " + m;
  return Status::error(dir + ": cannot resume: no checkpoint there verifies:" + why);
}

}  // namespace dtl::rt::io
