#include "tools/dtlc/compile_spec.h"

namespace dtl::cli {

int compileSpec(driver::Frontend& fe, const std::string& command, const std::string& spec,
                const driver::FrontendOptions& opt, driver::Stop stop, std::string& err, bool json) {
  int status = fe.run(spec, opt, stop);
  if (status == 2) {
    for (const std::string& u : fe.usageErrors()) err += "dtlc " + command + ": " + u + "\n";
    return 2;
  }
  if (status != 0) {
    err += json ? fe.diagnostics().renderJson() + "\n" : fe.diagnostics().render();
    return 1;
  }
  return 0;
}

int refusals(const driver::Frontend& fe, const std::string& command, std::string& err) {
  for (const std::string& e : fe.layoutErrors()) err += "dtlc " + command + ": " + e + "\n";
  return fe.layoutErrors().empty() ? 0 : 1;
}

}  // namespace dtl::cli
