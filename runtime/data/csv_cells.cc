#include "runtime/data/csv_cells.h"

namespace dtl::rt::data {

bool isBlank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && isBlank(s.front())) s.remove_prefix(1);
  while (!s.empty() && isBlank(s.back())) s.remove_suffix(1);
  return s;
}

// Quotes matter only for delimited files: headers such as "CRIM","ZN" and
// quoted numbers. Whitespace mode splits on runs of spaces and tabs.
void splitCells(std::string_view line, char delim, bool whitespace, std::vector<std::string_view>& cells) {
  cells.clear();
  if (whitespace) {
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && isBlank(line[i])) ++i;
      size_t start = i;
      while (i < line.size() && !isBlank(line[i])) ++i;
      if (i > start) cells.push_back(line.substr(start, i - start));
    }
    return;
  }
  size_t start = 0;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '"')
      quoted = !quoted;
    else if (line[i] == delim && !quoted) {
      cells.push_back(trim(line.substr(start, i - start)));
      start = i + 1;
    }
  }
  cells.push_back(trim(line.substr(start)));
}

}  // namespace dtl::rt::data
