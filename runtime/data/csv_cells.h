// Splitting one CSV line into cells, shared by the probe (dtlc check) and
// the loader so both read a file the same way. Quotes matter only for
// delimited files (headers such as "CRIM","ZN"); whitespace mode splits on
// runs of spaces and tabs.
#pragma once

#include <string_view>
#include <vector>

namespace dtl::rt::data {

bool isBlank(char c);
std::string_view trim(std::string_view s);
void splitCells(std::string_view line, char delim, bool whitespace, std::vector<std::string_view>& cells);

}  // namespace dtl::rt::data
