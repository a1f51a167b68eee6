// index.json: {"latest": "step-…", "checkpoints": ["step-…", …]}, read with
// every field checked (a name is only ever "step-" and digits, so nothing
// read from it can point outside the folder), written atomically.
#include "runtime/io/checkpoint_index.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include "core/json.h"
#include "runtime/data/literal.h"
#include "runtime/io/file_ops.h"

namespace dtl::rt::io::index {

using data::Literal;

std::string joinPath(const std::string& dir, const std::string& name) { return dir + "/" + name; }

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

Status read(const std::string& dir, std::vector<std::string>& names) {
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

std::vector<std::string> scan(const std::string& dir) {
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

Status write(const std::string& dir, const std::vector<std::string>& names) {
  std::string path = joinPath(dir, "index.json");
  if (names.empty()) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ioError(path, "remove", errno);
    return syncDir(dir);
  }
  json::Writer w(/*pretty=*/true);
  w.beginObject().key("latest").value(names.back()).key("checkpoints").beginArray();
  for (const auto& n : names) w.value(n);
  w.endArray().endObject();
  std::string text = w.str() + "\n";
  return writeFileAtomic(path, {{text.data(), text.size()}});
}

}  // namespace dtl::rt::io::index
