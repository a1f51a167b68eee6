// Stage 1: load the spec, its imports and the stdlib.
//
// 1. Parse the embedded stdlib as `<stdlib>/nn.dtl`.
// 2. Parse the spec; follow each `import "path"` relative to the importing
//    file, breadth first, each file once (a repeated import is harmless; a
//    cycle is therefore harmless too).
// 3. Collect layers by name (a user layer may not reuse a stdlib name) and
//    the spec's single model, data, train and parallel blocks.
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "compiler/sema/program.h"
#include "compiler/syntax/parse.h"

namespace dtl::sema {

namespace fs = std::filesystem;

namespace {

bool readFile(const std::string& path, std::string& out) {
  std::error_code ec;
  // Regular files only: a folder fails, a device (/dev/zero) or FIFO never ends.
  if (!fs::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

template <typename T>
void takeSingle(std::vector<T>& decls, T*& slot, const char* what, diag::Diagnostics& diags) {
  for (T& d : decls) {
    if (slot) {
      diags.error(d.loc, std::string("a second `") + what + "` block",
                  std::string("a spec has one `") + what + "` block; merge them");
      continue;
    }
    slot = &d;
  }
}

}  // namespace

void loadModules(Program& prog, diag::SourceManager& sources, int spec_file,
                 const std::string& spec_path, diag::Diagnostics& diags) {
  prog.sources = &sources;
  prog.spec_file = spec_file;
  fs::path spec_abs = fs::absolute(fs::path(spec_path)).lexically_normal();
  prog.spec_dir = spec_abs.parent_path().string();

  int std_file = sources.add("<stdlib>/nn.dtl", kStdlibSource);
  prog.modules.push_back(std::make_unique<syntax::Module>(syntax::parseFile(sources, std_file, diags)));
  prog.modules.push_back(std::make_unique<syntax::Module>(syntax::parseFile(sources, spec_file, diags)));

  std::set<std::string> loaded{spec_abs.string()};
  std::map<int, fs::path> dir_of{{spec_file, spec_abs.parent_path()}};
  for (size_t i = 1; i < prog.modules.size(); ++i) {
    syntax::Module& m = *prog.modules[i];
    for (const syntax::Import& imp : m.imports) {
      fs::path p(imp.path);
      if (p.is_relative()) p = dir_of[m.file] / p;
      p = p.lexically_normal();
      if (!loaded.insert(p.string()).second) continue;
      // Imported files are named as the import wrote them, joined to the
      // importing file's name, so diagnostics stay short and stable.
      fs::path shown = fs::path(sources.name(m.file)).parent_path() / imp.path;
      if (fs::path(imp.path).is_absolute()) shown = imp.path;
      std::string text;
      if (imp.path.empty() || !readFile(p.string(), text)) {
        diags.error(imp.loc, "cannot read imported file `" + imp.path + "`",
                    "imports are relative to the importing file: looked for " +
                        shown.lexically_normal().string());
        continue;
      }
      int f = sources.add(shown.lexically_normal().string(), std::move(text));
      dir_of[f] = p.parent_path();
      prog.modules.push_back(std::make_unique<syntax::Module>(syntax::parseFile(sources, f, diags)));
    }
  }

  for (size_t i = 0; i < prog.modules.size(); ++i) {
    syntax::Module& m = *prog.modules[i];
    for (syntax::LayerDecl& l : m.layers) {
      if (l.is_model) {
        if (m.file != spec_file) {
          diags.error(l.name.loc, "a `model` in an imported file",
                      "imported files hold layers; the model belongs in the spec being run");
        } else if (prog.model) {
          diags.error(l.name.loc, "a second model `" + l.name.name + "`",
                      "a spec trains one model; the first is `" + prog.model->name.name + "`");
        } else {
          prog.model = &l;
        }
        continue;
      }
      auto it = prog.layers.find(l.name.name);
      if (it != prog.layers.end()) {
        const bool std_clash = i > 0 && it->second->name.loc.file == std_file;
        diags.error(l.name.loc,
                    std_clash ? "layer `" + l.name.name + "` is already defined by the stdlib"
                              : "layer `" + l.name.name + "` is defined twice",
                    std_clash ? "choose another name, e.g. `My" + l.name.name + "`"
                              : "the first definition is at line " +
                                    std::to_string(it->second->name.loc.line));
        continue;
      }
      prog.layers[l.name.name] = &l;
      if (i == 0) prog.stdlib_layers.push_back(l.name.name);
    }
    if (m.file != spec_file) {
      for (auto& d : m.data) diags.error(d.loc, "a `data` block in an imported file", "data belongs in the spec being run");
      for (auto& d : m.train) diags.error(d.loc, "a `train` block in an imported file", "training settings belong in the spec being run");
      for (auto& d : m.parallel) diags.error(d.loc, "a `parallel` block in an imported file", "the layout belongs in the spec being run");
      continue;
    }
    takeSingle(m.data, prog.data, "data", diags);
    takeSingle(m.train, prog.train, "train", diags);
    takeSingle(m.parallel, prog.parallel, "parallel", diags);
  }
  // Without a parse, a missing model is likely a syntax error's echo.
  if (!prog.model && !diags.hasErrors()) {
    diags.error(diag::Loc{spec_file, 1, 1, 1}, "no `model` in " + sources.name(spec_file),
                "a spec declares what it trains: `model Name { … }`");
  }
}

}  // namespace dtl::sema
