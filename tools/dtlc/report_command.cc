// `dtlc report RUN_DIR`: finds what a run left — RUN_DIR is a run folder
// of `dtlc run`; the metrics are RUN_DIR/metrics.jsonl or --metrics, the
// spec RUN_DIR/spec.dtl (with the run's --sets in its header) or --spec — compiles the spec's plan at the
// world size the latest checkpoint recorded, and writes the page
// (report_page.h). A part it cannot find is described on the page.
#include "tools/dtlc/report_command.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "compiler/plan/plan.h"
#include "compiler/plan/plan_svg.h"
#include "compiler/program/plan_program.h"
#include "runtime/data/literal.h"
#include "runtime/io/checkpoint_store.h"
#include "tools/dtlc/compile_spec.h"
#include "tools/dtlc/flags.h"
#include "tools/dtlc/report_page.h"
#include "tools/dtlc/kernel_emitter.h"
#include "tools/dtlc/run_folder.h"

namespace dtl::cli {

namespace {

namespace fs = std::filesystem;

const char* kReportHelp =
    "usage: dtlc report RUN_DIR [options]\n"
    "\n"
    "Writes one self-contained HTML page of a training run (no network, no\n"
    "scripts): loss, eval metrics, learning rate and throughput curves with a\n"
    "log-scale switch; the plan as a picture (the mesh, collectives per axis\n"
    "with their bytes, memory per rank); the checkpoints; the spec. RUN_DIR is\n"
    "a run folder of dtlc run. A part that cannot be found is named on the\n"
    "page instead.\n"
    "\n"
    "options:\n"
    "  -o, --out FILE       the page to write (default RUN_DIR/report.html)\n"
    "  --metrics FILE       the metrics of `dtlc run --metrics FILE` (default\n"
    "                       RUN_DIR/metrics.jsonl when it exists)\n"
    "  --spec SPEC          the spec that was trained (default RUN_DIR/spec.dtl\n"
    "                       when it exists); its plan is drawn\n"
    "  --world N            plan for N ranks (default: the world size the latest\n"
    "                       checkpoint's state.json records)\n"
    "  --set KEY=VALUE      override a setting as for `dtlc run` (repeatable)\n"
    "  -h, --help           this help\n"
    "\n"
    "exit status: 0 written, 1 RUN_DIR, --metrics or --spec does not exist, or the\n"
    "page could not be written, 2 usage error\n";

struct ReportFlags {
  std::string dir, out, metrics, spec;
  int64_t world = 0;
  std::vector<std::string> sets;
  bool help = false;
};

bool readFile(const std::string& path, std::string& text) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream s;
  s << f.rdbuf();
  text = s.str();
  return !f.bad();
}

int64_t folderBytes(const fs::path& dir) {
  std::error_code ec;
  int64_t n = 0;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->is_regular_file(ec)) n += static_cast<int64_t>(it->file_size(ec));
  return n;
}

// "step-00000040" → 40; "diverged-step-…" too (with *diverged set).
bool stepOf(std::string name, int64_t& step, bool& diverged) {
  diverged = name.rfind("diverged-", 0) == 0;
  if (diverged) name = name.substr(9);
  if (name.rfind("step-", 0) != 0 || name.size() == 5 || name.find_first_not_of("0123456789", 5) != std::string::npos)
    return false;
  step = std::stoll(name.substr(5));
  return true;
}

// Every step-* and diverged-step-* folder by step; the latest is the one
// index.json names last (the highest step when it cannot be read).
void findCheckpoints(const std::string& dir, report::PageInputs& in) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    report::CheckpointRow row;
    row.name = e.path().filename().string();
    if (!e.is_directory(ec) || !stepOf(row.name, row.step, row.diverged)) continue;
    row.path = (fs::path(dir) / row.name).string();
    row.bytes = folderBytes(e.path());
    in.checkpoints.push_back(row);
  }
  std::sort(in.checkpoints.begin(), in.checkpoints.end(),
            [](const auto& a, const auto& b) { return a.step != b.step ? a.step < b.step : a.diverged < b.diverged; });
  std::vector<std::string> names;
  rt::io::Status s = rt::io::CheckpointStore::list(dir, names);
  if (!s.ok && !in.checkpoints.empty()) in.checkpoints_note = s.message;
  const std::string latest = s.ok && !names.empty() ? names.back() : "";
  for (auto it = in.checkpoints.rbegin(); it != in.checkpoints.rend(); ++it)
    if (!it->diverged && (latest.empty() || it->name == latest)) {
      it->latest = true;
      break;
    }
}

// The model and world size the latest checkpoint's state.json records.
void readState(const report::PageInputs& in, std::string& model, int64_t& world) {
  for (const report::CheckpointRow& c : in.checkpoints) {
    std::string text, error;
    rt::data::Literal o;
    if (!c.latest || !readFile(c.path + "/state.json", text) ||
        !rt::data::parseLiteral(text, rt::data::Syntax::Json, o, error))
      continue;
    if (const auto* w = o.get("world"); w && w->type == rt::data::Literal::Type::Int && w->i > 0) world = w->i;
    if (const auto* m = o.get("model"); m && m->type == rt::data::Literal::Type::String) model = m->s;
  }
}

void findMetrics(const ReportFlags& f, report::PageInputs& in) {
  in.metrics_path = f.metrics.empty() ? (fs::path(f.dir) / "metrics.jsonl").string() : f.metrics;
  std::string text;
  if (!readFile(in.metrics_path, text)) {
    in.metrics_missing = "No metrics: " + in.metrics_path +
                         " does not exist. `dtlc run SPEC --out " + f.dir + "` writes it there; or name the file with `dtlc report " +
                         f.dir + " --metrics FILE`.";
    return;
  }
  in.metrics = report::parseMetrics(text);
}

