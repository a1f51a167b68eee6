// `dtlc plan`: the communication plan of one optimiser step, before anything runs.
#pragma once

#include <string>
#include <vector>

namespace dtl::cli {

int planCommand(const std::vector<std::string>& args, std::string& out, std::string& err);

}  // namespace dtl::cli
