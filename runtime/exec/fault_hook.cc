// fault_hook.h: the DTL_FAULT syntax.
#include "runtime/exec/fault_hook.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace dtl::rt {

namespace {

std::vector<std::string> splitOn(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) out.push_back(part);
  if (!s.empty() && s.back() == sep) out.emplace_back();
  return out;
}

bool parseInteger(const std::string& s, int64_t& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < 0) return false;
  out = v;
  return true;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

int64_t Fault::integer(const std::string& key, int64_t fallback) const {
  auto it = args.find(key);
  int64_t v = fallback;
  if (it != args.end()) parseInteger(it->second, v);
  return v;
}

std::string Fault::text(const std::string& key) const {
  auto it = args.find(key);
  return it == args.end() ? "" : it->second;
}

bool parseFaults(const std::string& text, const std::vector<FaultKind>& kinds, std::vector<Fault>& out,
                 std::string& err) {
  out.clear();
  if (text.empty()) return true;
  std::vector<std::string> kind_names;
  for (const FaultKind& k : kinds) kind_names.push_back(k.name);
  for (const std::string& item : splitOn(text, ',')) {
    std::vector<std::string> parts = splitOn(item, ':');
    Fault f;
    f.kind = parts.empty() ? "" : parts[0];
    auto kind = std::find_if(kinds.begin(), kinds.end(), [&](const FaultKind& k) { return k.name == f.kind; });
    if (kind == kinds.end()) {
      err = std::string(kEnvFault) + ": unknown fault `" + f.kind + "` in `" + item + "` (known: " + joined(kind_names) + ")";
      return false;
    }
    for (size_t i = 1; i < parts.size(); ++i) {
      const size_t eq = parts[i].find('=');
      const std::string key = parts[i].substr(0, eq), value = eq == std::string::npos ? "" : parts[i].substr(eq + 1);
      const auto& ints = kind->integer_keys;
      const auto& texts = kind->text_keys;
      const bool is_int = std::find(ints.begin(), ints.end(), key) != ints.end();
      const bool is_text = std::find(texts.begin(), texts.end(), key) != texts.end();
      int64_t ignored;
      if (eq == std::string::npos || (!is_int && !is_text)) {
        std::vector<std::string> keys = ints;
        keys.insert(keys.end(), texts.begin(), texts.end());
        err = std::string(kEnvFault) + ": `" + parts[i] + "` in `" + item + "`: `" + f.kind + "` takes key=value with keys " +
              joined(keys);
        return false;
      }
      if (is_int && !parseInteger(value, ignored)) {
        err = std::string(kEnvFault) + ": `" + parts[i] + "` in `" + item + "`: `" + key + "` must be an integer";
        return false;
      }
      f.args[key] = value;
    }
    out.push_back(std::move(f));
  }
  return true;
}

std::vector<const Fault*> faultsAt(const std::vector<Fault>& faults, const std::string& kind, int64_t rank,
                                   int64_t step, int64_t restart) {
  auto matches = [](const Fault& f, const char* key, int64_t v) { return !f.args.count(key) || f.integer(key, -1) == v; };
  std::vector<const Fault*> out;
  for (const Fault& f : faults)
    if (f.kind == kind && matches(f, "rank", rank) && matches(f, "step", step) && matches(f, "restart", restart))
      out.push_back(&f);
  return out;
}

const std::vector<FaultKind>& knownFaults() {
  static const std::vector<FaultKind> kinds = {{"stop", {"rank", "step", "restart"}, {}},
                                               {"kill", {"rank", "step", "restart"}, {}},
                                               {"nan_grad", {"rank", "step", "restart"}, {"tensor"}},
                                               {"flip_bit", {"rank", "step", "restart"}, {"tensor"}}};
  return kinds;
}

bool faultsFromEnvironment(std::vector<Fault>& out, std::string& err) {
  const char* text = std::getenv(kEnvFault);
  out.clear();
  if (text == nullptr || *text == '\0') return true;
  if (!parseFaults(text, knownFaults(), out, err)) return false;
  std::fprintf(stderr, "warning: %s=%s: faults will be injected (a test hook)\n", kEnvFault, text);
  return true;
}

bool FaultHook::fromEnvironment(int rank, int restart, FaultHook& out, std::string& err) {
  std::vector<Fault> faults;
  if (!faultsFromEnvironment(faults, err)) return false;
  out = FaultHook(std::move(faults), rank, restart);
  return true;
}

bool FaultHook::due(const std::string& kind, int64_t step) const {
  return !faultsAt(faults_, kind, rank_, step, restart_).empty();
}

void FaultHook::afterStep(int64_t step) const {
  if (due("kill", step)) ::raise(SIGKILL);
  if (due("stop", step)) ::raise(SIGSTOP);
}

}  // namespace dtl::rt
