// cross_entropy via log_softmax: one pass over the logits, picking the entry
// whose class coordinate equals its position's label.
#include "runtime/kernels/reference/losses.h"

#include <cmath>

#include "runtime/kernels/reference/softmax.h"

namespace dtl::rt::ref {

namespace {

// Per logits element: its label position and whether its class is the label.
struct LabelMap {
  std::vector<int64_t> position;  // flat index into the positions [logits without classes]
  std::vector<bool> hit;
  int64_t positions = 0;
};

Status checkLabels(const Tensor& labels, const Dim& classes) {
  DTL_REF_CHECK(isInteger(labels.dtype), std::string("cross_entropy labels of type ") + dtypeName(labels.dtype));
  for (size_t k = 0; k < labels.i.size(); ++k) {
    int64_t c = labels.i[k];
    if (c < 0 || c >= classes.size)
      return Status::error("cross_entropy: label " + std::to_string(c) + " at " + positionStr(labels.shape, k) +
                           " is out of range for " + classes.name + " " + std::to_string(classes.size) +
                           "; labels must be in [0, " + std::to_string(classes.size) + ")");
  }
  return Status{};
}

Status labelMap(const Tensor& logits, const Tensor& labels, const std::string& classes, LabelMap* map) {
  int c = logits.shape.find(classes);
  DTL_REF_CHECK(logits.floating() && c >= 0, "cross_entropy over `" + classes + "` of " + logits.shape.str());
  Shape rest = without(logits.shape, {classes});
  DTL_REF_CHECK(labels.shape.rank() == rest.rank(), "labels " + labels.shape.str() + " for logits " + logits.shape.str());
  if (Status st = checkLabels(labels, logits.shape.dims[c]); !st.ok) return st;
  Tensor aligned = alignTo(labels, rest);  // [rest]
  map->position = offsetsIn(rest, logits.shape);
  map->positions = aligned.numel();
  map->hit.resize(map->position.size());
  int64_t stride = stridesOf(logits.shape)[c], size = logits.shape.dims[c].size;
  for (size_t k = 0; k < map->hit.size(); ++k)
    map->hit[k] = static_cast<int64_t>(k) / stride % size == aligned.i[map->position[k]];
  return Status{};
}

}  // namespace

Status crossEntropy(const Tensor& logits, const Tensor& labels, const std::string& classes, Tensor* loss) {
  LabelMap map;
  if (Status st = labelMap(logits, labels, classes, &map); !st.ok) return st;
  Tensor lp = logSoftmax(logits, classes);
  double total = 0;
  for (size_t k = 0; k < map.hit.size(); ++k)
    if (map.hit[k]) total -= lp.f[k];
  *loss = Tensor::scalar(total / static_cast<double>(map.positions));
  return Status{};
}

Status crossEntropyBackward(const Tensor& logits, const Tensor& labels, const std::string& classes,
                            const Tensor& dloss, Tensor* dlogits) {
  DTL_REF_CHECK(dloss.floating() && dloss.shape.scalar(), "cross_entropy backward dloss " + dloss.shape.str());
  LabelMap map;
  if (Status st = labelMap(logits, labels, classes, &map); !st.ok) return st;
  *dlogits = softmax(logits, classes);
  double g = dloss.f[0] / static_cast<double>(map.positions);
  for (size_t k = 0; k < map.hit.size(); ++k) dlogits->f[k] = g * (dlogits->f[k] - (map.hit[k] ? 1.0 : 0.0));
  return Status{};
}

namespace {

// The labels of every logit position's row, and that position's class.
Status classWindow(const Shape& shape, const Tensor& labels, const std::string& classes, int64_t whole,
                   std::vector<int64_t>* label_at, std::vector<int64_t>* class_at) {
  const int c = shape.find(classes);
  DTL_REF_CHECK(c >= 0, "pick_class over `" + classes + "`, not a dim of " + shape.str());
  Dim all = shape.dims[static_cast<size_t>(c)];
  if (whole > 0) all.size = whole;
  if (Status st = checkLabels(labels, all); !st.ok) return st;
  Shape rest = shape;
  rest.dims.erase(rest.dims.begin() + c);
  DTL_REF_CHECK(labels.shape.rank() == rest.rank(), "labels " + labels.shape.str() + " for logits " + shape.str());
  const std::vector<int64_t> at = offsetsIn(labels.shape, shape);
  const int64_t stride = stridesOf(shape)[static_cast<size_t>(c)], size = shape.dims[static_cast<size_t>(c)].size;
  label_at->resize(at.size());
  class_at->resize(at.size());
  for (size_t k = 0; k < at.size(); ++k) {
    (*label_at)[k] = labels.i[static_cast<size_t>(at[k])];
    (*class_at)[k] = static_cast<int64_t>(k) / stride % size;
  }
  return Status{};
}

}  // namespace

Status pickClass(const Tensor& logits, const Tensor& labels, const std::string& classes, Tensor* out, int64_t first,
                 int64_t whole) {
  std::vector<int64_t> label_at, class_at;
  if (Status st = classWindow(logits.shape, labels, classes, whole, &label_at, &class_at); !st.ok) return st;
  Shape rest = logits.shape;
  rest.dims.erase(rest.dims.begin() + logits.shape.find(classes));
  *out = Tensor::zeros(rest, logits.dtype);
  const std::vector<int64_t> row = offsetsIn(rest, logits.shape);
  for (size_t k = 0; k < label_at.size(); ++k)
    if (class_at[k] + first == label_at[k]) out->f[static_cast<size_t>(row[k])] = logits.f[k];
  return Status{};
}

Status pickClassGrad(const Shape& shape, const Tensor& labels, const std::string& classes, Tensor* out, int64_t first,
                     int64_t whole) {
  std::vector<int64_t> label_at, class_at;
  if (Status st = classWindow(shape, labels, classes, whole, &label_at, &class_at); !st.ok) return st;
  *out = Tensor::zeros(shape, DType::F32);
  for (size_t k = 0; k < label_at.size(); ++k) out->f[k] = class_at[k] + first == label_at[k] ? 1.0 : 0.0;
  return Status{};
}

}  // namespace dtl::rt::ref
