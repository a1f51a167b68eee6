// Argument parsing and the `check` command. Flags accept `--flag value` and
// `--flag=value`; every flag is described by `dtlc COMMAND --help`.
#include "tools/dtlc/cli.h"

#include <cstdlib>

#include "compiler/driver/frontend.h"
#include "compiler/sema/print_sema.h"
#include "compiler/syntax/print_ast.h"
#include "tools/dtlc/plan_command.h"
#include "tools/dtlc/run_command.h"

namespace dtl::cli {

namespace {

const char* kMainHelp =
    "dtl — a compiled training-script language\n"
    "\n"
    "usage: dtlc COMMAND [options]\n"
    "\n"
    "commands:\n"
    "  check SPEC   parse and type-check a spec; print its model, parameters and layout\n"
    "  plan SPEC    show what one optimiser step sends over the wire, and memory per rank\n"
    "  run SPEC     train a spec on this process\n"
    "\n"
    "Run `dtlc COMMAND --help` for a command's options. Docs: docs/language-guide.md.\n";

const char* kCheckHelp =
    "usage: dtlc check SPEC [options]\n"
    "\n"
    "Parses SPEC, resolves every name, infers every tensor's named shape and\n"
    "checks the data, train and parallel blocks. Prints a summary: the model,\n"
    "its inputs, every parameter with its path, named shape and element count,\n"
    "the totals and the mesh. Diagnostics go to stderr.\n"
    "\n"
    "options:\n"
    "  --format text|json   summary and diagnostics as text (default) or JSON\n"
    "  --world N            the number of ranks: resolves `auto` and checks the\n"
    "                       mesh multiplies to N\n"
    "  --set KEY=VALUE      override a setting before checking; VALUE is a DTL\n"
    "                       expression. Keys: model.DIM, train.KEY, data.KEY,\n"
    "                       parallel.KEY, parallel.mesh.AXIS. Repeatable.\n"
    "                       e.g. --set model.hidden=256 --set 'parallel.bucket=1 MiB'\n"
    "  --emit=STAGE         print a stage's output instead of the summary:\n"
    "                       ast (the syntax tree), sema (the checked model),\n"
    "                       ir (the forward graph) or grad (forward, backward\n"
    "                       and optimiser updates)\n"
    "  -h, --help           this help\n"
    "\n"
    "exit status: 0 the spec is good, 1 the spec has errors, 2 usage error\n";

struct Flags {
  std::string spec;
  std::string format = "text";
  std::string emit;
  driver::FrontendOptions fe;
  bool help = false;
};

// Parses `check`'s flags; returns an error message or "".
std::string parseCheck(const std::vector<std::string>& args, Flags& f) {
  for (size_t i = 1; i < args.size(); ++i) {
    std::string a = args[i], value;
    bool has_value = false;
    size_t eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_value = true;
    }
    auto next = [&](const char* flag) -> bool {
      if (has_value) return true;
      if (i + 1 >= args.size()) return false;
      value = args[++i];
      (void)flag;
      return true;
    };
    if (a == "-h" || a == "--help") {
      f.help = true;
    } else if (a == "--format") {
      if (!next("--format")) return "--format needs a value: text or json";
      if (value != "text" && value != "json") return "--format is text or json, got '" + value + "'";
      f.format = value;
    } else if (a == "--world") {
      if (!next("--world")) return "--world needs a number of ranks";
      char* end = nullptr;
      long long n = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end || n < 1 || n > 1000000) return "--world expects a positive number of ranks, got '" + value + "'";
      f.fe.world = n;
    } else if (a == "--set") {
      if (!next("--set")) return "--set needs KEY=VALUE";
      f.fe.sets.push_back(value);
    } else if (a == "--emit") {
      if (!next("--emit")) return "--emit needs a stage: ast or sema";
      if (value != "ast" && value != "sema" && value != "ir" && value != "grad")
        return "--emit is ast, sema, ir or grad, got '" + value + "'";
      f.emit = value;
    } else if (a.rfind("-", 0) == 0 && a.size() > 1) {
      return "unknown option '" + args[i] + "' (see dtlc check --help)";
    } else if (f.spec.empty()) {
      f.spec = args[i];
    } else {
      return "more than one SPEC given: '" + f.spec + "' and '" + args[i] + "'";
    }
  }
  return "";
}

int check(const std::vector<std::string>& args, std::string& out, std::string& err) {
  Flags f;
  std::string bad = parseCheck(args, f);
  if (f.help) {
    out += kCheckHelp;
    return 0;
  }
  if (!bad.empty()) {
    err += "dtlc check: " + bad + "\n";
    return 2;
  }
  if (f.spec.empty()) {
    err += "dtlc check: no SPEC given\nusage: dtlc check SPEC [--format text|json] [--world N] [--set KEY=VALUE]…\n";
    return 2;
  }
  driver::Frontend fe;
  driver::Stop stop = f.emit == "ast"    ? driver::Stop::Ast
                      : f.emit == "ir"   ? driver::Stop::Ir
                      : f.emit == "grad" ? driver::Stop::Grad
                                         : driver::Stop::Sema;
  int status = fe.run(f.spec, f.fe, stop);
  if (status == 2) {
    for (const std::string& u : fe.usageErrors()) err += "dtlc check: " + u + "\n";
    return 2;
  }
  if (status != 0) {
    err += f.format == "json" ? fe.diagnostics().renderJson() + "\n" : fe.diagnostics().render();
    return 1;
  }
  if (f.emit == "ast") {
    for (const auto& m : fe.program().modules)
      if (m->file == fe.program().spec_file) out += syntax::printAst(*m);
    return 0;
  }
  if (f.emit == "ir" || f.emit == "grad") {
    out += ir::printGraph(fe.graph(), f.emit == "grad");
    return 0;
  }
  if (f.emit == "sema") {
    out += sema::semaDump(fe.spec());
    return 0;
  }
  out += f.format == "json" ? sema::summaryJson(fe.spec()) : sema::summaryText(fe.spec());
  return 0;
}

}  // namespace

int runCli(const std::vector<std::string>& args, std::string& out, std::string& err) {
  try {
    if (args.empty()) {
      err += kMainHelp;
      return 2;
    }
    const std::string& cmd = args[0];
    if (cmd == "-h" || cmd == "--help" || cmd == "help") {
      out += kMainHelp;
      return 0;
    }
    if (cmd == "check") return check(args, out, err);
    if (cmd == "run") return runCommand(args, out, err);
    if (cmd == "plan") return planCommand(args, out, err);
    err += "dtlc: unknown command '" + cmd + "'\n\n" + kMainHelp;
    return 2;
  } catch (const std::exception& e) {
    // A broken invariant, not a user's mistake: say so plainly.
    err += std::string("dtlc: internal error: ") + e.what() + "\n";
    return 70;
  }
}

}  // namespace dtl::cli
