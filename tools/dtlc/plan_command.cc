#include "tools/dtlc/plan_command.h"

#include <cstdlib>

#include "compiler/driver/frontend.h"
#include "compiler/plan/plan.h"

namespace dtl::cli {

namespace {

const char* kPlanHelp =
    "usage: dtlc plan SPEC [options]\n"
    "\n"
    "Lays SPEC out on its mesh and prints what one optimiser step sends over\n"
    "the wire: every collective with its op, mesh axis, dtype, bytes, bucket,\n"
    "tensors, the point of the backward pass where it starts and the layout\n"
    "rule (and spec line) that caused it; memory per rank; bytes sent per rank.\n"
    "\n"
    "options:\n"
    "  --world N            the number of ranks (resolves `auto`; required when the mesh has it)\n"
    "  --format text|json|dot\n"
    "                       text (default), JSON (docs/plan.md) or a Graphviz picture\n"
    "  --set KEY=VALUE      override a setting, as for `dtlc check` (repeatable)\n"
    "  -h, --help           this help\n";

}  // namespace

int planCommand(const std::vector<std::string>& args, std::string& out, std::string& err) {
  std::string spec, format = "text";
  driver::FrontendOptions opt;
  for (size_t i = 1; i < args.size(); ++i) {
    std::string a = args[i], value;
    size_t eq = a.find('=');
    bool has = a.rfind("--", 0) == 0 && eq != std::string::npos;
    if (has) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
    }
    auto next = [&]() {
      if (has) return true;
      if (i + 1 >= args.size()) return false;
      value = args[++i];
      return true;
    };
    if (a == "-h" || a == "--help") {
      out += kPlanHelp;
      return 0;
    } else if (a == "--world") {
      char* end = nullptr;
      long long n = next() ? std::strtoll(value.c_str(), &end, 10) : 0;
      if (!end || *end || n < 1 || n > 1000000) {
        err += "dtlc plan: --world expects a positive number of ranks\n";
        return 2;
      }
      opt.world = n;
    } else if (a == "--format") {
      if (!next() || (value != "text" && value != "json" && value != "dot")) {
        err += "dtlc plan: --format is text, json or dot\n";
        return 2;
      }
      format = value;
    } else if (a == "--set") {
      if (!next()) {
        err += "dtlc plan: --set needs KEY=VALUE\n";
        return 2;
      }
      opt.sets.push_back(value);
    } else if (a.rfind("-", 0) == 0 && a.size() > 1) {
      err += "dtlc plan: unknown option '" + args[i] + "' (see dtlc plan --help)\n";
      return 2;
    } else if (spec.empty()) {
      spec = args[i];
    } else {
      err += "dtlc plan: more than one SPEC given\n";
      return 2;
    }
  }
  if (spec.empty()) {
    err += "dtlc plan: no SPEC given\nusage: dtlc plan SPEC [--world N] [--format text|json|dot] [--set KEY=VALUE]…\n";
    return 2;
  }
  driver::Frontend fe;
  int status = fe.run(spec, opt, driver::Stop::Plan);
  if (status == 2) {
    for (const std::string& u : fe.usageErrors()) err += "dtlc plan: " + u + "\n";
    return 2;
  }
  if (status != 0) {
    err += fe.diagnostics().render();
    return 1;
  }
  for (const auto& a : fe.spec().parallel.mesh) {
    if (a.is_auto && a.size == 0) {
      err += "dtlc plan: the mesh has `" + a.name + " = auto`; give the world size: --world N\n";
      return 2;
    }
  }
  if (!fe.layoutErrors().empty()) {
    for (const std::string& e : fe.layoutErrors()) err += "dtlc plan: " + e + "\n";
    return 1;
  }
  const sema::Spec& s = fe.spec();
  out += format == "json" ? plan::planJson(fe.graph(), fe.layout(), s)
         : format == "dot" ? plan::planDot(fe.graph(), fe.layout(), s)
                           : plan::planText(fe.graph(), fe.layout(), s);
  return 0;
}

}  // namespace dtl::cli
