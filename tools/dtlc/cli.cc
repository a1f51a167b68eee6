// Argument parsing and the `check` command. Flags accept `--flag value` and
// `--flag=value`; every flag is described by `dtlc COMMAND --help`.
#include "tools/dtlc/cli.h"

#include <new>

#include "compiler/codegen/fuse_regions.h"
#include "compiler/codegen/traffic.h"
#include "compiler/driver/frontend.h"
#include "compiler/layout/print_layout.h"
#include "compiler/program/plan_program.h"
#include "compiler/sema/print_sema.h"
#include "compiler/syntax/print_ast.h"
#include "tools/dtlc/compile_spec.h"
#include "tools/dtlc/export_command.h"
#include "tools/dtlc/flags.h"
#include "tools/dtlc/generate_command.h"
#include "tools/dtlc/kernel_emitter.h"
#include "tools/dtlc/plan_command.h"
#include "tools/dtlc/report_command.h"
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
    "  run SPEC     train a spec, on this process or on N ranks (--nproc N)\n"
    "  generate SPEC --checkpoint DIR --prompt TEXT\n"
    "               sample text from a trained byte-level language model\n"
    "  export DIR --spec SPEC --format torch --out FILE\n"
    "               write a checkpoint's GPT as a nanoGPT-style PyTorch state_dict\n"
    "  report RUN_DIR\n"
    "               write one HTML page of a run: curves, plan, checkpoints, spec\n"
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
    "                       ir (the forward graph), grad (forward, backward\n"
    "                       and optimiser updates), layout (the graph laid out\n"
    "                       on the mesh: placements, local shapes, collectives,\n"
    "                       buckets; the %N ids `dtlc plan` names) or program\n"
    "                       (rank 0's program: instructions, communication\n"
    "                       groups, buffer slots)\n"
    "  --kernels jit|fast   the program --emit=program prints: as `dtlc run\n"
    "                       --kernels` runs it (jit: each fused region one\n"
    "                       instruction; default as run's: jit where dtlc has\n"
    "                       the generator); --emit=fused|llvm|ptx always show\n"
    "                       the regions jit runs\n"
    "  -h, --help           this help\n"
    "\n"
    "Rules and settings this build cannot run yet (a `split` of a dim other than\n"
    "batch, pipeline, recompute, reduce_dtype, precision) are warnings here\n"
    "and errors for `dtlc plan` and `dtlc run` (and --emit=layout|program|fused|\n"
    "llvm|ptx).\n"
    "\n"
    "exit status: 0 the spec is good, 1 the spec has errors, 2 usage error\n";

KernelEmitter& kernelEmitter() {
  static KernelEmitter emitter = nullptr;
  return emitter;
}

bool needsLayout(const std::string& emit) {
  return emit == "layout" || emit == "program" || emit == "fused" || emit == "llvm" || emit == "ptx";
}

// --emit=layout|program|fused|llvm|ptx: the laid-out graph, or rank 0's
// program and its fused regions, on a mesh with every size known.
int emitLayout(const driver::Frontend& fe, const std::string& emit, bool fuse, std::string& out, std::string& err) {
  if ((emit == "llvm" || emit == "ptx") && !kernelEmitter()) {
    err += "dtlc check: --emit=" + emit +
           " needs the kernel generator, and this dtlc was built without it (LLVM 16 was not found: apt-get "
           "install llvm-16-dev, then reconfigure)\n";
    return 2;
  }
  for (const auto& a : fe.spec().parallel.mesh) {
    if (a.is_auto && a.size == 0) {
      err += "dtlc check: the mesh has `" + a.name + " = auto`; --emit=" + emit + " needs the world size: --world N\n";
      return 2;
    }
  }
  if (int rc = layoutRefusals(fe, "check", err); rc != 0) return rc;
  if (emit == "layout") {
    out += layout::printLayout(fe.graph(), fe.layout());
    return 0;
  }
  if (emit == "program") {
    program::PlanOptions o;
    o.fuse = fuse;
    out += prog::printProgram(program::planProgram(fe.graph(), fe.layout(), layout::meshCoords(fe.layout().mesh, 0), o));
    return 0;
  }
  // The regions as the planner cuts them (parameters and their views run
  // first), by the rules `--kernels jit` runs: the generator's full rules.
  program::PlanOptions o;
  o.fuse = true;
  prog::Program p = program::planProgram(fe.graph(), fe.layout(), layout::meshCoords(fe.layout().mesh, 0), o);
  codegen::Fusion f = codegen::plannedFusion(p);
  if (emit == "fused") {
    out += codegen::printTraffic(codegen::stepTraffic(p, fe.spec().train.stateTensorsPerParam()));
    out += codegen::printFusion(p, f);
    return 0;
  }
  return kernelEmitter()(p, f, optimizerConfig(fe.spec().train), emit == "ptx", out, err);
}

