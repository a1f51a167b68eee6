// Run folders: resolving, refusing a taken one, and the files written into
// it before training (the resolved spec and the plan). The checkpoints and
// metrics are the trainer's.
#include "tools/dtlc/run_folder.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "compiler/plan/plan.h"
#include "compiler/program/plan_program.h"
#include "tools/dtlc/kernel_emitter.h"
#include "runtime/io/checkpoint_index.h"
#include "runtime/io/file_ops.h"

namespace dtl::cli {

namespace fs = std::filesystem;

namespace {

// "runs/x/" → "runs/x"; "" and "/" stay.
std::string trimSlashes(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

// step-N, or diverged-step-N (a checkpoint set aside after a non-finite loss).
bool isCheckpointName(const std::string& name) {
  const std::string kept = name.rfind("diverged-", 0) == 0 ? name.substr(9) : name;
  int64_t step = 0;
  return rt::io::index::parseName(kept, &step);
}

// A literal's text (quotes included) from line:col:len of the spec file.
struct Edit {
  size_t at = 0, len = 0;
  std::string text;
};

void quotedPath(const driver::Frontend& fe, const diag::Loc& loc, const std::string& path, std::vector<Edit>& edits) {
  const sema::Program& prog = fe.program();
  if (loc.file != prog.spec_file || path.empty() || fs::path(path).is_absolute()) return;
  const std::string& text = fe.sources().text(loc.file);
  const std::string_view line = fe.sources().line(loc.file, loc.line);
  if (line.data() == nullptr) return;  // no such line
  const size_t at = static_cast<size_t>(line.data() - text.data()) + static_cast<size_t>(loc.col - 1);
  const size_t len = static_cast<size_t>(loc.len);
  if (at + len > text.size() || len < 2 || text[at] != '"' || text[at + len - 1] != '"') return;
  std::string abs = (fs::path(prog.spec_dir) / path).lexically_normal().string(), quoted = "\"";
  for (char c : abs) quoted += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
  edits.push_back({at, len, quoted + "\""});
}

// The path argument of every data source call: its first positional string.
void dataPaths(const driver::Frontend& fe, const syntax::Expr& e, std::vector<Edit>& edits) {
  if (e.kind == syntax::Expr::Kind::Call) {
    for (size_t i = 1; i < e.kids.size(); ++i) {
      const bool positional = i - 1 >= e.arg_names.size() || e.arg_names[i - 1].empty();
      if (!positional) continue;
      if (e.kids[i]->kind == syntax::Expr::Kind::String) quotedPath(fe, e.kids[i]->loc, e.kids[i]->text, edits);
      break;
    }
  }
  for (const syntax::ExprPtr& k : e.kids)
    if (k) dataPaths(fe, *k, edits);
}

}  // namespace

RunFolder resolveRunFolder(const RunFlags& f, const std::string& spec_checkpoint_dir) {
  RunFolder r;
  if (!f.resume.empty()) {
    const std::string resume = trimSlashes(f.resume);
    const fs::path p(resume);
    if (isCheckpointName(p.filename().string())) {
      r.resume_dir = p.has_parent_path() ? p.parent_path().string() : ".";
      r.resume_checkpoint = p.filename().string();
    } else {
      r.resume_dir = resume;
    }
  }
  if (!f.out.empty())
    r.dir = trimSlashes(f.out);
  else if (!r.resume_dir.empty())
    r.dir = r.resume_dir;
  else if (!spec_checkpoint_dir.empty())
    r.dir = trimSlashes(spec_checkpoint_dir);
  else
    r.dir = "runs/" + fs::path(f.spec).stem().string();
  return r;
}

std::string refuseTakenFolder(const RunFolder& folder) {
  std::error_code ec;
  if (!folder.resume_dir.empty() && fs::equivalent(folder.dir, folder.resume_dir, ec)) return "";
  if (!fs::is_directory(folder.dir, ec)) return "";
  std::vector<std::string> held;
  for (const auto& e : fs::directory_iterator(folder.dir, ec)) {
    const std::string name = e.path().filename().string();
    if (isCheckpointName(name) || name == "index.json") held.push_back(name);
    if (name == "metrics.jsonl" && fs::file_size(e.path(), ec) > 0 && !ec) held.push_back(name);
  }
  if (held.empty()) return "";
  std::sort(held.begin(), held.end());
  std::string list;
  for (size_t i = 0; i < held.size() && i < 3; ++i) list += (i ? ", " : "") + held[i];
  if (held.size() > 3) list += ", …";
  return "run folder " + folder.dir + " already holds a run (" + list + ")\n" +
         "hint: --resume " + folder.dir + " continues it; --out DIR starts a new run in another folder (or remove " +
         folder.dir + ")";
}

std::string resolvedSpecText(const driver::Frontend& fe, const std::vector<std::string>& sets) {
  const sema::Program& prog = fe.program();
  std::vector<Edit> edits;
  for (const auto& m : prog.modules) {
    if (!m || m->file != prog.spec_file) continue;
    for (const syntax::Import& i : m->imports) quotedPath(fe, i.loc, i.path, edits);
    for (const syntax::DataDecl& d : m->data)
      for (const syntax::DataSplit& s : d.splits)
        for (const syntax::DataField& field : s.fields)
          if (field.source) dataPaths(fe, *field.source, edits);
  }
  std::string text = fe.sources().text(prog.spec_file);
  std::sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) { return a.at > b.at; });
  for (const Edit& e : edits) text.replace(e.at, e.len, e.text);
  std::string header = "# The spec of this run: " + fe.sources().name(prog.spec_file) +
                       ", with its data and import paths made absolute.\n";
  if (!sets.empty()) header += "# Compiled with these overrides (dtlc report applies them):\n";
  for (const std::string& s : sets) header += std::string(kSetHeader) + s + "\n";
  return header + text;
}

std::string writeRunFiles(const RunFolder& folder, const driver::Frontend& fe, const std::vector<std::string>& sets,
                          const std::string& kernels) {
  rt::io::Status s = rt::io::makeDirs(folder.dir);
  if (!s.ok) return s.message;
  // One process runs the graph as it is, not laid out: its plan is `dtlc plan --world 1`'s.
  const driver::Frontend* planned = &fe;
  driver::Frontend one;
  if (fe.layout().mesh.empty()) {
    driver::FrontendOptions opt;
    opt.sets = sets;
    opt.world = 1;
    opt.refuse_unbuilt = true;
    if (one.run(fe.spec().file, opt, driver::Stop::Plan) != 0) return "the spec does not compile for its plan";
    planned = &one;
  }
  const prog::Program rank0 =
      program::planProgram(planned->graph(), planned->layout(), layout::meshCoords(planned->layout().mesh, 0),
                           planOptionsFor(kernels));
  const std::string spec = resolvedSpecText(fe, sets);
  const std::string text = plan::planText(planned->graph(), planned->layout(), rank0, planned->spec());
  const std::string json = plan::planJson(planned->graph(), planned->layout(), rank0, planned->spec());
  for (const auto& [name, body] : {std::pair<const char*, const std::string*>{"spec.dtl", &spec},
                                   {"plan.txt", &text}, {"plan.json", &json}}) {
    s = rt::io::writeFileAtomic(folder.dir + "/" + name, {{body->data(), body->size()}});
    if (!s.ok) return s.message;
  }
  return "";
}

}  // namespace dtl::cli
