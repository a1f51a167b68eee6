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

Values randomValues(int64_t n, std::mt19937_64& rng, double special) {
  static const float kSpecials[] = {NAN,   INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -3e-42f, 1.17e-38f,
                                    FLT_MAX, -FLT_MAX, 1e30f,    -1e30f, 88.7f, -104.0f};
  std::uniform_real_distribution<double> coin(0, 1);
  std::normal_distribution<float> normal(0, 1);
  const float scales[] = {1, 10, 100};
  float scale = scales[rng() % 3];
  Values v(static_cast<size_t>(n));
  for (float& x : v)
    x = coin(rng) < special ? kSpecials[rng() % (sizeof kSpecials / sizeof *kSpecials)] : normal(rng) * scale;
  return v;
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
