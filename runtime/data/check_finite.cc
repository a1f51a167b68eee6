// Load-time check that a float field holds only finite values. A NaN or an
// infinity in the inputs reaches the loss (the kernels propagate them as
// PyTorch does), so a run on such data trains to NaN or a ruined model; it is
// refused when the split is opened, naming the file and the value's place.
#include <cmath>
#include <cstdio>

#include "runtime/data/sources.h"

namespace dtl::rt::data::detail {

namespace {

std::string numberText(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// "(1, 2)": element j's coordinates within a sample of the file's dims.
std::string coordinates(const std::vector<int64_t>& dims, int64_t j) {
  std::string s;
  for (size_t d = dims.size(); d-- > 0;) {
    int64_t size = dims[d] > 0 ? dims[d] : 1;
    s = std::to_string(j % size) + (s.empty() ? "" : ", ") + s;
    j /= size;
  }
  return "(" + s + ")";
}

// Where element j of sample i is in the file: "data.csv:5: column 2 ('age')"
// or "x.npy: sample 3, element (1, 2)".
std::string placeOf(const FieldSpec& f, const Column& c, int64_t i, int64_t j) {
  if (static_cast<int64_t>(c.lines.size()) > i && static_cast<int64_t>(c.columns.size()) > j) {
    const std::string& title = static_cast<int64_t>(c.titles.size()) > j ? c.titles[static_cast<size_t>(j)] : "";
    return f.path + ":" + std::to_string(c.lines[static_cast<size_t>(i)]) + ": column " +
           std::to_string(c.columns[static_cast<size_t>(j)]) + (title.empty() ? "" : " ('" + title + "')");
  }
  std::string s = f.path + ": sample " + std::to_string(i);
  if (c.elements > 1)
    s += ", element " + (c.file_dims.size() > 1 ? coordinates(c.file_dims, j) : std::to_string(j));
  return s;
}

}  // namespace

double applyTransforms(const std::vector<Transform>& ts, double v) {
  for (const Transform& t : ts) {
    switch (t.op) {
      case '/': v /= t.value; break;
      case '*': v *= t.value; break;
      case '-': v -= t.value; break;
      default: v += t.value; break;
    }
  }
  return v;
}

namespace {

// Integer elements: the transforms are monotone affine maps, so when the
// type's extremes stay finite every value does (MNIST's u8 `/ 255` costs no scan).
bool integerRangeStaysFinite(const FieldSpec& f, Elem e) {
  if (!elemIsInteger(e)) return false;
  const int bits = static_cast<int>(elemSize(e)) * 8;
  const bool is_signed = e == Elem::I8 || e == Elem::I16 || e == Elem::I32 || e == Elem::I64;
  const double lo = is_signed ? -std::ldexp(1.0, bits - 1) : 0.0, hi = std::ldexp(1.0, is_signed ? bits - 1 : bits);
  return std::isfinite(static_cast<float>(applyTransforms(f.transforms, lo))) &&
         std::isfinite(static_cast<float>(applyTransforms(f.transforms, hi)));
}

}  // namespace

Status checkFinite(const FieldSpec& f, const Column& c) {
  if (integerRangeStaysFinite(f, c.elem)) return {};
  std::vector<double> v(static_cast<size_t>(c.elements));
  for (int64_t i = 0; i < c.samples; ++i) {
    c.sample(i, v.data());
    for (int64_t j = 0; j < c.elements; ++j) {
      const double raw = v[static_cast<size_t>(j)];
      const float fed = static_cast<float>(applyTransforms(f.transforms, raw));
      if (std::isfinite(fed)) continue;
      std::string what = std::isfinite(raw) ? numberText(raw) + ", which becomes " + numberText(fed) +
                                                  (f.transforms.empty() ? " in f32" : " after the transforms in f32")
                                            : numberText(raw);
      return Status::error(placeOf(f, c, i, j) + " is " + what + "; input '" + f.name +
                           "' takes finite numbers only (a NaN or infinity in the data trains to a NaN loss or a "
                           "ruined model): fix or remove that value in the file");
    }
  }
  return {};
}

}  // namespace dtl::rt::data::detail
