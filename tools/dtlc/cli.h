// The dtlc command line as a function: argv in, exit status out, text to the
// two streams. main() calls it; tests call it in-process.
#pragma once

#include <string>
#include <vector>

namespace dtl::cli {

// Exit status: 0 success, 1 errors in the spec, 2 usage errors.
int runCli(const std::vector<std::string>& args, std::string& out, std::string& err);

}  // namespace dtl::cli
