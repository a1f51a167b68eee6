#include "compiler/sema/print_sema.h"

#include <algorithm>
#include <cstdio>

#include "core/json.h"

namespace dtl::sema {

std::string groupDigits(int64_t n) {
  std::string s = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return (n < 0 ? "-" : "") + out;
}

std::string humanBytes(int64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

namespace {

std::string num(double v) { return json::number(v); }

std::string typeText(DType t, const Shape& s) { return std::string(dtypeName(t)) + s.str(); }

std::string meshText(const ParallelSpec& p) {
  std::string s;
  for (const MeshAxisSpec& m : p.mesh) {
    s += (s.empty() ? "" : ", ") + m.name + " = ";
    if (m.is_auto && m.size == 0) s += "auto";
    else s += std::to_string(m.size) + (m.is_auto ? " (auto)" : "");
  }
  return s;
}

std::string optimizerText(const TrainSpec& t) {
  std::string s = t.optimizer + "(";
  bool first = true;
  for (const auto& [k, v] : t.optimizer_args) {
    s += (first ? "" : ", ") + k + " = " + num(v);
    first = false;
  }
  return s + ")";
}

std::string scheduleText(const TrainSpec& t) {
  std::string s = t.schedule + "(";
  bool first = true;
  for (const auto& [k, v] : t.schedule_args) {
    s += (first ? "" : ", ") + k + " = " + num(v);
    first = false;
  }
  return s + ")";
}

void pad(std::string& s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
}

}  // namespace

std::string summaryText(const Spec& spec) {
  const Model& m = spec.model;
  std::string out = "model " + m.name + "  (" + spec.file + ")\n";
  out += "inputs\n";
  for (const InputInfo& i : m.inputs) {
    std::string l = "  " + i.name;
    pad(l, 24);
    out += l + typeText(i.dtype, i.shape) + "\n";
  }
  out += "parameters\n";
  size_t w = 0;
  for (const ParamInfo& p : m.params) w = std::max(w, p.path.size());
  size_t sw = 0;
  for (const ParamInfo& p : m.params) sw = std::max(sw, p.shape.str().size());
  for (const ParamInfo& p : m.params) {
    std::string l = "  " + p.path;
    pad(l, w + 4);
    std::string shape = p.shape.str();
    pad(shape, sw + 2);
    std::string count = groupDigits(p.shape.elements().value_or(0));
    std::string c = std::string(std::max<size_t>(0, 14 > count.size() ? 14 - count.size() : 0), ' ') + count;
    l += shape + c;
    if (p.dtype != DType::F32) l += std::string("  ") + dtypeName(p.dtype);
    out += l + "\n";
  }
  out += "  total: " + groupDigits(m.parameters) + " parameters, " + humanBytes(m.parameter_bytes) + "\n";
  const ParallelSpec& p = spec.parallel;
  out += "mesh: " + meshText(p);
  if (!p.present) out += "  (no parallel block: data parallel over every rank)";
  if (p.world == 0 && std::any_of(p.mesh.begin(), p.mesh.end(), [](const MeshAxisSpec& a) { return a.is_auto; }))
    out += "  (--world N resolves auto)";
  out += "\n";
  for (const SplitSpec& s : p.splits) out += "  split " + s.dim + " over " + s.axis + "\n";
  if (!p.pipeline.empty())
    out += "  pipeline " + p.pipeline + " over " + p.pipeline_axis + ", " + std::to_string(p.microbatches) +
           " micro-batches\n";
  if (p.present) {
    out += "  zero " + std::to_string(p.zero) + ", bucket " + humanBytes(p.bucket_bytes) + ", overlap " +
           (p.overlap ? "on" : "off") + ", reduce " + dtypeName(p.reduce_dtype);
    if (!p.recompute.empty()) out += ", recompute " + p.recompute;
    out += "\n";
  }
  const TrainSpec& t = spec.train;
  if (t.present) {
    out += "train: batch " + std::to_string(t.batch) + " per rank × accumulate " + std::to_string(t.accumulate) + ", " +
           (t.steps ? std::to_string(*t.steps) + " steps" : std::to_string(t.epochs.value_or(1)) + " epochs") + ", " +
           optimizerText(t) + ", " + scheduleText(t) + "\n";
  }
  for (const DataSplit& s : spec.data.splits) {
    out += "data " + s.name + ":\n";
    for (const DataField& f : s.fields) {
      std::string l = "  " + f.name;
      pad(l, 24);
      l += f.source + (f.path.empty() ? "" : " " + f.path);
      if (!f.transform.empty()) l += " " + f.transform;
      if (f.samples >= 0) l += "  (" + groupDigits(f.samples) + " samples)";
      out += l + "\n";
    }
  }
  return out;
}

std::string summaryJson(const Spec& spec) {
  const Model& m = spec.model;
  json::Writer w;
  w.beginObject();
  w.key("model").value(m.name);
  w.key("file").value(spec.file);
  w.key("parameters").value(m.parameters);
  w.key("parameter_bytes").value(m.parameter_bytes);
  w.key("params").beginArray();
  for (const ParamInfo& p : m.params) {
    w.beginObject();
    w.key("path").value(p.path);
    w.key("shape").beginArray();
    for (const Dim& d : p.shape.dims) w.beginArray().value(d.name).value(d.size).endArray();
    w.endArray();
    w.key("dtype").value(dtypeName(p.dtype));
    w.key("elements").value(p.shape.elements().value_or(0));
    w.key("init").value(p.init);
    w.endObject();
  }
  w.endArray();
  w.key("inputs").beginArray();
  for (const InputInfo& i : m.inputs) {
    w.beginObject();
    w.key("name").value(i.name);
    w.key("dtype").value(dtypeName(i.dtype));
    w.key("shape").beginArray();
    for (const Dim& d : i.shape.dims) w.beginArray().value(d.name).value(d.size).endArray();
    w.endArray();
    w.endObject();
  }
  w.endArray();
  const ParallelSpec& p = spec.parallel;
  w.key("mesh").beginObject();
  w.key("world");
  if (p.world > 0) w.value(p.world);
  else w.null();
  w.key("axes").beginArray();
  for (const MeshAxisSpec& a : p.mesh) {
    w.beginObject();
    w.key("name").value(a.name);
    w.key("size");
    if (a.size > 0) w.value(a.size);
    else w.null();
    w.key("auto").value(a.is_auto);
    w.endObject();
  }
  w.endArray();
  w.key("splits").beginArray();
  for (const SplitSpec& s : p.splits) w.beginObject().key("dim").value(s.dim).key("axis").value(s.axis).endObject();
  w.endArray();
  if (!p.pipeline.empty())
    w.key("pipeline").beginObject().key("schedule").value(p.pipeline).key("axis").value(p.pipeline_axis)
        .key("microbatches").value(p.microbatches).endObject();
  w.key("zero").value(p.zero);
  w.key("bucket_bytes").value(p.bucket_bytes);
  w.key("overlap").value(p.overlap);
  w.key("reduce_dtype").value(dtypeName(p.reduce_dtype));
  w.endObject();
  const TrainSpec& t = spec.train;
  if (t.present) {
    w.key("train").beginObject();
    w.key("batch").value(t.batch);
    w.key("accumulate").value(t.accumulate);
    if (t.steps) w.key("steps").value(*t.steps);
    else w.key("epochs").value(t.epochs.value_or(1));
    w.key("optimizer").beginObject().key("name").value(t.optimizer);
    for (const auto& [k, v] : t.optimizer_args) w.key(k).value(v);
    w.endObject();
    w.key("schedule").beginObject().key("name").value(t.schedule);
    for (const auto& [k, v] : t.schedule_args) w.key(k).value(v);
    w.endObject();
    w.key("precision").value(dtypeName(t.precision));
    w.key("seed").value(t.seed);
    w.endObject();
  }
  w.endObject();
  return w.str() + "\n";
}

std::string semaDump(const Spec& spec) {
  const Model& m = spec.model;
  std::string out = "model " + m.name + "\n";
  for (const Dim& d : m.dims) out += "  dim " + d.name + " = " + std::to_string(d.size) + "\n";
  for (const InputInfo& i : m.inputs) out += "  input " + i.name + " : " + typeText(i.dtype, i.shape) + "\n";
  for (const ParamInfo& p : m.params)
    out += "  param " + p.path + " : " + typeText(p.dtype, p.shape) + " init " + p.init + "\n";
  for (const ValueInfo& v : m.values)
    out += std::string("  ") + (v.is_metric ? "metric " : "value ") + v.name + " : " + typeText(v.dtype, v.shape) + "\n";
  for (const std::string& l : m.layer_paths) out += "  layer " + l + "\n";
  out += summaryText(spec).substr(summaryText(spec).find("mesh:"));
  return out;
}

}  // namespace dtl::sema
