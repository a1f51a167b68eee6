// Stage 5b: the data block.
//
// 1. Settings (`shuffle`, `drop_last`) and split names (`train`, `eval`).
// 2. Each field is `input = SOURCE(args) [op number]…`, or a bare source that
//    yields several fields (`text`, `tokens`: tokens and targets;
//    `synthetic`: every input). A field must name a model input.
// 3. Files are probed (headers only): a field's per-sample element count must
//    equal its input's (every dim but `batch`); integer inputs need integer
//    data; all fields of a split have the same number of samples; every
//    input is fed by every split.
#include <filesystem>
#include <set>

#include "compiler/sema/check_blocks.h"
#include "compiler/sema/constants.h"
#include "compiler/sema/signatures.h"
#include "compiler/syntax/parse.h"
#include "runtime/data/probe.h"

namespace dtl::sema {

namespace {

using syntax::Expr;
namespace probe = dtl::rt::data;

class DataChecker {
 public:
  DataChecker(const Program& prog, const Model& model, diag::Diagnostics& diags)
      : prog_(prog), model_(model), diags_(diags), c_(diags) {}

  void run(DataSpec& out) {
    const syntax::DataDecl& d = *prog_.data;
    out.present = true;
    std::set<std::string> seen;
    for (const syntax::Setting& s : d.settings) {
      const std::string& k = s.key.name;
      if (!seen.insert(k).second) {
        diags_.error(s.key.loc, "`" + k + "` is set twice in `data`");
        continue;
      }
      if (k == "shuffle") {
        c_.boolean(*s.value, "`data.shuffle`", out.shuffle);
      } else if (k == "drop_last") {
        if (c_.boolean(*s.value, "`data.drop_last`", out.drop_last) && !out.drop_last)
          diags_.error(s.value->loc, "`drop_last = false` is not supported",
                       "every rank must see a full batch, so a short last batch is always dropped");
      } else {
        std::string hint = diag::didYouMean(k, {"shuffle", "drop_last"});
        diags_.error(s.key.loc, "unknown data setting `" + k + "`", hint.empty() ? "settings: shuffle, drop_last" : hint);
      }
    }
    std::set<std::string> splits;
    for (const syntax::DataSplit& s : d.splits) {
      if (s.name.name != "train" && s.name.name != "eval") {
        std::string hint = diag::didYouMean(s.name.name, {"train", "eval"});
        diags_.error(s.name.loc, "unknown data split `" + s.name.name + "`", hint.empty() ? "splits: train, eval" : hint);
        continue;
      }
      if (!splits.insert(s.name.name).second) {
        diags_.error(s.name.loc, "split `" + s.name.name + "` is given twice");
        continue;
      }
      out.splits.push_back(split(s));
    }
    if (!splits.count("train"))
      diags_.error(d.loc, "`data` has no `train` split", "add `train { INPUT = SOURCE(…) … }`");
  }

 private:
  const InputInfo* input(const std::string& name) const {
    for (const InputInfo& i : model_.inputs)
      if (i.name == name) return &i;
    return nullptr;
  }

  DataSplit split(const syntax::DataSplit& s) {
    DataSplit out;
    out.name = s.name.name;
    out.loc = s.name.loc;
    std::map<std::string, Loc> fed;
    std::set<std::string> misspelt;  // inputs that a misspelt field was likely meant for
    for (const syntax::DataField& f : s.fields) field(f, out, fed, misspelt);
    for (const InputInfo& in : model_.inputs)
      if (!fed.count(in.name) && !misspelt.count(in.name))
        diags_.error(s.name.loc, "split `" + s.name.name + "` does not feed input `" + in.name + "`",
                     "add `" + in.name + " = SOURCE(…)` to it");
    // All fields of a split must agree on the sample count.
    const DataField* first = nullptr;
    for (const DataField& f : out.fields) {
      if (f.samples < 0) continue;
      if (!first) {
        first = &f;
      } else if (f.samples != first->samples) {
        diags_.error(f.loc, "field `" + f.name + "` has " + std::to_string(f.samples) + " samples but `" +
                                first->name + "` has " + std::to_string(first->samples),
                     "the fields of a split are read in step, so their files must hold the same samples");
      }
    }
    return out;
  }

