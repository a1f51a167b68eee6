// libFuzzer target for the whole front end (scripts/fuzz.sh builds and runs it).
//
// The input is a spec file's text, checked in memory as `fuzz.dtl`. Lines of
// the form `#set KEY=VALUE` (a comment to the parser) also become `--set`
// overrides, so the override path is fuzzed with the spec. Diagnostics are
// rendered as text and JSON; a spec that checks renders every printer that
// `dtlc check` has. Relative paths in the spec (imports, data files) resolve
// against the current folder and are only read; nothing is written.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/driver/frontend.h"
#include "compiler/sema/print_sema.h"
#include "compiler/syntax/print_ast.h"

namespace {

// The `#set ` lines, at most a few (each is re-parsed as its own source).
void collectSets(const std::string& text, std::vector<std::string>& sets) {
  constexpr size_t kMaxSets = 4;
  size_t pos = 0;
  while (pos < text.size() && sets.size() < kMaxSets) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    if (text.compare(pos, 5, "#set ") == 0) sets.push_back(text.substr(pos + 5, end - pos - 5));
    pos = end + 1;
  }
}

// Keeps the printers' output alive so the optimiser cannot drop the calls.
volatile size_t g_sink = 0;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  dtl::driver::FrontendOptions opts;
  collectSets(text, opts.sets);

  dtl::driver::Frontend fe;
  const int status = fe.runText("fuzz.dtl", text, opts);
  size_t n = fe.diagnostics().render().size() + fe.diagnostics().renderJson().size();
  for (const std::string& u : fe.usageErrors()) n += u.size();
  if (status == 0) {
    n += dtl::sema::summaryText(fe.spec()).size();
    n += dtl::sema::summaryJson(fe.spec()).size();
    n += dtl::sema::semaDump(fe.spec()).size();
    for (const auto& m : fe.program().modules)
      if (m->file == fe.program().spec_file) n += dtl::syntax::printAst(*m).size();
  }
  g_sink = g_sink + n;
  return 0;
}
