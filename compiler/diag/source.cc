#include "compiler/diag/source.h"

namespace dtl::diag {

int SourceManager::add(std::string name, std::string text) {
  File f;
  f.name = std::move(name);
  f.text = std::move(text);
  f.line_starts.push_back(0);
  for (size_t i = 0; i < f.text.size(); ++i)
    if (f.text[i] == '\n') f.line_starts.push_back(i + 1);
  files_.push_back(std::move(f));
  return static_cast<int>(files_.size()) - 1;
}

std::string_view SourceManager::line(int file, int line) const {
  if (file < 0 || file >= count()) return {};
  const File& f = files_[file];
  if (line < 1 || static_cast<size_t>(line) > f.line_starts.size()) return {};
  size_t begin = f.line_starts[line - 1];
  size_t end = f.text.find('\n', begin);
  if (end == std::string::npos) end = f.text.size();
  if (end > begin && f.text[end - 1] == '\r') --end;
  return std::string_view(f.text).substr(begin, end - begin);
}

}  // namespace dtl::diag
