// `dtlc run`: check and lower the spec, then train it on this process.
#pragma once

#include <string>
#include <vector>

namespace dtl::cli {

int runCommand(const std::vector<std::string>& args, std::string& out, std::string& err);
extern const char* const kRunHelp;

}  // namespace dtl::cli
