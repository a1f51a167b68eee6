// The golden diagnostics suite (docs/diagnostics.md, "Golden tests"): every
// tests/golden/diagnostics/NAME.dtl is checked in-process with
// `dtlc check NAME.dtl` from that folder, so file names in messages are just
// `NAME.dtl`. The exit status must be 1 and stderr must equal NAME.expected
// byte for byte. A first line `# args: --world 6` adds those arguments.
//
// After an intended change of wording, location or recovery, regenerate
// with scripts/update-goldens.sh and review the diff.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tools/dtlc/big_stack.h"
#include "tools/dtlc/cli.h"

namespace fs = std::filesystem;

namespace {

const fs::path kDir = fs::path(DTL_SOURCE_DIR) / "tests" / "golden" / "diagnostics";

std::vector<std::string> caseNames() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(kDir, ec))
    if (e.is_regular_file() && e.path().extension() == ".dtl") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

bool readFile(const fs::path& p, std::string& out) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

std::vector<std::string> splitLines(const std::string& s) {
  std::vector<std::string> lines;
  std::string line;
  std::istringstream in(s);
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// The words after `# args:` on the first line, if it has them.
std::vector<std::string> extraArgs(const std::string& spec) {
  std::vector<std::string> args;
  std::string first = spec.substr(0, spec.find('\n'));
  const std::string tag = "# args:";
  if (first.rfind(tag, 0) != 0) return args;
  std::istringstream words(first.substr(tag.size()));
  for (std::string w; words >> w;) args.push_back(w);
  return args;
}

// A line diff (longest common subsequence): ' ' kept, '-' expected only,
// '+' actual only.
std::string diff(const std::string& expected, const std::string& actual) {
  std::vector<std::string> a = splitLines(expected), b = splitLines(actual);
  std::vector<std::vector<int>> lcs(a.size() + 1, std::vector<int>(b.size() + 1, 0));
  for (size_t i = a.size(); i-- > 0;)
    for (size_t j = b.size(); j-- > 0;)
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
  std::string out = "--- expected\n+++ actual\n";
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (i < a.size() && j < b.size() && a[i] == b[j]) {
      out += "  " + a[i++] + "\n";
      ++j;
    } else if (j < b.size() && (i == a.size() || lcs[i][j + 1] >= lcs[i + 1][j])) {
      out += "+ " + b[j++] + "\n";
    } else {
      out += "- " + a[i++] + "\n";
    }
  }
  return out;
}

// Runs in the case's folder and goes back afterwards.
class InFolder {
 public:
  explicit InFolder(const fs::path& dir) : old_(fs::current_path()) { fs::current_path(dir); }
  ~InFolder() {
    std::error_code ec;
    fs::current_path(old_, ec);
  }

 private:
  fs::path old_;
};

class GoldenDiagnostics : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenDiagnostics, MatchesExpected) {
  const std::string name = GetParam();
  std::string spec, expected;
  ASSERT_TRUE(readFile(kDir / (name + ".dtl"), spec)) << "cannot read " << name << ".dtl";
  ASSERT_TRUE(readFile(kDir / (name + ".expected"), expected))
      << name << ".expected is missing; run scripts/update-goldens.sh";

  std::vector<std::string> args = {"check", name + ".dtl"};
  for (const std::string& a : extraArgs(spec)) args.push_back(a);
  std::string out, err;
  int status = -1;
  {
    InFolder here(kDir);
    dtl::cli::runWithStack(256u << 20, [&] { status = dtl::cli::runCli(args, out, err); });
  }

  EXPECT_EQ(status, 1) << name << ".dtl: expected exit status 1 (spec errors)\nstderr:\n" << err;
  EXPECT_TRUE(err == expected) << name << ".dtl: stderr differs from " << name << ".expected\n"
                               << diff(expected, err)
                               << "(if the change is intended: scripts/update-goldens.sh, then review the diff)";
}

std::string testName(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Cases, GoldenDiagnostics, ::testing::ValuesIn(caseNames()), testName);

TEST(GoldenDiagnosticsSuite, HasAtLeastThirtyCases) {
  EXPECT_GE(caseNames().size(), 30u) << "in " << kDir.string();
}

TEST(GoldenDiagnosticsSuite, EveryCaseHasExpectedOutput) {
  for (const std::string& name : caseNames())
    EXPECT_TRUE(fs::exists(kDir / (name + ".expected"))) << name << ".expected is missing";
}

}  // namespace