int check(const std::vector<std::string>& args, std::string& out, std::string& err) {
  std::string spec, format = "text", emit, kernels;  // kernels: "" = the default
  driver::FrontendOptions opt;
  bool help = false;
  std::string bad = Flags("check")
                        .text("--format", format, "a value", {"text", "json"})
                        .integer("--world", opt.world, "a positive number of ranks", 1, 1000000)
                        .list("--set", opt.sets, "KEY=VALUE")
                        .text("--kernels", kernels, "", {"fast", "jit"})
                        .text("--emit", emit, "a stage", {"ast", "sema", "ir", "grad", "layout", "program", "fused", "llvm", "ptx"})
                        .parse(args, spec, help);
  if (help) {
    out += kCheckHelp;
    return 0;
  }
  if (!bad.empty()) {
    err += "dtlc check: " + bad + "\n";
    return 2;
  }
  if (spec.empty()) {
    err += "dtlc check: no SPEC given\nusage: dtlc check SPEC [--format text|json] [--world N] [--set KEY=VALUE]…\n";
    return 2;
  }
  driver::Frontend fe;
  driver::Stop stop = emit == "ast"      ? driver::Stop::Ast
                      : emit == "ir"     ? driver::Stop::Ir
                      : emit == "grad"   ? driver::Stop::Grad
                      : needsLayout(emit) ? driver::Stop::Plan
                                          : driver::Stop::Sema;
  // A layout of what is not built yet would be wrong: refused as plan refuses it.
  opt.refuse_unbuilt = needsLayout(emit);
  if (int rc = compileSpec(fe, "check", spec, opt, stop, err, format == "json"); rc != 0) return rc;
  if (needsLayout(emit)) return emitLayout(fe, emit, kernelsOrDefault(kernels) == "jit", out, err);
  if (emit == "ast") {
    for (const auto& m : fe.program().modules)
      if (m->file == fe.program().spec_file) out += syntax::printAst(*m);
    return 0;
  }
  if (emit == "ir" || emit == "grad") {
    out += ir::printGraph(fe.graph(), emit == "grad");
    return 0;
  }
  if (emit == "sema") {
    out += sema::semaDump(fe.spec());
    return 0;
  }
  out += format == "json" ? sema::summaryJson(fe.spec()) : sema::summaryText(fe.spec());
  return 0;
}

}  // namespace

void setKernelEmitter(KernelEmitter emitter) { kernelEmitter() = emitter; }

namespace {
RegionRunnerMaker& regionRunnerMaker() {
  static RegionRunnerMaker maker = nullptr;
  return maker;
}
}  // namespace

void setRegionRunnerMaker(RegionRunnerMaker maker) { regionRunnerMaker() = maker; }

std::string kernelsOrDefault(const std::string& kernels) {
  if (!kernels.empty()) return kernels;
  return regionRunnerMaker() ? "jit" : "fast";
}

program::PlanOptions planOptionsFor(const std::string& kernels) {
  program::PlanOptions o;
  o.fuse = kernelsOrDefault(kernels) == "jit";
  return o;
}

int makeRegionRunner(const prog::Program& p, const rt::optim::OptimizerConfig& opt, int threads, JitRunners& runners,
                     std::string& note, std::string& err) {
  if (!regionRunnerMaker()) {
    err += "dtlc run: --kernels jit needs the kernel generator, and this dtlc was built without it (LLVM 16 was not "
           "found: apt-get install llvm-16-dev, then reconfigure); --kernels fast runs the same program unfused\n";
    return 2;
  }
  return regionRunnerMaker()(p, opt, threads, runners, note, err);
}

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
    if (cmd == "generate") return generateCommand(args, out, err);
    if (cmd == "export") return exportCommand(args, out, err);
    if (cmd == "report") return reportCommand(args, out, err);
    err += "dtlc: unknown command '" + cmd + "'\n\n" + kMainHelp;
    return 2;
  } catch (const std::bad_alloc&) {
    // Sizes are checked (sema, the memory check of `run`), so this is a
    // machine out of memory, not a bug: say what to look at.
    err += "dtlc: out of memory (an allocation failed); `dtlc plan SPEC` shows the memory per rank the spec needs\n";
    return 1;
  } catch (const std::exception& e) {
    // A broken invariant, not a user's mistake: say so plainly.
    err += std::string("dtlc: internal error: ") + e.what() + "\n";
    return 70;
  }
}

}  // namespace dtl::cli
