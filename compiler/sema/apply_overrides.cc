// Stage 2: `--set` overrides.
//
// Keys: model.DIM, train.KEY, data.KEY, parallel.KEY, parallel.mesh.AXIS.
// 1. Split at the first '=', parse the right side as an expression.
// 2. Replace the matching setting's expression, or append a new one (creating
//    the train or parallel block when the spec has none). Unknown settings
//    are left for the block's checker, which reports them at the override.
//    `train.epochs` and `train.steps` replace each other.
#include "compiler/sema/apply_overrides.h"

#include "compiler/syntax/parse.h"

namespace dtl::sema {

namespace {

void setIn(std::vector<syntax::Setting>& settings, const std::string& key, syntax::ExprPtr value,
           Loc loc) {
  for (syntax::Setting& s : settings) {
    if (s.key.name == key) {
      s.value = std::move(value);
      return;
    }
  }
  settings.push_back(syntax::Setting{syntax::Ident{key, loc}, std::move(value)});
}

}  // namespace

std::vector<std::string> applyOverrides(Program& prog, diag::SourceManager& sources,
                                        const std::vector<std::string>& sets,
                                        diag::Diagnostics& diags) {
  std::vector<std::string> usage;
  for (const std::string& kv : sets) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      usage.push_back("--set " + kv + ": expected KEY=VALUE, e.g. --set train.epochs=1");
      continue;
    }
    std::string key = kv.substr(0, eq);
    while (!key.empty() && key.back() == ' ') key.pop_back();
    int file = sources.add("--set " + key, kv.substr(eq + 1));
    syntax::ExprPtr value = syntax::parseExpression(sources, file, diags);
    if (!value) continue;
    Loc loc{file, 1, 1, static_cast<int>(std::max<size_t>(1, kv.size() - eq - 1))};
    size_t dot = key.find('.');
    std::string section = key.substr(0, dot);
    std::string rest = dot == std::string::npos ? "" : key.substr(dot + 1);
    if (rest.empty()) {
      usage.push_back("--set " + kv + ": expected SECTION.KEY with SECTION one of model, data, train, parallel");
      continue;
    }
    if (section == "model") {
      if (!prog.model) continue;
      bool found = false;
      std::vector<std::string> names;
      for (syntax::DimDef& d : prog.model->dims) {
        names.push_back(d.name.name);
        if (d.name.name == rest) {
          d.value = std::move(value);
          found = true;
          break;
        }
      }
      if (!found) {
        std::string hint = diag::didYouMean(rest, names);
        usage.push_back("--set " + kv + ": model `" + prog.model->name.name + "` declares no dim `" +
                        rest + "`" + (hint.empty() ? "" : "; " + hint));
      }
    } else if (section == "train") {
      if (!prog.train) {
        prog.train_storage = std::make_unique<syntax::TrainDecl>();
        prog.train_storage->loc = loc;
        prog.train = prog.train_storage.get();
      }
      // `epochs` and `steps` are one setting, the run's length, written two
      // ways: overriding either replaces whichever the spec gave.
      if (rest == "epochs" || rest == "steps") {
        std::string other = rest == "epochs" ? "steps" : "epochs";
        std::erase_if(prog.train->settings, [&](const syntax::Setting& s) { return s.key.name == other; });
      }
      setIn(prog.train->settings, rest, std::move(value), loc);
    } else if (section == "data") {
      if (!prog.data) {
        usage.push_back("--set " + kv + ": the spec has no `data` block");
        continue;
      }
      setIn(prog.data->settings, rest, std::move(value), loc);
    } else if (section == "parallel") {
      if (!prog.parallel) {
        prog.parallel_storage = std::make_unique<syntax::ParallelDecl>();
        prog.parallel_storage->loc = loc;
        prog.parallel = prog.parallel_storage.get();
      }
      if (rest.rfind("mesh.", 0) == 0) {
        std::string axis = rest.substr(5);
        bool found = false;
        for (syntax::MeshAxis& a : prog.parallel->mesh) {
          if (a.name.name == axis) {
            a.size = std::move(value);
            found = true;
            break;
          }
        }
        if (!found) {
          prog.parallel->mesh.push_back(syntax::MeshAxis{syntax::Ident{axis, loc}, std::move(value)});
          if (!prog.parallel->has_mesh) prog.parallel->mesh_loc = loc;
          prog.parallel->has_mesh = true;
        }
      } else {
        setIn(prog.parallel->settings, rest, std::move(value), loc);
      }
    } else {
      usage.push_back("--set " + kv + ": unknown section `" + section +
                      "`; expected model, data, train or parallel");
    }
  }
  return usage;
}

}  // namespace dtl::sema
