// The gtest side of the JIT-versus-reference check (codegen_check.h).
#include "tests/unit/codegen_check.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace dtl::codegen::testing {

std::vector<Values> runJit(const Region& r, const std::vector<Values>& inputs, Stats* stats) {
  std::string error;
  std::vector<Values> out = jitOutputs(r, inputs, stats, &error);
  if (!error.empty()) ADD_FAILURE() << error << "\n" << printRegion(r);
  return out;
}

std::vector<Values> checkRegion(const Region& r, const std::vector<Values>& inputs, Stats* stats) {
  std::string report;
  std::vector<Values> out = compareWithReference(r, inputs, stats, &report);
  if (!report.empty()) ADD_FAILURE() << report;
  return out;
}

std::string ptxasPath() {
  namespace fs = std::filesystem;
  std::string configured = DTL_PTXAS;
  std::error_code ec;
  if (!configured.empty() && fs::is_regular_file(configured, ec)) return configured;
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    for (std::string dir; std::getline(dirs, dir, ':');)
      if (!dir.empty() && fs::is_regular_file(dir + "/ptxas", ec)) return dir + "/ptxas";
  }
  return fs::is_regular_file("/usr/local/cuda/bin/ptxas", ec) ? "/usr/local/cuda/bin/ptxas" : "";
}

}  // namespace dtl::codegen::testing
