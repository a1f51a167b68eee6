// `dtlc export`: a checkpoint's parameters in another framework's names and
// layouts. `--format torch`: a nanoGPT-style PyTorch state_dict
// (torch_export.h) as a safetensors file.
#pragma once

#include <string>
#include <vector>

namespace dtl::cli {

int exportCommand(const std::vector<std::string>& args, std::string& out, std::string& err);
extern const char* const kExportHelp;

}  // namespace dtl::cli
