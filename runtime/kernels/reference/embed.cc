// embed forward (gather rows) and backward (scatter-add rows). A row is the
// table's trailing dims flattened; the ids tensor is walked in storage order.
#include "runtime/kernels/reference/embed.h"


namespace dtl::rt::ref {

namespace {

Shape outputShape(const Shape& table, const Shape& ids) {
  DTL_REF_CHECK(table.rank() >= 2, "embed table " + table.str() + " needs [vocab, rest…]");
  Shape out = ids;
  for (size_t d = 1; d < table.rank(); ++d) {
    DTL_REF_CHECK(!out.has(table.dims[d].name), "embed result would have `" + table.dims[d].name + "` twice");
    out.dims.push_back(table.dims[d]);
  }
  return out;
}

// Elements per table row: the product of the dims after vocab.
int64_t rowSize(const Shape& table) {
  int64_t n = 1;
  for (size_t d = 1; d < table.rank(); ++d) n *= table.dims[d].size;
  return n;
}

// Ids are checked against the whole table (`whole` rows; 0: the rows held).
Status checkIds(const Tensor& ids, const Dim& vocab, int64_t whole) {
  DTL_REF_CHECK(isInteger(ids.dtype), std::string("embed ids of type ") + dtypeName(ids.dtype));
  const int64_t rows = whole > 0 ? whole : vocab.size;
  for (size_t k = 0; k < ids.i.size(); ++k) {
    int64_t id = ids.i[k];
    if (id < 0 || id >= rows)
      return Status::error("embed: id " + std::to_string(id) + " at " + positionStr(ids.shape, k) +
                           " is out of range for a table of " + vocab.name + " " + std::to_string(rows) +
                           "; ids must be in [0, " + std::to_string(rows) + ")");
  }
  return Status{};
}

}  // namespace

Status embed(const Tensor& table, const Tensor& ids, Tensor* out, int64_t first, int64_t whole) {
  Shape s = outputShape(table.shape, ids.shape);
  DTL_REF_CHECK(table.floating(), "embed table must be float");
  if (Status st = checkIds(ids, table.shape.dims[0], whole); !st.ok) return st;
  int64_t row = rowSize(table.shape), held = table.shape.dims[0].size;
  *out = Tensor::zeros(s, table.dtype);
  for (size_t k = 0; k < ids.i.size(); ++k) {
    const int64_t r = ids.i[k] - first;  // another rank's row: zeros
    if (r < 0 || r >= held) continue;
    for (int64_t c = 0; c < row; ++c) out->f[k * row + c] = table.f[r * row + c];
  }
  return Status{};
}

Status embedBackward(const Shape& table_shape, const Tensor& ids, const Tensor& dy, Tensor* dtable, int64_t first,
                     int64_t whole) {
  Shape s = outputShape(table_shape, ids.shape);
  DTL_REF_CHECK(dy.floating() && dy.shape == s, "embed backward dy " + dy.shape.str() + " for " + s.str());
  if (Status st = checkIds(ids, table_shape.dims[0], whole); !st.ok) return st;
  *dtable = Tensor::zeros(table_shape, dy.dtype);
  int64_t row = rowSize(table_shape), held = table_shape.dims[0].size;
  for (size_t k = 0; k < ids.i.size(); ++k) {
    const int64_t r = ids.i[k] - first;
    if (r < 0 || r >= held) continue;
    for (int64_t c = 0; c < row; ++c) dtable->f[r * row + c] += dy.f[k * row + c];
  }
  return Status{};
}

Status embedBackwardInto(const Tensor& base, const Tensor& ids, const Tensor& dy, Tensor* dtable, int64_t first,
                         int64_t whole) {
  DTL_REF_CHECK(base.floating(), "embed backward into a non-float base");
  Tensor sums;
  if (Status st = embedBackward(base.shape, ids, dy, &sums, first, whole); !st.ok) return st;
  *dtable = base;
  const int64_t row = rowSize(base.shape), held = base.shape.dims[0].size;
  std::vector<bool> selected(static_cast<size_t>(held), false);
  for (int64_t id : ids.i)
    if (id - first >= 0 && id - first < held) selected[static_cast<size_t>(id - first)] = true;
  for (int64_t r = 0; r < held; ++r)
    if (selected[static_cast<size_t>(r)])
      for (int64_t c = 0; c < row; ++c) dtable->f[r * row + c] = base.f[r * row + c] + sums.f[r * row + c];
  return Status{};
}

}  // namespace dtl::rt::ref
