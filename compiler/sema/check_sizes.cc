// Stage 5d: sizes no machine can hold. A dim like `hidden = 100000000000000`
// is a valid number, but the tensors it sizes cannot exist: without this
// check they overflow byte counts downstream or end as std::bad_alloc in
// `dtlc run`. Reported at the culprit dim's definition, once per dim.
//
// 1. For every parameter, input and named value of the model: its bytes
//    (elements × element size); past int64 or past kMaxTensorBytes is an
//    error at the definition of its largest dim (a model `dim`, or
//    `train.batch` for `batch`; else the tensor's own line).
// 2. The parameters together must stay under the same bound.
#include <algorithm>
#include <set>

#include "compiler/sema/check_blocks.h"
#include "compiler/sema/print_sema.h"

namespace dtl::sema {

namespace {

// Bytes of f32 elements, or -1 past int64.
int64_t bytesOf(const Shape& s, DType t) {
  std::optional<int64_t> n = s.elements();
  int64_t b = 0;
  return n && checkedMul(*n, dtypeBytes(t), b) ? b : -1;
}

// "784 × 100,000,000,000,000"
std::string product(const Shape& s) {
  std::string out;
  for (const Dim& d : s.dims) out += (out.empty() ? "" : " × ") + groupDigits(d.size);
  return out.empty() ? "1" : out;
}

class Sizes {
 public:
  Sizes(const Program& prog, const TrainSpec& train, diag::Diagnostics& diags)
      : prog_(prog), train_(train), diags_(diags) {}

  void tensor(const std::string& name, const Shape& s, DType t, Loc own) {
    int64_t bytes = bytesOf(s, t);
    if (bytes >= 0 && bytes <= kMaxTensorBytes) return;
    const Dim* big = nullptr;
    for (const Dim& d : s.dims)
      if (!big || d.size > big->size) big = &d;
    if (!blamed_.insert(big ? big->name : name).second) return;  // one report per dim
    std::string holds = bytes < 0 ? "more bytes than fit in 64 bits" : groupDigits(bytes) + " bytes (" + humanBytes(bytes) + ")";
    diags_.error(big ? definition(big->name, own) : own,
                 "`" + name + "` " + s.str() + " would hold " + product(s) + " " + dtypeName(t) + " = " + holds +
                     ", more than the " + humanBytes(kMaxTensorBytes) + " a tensor may hold",
                 big ? "`" + big->name + " = " + groupDigits(big->size) + "` is far larger than a tensor's dim can be; check its value"
                     : "check the dims of `" + name + "`");
  }

  void total(const Model& m) {
    if (blamed_.empty() && (m.parameter_bytes < 0 || m.parameter_bytes > kMaxTensorBytes))
      diags_.error(m.loc, "the parameters of `" + m.name + "` would hold " + humanBytes(m.parameter_bytes) + ", more than " +
                              humanBytes(kMaxTensorBytes),
                   "check the model's dims and `repeat` counts");
  }

 private:
  // Where `dim` gets its size: the model's `dim` line (its value: an override
  // points at its --set), train.batch for `batch`, else the tensor itself.
  Loc definition(const std::string& dim, Loc own) const {
    if (prog_.model)
      for (const syntax::DimDef& d : prog_.model->dims)
        if (d.name.name == dim) return d.value ? d.value->loc : d.name.loc;
    auto it = train_.where.find("batch");
    if (dim == "batch" && it != train_.where.end()) return it->second;
    return own;
  }

  const Program& prog_;
  const TrainSpec& train_;
  diag::Diagnostics& diags_;
  std::set<std::string> blamed_;
};

}  // namespace

void checkSizes(const Program& prog, const Model& model, const TrainSpec& train, diag::Diagnostics& diags) {
  Sizes sizes(prog, train, diags);
  for (const ParamInfo& p : model.params) sizes.tensor(p.path, p.shape, p.dtype, p.loc);
  for (const InputInfo& i : model.inputs) sizes.tensor(i.name, i.shape, i.dtype, i.loc);
  for (const ValueInfo& v : model.values) sizes.tensor(v.name, v.shape, v.dtype, v.loc);
  sizes.total(model);
}

}  // namespace dtl::sema