// The --sets a run had, which `dtlc run` names in the header of the spec it
// writes into its run folder (`# set: KEY=VALUE`, tools/dtlc/run_folder.h).
std::vector<std::string> headerSets(const std::string& spec_text) {
  std::vector<std::string> sets;
  size_t at = 0;
  while (at < spec_text.size() && spec_text[at] == '#') {
    size_t end = spec_text.find('\n', at);
    if (end == std::string::npos) end = spec_text.size();
    const std::string line = spec_text.substr(at, end - at);
    if (line.rfind(kSetHeader, 0) == 0) sets.push_back(line.substr(kSetHeader.size()));
    at = end + 1;
  }
  return sets;
}

// The spec's plan at `world` ranks (0: the spec's own mesh), as a picture and
// as text, with the run's --sets and then the command line's.
void planOf(const ReportFlags& f, int64_t world, report::PageInputs& in) {
  driver::FrontendOptions opt;
  opt.refuse_unbuilt = true;
  opt.world = world;
  opt.sets = headerSets(in.spec_text);
  opt.sets.insert(opt.sets.end(), f.sets.begin(), f.sets.end());
  driver::Frontend fe;
  std::string err;
  if (compileSpec(fe, "report", in.spec_path, opt, driver::Stop::Plan, err) != 0) {
    in.plan_missing = "No plan: the spec does not compile at " + std::to_string(world) + " rank(s):\n" + err;
    return;
  }
  in.model = fe.spec().model.name;
  for (const auto& a : fe.spec().parallel.mesh)
    if (a.is_auto && a.size == 0) {
      in.plan_missing = "No plan: the mesh has `" + a.name + " = auto` and no checkpoint records the world size; give --world N.";
      return;
    }
  if (layoutRefusals(fe, "report", err) != 0) {
    in.plan_missing = "No plan: " + err;
    return;
  }
  // The default kernels' program (the run's own plan.txt says what it ran).
  const prog::Program rank0 =
      program::planProgram(fe.graph(), fe.layout(), layout::meshCoords(fe.layout().mesh, 0), planOptionsFor(""));
  in.plan_svg = plan::planSvg(plan::planPicture(fe.graph(), fe.layout(), rank0, fe.spec()));
  in.plan_text = plan::planText(fe.graph(), fe.layout(), rank0, fe.spec());
}

void findSpec(const ReportFlags& f, report::PageInputs& in) {
  in.spec_path = f.spec.empty() ? (fs::path(f.dir) / "spec.dtl").string() : f.spec;
  if (!readFile(in.spec_path, in.spec_text)) {
    in.spec_missing = "No spec: " + in.spec_path + " does not exist; name the spec that was trained with `dtlc report " +
                      f.dir + " --spec SPEC`.";
    in.plan_missing = "No plan: it is compiled from the spec, and there is none (--spec SPEC).";
    return;
  }
  planOf(f, f.world > 0 ? f.world : in.world, in);
}

std::string parseReport(const std::vector<std::string>& args, ReportFlags& f) {
  std::string bad = Flags("report")
                        .text("-o", f.out, "a file")
                        .text("--out", f.out, "a file")
                        .text("--metrics", f.metrics, "a file")
                        .text("--spec", f.spec, "a spec file")
                        .integer("--world", f.world, "a positive number of ranks", 1, 1000000)
                        .list("--set", f.sets, "KEY=VALUE")
                        .parse(args, f.dir, f.help);
  if (!bad.empty() || f.help) return bad;
  if (f.dir.empty()) return "no RUN_DIR given: a run folder of dtlc run, e.g. runs/x";
  return "";
}

// RUN_DIR, and the files named on the command line, must exist.
std::string missingInput(const ReportFlags& f) {
  std::error_code ec;
  if (!fs::is_directory(f.dir, ec))
    return "RUN_DIR " + f.dir + (fs::exists(f.dir, ec) ? " is not a folder" : " does not exist") +
           " (a run folder of dtlc run, e.g. runs/x)";
  if (!f.metrics.empty() && !fs::is_regular_file(f.metrics, ec)) return "--metrics " + f.metrics + " does not exist";
  if (!f.spec.empty() && !fs::is_regular_file(f.spec, ec)) return "--spec " + f.spec + " does not exist";
  return "";
}

}  // namespace

int reportCommand(const std::vector<std::string>& args, std::string& out, std::string& err) {
  ReportFlags f;
  const std::string bad = parseReport(args, f);
  if (f.help) {
    out += kReportHelp;
    return 0;
  }
  if (!bad.empty()) {
    err += "dtlc report: " + bad + "\nusage: dtlc report RUN_DIR [-o FILE] [--metrics FILE] [--spec SPEC] [--world N]\n";
    return 2;
  }
  if (std::string no = missingInput(f); !no.empty()) {
    err += "dtlc report: " + no + "\n";
    return 1;
  }
  report::PageInputs in;
  in.run_dir = f.dir;
  findCheckpoints(f.dir, in);
  readState(in, in.model, in.world);
  if (f.world > 0) in.world = f.world;
  findMetrics(f, in);
  findSpec(f, in);
  const std::string path = f.out.empty() ? (fs::path(f.dir) / "report.html").string() : f.out;
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  const std::string html = report::reportHtml(in);
  if (!(file << html) || !file.flush()) {
    err += "dtlc report: cannot write " + path + "\n";
    return 1;
  }
  out += "wrote " + path + " (" + std::to_string(html.size() / 1024) + " KiB)\n";
  for (const std::string* why : {&in.metrics_missing, &in.spec_missing, &in.plan_missing})
    if (!why->empty()) err += "note: dtlc report: " + why->substr(0, why->find('\n')) + "\n";
  return 0;
}

}  // namespace dtl::cli
