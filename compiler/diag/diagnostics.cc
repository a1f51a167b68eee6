#include "compiler/diag/diagnostics.h"

#include <algorithm>

#include "core/json.h"

namespace dtl::diag {

Diagnostic& Diagnostics::error(Loc loc, std::string message, std::string hint) {
  return report(Severity::Error, loc, std::move(message), std::move(hint));
}

Diagnostic& Diagnostics::warning(Loc loc, std::string message, std::string hint) {
  return report(Severity::Warning, loc, std::move(message), std::move(hint));
}

Diagnostic& Diagnostics::report(Severity severity, Loc loc, std::string message, std::string hint) {
  for (const Diagnostic& d : list_) {
    if (d.loc.file == loc.file && d.loc.line == loc.line && d.loc.col == loc.col &&
        d.message == message) {
      dropped_ = Diagnostic{};
      return dropped_;
    }
  }
  if (severity == Severity::Error && error_count_ >= kMaxErrors) {
    ++dropped_count_;
    dropped_ = Diagnostic{};
    return dropped_;
  }
  ++(severity == Severity::Error ? error_count_ : warning_count_);
  list_.push_back(Diagnostic{severity, loc, std::move(message), std::move(hint), {}});
  return list_.back();
}

void Diagnostics::addNote(size_t index, Loc loc, std::string message) {
  if (index >= list_.size()) return;
  list_[index].notes.push_back(Diagnostic{Severity::Note, loc, std::move(message), {}, {}});
}

namespace {

const char* severityName(Severity s) {
  switch (s) {
    case Severity::Error: return "error";
    case Severity::Warning: return "warning";
    case Severity::Note: return "note";
  }
  return "error";
}

// "3 errors", "1 warning"
std::string count(int n, const char* what) { return std::to_string(n) + " " + what + (n == 1 ? "" : "s"); }

void renderOne(const SourceManager& src, const Diagnostic& d, std::string& out) {
  const char* kind = severityName(d.severity);
  if (d.loc.valid()) {
    out += src.name(d.loc.file) + ":" + std::to_string(d.loc.line) + ":" +
           std::to_string(d.loc.col) + ": ";
  }
  out += kind;
  out += ": " + d.message + "\n";
  if (d.loc.valid()) {
    std::string_view line = src.line(d.loc.file, d.loc.line);
    if (!line.empty()) {
      out += "  ";
      // Tabs stay tabs so the caret lines up under them.
      out.append(line.data(), line.size());
      out += "\n  ";
      int col = std::max(1, d.loc.col);
      for (int i = 1; i < col && static_cast<size_t>(i - 1) < line.size(); ++i)
        out += line[i - 1] == '\t' ? '\t' : ' ';
      out += '^';
      int room = static_cast<int>(line.size()) - col;
      int tail = std::min(d.loc.len - 1, std::max(0, room));
      out.append(static_cast<size_t>(std::max(0, tail)), '~');
      out += "\n";
    }
  }
  if (!d.hint.empty()) out += "hint: " + d.hint + "\n";
  for (const Diagnostic& n : d.notes) renderOne(src, n, out);
}

}  // namespace

std::string Diagnostics::render() const {
  std::string out;
  for (const Diagnostic& d : list_) renderOne(*sources_, d, out);
  if (dropped_count_ > 0)
    out += "note: " + std::to_string(dropped_count_) + " more error" +
           (dropped_count_ == 1 ? "" : "s") + " not shown (limit " +
           std::to_string(kMaxErrors) + ")\n";
  int errors = error_count_ + dropped_count_;
  if (warning_count_ > 0 && errors > 0)
    out += count(warning_count_, "warning") + " and " + count(errors, "error") + " generated.\n";
  else if (warning_count_ > 0 || errors > 0)
    out += (errors > 0 ? count(errors, "error") : count(warning_count_, "warning")) + " generated.\n";
  return out;
}

std::string Diagnostics::renderJson() const {
  json::Writer w;
  w.beginArray();
  for (const Diagnostic& d : list_) {
    w.beginObject();
    w.key("severity").value(severityName(d.severity));
    w.key("file").value(d.loc.valid() ? sources_->name(d.loc.file) : "");
    w.key("line").value(d.loc.line);
    w.key("column").value(d.loc.col);
    w.key("message").value(d.message);
    if (!d.hint.empty()) w.key("hint").value(d.hint);
    w.endObject();
  }
  w.endArray();
  return w.str();
}

int editDistance(const std::string& a, const std::string& b) {
  std::vector<int> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      int sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest(const std::string& name, const std::vector<std::string>& candidates) {
  int limit = name.size() <= 3 ? 1 : name.size() <= 6 ? 2 : 3;
  std::string best;
  int best_d = limit + 1;
  for (const std::string& c : candidates) {
    if (c == name || c.size() > name.size() + limit + 1 || name.size() > c.size() + limit + 1)
      continue;
    int d = editDistance(name, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

std::string didYouMean(const std::string& name, const std::vector<std::string>& candidates) {
  std::string c = closest(name, candidates);
  return c.empty() ? std::string() : "did you mean `" + c + "`?";
}

}  // namespace dtl::diag
