// The mapping, in order:
// 1. Roles by parameter: the token table is the one the ids input's Embed
//    reads; stacked parameters must be exactly one TransformerBlock's
//    (PREFIX.ln1.weight … PREFIX.mlp.down.bias); of the rest, a [seq, d]
//    table is the positions, a [d] weight/bias pair the final LayerNorm and
//    a [d, vocab] weight the head. Anything else is refused at its line.
// 2. The forward pass: only what nanoGPT computes — causal attention, the
//    exact (erf) gelu, layer norms with eps 1e-5 — in nanoGPT's numbers (one
//    attention and gelu per layer, two layer norms per layer and ln_f).
// 3. The tensors, per layer, transposed to [out, in] and q, k, v merged.
#include "tools/dtlc/torch_export.h"

#include <cmath>

namespace dtl::cli {

namespace {

const char* const kBlockParts[] = {"ln1.weight", "ln1.bias", "attn.wq", "attn.wk", "attn.wv", "attn.bq",
                                   "attn.bk",    "attn.bv",  "attn.wo", "attn.bo", "ln2.weight", "ln2.bias",
                                   "mlp.up.weight", "mlp.up.bias", "mlp.down.weight", "mlp.down.bias"};

bool endsWith(const std::string& s, const std::string& tail) {
  return s.size() > tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// [rows, cols] → [cols, rows]
std::vector<float> transposed(const float* a, int64_t rows, int64_t cols) {
  std::vector<float> t(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[static_cast<size_t>(c * rows + r)] = a[r * cols + c];
  return t;
}

class GptMapper {
 public:
  GptMapper(const driver::Frontend& fe, const std::map<std::string, std::vector<float>>& values, std::string& err)
      : fe_(fe), spec_(fe.spec()), g_(fe.graph()), values_(values), err_(err) {}

  bool run(std::vector<TorchTensor>& out, GptConfig& c) {
    if (!roles() || !forward()) return false;
    c = config_;
    emit(out);
    return true;
  }

 private:
  const sema::ParamInfo* param(const std::string& path) const {
    for (const sema::ParamInfo& p : spec_.model.params)
      if (p.path == path) return &p;
    return nullptr;
  }

  // Located at the parameter's declaration when the spec declares it; a
  // standard-library layer's parameter (its line is in nn.dtl) at the model.
  bool refuse(const sema::ParamInfo* p, const std::string& message) {
    const std::string hint =
        "export --format torch maps a GPT built like samples/char_gpt.dtl: tok = Embedding(vocab, d), a [seq, d] "
        "position table, repeat(layers) TransformerBlock(d, heads, hidden), a final LayerNorm, logits tied to "
        "tok.table (or a Linear(d, vocab, use_bias = false) head)";
    diag::Diagnostics d(fe_.sources());
    const bool in_spec = p && p->loc.valid() && fe_.sources().name(p->loc.file) == spec_.file;
    d.error(in_spec ? p->loc : spec_.model.loc, "dtlc export: " + message, hint);
    err_ += d.render();
    return false;
  }

  // The table the token ids are looked up in: "" when not exactly one.
  std::string tokenTable() const {
    std::string table;
    for (const ir::Node& n : g_.nodes) {
      if (n.op != ir::Op::Embed || n.inputs.size() < 2 || g_[n.inputs[1]].op != ir::Op::Input) continue;
      if (g_[n.inputs[0]].op != ir::Op::Param || !table.empty()) return "";
      table = g_[n.inputs[0]].name;
    }
    return table;
  }

  bool stacked(const sema::ParamInfo& p) const {
    for (const std::string& r : spec_.model.repeat_dims)
      if (!p.shape.dims.empty() && p.shape.dims[0].name == r) return true;
    return false;
  }

  bool blockPart(const sema::ParamInfo& p) {
    for (const char* part : kBlockParts) {
      if (!endsWith(p.path, std::string(".") + part)) continue;
      const std::string prefix = p.path.substr(0, p.path.size() - std::string(part).size() - 1);
      if (!block_.empty() && block_ != prefix)
        return refuse(&p, "a second stack of blocks, `" + prefix + "` beside `" + block_ + "`; nanoGPT has one");
      block_ = prefix;
      return true;
    }
    return refuse(&p, "stacked parameter `" + p.path + "` " + p.shape.str() + " is not part of a TransformerBlock");
  }

  bool other(const sema::ParamInfo& p, const ir::Node& ids) {
    const Shape& s = p.shape;
    const std::string prefix = p.path.substr(0, p.path.find_last_of('.'));
    const sema::ParamInfo* weight = param(prefix + ".weight");
    if (s.dims.size() == 1 && endsWith(p.path, ".bias") && weight && weight->shape.dims.size() == 2)
      return refuse(&p, "`" + p.path + "` is a bias of a Linear layer; nanoGPT's lm_head has none (use_bias = false)");
    if (s.dims.size() == 1 && (endsWith(p.path, ".weight") || endsWith(p.path, ".bias"))) {
      if (!ln_f_.empty() && ln_f_ != prefix)
        return refuse(&p, "a second final layer norm, `" + prefix + "` beside `" + ln_f_ + "`");
      ln_f_ = prefix;
      return true;
    }
    const Shape& table = param(wte_)->shape;
    if (s.dims.size() == 2 && s.dims[0].name == ids.shape.dims[1].name && s.dims[1].name == table.dims[1].name &&
        wpe_.empty()) {
      wpe_ = p.path;
      return true;
    }
    if (s.dims.size() == 2 && endsWith(p.path, ".weight") && s.dims[0].name == table.dims[1].name &&
        s.dims[1].name == table.dims[0].name && head_.empty()) {
      head_ = p.path;
      return true;
    }
    return refuse(&p, "parameter `" + p.path + "` " + s.str() + " has no place in nanoGPT's state_dict");
  }

  // Step 1.
  bool roles() {
    wte_ = tokenTable();
    const ir::Node* ids = nullptr;
    for (const ir::Node& n : g_.nodes)
      if (n.op == ir::Op::Embed && n.inputs.size() > 1 && g_[n.inputs[1]].op == ir::Op::Input) ids = &g_[n.inputs[1]];
    if (wte_.empty() || !ids || ids->shape.dims.size() != 2 || param(wte_)->shape.dims.size() != 2)
      return refuse(nullptr, "model " + spec_.model.name + " looks up no token ids [batch, seq] in one Embedding table");
    for (const sema::ParamInfo& p : spec_.model.params) {
      if (p.path == wte_) continue;
      if (!(stacked(p) ? blockPart(p) : other(p, *ids))) return false;
    }
    for (const char* part : kBlockParts)
      if (block_.empty() || !param(block_ + "." + part))
        return refuse(nullptr, block_.empty() ? std::string("no repeat(layers) TransformerBlock stack")
                                              : "the block stack `" + block_ + "` has no `" + part + "`");
    if (wpe_.empty()) return refuse(nullptr, "no position table [seq, d]");
    if (ln_f_.empty() || !param(ln_f_ + ".weight") || !param(ln_f_ + ".bias"))
      return refuse(nullptr, "no final LayerNorm (a [d] weight and bias)");
    const Shape& wq = param(block_ + ".attn.wq")->shape;  // [layers, d, heads, head_dim]
    config_.vocab_size = param(wte_)->shape.dims[0].size;
    config_.n_embd = param(wte_)->shape.dims[1].size;
    config_.block_size = param(wpe_)->shape.dims[0].size;
    config_.n_layer = wq.dims[0].size;
    config_.n_head = wq.dims.size() == 4 ? wq.dims[2].size : 0;
    config_.n_hidden = param(block_ + ".mlp.up.weight")->shape.dims.back().size;
    config_.tied = head_.empty();
    if (wq.dims.size() != 4 || wq.dims[2].size * wq.dims[3].size != config_.n_embd)
      return refuse(param(block_ + ".attn.wq"), "`" + block_ + ".attn.wq` is " + wq.str() + ", not [layers, d, heads, d / heads]");
    return true;
  }

  // Step 2.
  bool forward() {
    int64_t attention = 0, gelu = 0, norms = 0;
    for (const ir::Node& n : g_.nodes) {
      if (n.id >= g_.forward_end) break;
      std::string why;
      if (n.op == ir::Op::Attention) ++attention, why = n.flag ? "" : "its attention is not causal";
      if (n.op == ir::Op::Unary) ++gelu, why = n.fn == "gelu" ? "" : "it uses `" + n.fn + "` (nanoGPT: the exact gelu only)";
      if (n.op == ir::Op::Normalize) ++norms, why = std::fabs(n.scalar - 1e-5) < 1e-12 ? "" : "a layer norm's eps is not 1e-5";
      if (n.op == ir::Op::RmsNormalize) why = "it uses rms_normalize (nanoGPT: LayerNorm)";
      if (!why.empty()) {
        err_ += n.where + ": error: dtlc export: model " + spec_.model.name + " is not nanoGPT's GPT: " + why +
                "\nhint: export --format torch maps nanoGPT's GPT, whose forward pass has causal attention, the exact "
                "gelu and layer norms with eps 1e-5 only\n";
        return false;
      }
    }
    const int64_t L = config_.n_layer;
    if (attention != L || gelu != L || norms != 2 * L + 1) {
      err_ += "dtlc export: model " + spec_.model.name + " is not nanoGPT's GPT: its forward pass has " +
              std::to_string(attention) + " attentions, " + std::to_string(gelu) + " gelus and " +
              std::to_string(norms) + " layer norms, where " + std::to_string(L) + " blocks and ln_f have " +
              std::to_string(L) + ", " + std::to_string(L) + " and " + std::to_string(2 * L + 1) + "\n";
      return false;
    }
    return true;
  }

  // Layer l's block of a stacked parameter.
  const float* layer(const std::string& part, int64_t l) const {
    const std::vector<float>& v = values_.at(block_ + "." + part);
    return v.data() + static_cast<size_t>(l) * (v.size() / static_cast<size_t>(config_.n_layer));
  }

  void add(std::vector<TorchTensor>& out, std::string name, std::vector<int64_t> shape, std::vector<float> data) const {
    out.push_back({std::move(name), std::move(shape), std::move(data)});
  }

  void addLayer(std::vector<TorchTensor>& out, int64_t l) const {
    const int64_t d = config_.n_embd, h = config_.n_hidden;
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    auto vec = [&](const char* part, int64_t n) { return std::vector<float>(layer(part, l), layer(part, l) + n); };
    add(out, p + "ln_1.weight", {d}, vec("ln1.weight", d));
    add(out, p + "ln_1.bias", {d}, vec("ln1.bias", d));
    std::vector<float> qkv, bias;
    for (const char* w : {"attn.wq", "attn.wk", "attn.wv"}) {
      const std::vector<float> t = transposed(layer(w, l), d, d);  // [d, heads·head_dim] → [out, in]
      qkv.insert(qkv.end(), t.begin(), t.end());
    }
    for (const char* b : {"attn.bq", "attn.bk", "attn.bv"}) bias.insert(bias.end(), layer(b, l), layer(b, l) + d);
    add(out, p + "attn.c_attn.weight", {3 * d, d}, qkv);
    add(out, p + "attn.c_attn.bias", {3 * d}, bias);
    add(out, p + "attn.c_proj.weight", {d, d}, transposed(layer("attn.wo", l), d, d));
    add(out, p + "attn.c_proj.bias", {d}, vec("attn.bo", d));
    add(out, p + "ln_2.weight", {d}, vec("ln2.weight", d));
    add(out, p + "ln_2.bias", {d}, vec("ln2.bias", d));
    add(out, p + "mlp.c_fc.weight", {h, d}, transposed(layer("mlp.up.weight", l), d, h));
    add(out, p + "mlp.c_fc.bias", {h}, vec("mlp.up.bias", h));
    add(out, p + "mlp.c_proj.weight", {d, h}, transposed(layer("mlp.down.weight", l), h, d));
    add(out, p + "mlp.c_proj.bias", {d}, vec("mlp.down.bias", d));
  }

  // Step 3.
  void emit(std::vector<TorchTensor>& out) const {
    const int64_t d = config_.n_embd, v = config_.vocab_size;
    add(out, "transformer.wte.weight", {v, d}, values_.at(wte_));
    add(out, "transformer.wpe.weight", {config_.block_size, d}, values_.at(wpe_));
    for (int64_t l = 0; l < config_.n_layer; ++l) addLayer(out, l);
    add(out, "transformer.ln_f.weight", {d}, values_.at(ln_f_ + ".weight"));
    add(out, "transformer.ln_f.bias", {d}, values_.at(ln_f_ + ".bias"));
    add(out, "lm_head.weight", {v, d}, head_.empty() ? values_.at(wte_) : transposed(values_.at(head_).data(), d, v));
  }

  const driver::Frontend& fe_;
  const sema::Spec& spec_;
  const ir::Graph& g_;
  const std::map<std::string, std::vector<float>>& values_;
  std::string& err_;
  std::string wte_, wpe_, block_, ln_f_, head_;
  GptConfig config_;
};

}  // namespace

bool torchGpt(const driver::Frontend& fe, const std::map<std::string, std::vector<float>>& values,
              std::vector<TorchTensor>& out, GptConfig& config, std::string& err) {
  return GptMapper(fe, values, err).run(out, config);
}

}  // namespace dtl::cli
