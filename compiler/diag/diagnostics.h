// Diagnostics: a user's mistake is collected here, never thrown. Each stage
// reports every independent error it finds; the engine stops recording after
// kMaxErrors and says how many it dropped. A warning is what `dtlc check`
// accepts but a later command refuses (a setting not built yet); it never
// fails a command by itself. Rendering is clang's shape:
//
//   spec.dtl:12:9: error: unknown layer `Lineer`
//     fc1 = Lineer(pixels, hidden)
//           ^~~~~~
//   hint: did you mean `Linear`?
#pragma once

#include <string>
#include <vector>

#include "compiler/diag/source.h"

namespace dtl::diag {

enum class Severity { Error, Warning, Note };

struct Diagnostic {
  Severity severity = Severity::Error;
  Loc loc;
  std::string message;
  std::string hint;                   // empty = none
  std::vector<Diagnostic> notes;      // secondary locations ("while instantiating …")
};

class Diagnostics {
 public:
  static constexpr int kMaxErrors = 20;

  explicit Diagnostics(const SourceManager& sources) : sources_(&sources) {}

  // Records an error; identical (location, message) pairs are kept once, so a
  // layer used twice reports its mistake once.
  Diagnostic& error(Loc loc, std::string message, std::string hint = {});
  // Records a warning, kept once per (location, message) like an error.
  Diagnostic& warning(Loc loc, std::string message, std::string hint = {});
  // An error or a warning, as the caller decides (the same finding is one
  // for `dtlc plan` and the other for `dtlc check`).
  Diagnostic& report(Severity severity, Loc loc, std::string message, std::string hint = {});
  // Adds a note (a second location, e.g. "instantiated here") to the error
  // at `index` in all().
  void addNote(size_t index, Loc loc, std::string message);
  bool hasErrors() const { return error_count_ > 0; }
  int errorCount() const { return error_count_; }
  int warningCount() const { return warning_count_; }
  bool full() const { return error_count_ >= kMaxErrors; }
  const std::vector<Diagnostic>& all() const { return list_; }

  // Text for stderr; JSON for `--format json`.
  std::string render() const;
  std::string renderJson() const;

 private:
  const SourceManager* sources_;
  std::vector<Diagnostic> list_;
  Diagnostic dropped_;  // sink for errors past the cap or duplicates
  int error_count_ = 0;
  int warning_count_ = 0;
  int dropped_count_ = 0;
};

// Edit distance for "did you mean" hints.
int editDistance(const std::string& a, const std::string& b);
// The closest candidate within a distance that scales with the name's
// length, or "" when none is close. Deterministic: ties pick the first.
std::string closest(const std::string& name, const std::vector<std::string>& candidates);
// "hint: did you mean `X`?" text or "".
std::string didYouMean(const std::string& name, const std::vector<std::string>& candidates);

}  // namespace dtl::diag
