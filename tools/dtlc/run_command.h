// `dtlc run`: check and lower the spec, then train it on this process.
#pragma once

#include <string>
#include <vector>

namespace dtl::cli {

int runCommand(const std::vector<std::string>& args, std::string& out, std::string& err);
extern const char* const kRunHelp;

// This process's executable when it is dtlc (which `--nproc` and `--verify`
// start again as ranks and jobs); else false with `what` naming it (an
// embedding program, such as a test, would start copies of itself).
bool dtlcExecutable(std::string& exe, std::string& what);

}  // namespace dtl::cli
