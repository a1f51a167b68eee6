// `dtlc report RUN_DIR`: one self-contained HTML page of a training run —
// its curves, plan, checkpoints and spec (docs/running.md, "A report page").
#pragma once

#include <string>
#include <vector>

namespace dtl::cli {

int reportCommand(const std::vector<std::string>& args, std::string& out, std::string& err);

}  // namespace dtl::cli
