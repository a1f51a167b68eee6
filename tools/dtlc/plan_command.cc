#include "tools/dtlc/plan_command.h"

#include "compiler/driver/frontend.h"
#include "compiler/plan/plan.h"
#include "compiler/plan/plan_svg.h"
#include "compiler/program/plan_program.h"
#include "tools/dtlc/compile_spec.h"
#include "tools/dtlc/flags.h"
#include "tools/dtlc/kernel_emitter.h"
#include "tools/dtlc/memory_check.h"

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
    "  --format text|json|dot|svg\n"
    "                       text (default), JSON (docs/plan.md), a Graphviz picture,\n"
    "                       or an SVG picture drawn by dtlc (the mesh, collectives\n"
    "                       per axis with their bytes, memory per rank as bars)\n"
    "  --set KEY=VALUE      override a setting, as for `dtlc check` (repeatable)\n"
    "  --device-memory SIZE the memory of one rank's device on the target machine\n"
    "                       (e.g. '24 GiB'): exit 1 with the breakdown when the plan\n"
    "                       needs more per rank\n"
    "  --kernels jit|fast   the kernels the run will use (default as `dtlc run`'s:\n"
    "                       jit where dtlc has the generator): jit's fused\n"
    "                       regions hold other buffers than fast's node by node\n"
    "  -h, --help           this help\n"
    "\n"
    "Rules and settings this build cannot run yet are refused at their source\n"
    "(docs/plan.md#not-yet).\n"
    "\n"
    "exit status: 0 planned, 1 the spec has errors, is not built yet or does not fit,\n"
    "2 usage error\n";

}  // namespace

int planCommand(const std::vector<std::string>& args, std::string& out, std::string& err) {
  std::string spec, format = "text", kernels;  // kernels: "" = the default
  driver::FrontendOptions opt;
  opt.refuse_unbuilt = true;
  int64_t device_memory = 0;
  bool help = false;
  std::string bad = Flags("plan")
                        .integer("--world", opt.world, "a positive number of ranks", 1, 1000000)
                        .text("--format", format, "a value", {"text", "json", "dot", "svg"})
                        .list("--set", opt.sets, "KEY=VALUE")
                        .bytes("--device-memory", device_memory)
                        .text("--kernels", kernels, "", {"jit", "fast"})
                        .parse(args, spec, help);
  if (help) {
    out += kPlanHelp;
    return 0;
  }
  if (!bad.empty()) {
    err += "dtlc plan: " + bad + "\n";
    return 2;
  }
  if (spec.empty()) {
    err += "dtlc plan: no SPEC given\nusage: dtlc plan SPEC [--world N] [--format text|json|dot|svg] [--set KEY=VALUE]… "
           "[--device-memory SIZE] [--kernels jit|fast]\n";
    return 2;
  }
  driver::Frontend fe;
  if (int rc = compileSpec(fe, "plan", spec, opt, driver::Stop::Plan, err); rc != 0) return rc;
  for (const auto& a : fe.spec().parallel.mesh) {
    if (a.is_auto && a.size == 0) {
      err += "dtlc plan: the mesh has `" + a.name + " = auto`; give the world size: --world N\n";
      return 2;
    }
  }
  if (int rc = layoutRefusals(fe, "plan", err); rc != 0) return rc;
  const sema::Spec& s = fe.spec();
  // Every rank's program needs the same memory: splits are even.
  const prog::Program rank0 = program::planProgram(fe.graph(), fe.layout(), layout::meshCoords(fe.layout().mesh, 0),
                                                  planOptionsFor(kernels));
  if (device_memory > 0) {
    std::string no = memoryRefusal(plan::memoryPerRank(rank0, s), 1, device_memory, "of --device-memory",
                                   "lower train.batch or the model's dims, or plan for a device with more memory");
    if (!no.empty()) {
      err += "dtlc plan: " + no;
      return 1;
    }
  }
  out += format == "json" ? plan::planJson(fe.graph(), fe.layout(), rank0, s)
         : format == "dot" ? plan::planDot(fe.graph(), fe.layout(), rank0, s)
         : format == "svg" ? plan::planSvg(plan::planPicture(fe.graph(), fe.layout(), rank0, s))
                           : plan::planText(fe.graph(), fe.layout(), rank0, s);
  return 0;
}

}  // namespace dtl::cli
