// `dtlc generate`: text from a trained byte-level language model (a spec fed
// by `text(…)`, e.g. samples/char_gpt.dtl) and one of its checkpoints.
#pragma once

#include <string>
#include <vector>

namespace dtl::cli {

int generateCommand(const std::vector<std::string>& args, std::string& out, std::string& err);
extern const char* const kGenerateHelp;

}  // namespace dtl::cli
