// `dtlc export DIR --spec SPEC --format torch --out FILE`: loads the
// checkpoint DIR (checked against SPEC's parameters: a checkpoint stores
// parameters by path and the model's name, not the spec, so the spec comes
// from the command line), maps them (torch_export.h) and writes FILE.
#include "tools/dtlc/export_command.h"

#include "runtime/io/safetensors.h"
#include "tools/dtlc/checkpoint_params.h"
#include "tools/dtlc/compile_spec.h"
#include "tools/dtlc/flags.h"
#include "tools/dtlc/torch_export.h"

namespace dtl::cli {

const char* const kExportHelp =
    "usage: dtlc export DIR --spec SPEC --format torch --out FILE [options]\n"
    "\n"
    "Writes the parameters of the checkpoint DIR (the spec's checkpoint folder,\n"
    "for its newest checkpoint that verifies, or one checkpoint in it:\n"
    "runs/x/step-00000500) in another framework's names and layouts.\n"
    "\n"
    "options:\n"
    "  --spec SPEC          the spec the checkpoint was trained from (a checkpoint\n"
    "                       holds parameters by path, not the model)\n"
    "  --format torch       a safetensors file holding the state_dict of a\n"
    "                       nanoGPT-style PyTorch GPT (nn.Linear weights [out, in],\n"
    "                       q, k, v merged into attn.c_attn; names in\n"
    "                       docs/running.md); the spec must be a GPT built like\n"
    "                       samples/char_gpt.dtl\n"
    "  --out FILE           the file to write (replaced atomically)\n"
    "  --set KEY=VALUE      override a setting as for `dtlc run` (repeatable); give\n"
    "                       the --set's the checkpoint was trained with\n"
    "  -h, --help           this help\n"
    "\n"
    "Prints the model's nanoGPT configuration (n_layer, n_head, n_embd, the MLP's\n"
    "hidden size, vocab_size, block_size), which the file's metadata holds too.\n"
    "\n"
    "exit status: 0 written, 1 an error in the spec or the checkpoint, or a model\n"
    "the format cannot hold, 2 usage error\n";

namespace {

struct ExportFlags {
  std::string dir, spec, format, out;
  std::vector<std::string> sets;
  bool help = false;
};

std::string parseExport(const std::vector<std::string>& args, ExportFlags& f) {
  std::string bad = Flags("export")
                        .text("--spec", f.spec, "a spec file")
                        .text("--format", f.format, "", {"torch"})
                        .text("--out", f.out, "a file")
                        .list("--set", f.sets, "KEY=VALUE")
                        .parse(args, f.dir, f.help);
  if (!bad.empty() || f.help) return bad;
  if (f.dir.empty()) return "no DIR given: the checkpoint to export";
  if (f.spec.empty()) return "--spec SPEC is required: the spec the checkpoint was trained from";
  if (f.format.empty()) return "--format is required: torch";
  if (f.out.empty()) return "--out FILE is required: the file to write";
  return "";
}

std::map<std::string, std::string> metadata(const GptConfig& c) {
  return {{"format", "pt"},
          {"n_layer", std::to_string(c.n_layer)},
          {"n_head", std::to_string(c.n_head)},
          {"n_embd", std::to_string(c.n_embd)},
          {"n_hidden", std::to_string(c.n_hidden)},
          {"vocab_size", std::to_string(c.vocab_size)},
          {"block_size", std::to_string(c.block_size)},
          {"bias", "true"},
          {"tied_lm_head", c.tied ? "true" : "false"}};
}

}  // namespace

int exportCommand(const std::vector<std::string>& args, std::string& out, std::string& err) {
  ExportFlags f;
  const std::string bad = parseExport(args, f);
  if (f.help) {
    out += kExportHelp;
    return 0;
  }
  if (!bad.empty()) {
    err += "dtlc export: " + bad + "\nusage: dtlc export DIR --spec SPEC --format torch --out FILE [--set KEY=VALUE]…\n";
    return 2;
  }
  driver::Frontend fe;
  if (int rc = compileOneProcess(fe, "export", f.spec, f.sets, driver::Stop::Ir, err); rc != 0) return rc;
  LoadedParams params;
  if (!loadCheckpointParams("dtlc export: ", f.dir, fe.spec().model, params, err)) return 1;
  for (const std::string& w : params.warnings) err += "warning: dtlc export: " + f.dir + ": " + w + "\n";
  std::vector<TorchTensor> tensors;
  GptConfig config;
  if (!torchGpt(fe, params.values, tensors, config, err)) return 1;
  std::vector<rt::io::TensorBlob> blobs;
  for (const TorchTensor& t : tensors) {
    rt::io::TensorBlob b{t.name, "F32", t.shape, {}};
    b.bytes.assign(reinterpret_cast<const uint8_t*>(t.data.data()),
                   reinterpret_cast<const uint8_t*>(t.data.data() + t.data.size()));
    blobs.push_back(std::move(b));
  }
  rt::io::Status s = rt::io::writeSafetensors(f.out, blobs, metadata(config));
  if (!s.ok) {
    err += "dtlc export: --out: " + s.message + "\n";
    return 1;
  }
  out += "wrote " + f.out + " from " + params.checkpoint + ": " + std::to_string(tensors.size()) +
         " tensors, nanoGPT config n_layer=" + std::to_string(config.n_layer) + " n_head=" +
         std::to_string(config.n_head) + " n_embd=" + std::to_string(config.n_embd) + " n_hidden=" +
         std::to_string(config.n_hidden) + " vocab_size=" + std::to_string(config.vocab_size) +
         " block_size=" + std::to_string(config.block_size) + " bias=True" +
         (config.tied ? " (lm_head tied to wte)" : "") + "\n";
  return 0;
}

}  // namespace dtl::cli