  void field(const syntax::DataField& f, DataSplit& out, std::map<std::string, Loc>& fed,
             std::set<std::string>& misspelt) {
    // Peel transforms: SOURCE / c, * c, - c, + c.
    const Expr* e = f.source.get();
    std::string transform;
    std::vector<std::pair<char, double>> transforms;
    while (e->kind == Expr::Kind::Binary && (e->text == "/" || e->text == "*" || e->text == "-" || e->text == "+")) {
      double v;
      if (!c_.number(*e->kids[1], "a data transform", v)) return;
      if (e->text == "/" && v == 0) {
        diags_.error(e->kids[1]->loc, "division by zero in a data transform");
        return;
      }
      transform = e->text + " " + syntax::exprText(*e->kids[1]) + (transform.empty() ? "" : " " + transform);
      transforms.insert(transforms.begin(), {e->text[0], v});  // the innermost applies first
      e = e->kids[0].get();
    }
    if (e->kind == Expr::Kind::Error) return;
    const std::string& src = e->calleeName();
    const Signature* sig = src.empty() ? nullptr : findBuiltin(BuiltinKind::Source, src);
    if (!sig) {
      std::string hint = src.empty() ? "" : diag::didYouMean(src, builtinNames(BuiltinKind::Source));
      diags_.error(e->kind == Expr::Kind::Call ? e->kids[0]->loc : e->loc,
                   src.empty() ? "expected a data source, got `" + syntax::exprText(*e) + "`"
                               : "unknown data source `" + src + "`",
                   hint.empty() ? "sources: idx, csv, npy, safetensors, text, tokens, synthetic" : hint);
      return;
    }
    std::vector<const Expr*> args;
    if (!bindArguments(*e, *sig, "source `" + src + "`", args, diags_)) return;
    bool multi = src == "text" || src == "tokens" || src == "synthetic";
    std::vector<std::string> names;
    if (f.name) {
      if (multi && src != "synthetic") {
        diags_.error(f.name->loc, "`" + src + "` yields two fields, `tokens` and `targets`",
                     "write it on its own: `train { " + src + "(…) }` and name the inputs tokens and targets");
        return;
      }
      names.push_back(f.name->name);
    } else if (src == "synthetic") {
      for (const InputInfo& i : model_.inputs) names.push_back(i.name);
    } else if (multi) {
      names = {"tokens", "targets"};
    } else {
      diags_.error(e->loc, "`" + src + "` yields one field; name it: `INPUT = " + src + "(…)`");
      return;
    }
    DataField resolved_args;
    probe::ProbeResult info = probeSource(src, *e, args, resolved_args);
    for (const std::string& n : names) {
      Loc at = f.name ? f.name->loc : e->loc;
      const InputInfo* in = input(n);
      if (!in) {
        std::vector<std::string> inputs;
        for (const InputInfo& i : model_.inputs) inputs.push_back(i.name);
        std::string hint = diag::didYouMean(n, inputs);
        if (!hint.empty()) misspelt.insert(diag::closest(n, inputs));
        diags_.error(at, "field `" + n + "` feeds no input of model `" + model_.name + "`",
                     hint.empty() ? (multi ? "`" + src + "` feeds inputs named tokens and targets; declare them in the model"
                                           : "fields are bound to model inputs by name")
                                  : hint);
        continue;
      }
      if (fed.count(n)) {
        diags_.error(at, "input `" + n + "` is fed twice in split `" + out.name + "`");
        continue;
      }
      fed[n] = at;
      DataField df = resolved_args;
      df.transforms = transforms;
      df.name = n;
      df.source = src;
      df.transform = transform;
      df.loc = at;
      if (args[0] && args[0]->kind == Expr::Kind::String && src != "synthetic") df.path = resolved(args[0]->text);
      if (info.ok) {
        df.samples = info.info.samples;
        df.sample_elements = info.info.sample_elements;
        df.file_dtype = info.info.dtype;
        fits(df, *in, info.info, at, !transform.empty());
      }
      out.fields.push_back(std::move(df));
    }
  }

  void fits(const DataField& df, const InputInfo& in, const probe::SampleInfo& info, Loc at, bool transformed) {
    if (in.shape.dims.empty() || in.shape.dims[0].name != "batch") {
      diags_.error(in.loc, "input `" + in.name + "` is fed by data, so its first dim must be `batch`",
                   "declare it as `" + in.name + " : " + dtypeName(in.dtype) + "[batch, …]`");
      return;
    }
    int64_t per = 1;
    for (size_t i = 1; i < in.shape.dims.size(); ++i)
      if (!checkedMul(per, in.shape.dims[i].size, per)) per = -1;
    if (per != info.sample_elements) {
      std::string dims;
      for (size_t i = 0; i < info.sample_dims.size(); ++i) dims += (i ? "×" : "") + std::to_string(info.sample_dims[i]);
      diags_.error(at, "field `" + df.name + "` has " + std::to_string(info.sample_elements) +
                           " values per sample" + (dims.empty() ? "" : " (" + dims + ")") + " but input `" + in.name +
                           "` " + in.shape.str() + " takes " + std::to_string(per),
                   "a sample is reshaped to the input's dims after `batch`; their product must match");
    }
    if (isInteger(in.dtype) && (info.kind == probe::ElemKind::Float || transformed)) {
      diags_.error(at, "field `" + df.name + "` yields floating-point values but input `" + in.name + "` is " +
                           dtypeName(in.dtype),
                   transformed ? "integer inputs (ids, labels) take the data as stored; remove the transform"
                               : "declare the input as f32[…] or use integer data");
    }
  }

  static void replaceAll(std::string& s, const std::string& from, const std::string& to) {
    if (from.empty()) return;
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
      s.replace(at, from.size(), to);
  }

