// Dataset: opens every field of a split (checking each against its model
// input), decides how synthetic fields are made, and copies one sample of
// every field into a batch slot. Reading files is in sources_*.cc.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <set>

#include "runtime/data/loader.h"
#include "runtime/data/loader_random.h"
#include "runtime/data/sources.h"
#include "runtime/data/sources_synthetic.h"

namespace dtl::rt::data {

using namespace detail;

struct Dataset::Impl {
  enum class Kind { File, SynthFloat, SynthInput, SynthTeacher, SynthDerived };
  struct Field {
    Kind kind = Kind::File;
    Column column;  // File
    int64_t elements = 1;
    uint64_t name_hash = 0;
    int64_t range = 2;  // synthetic integer fields
    std::unique_ptr<Teacher> teacher;
    int from = -1;  // SynthDerived: the integer input field it maps
    // A float field read from one-byte elements (MNIST's u8 pixels): each
    // byte's value after the transforms, as copySample computes it element
    // by element (the same double arithmetic, then f32), looked up instead.
    std::vector<float> byte_values;
  };
  std::vector<FieldSpec> specs;
  std::vector<Field> fields;
  std::vector<int> float_fields;  // teacher input x, in field order
  std::vector<int> copy_order;    // sources before the fields derived from them
  int64_t samples = 0;
  int64_t teacher_inputs = 0;
};

namespace {

std::string dimsText(const std::vector<int64_t>& dims) {
  std::string s;
  for (size_t k = 0; k < dims.size(); ++k) s += (k ? "×" : "") + std::to_string(dims[k]);
  return s;
}

std::string fieldName(const FieldSpec& f) { return "field '" + f.name + "'"; }
std::string describe(const FieldSpec& f) { return f.source == "synthetic" ? std::string("synthetic") : f.path; }
std::string roleOf(const FieldSpec& f) { return f.field_of_multi.empty() ? f.name : f.field_of_multi; }

// The spec itself, before any file is touched.
Status checkSpec(const FieldSpec& f, int64_t& elements) {
  static const std::set<std::string> kSources = {"idx", "csv", "npy", "safetensors", "text", "tokens", "synthetic"};
  std::string who = fieldName(f) + ": ";
  if (f.name.empty()) return Status::error("a data field has no name (it must name a model input)");
  if (!kSources.count(f.source))
    return Status::error(who + "unknown source '" + f.source +
                         "' (expected idx, csv, npy, safetensors, text, tokens or synthetic)");
  if (f.source != "synthetic" && f.path.empty()) return Status::error(who + f.source + " source has no path");
  elements = 1;
  for (int64_t d : f.sample_dims)
    if (d < 0 || __builtin_mul_overflow(elements, d, &elements))
      return Status::error(who + "input dims " + dimsText(f.sample_dims) + " are negative or too large");
  for (const Transform& t : f.transforms) {
    if (t.op != '/' && t.op != '*' && t.op != '-' && t.op != '+')
      return Status::error(who + "unknown transform '" + std::string(1, t.op) + "' (expected / * - +)");
    if (t.op == '/' && t.value == 0) return Status::error(who + "transform divides by zero");
  }
  if (f.integer && !f.transforms.empty())
    return Status::error(who + describe(f) + ": input '" + f.name +
                         "' is i32 (ids, labels), which takes the data as stored; remove the transform");
  if (f.integer && f.int_range < 0)
    return Status::error(who + "int_range " + std::to_string(f.int_range) + " is negative");
  if ((f.source == "text" || f.source == "tokens") && f.seq < 1)
    return Status::error(who + f.path + ": " + f.source + " needs seq >= 1 (got " + std::to_string(f.seq) + ")");
  return {};
}

Status readFile(const FieldSpec& f, SourceCache& cache, Column& out) {
  try {
    if (f.source == "idx") return readIdx(f, out);
    if (f.source == "npy") return readNpy(f, out);
    if (f.source == "safetensors") return readSafetensors(f, out);
    if (f.source == "csv") return readCsv(f, out);
    if (f.source == "text") return readText(f, cache, out);
    return readTokens(f, cache, out);
  } catch (const std::bad_alloc&) {
    return Status::error(f.path + ": ran out of memory while loading the file");
  } catch (const std::exception& e) {
    return Status::error(f.path + ": internal error while loading the file (" + e.what() + ")");
  }
}

// Integer inputs take whole numbers in [0, 2^31); the kernels range-check labels.
Status checkIntegers(const FieldSpec& f, const Column& c) {
  if (c.elem == Elem::U8 || c.elem == Elem::U16) return {};
  std::vector<double> v(static_cast<size_t>(c.elements));
  for (int64_t i = 0; i < c.samples; ++i) {
    c.sample(i, v.data());
    for (int64_t j = 0; j < c.elements; ++j) {
      double x = v[static_cast<size_t>(j)];
      if (x >= 0 && x <= 2147483647.0 && x == std::floor(x)) continue;
      char num[64];
      std::snprintf(num, sizeof num, "%.17g", x);
      return Status::error(fieldName(f) + ": " + f.path + ": sample " + std::to_string(i) +
                           (c.elements > 1 ? ", element " + std::to_string(j) : std::string()) + " is " + num +
                           (x < 0                ? ", which is negative"
                            : x != std::floor(x) ? ", which is not a whole number"
                                                 : ", which is too large") +
                           "; input '" + f.name + "' is i32 and takes whole numbers from 0 to 2147483647");
    }
  }
  return {};
}

// Step 2 of open: how each synthetic field is made (rules in loader.h).
void planSynthetic(Dataset::Impl& ds) {
  using Kind = Dataset::Impl::Kind;
  int n = static_cast<int>(ds.specs.size());
  int input = -1;  // the integer input of an integer-only split
  for (int k = 0; k < n; ++k) {
    const FieldSpec& f = ds.specs[static_cast<size_t>(k)];
    if (!f.integer) {
      ds.float_fields.push_back(k);
      ds.teacher_inputs += ds.fields[static_cast<size_t>(k)].elements;
    } else if (input < 0 && roleOf(f) != "targets") {
      input = k;
    }
  }
  std::vector<int> later;
  for (int k = 0; k < n; ++k) {
    const FieldSpec& f = ds.specs[static_cast<size_t>(k)];
    auto& field = ds.fields[static_cast<size_t>(k)];
    bool derived = false;
    if (f.source == "synthetic") {
      field.name_hash = nameHash(f.name);
      field.range = f.int_range > 0 ? f.int_range : 2;
      if (!f.integer) {
        field.kind = Kind::SynthFloat;
      } else if (ds.teacher_inputs > 0) {
        field.kind = Kind::SynthTeacher;
        field.teacher = std::make_unique<Teacher>(f.seed, field.name_hash, ds.teacher_inputs, field.range);
        derived = true;
      } else if (input >= 0 && input != k) {
        field.kind = Kind::SynthDerived;
        field.from = input;
        derived = true;
      } else {
        field.kind = Kind::SynthInput;
      }
    }
    (derived ? later : ds.copy_order).push_back(k);
  }
  ds.copy_order.insert(ds.copy_order.end(), later.begin(), later.end());
}

[[noreturn]] void broken(const char* what, int64_t a, int64_t b) {
  std::fprintf(stderr, "%s:%d: check failed: %s (%lld, %lld)\n", __FILE__, __LINE__, what, static_cast<long long>(a),
               static_cast<long long>(b));
  std::abort();
}

template <class T>
T* slotOf(std::vector<T>& v, int64_t slot, int64_t n) {
  size_t need = static_cast<size_t>((slot + 1) * n);
  if (v.size() < need) v.resize(need);
  return v.data() + slot * n;
}

}  // namespace

Status Dataset::open(const std::vector<FieldSpec>& specs, Dataset& out) {
  auto ds = std::make_shared<Impl>();
  ds->specs = specs;
  ds->fields.resize(specs.size());
  if (specs.empty()) return Status::error("a data split needs at least one field");
  SourceCache cache;
  int first_file = -1;
  std::set<std::string> names;
  for (size_t k = 0; k < specs.size(); ++k) {
    const FieldSpec& f = specs[k];
    Impl::Field& field = ds->fields[k];
    Status s = checkSpec(f, field.elements);
    if (!s.ok) return s;
    if (!names.insert(f.name).second) return Status::error(fieldName(f) + ": the split feeds it twice");
    if (f.source == "synthetic") continue;
    s = readFile(f, cache, field.column);
    if (!s.ok) return Status::error(fieldName(f) + ": " + s.message);
    const Column& c = field.column;
    if (c.elements != field.elements) {
      std::string file_dims = c.file_dims.size() > 1 ? " (" + dimsText(c.file_dims) + ")" : "";
      std::string in_dims = f.sample_dims.size() > 1 ? " (" + dimsText(f.sample_dims) + ")" : "";
      return Status::error(fieldName(f) + ": " + f.path + ": each sample has " + std::to_string(c.elements) +
                           " values" + file_dims + " but input '" + f.name + "' takes " +
                           std::to_string(field.elements) + in_dims +
                           "; a sample is reshaped to the input's dims after batch, so the counts must match");
    }
    if (f.integer && !(s = checkIntegers(f, c)).ok) return s;
    if (!f.integer && !(s = checkFinite(f, c)).ok) return Status::error(fieldName(f) + ": " + s.message);
    if (!f.integer && elemSize(c.elem) == 1) {
      Column one = c;  // each byte value as the column reads it (u8, i8, f8 formats)
      auto bytes = std::make_shared<std::vector<unsigned char>>(256);
      for (int b = 0; b < 256; ++b) (*bytes)[static_cast<size_t>(b)] = static_cast<unsigned char>(b);
      one.bytes = bytes;
      field.byte_values.resize(256);
      for (int b = 0; b < 256; ++b)
        field.byte_values[static_cast<size_t>(b)] = static_cast<float>(applyTransforms(f.transforms, one.value(b)));
    }
    if (first_file < 0) {
      first_file = static_cast<int>(k);
      ds->samples = c.samples;
    } else if (c.samples != ds->samples) {
      const FieldSpec& g = specs[static_cast<size_t>(first_file)];
      return Status::error(fieldName(f) + ": " + f.path + " has " + std::to_string(c.samples) + " samples but " +
                           fieldName(g) + " (" + g.path + ") has " + std::to_string(ds->samples) +
                           "; every field of a split needs the same number of samples");
    }
  }
  if (first_file < 0) ds->samples = kSyntheticSamples;
  try {
    planSynthetic(*ds);
  } catch (const std::bad_alloc&) {
    return Status::error("synthetic data: ran out of memory building the teacher for " +
                         std::to_string(ds->teacher_inputs) + " inputs");
  }
  out.impl_ = std::move(ds);
  return {};
}

int64_t Dataset::samples() const { return impl_ ? impl_->samples : 0; }

const std::vector<FieldSpec>& Dataset::fields() const {
  static const std::vector<FieldSpec> kNone;
  return impl_ ? impl_->specs : kNone;
}

Batch Dataset::makeBatch(int64_t batch) const {
  Batch b;
  if (!impl_) return b;
  for (size_t k = 0; k < impl_->specs.size(); ++k) {
    size_t n = static_cast<size_t>(batch * impl_->fields[k].elements);
    if (impl_->specs[k].integer)
      b.ints[impl_->specs[k].name].resize(n);
    else
      b.floats[impl_->specs[k].name].resize(n);
  }
  return b;
}

bool Dataset::holdsBatch(const Batch& b, int64_t batch) const {
  if (!impl_ || b.floats.size() + b.ints.size() != impl_->specs.size()) return false;
  auto holds = [](const auto& vectors, const std::string& name, int64_t n) {
    const auto it = vectors.find(name);
    return it != vectors.end() && it->second.size() == static_cast<size_t>(n);
  };
  for (size_t k = 0; k < impl_->specs.size(); ++k) {
    const FieldSpec& f = impl_->specs[k];
    const int64_t n = batch * impl_->fields[k].elements;
    if (!(f.integer ? holds(b.ints, f.name, n) : holds(b.floats, f.name, n))) return false;
  }
  return true;
}

void Dataset::prefetchSample(int64_t index) const {
  if (!impl_ || index < 0 || index >= impl_->samples) return;
  for (const Impl::Field& field : impl_->fields) {
    if (field.kind != Impl::Kind::File || !field.column.bytes) continue;
    const char* p = reinterpret_cast<const char*>(field.column.sampleBytes(index));
    const int64_t bytes = field.elements * elemSize(field.column.elem);
    for (int64_t at = 0; at < bytes; at += 64) __builtin_prefetch(p + at);
  }
}

void Dataset::copySample(int64_t index, Batch& into, int64_t slot) const {
  if (!impl_ || index < 0 || index >= impl_->samples) broken("sample index within the dataset", index, samples());
  if (slot < 0) broken("slot >= 0", slot, 0);
  const Impl& ds = *impl_;
  thread_local std::vector<double> values;
  thread_local std::vector<float> x;
  for (int k : ds.copy_order) {
    const FieldSpec& f = ds.specs[static_cast<size_t>(k)];
    const Impl::Field& field = ds.fields[static_cast<size_t>(k)];
    int64_t n = field.elements;
    if (!f.integer) {
      float* dst = slotOf(into.floats[f.name], slot, n);
      if (field.kind == Impl::Kind::SynthFloat) {
        syntheticNormals(f.seed, field.name_hash, index, dst, n);
        continue;
      }
      if (!field.byte_values.empty()) {
        const unsigned char* src = field.column.bytes->data() + field.column.offset + index * field.column.stride;
        for (int64_t j = 0; j < n; ++j) dst[j] = field.byte_values[src[j]];
        continue;
      }
      if (field.column.elem == Elem::F32 && f.transforms.empty()) {
        // f32 → double → f32 gives back every finite value's bits, and
        // checkFinite refused NaN and inf when the dataset opened: a copy as
        // stored is the same batch without a conversion per element.
        std::memcpy(dst, field.column.sampleBytes(index), static_cast<size_t>(n) * sizeof(float));
        continue;
      }
      values.resize(static_cast<size_t>(n));
      field.column.sample(index, values.data());
      for (int64_t j = 0; j < n; ++j)
        dst[j] = static_cast<float>(applyTransforms(f.transforms, values[static_cast<size_t>(j)]));
      continue;
    }
    int32_t* dst = slotOf(into.ints[f.name], slot, n);
    switch (field.kind) {
      case Impl::Kind::File:
        if (field.column.elem == Elem::I32 && f.transforms.empty()) {  // exact either way; the copy is cheaper
          std::memcpy(dst, field.column.sampleBytes(index), static_cast<size_t>(n) * sizeof(int32_t));
          break;
        }
        values.resize(static_cast<size_t>(n));
        field.column.sample(index, values.data());
        for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<int32_t>(values[static_cast<size_t>(j)]);
        break;
      case Impl::Kind::SynthInput:
        syntheticInts(f.seed, field.name_hash, index, dst, n, field.range);
        break;
      case Impl::Kind::SynthTeacher: {
        x.resize(static_cast<size_t>(ds.teacher_inputs));
        float* at = x.data();
        for (int g : ds.float_fields) {
          int64_t m = ds.fields[static_cast<size_t>(g)].elements;
          const float* src = into.floats[ds.specs[static_cast<size_t>(g)].name].data() + slot * m;
          at = std::copy(src, src + m, at);
        }
        field.teacher->label(x.data(), dst, n);
        break;
      }
      case Impl::Kind::SynthDerived: {
        const FieldSpec& from = ds.specs[static_cast<size_t>(field.from)];
        int64_t m = ds.fields[static_cast<size_t>(field.from)].elements;
        const int32_t* src = into.ints[from.name].data() + slot * m;
        for (int64_t j = 0; j < n; ++j) dst[j] = lmTarget(m ? src[j % m] : 0, field.range);
        break;
      }
      case Impl::Kind::SynthFloat:
        break;  // float fields are handled above
    }
  }
}

}  // namespace dtl::rt::data
