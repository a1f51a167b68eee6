// Source files and locations. Every AST node and every diagnostic carries a
// Loc; the SourceManager owns the text so a diagnostic can show the line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtl::diag {

struct Loc {
  int file = -1;  // index into SourceManager; -1 = no location
  int line = 0;   // 1-based
  int col = 0;    // 1-based, in bytes
  int len = 1;    // bytes underlined (on the first line)
  bool valid() const { return file >= 0; }
};

class SourceManager {
 public:
  // Adds a file's text; `name` is how diagnostics spell it.
  int add(std::string name, std::string text);
  const std::string& name(int file) const { return files_[file].name; }
  const std::string& text(int file) const { return files_[file].text; }
  std::string_view line(int file, int line) const;
  int count() const { return static_cast<int>(files_.size()); }

 private:
  struct File {
    std::string name;
    std::string text;
    std::vector<size_t> line_starts;
  };
  std::vector<File> files_;
};

}  // namespace dtl::diag
