// libFuzzer target for the whole front end (scripts/fuzz.sh builds and runs it).
//
// The input is a spec file's text, checked in memory as `fuzz.dtl`. Lines of
// the form `#set KEY=VALUE` (comments to the parser) also become `--set`
// overrides, so the override path is fuzzed with the spec, and `#world N`
// sets --world (1 to 1000000, as dtlc accepts; otherwise unknown).
// Diagnostics are rendered as text and JSON; a spec that checks renders every
// printer that `dtlc check` has. Relative paths in the spec (imports, data files) resolve
// against the current folder and are only read; nothing is written.
//
// Like dtlc (tools/dtlc/big_stack.h), the front end runs on a thread with a
// big stack: its recursion is bounded by the input's nesting limits, not
// small. The sanitizers make frames about 8× larger than a release build's
// (the deepest input, fuzz/regressions/frontend/crash-forward-self-call-64x990-deep-stack.dtl,
// needs ~64 MiB in release and ~512 MiB here), so dtlc's 256 MiB becomes 2 GiB:
// an input that overflows this would overflow dtlc too.
#include <pthread.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "compiler/driver/frontend.h"
#include "compiler/sema/print_sema.h"
#include "compiler/syntax/print_ast.h"

namespace {

// The `#set ` lines, at most a few (each is re-parsed as its own source),
// and the last `#world ` line.
void collectOptions(const std::string& text, dtl::driver::FrontendOptions& opts) {
  constexpr size_t kMaxSets = 4;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    if (text.compare(pos, 5, "#set ") == 0 && opts.sets.size() < kMaxSets) {
      opts.sets.push_back(text.substr(pos + 5, end - pos - 5));
    } else if (text.compare(pos, 7, "#world ") == 0) {
      const std::string value = text.substr(pos + 7, end - pos - 7);
      long long n = std::strtoll(value.c_str(), nullptr, 10);
      opts.world = n >= 1 && n <= 1000000 ? n : 0;
    }
    pos = end + 1;
  }
}

constexpr size_t kStackBytes = size_t{2} << 30;

// Keeps the printers' output alive so the optimiser cannot drop the calls.
volatile size_t g_sink = 0;

void checkSpec(const std::string& text) {
  dtl::driver::FrontendOptions opts;
  collectOptions(text, opts);

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
}

void* checkSpecThread(void* text) {
  checkSpec(*static_cast<const std::string*>(text));
  return nullptr;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  pthread_attr_t attr;
  pthread_t thread;
  if (pthread_attr_init(&attr) != 0 || pthread_attr_setstacksize(&attr, kStackBytes) != 0 ||
      pthread_create(&thread, &attr, checkSpecThread, &text) != 0) {
    // Running on the small main stack would report overflows dtlc never has.
    std::fprintf(stderr, "fuzz_frontend: cannot start a thread with a %zu MiB stack\n", kStackBytes >> 20);
    std::abort();
  }
  pthread_attr_destroy(&attr);
  pthread_join(thread, nullptr);
  return 0;
}
