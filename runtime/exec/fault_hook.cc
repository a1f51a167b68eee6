#include "runtime/exec/fault_hook.h"

#include <signal.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace dtl::rt {

namespace {

const char* const kKinds[] = {"stop", "kill"};
const char* const kKeys[] = {"rank", "step", "restart"};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t at = 0;
  for (;;) {
    size_t next = s.find(sep, at);
    out.push_back(s.substr(at, next == std::string::npos ? std::string::npos : next - at));
    if (next == std::string::npos) return out;
    at = next + 1;
  }
}

template <size_t N>
bool oneOf(const std::string& s, const char* const (&names)[N]) {
  for (const char* n : names)
    if (s == n) return true;
  return false;
}

}  // namespace

bool parseFaults(const std::string& text, std::vector<Fault>& out, std::string& err) {
  out.clear();
  for (const std::string& item : split(text, ',')) {
    std::vector<std::string> parts = split(item, ':');
    Fault f;
    f.kind = parts[0];
    if (!oneOf(f.kind, kKinds)) {
      err = "DTL_FAULT: unknown fault `" + f.kind + "` in `" + item + "` (stop, kill)";
      return false;
    }
    for (size_t k = 1; k < parts.size(); ++k) {
      const std::string& kv = parts[k];
      size_t eq = kv.find('=');
      std::string key = kv.substr(0, eq), value = eq == std::string::npos ? "" : kv.substr(eq + 1);
      int64_t v = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (!oneOf(key, kKeys) || value.empty() || ec != std::errc() || end != value.data() + value.size() || v < 0) {
        err = "DTL_FAULT: `" + kv + "` in `" + item + "` is not rank=N, step=N or restart=N";
        return false;
      }
      f.args[key] = v;
    }
    out.push_back(std::move(f));
  }
  return true;
}

bool FaultHook::fromEnvironment(int rank, int restart, FaultHook& out, std::string& err) {
  const char* text = std::getenv("DTL_FAULT");
  if (text == nullptr || *text == '\0') return true;
  std::vector<Fault> faults;
  if (!parseFaults(text, faults, err)) return false;
  out = FaultHook(std::move(faults), rank, restart);
  std::fprintf(stderr, "warning: DTL_FAULT=%s: faults will be injected (a test hook)\n", text);
  return true;
}

bool FaultHook::due(const std::string& kind, int64_t step) const {
  auto matches = [](const Fault& f, const char* key, int64_t v) {
    auto it = f.args.find(key);
    return it == f.args.end() || it->second == v;
  };
  for (const Fault& f : faults_)
    if (f.kind == kind && matches(f, "rank", rank_) && matches(f, "step", step) && matches(f, "restart", restart_))
      return true;
  return false;
}

void FaultHook::afterStep(int64_t step) const {
  if (due("kill", step)) ::raise(SIGKILL);
  if (due("stop", step)) ::raise(SIGSTOP);
}

}  // namespace dtl::rt
