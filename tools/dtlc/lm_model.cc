#include "tools/dtlc/lm_model.h"

#include <algorithm>

#include "compiler/program/plan_program.h"
#include "core/cpus.h"

namespace dtl::cli {

namespace {

std::string located(const driver::Frontend& fe, const diag::Loc& loc, const std::string& message, const std::string& hint) {
  diag::Diagnostics d(fe.sources());
  d.error(loc, message, hint);
  return d.render();
}

diag::Loc lossLoc(const sema::Spec& spec) {
  for (const sema::ValueInfo& v : spec.model.values)
    if (v.name == "loss") return v.loc;
  return spec.model.loc;
}

// The i32[batch, seq] input an Embed reads its ids from; "" when not exactly one.
std::string idsInput(const ir::Graph& g) {
  std::string found;
  for (const ir::Node& n : g.nodes) {
    if (n.op != ir::Op::Embed || n.inputs.size() < 2) continue;
    const ir::Node& ids = g[n.inputs[1]];
    if (ids.op != ir::Op::Input || ids.shape.dims.size() != 2) continue;
    if (!found.empty() && found != ids.name) return "";
    found = ids.name;
  }
  return found;
}

// The data field that feeds `input` in the train split, or null.
const sema::DataField* feeding(const sema::Spec& spec, const std::string& input) {
  for (const sema::DataSplit& s : spec.data.splits)
    for (const sema::DataField& f : s.fields)
      if (s.name == "train" && f.name == input) return &f;
  return nullptr;
}

bool checkSource(const driver::Frontend& fe, const std::string& ids, std::string& err) {
  const sema::DataField* f = feeding(fe.spec(), ids);
  if (f && f->source == "text") return true;
  if (f && f->source == "tokens") {
    err += located(fe, f->loc, "dtlc generate: input `" + ids + "` is fed by `tokens`, ids of a tokenizer dtl does not have",
                   "generate encodes the prompt and decodes the output as bytes, as `text(…)` feeds them; train on "
                   "`text(…)` to generate, or decode the ids with the tokenizer that made the file");
    return false;
  }
  err += located(fe, f ? f->loc : fe.spec().model.loc,
                 "dtlc generate: input `" + ids + "` is not fed by `text(…)`, so its ids are not bytes",
                 "generate encodes the prompt and decodes the output as bytes, as `text(…)` feeds them");
  return false;
}

}  // namespace

bool findLanguageModel(const driver::Frontend& fe, LmShape& lm, std::string& err) {
  const ir::Graph& g = fe.graph();
  const ir::Node* ce = nullptr;
  for (const ir::Node& n : g.nodes)
    if (n.op == ir::Op::CrossEntropy && n.id < g.forward_end) ce = ce ? nullptr : &n;
  lm.ids = idsInput(g);
  const std::string shape_hint =
      "generate runs a language model: one input of token ids [batch, seq] read by an Embedding, and a loss "
      "`cross_entropy(logits, targets, over = vocab)` with logits [batch, seq, vocab] (samples/char_gpt.dtl)";
  if (!ce || lm.ids.empty()) {
    err += located(fe, lossLoc(fe.spec()), "dtlc generate: model " + fe.spec().model.name + " is not a language model",
                   shape_hint);
    return false;
  }
  const ir::Node& logits = g[ce->inputs[0]];
  const ir::Node* ids = nullptr;
  for (const ir::Node& n : g.nodes)
    if (n.op == ir::Op::Input && n.name == lm.ids) ids = &n;
  const std::string seq = ids->shape.dims[1].name, vocab = ce->names[0];
  const int ks = logits.shape.find(seq), kv = logits.shape.find(vocab);
  if (logits.shape.dims.size() != 3 || ks < 0 || kv < 0) {
    err += located(fe, lossLoc(fe.spec()),
                   "dtlc generate: the logits of the loss are " + logits.shape.str() + ", not [batch, " + seq + ", " +
                       vocab + "]",
                   shape_hint);
    return false;
  }
  for (const ir::Node& n : g.nodes) {
    if (n.op == ir::Op::Attention && !n.flag && n.id < g.forward_end) {
      err += located(fe, lossLoc(fe.spec()), "dtlc generate: the model's attention is not causal",
                     "generate pads the window after the prompt; only a causal model ignores the padding");
      return false;
    }
  }
  if (!checkSource(fe, lm.ids, err)) return false;
  lm.logits = logits.id;
  lm.seq = logits.shape.dims[static_cast<size_t>(ks)].size;
  lm.vocab = logits.shape.dims[static_cast<size_t>(kv)].size;
  auto stride = [&](int k) {
    int64_t s = 1;
    for (size_t d = static_cast<size_t>(k) + 1; d < logits.shape.dims.size(); ++d) s *= logits.shape.dims[d].size;
    return s;
  };
  lm.seq_stride = stride(ks);
  lm.vocab_stride = stride(kv);
  return true;
}

LmRunner::LmRunner(const ir::Graph& g, const LmShape& lm, std::map<std::string, std::vector<float>>& params,
                   bool reference_kernels)
    : lm_(lm) {
  ir::Graph with_logits = g;
  with_logits.outputs.push_back(lm.logits);
  program_ = program::planProgram(with_logits);
  backend_ = reference_kernels ? rt::makeReferenceBackend() : rt::makeFastBackend();
  exec_ = std::make_unique<rt::Executor>(program_, *backend_);
  for (auto& [path, v] : params) exec_->bindParam(path, v.data());
  for (const ir::Node& n : program_.nodes) {
    if (n.op != ir::Op::Input || n.name == lm.ids) continue;
    zeros_.emplace_back(static_cast<size_t>(n.shape.elements().value_or(0)), 0);
    exec_->setInput(n.name, zeros_.back().data(), static_cast<int64_t>(zeros_.back().size()));
  }
}

bool LmRunner::logits(const std::vector<int32_t>& ids, std::vector<float>& out, std::string& err) {
  std::vector<int32_t> window(static_cast<size_t>(lm_.seq), 0);
  std::copy(ids.begin(), ids.end(), window.begin());
  exec_->setInput(lm_.ids, window.data(), lm_.seq);
  rt::RunContext ctx;
  ctx.training = false;
  ctx.threads = usableCpus();
  rt::KernelStatus s = exec_->run(false, ctx);
  if (!s.ok) {
    err += "dtlc generate: the forward pass failed: " + s.message + "\n";
    return false;
  }
  const rt::TensorView& v = exec_->tensor(lm_.logits);
  if (!v.data) {
    err += "dtlc generate: the forward pass did not compute the logits\n";
    return false;
  }
  out.assign(ids.size() * static_cast<size_t>(lm_.vocab), 0.0f);
  for (size_t t = 0; t < ids.size(); ++t)
    for (int64_t c = 0; c < lm_.vocab; ++c)
      out[t * static_cast<size_t>(lm_.vocab) + static_cast<size_t>(c)] =
          v.f()[static_cast<int64_t>(t) * lm_.seq_stride + c * lm_.vocab_stride];
  return true;
}

}  // namespace dtl::cli
