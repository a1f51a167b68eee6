#include "tools/dtlc/compile_spec.h"

namespace dtl::cli {

int compileSpec(driver::Frontend& fe, const std::string& command, const std::string& spec,
                const driver::FrontendOptions& opt, driver::Stop stop, std::string& err, bool json) {
  int status = fe.run(spec, opt, stop);
  if (status == 2) {
    for (const std::string& u : fe.usageErrors()) err += "dtlc " + command + ": " + u + "\n";
    return 2;
  }
  // Warnings (what check accepts but plan and run refuse) go out with a good spec too.
  if (status != 0 || fe.diagnostics().warningCount() > 0)
    err += json ? fe.diagnostics().renderJson() + "\n" : fe.diagnostics().render();
  return status == 0 ? 0 : 1;
}

int layoutRefusals(const driver::Frontend& fe, const std::string& command, std::string& err) {
  for (const std::string& e : fe.layoutErrors()) err += "dtlc " + command + ": " + e + "\n";
  return fe.layoutErrors().empty() ? 0 : 1;
}

int compileForRun(driver::Frontend& fe, const std::string& spec, const std::vector<std::string>& sets, int64_t world,
                  std::string& err) {
  driver::FrontendOptions opt;
  opt.sets = sets;
  opt.world = world;
  opt.refuse_unbuilt = true;
  // One rank runs the plain training graph; several run it laid out on the
  // mesh, with the collectives the layout pass derived.
  if (int rc = compileSpec(fe, "run", spec, opt, world > 1 ? driver::Stop::Plan : driver::Stop::Grad, err); rc != 0)
    return rc;
  if (!fe.spec().data.present) {
    err += "dtlc run: " + spec + " has no `data` block; add one, e.g. `data { train { synthetic(seed = 1) } }`\n";
    return 1;
  }
  // Without one it would train on defaults nobody chose (batch 1, sgd, one epoch).
  if (!fe.spec().train.present) {
    err += "dtlc run: " + spec + " has no `train` block, so nothing says how to train it (batch, optimizer, "
           "epochs or steps); add one, e.g. `train { batch = 32  optimizer = adamw(lr = 1e-3)  epochs = 1 }`\n";
    return 1;
  }
  return layoutRefusals(fe, "run", err);
}

int compileOneProcess(driver::Frontend& fe, const std::string& command, const std::string& spec,
                      const std::vector<std::string>& sets, driver::Stop stop, std::string& err) {
  driver::Frontend first;  // for the mesh's axes
  driver::FrontendOptions o;
  o.sets = sets;
  std::string first_err;
  if (int rc = compileSpec(first, command, spec, o, driver::Stop::Sema, first_err); rc != 0) {
    err += first_err;
    return rc;
  }
  for (const sema::MeshAxisSpec& a : first.spec().parallel.mesh) o.sets.push_back("parallel.mesh." + a.name + "=1");
  if (first.spec().train.present) o.sets.push_back("train.batch=1");
  o.world = 1;
  std::string second_err;
  int rc = compileSpec(fe, command, spec, o, stop, second_err);
  if (rc != 0) err += second_err;
  return rc;
}

}  // namespace dtl::cli