  std::string resolved(const std::string& p) const {
    std::filesystem::path path(p);
    if (path.is_relative()) path = std::filesystem::path(prog_.spec_dir) / path;
    return path.lexically_normal().string();
  }

  // Reads the file's header; reports a missing or malformed file at the path.
  probe::ProbeResult probeSource(const std::string& src, const Expr& call, const std::vector<const Expr*>& args,
                                 DataField& out) {
    probe::ProbeResult none;
    if (src == "synthetic") {
      if (args[0]) c_.integer(*args[0], "`seed`", out.seed, 0);
      return none;
    }
    std::string path;
    if (!c_.string(*args[0], "the path of `" + src + "`", path)) return none;
    std::string full = resolved(path);
    probe::ProbeResult r;
    if (src == "idx") {
      r = probe::probeIdx(full);
    } else if (src == "npy") {
      r = probe::probeNpy(full);
    } else if (src == "safetensors") {
      std::string key;
      if (!c_.string(*args[1], "the key of `safetensors`", key)) return none;
      out.key = key;
      r = probe::probeSafetensors(full, key);
    } else if (src == "text" || src == "tokens") {
      int64_t seq = 0;
      const Expr* seq_e = src == "text" ? args[1] : args[2];
      if (!c_.integer(*seq_e, "`seq`", seq)) return none;
      out.seq = seq;
      if (src == "text") {
        r = probe::probeText(full, seq);
      } else {
        std::string dtype = "u16";
        if (args[1] && !c_.name(*args[1], "`dtype` of tokens", dtype)) return none;
        if (dtype != "u16" && dtype != "u32" && dtype != "i32") {
          diags_.error(args[1]->loc, "`dtype` of tokens is u16, u32 or i32, got `" + dtype + "`");
          return none;
        }
        out.token_dtype = dtype;
        r = probe::probeTokens(full, dtype, seq);
      }
    } else if (src == "csv") {
      probe::CsvOptions opt;
      if (!csvOptions(args, opt)) return none;
      out.csv_columns = opt.columns;
      out.csv_header = opt.header;
      out.csv_skip = opt.skip;
      out.csv_delimiter = opt.delimiter;
      r = probe::probeCsv(full, opt);
    }
    if (!r.ok) {
      // Name the file as the spec writes it, and where it was looked for as
      // seen from the command line, so messages do not depend on the machine.
      std::string message = r.error;
      replaceAll(message, "'" + full + "'", "`" + path + "`");
      replaceAll(message, full, "`" + path + "`");
      std::filesystem::path shown(path);
      if (shown.is_relative())
        shown = std::filesystem::path(prog_.sources->name(prog_.spec_file)).parent_path() / shown;
      diags_.error(args[0]->loc, message,
                   std::filesystem::path(path).is_absolute()
                       ? ""
                       : "relative paths start at the spec's folder: looked for " + shown.lexically_normal().string());
    }
    (void)call;
    return r;
  }

  bool csvOptions(const std::vector<const Expr*>& args, probe::CsvOptions& opt) {
    if (const Expr* cols = args[1]) {
      if (!columns(*cols, opt.columns)) return false;
    }
    if (args[2] && !c_.boolean(*args[2], "`header` of csv", opt.header)) return false;
    if (args[3] && !c_.integer(*args[3], "`skip` of csv", opt.skip, 0)) return false;
    if (args[4]) {
      std::string d;
      if (!c_.string(*args[4], "`delimiter` of csv", d)) return false;
      if (d.size() != 1) {
        diags_.error(args[4]->loc, "`delimiter` is one character, e.g. \",\" or \" \"");
        return false;
      }
      opt.delimiter = d[0];
    }
    return true;
  }

  bool columns(const Expr& e, std::vector<int64_t>& out) {
    int64_t a, b;
    if (e.kind == Expr::Kind::Range) {
      if (!c_.integer(*e.kids[0], "a column", a, 0) || !c_.integer(*e.kids[1], "a column", b, 0)) return false;
      // The cap counts the columns listed so far: a tuple of big ranges adds up.
      if (b < a || b - a > 1000000 - static_cast<int64_t>(out.size())) {
        diags_.error(e.loc, "column range " + std::to_string(a) + ".." + std::to_string(b) + " is empty or too large",
                     "ranges are inclusive: 0..9 is ten columns");
        return false;
      }
      for (int64_t i = a; i <= b; ++i) out.push_back(i);
      return true;
    }
    if (e.kind == Expr::Kind::Tuple) {
      for (const auto& k : e.kids)
        if (!columns(*k, out)) return false;
      return true;
    }
    if (!c_.integer(e, "`columns` of csv", a, 0)) return false;
    out.push_back(a);
    return true;
  }

  const Program& prog_;
  const Model& model_;
  diag::Diagnostics& diags_;
  Constants c_;
};

}  // namespace

void checkData(const Program& prog, const Model& model, DataSpec& out, diag::Diagnostics& diags) {
  if (!prog.data) return;
  DataChecker(prog, model, diags).run(out);
}

}  // namespace dtl::sema
