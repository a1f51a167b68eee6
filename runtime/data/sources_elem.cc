// Element types of in-memory columns: names, sizes, and exact conversion of
// every stored type (including f16, bf16 and the f8 formats) to double.
#include <cmath>
#include <limits>

#include "runtime/data/sources.h"

namespace dtl::rt::data::detail {

namespace {

struct ElemInfo {
  Elem elem;
  const char* name;
  int64_t size;
  bool integer;
};

constexpr ElemInfo kElems[] = {
    {Elem::U8, "u8", 1, true},          {Elem::I8, "i8", 1, true},          {Elem::U16, "u16", 2, true},
    {Elem::I16, "i16", 2, true},        {Elem::U32, "u32", 4, true},        {Elem::I32, "i32", 4, true},
    {Elem::U64, "u64", 8, true},        {Elem::I64, "i64", 8, true},        {Elem::F16, "f16", 2, false},
    {Elem::BF16, "bf16", 2, false},     {Elem::F32, "f32", 4, false},       {Elem::F64, "f64", 8, false},
    {Elem::F8E4M3, "f8e4m3", 1, false}, {Elem::F8E5M2, "f8e5m2", 1, false},
};

const ElemInfo& info(Elem e) { return kElems[static_cast<int>(e)]; }

template <class T, class F>
void copyAs(const Column& c, int64_t base, double* out, F convert) {
  for (int64_t j = 0; j < c.elements; ++j) out[j] = convert(c.at<T>(base + j));
}

}  // namespace

int64_t elemSize(Elem e) { return info(e).size; }
const char* elemName(Elem e) { return info(e).name; }
bool elemIsInteger(Elem e) { return info(e).integer; }

bool elemFromName(const std::string& name, Elem& out) {
  if (name == "bool") {  // safetensors BOOL: one byte, 0 or 1
    out = Elem::U8;
    return true;
  }
  for (const ElemInfo& e : kElems)
    if (name == e.name) {
      out = e.elem;
      return true;
    }
  return false;
}

float halfToFloat(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31)
    v = mant ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else
    v = std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
  return sign ? -v : v;
}

float bf16ToFloat(uint16_t h) {
  uint32_t bits = uint32_t{h} << 16;
  float v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

float f8e4m3ToFloat(uint8_t b) {
  int sign = b >> 7, exp = (b >> 3) & 0xf, mant = b & 0x7;
  float v;
  if (exp == 0xf && mant == 0x7)
    v = std::numeric_limits<float>::quiet_NaN();
  else if (exp == 0)
    v = std::ldexp(static_cast<float>(mant), -9);
  else
    v = std::ldexp(static_cast<float>(mant | 0x8), exp - 10);
  return sign ? -v : v;
}

float f8e5m2ToFloat(uint8_t b) {
  int sign = b >> 7, exp = (b >> 2) & 0x1f, mant = b & 0x3;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(mant), -16);
  else if (exp == 31)
    v = mant ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else
    v = std::ldexp(static_cast<float>(mant | 0x4), exp - 17);
  return sign ? -v : v;
}

double Column::value(int64_t k) const {
  switch (elem) {
    case Elem::U8:
      return at<uint8_t>(k);
    case Elem::I8:
      return at<int8_t>(k);
    case Elem::U16:
      return at<uint16_t>(k);
    case Elem::I16:
      return at<int16_t>(k);
    case Elem::U32:
      return at<uint32_t>(k);
    case Elem::I32:
      return at<int32_t>(k);
    case Elem::U64:
      return static_cast<double>(at<uint64_t>(k));
    case Elem::I64:
      return static_cast<double>(at<int64_t>(k));
    case Elem::F16:
      return halfToFloat(at<uint16_t>(k));
    case Elem::BF16:
      return bf16ToFloat(at<uint16_t>(k));
    case Elem::F32:
      return at<float>(k);
    case Elem::F64:
      return at<double>(k);
    case Elem::F8E4M3:
      return f8e4m3ToFloat(at<uint8_t>(k));
    case Elem::F8E5M2:
      return f8e5m2ToFloat(at<uint8_t>(k));
  }
  return 0;
}

void Column::sample(int64_t i, double* out) const {
  int64_t base = offset + i * stride;
  auto same = [](auto v) { return static_cast<double>(v); };
  switch (elem) {  // one switch per sample, not per element
    case Elem::U8:
      return copyAs<uint8_t>(*this, base, out, same);
    case Elem::I8:
      return copyAs<int8_t>(*this, base, out, same);
    case Elem::U16:
      return copyAs<uint16_t>(*this, base, out, same);
    case Elem::I16:
      return copyAs<int16_t>(*this, base, out, same);
    case Elem::U32:
      return copyAs<uint32_t>(*this, base, out, same);
    case Elem::I32:
      return copyAs<int32_t>(*this, base, out, same);
    case Elem::U64:
      return copyAs<uint64_t>(*this, base, out, same);
    case Elem::I64:
      return copyAs<int64_t>(*this, base, out, same);
    case Elem::F16:
      return copyAs<uint16_t>(*this, base, out, halfToFloat);
    case Elem::BF16:
      return copyAs<uint16_t>(*this, base, out, bf16ToFloat);
    case Elem::F32:
      return copyAs<float>(*this, base, out, same);
    case Elem::F64:
      return copyAs<double>(*this, base, out, same);
    case Elem::F8E4M3:
      return copyAs<uint8_t>(*this, base, out, f8e4m3ToFloat);
    case Elem::F8E5M2:
      return copyAs<uint8_t>(*this, base, out, f8e5m2ToFloat);
  }
}

Status readExact(GzReader& r, int64_t bytes, std::vector<unsigned char>& out) {
  out.resize(static_cast<size_t>(bytes));
  int64_t got = r.read(out.data(), bytes);
  if (got < 0) return Status::error(r.error());
  if (got < bytes)
    return Status::error(r.path() + ": file ended after " + std::to_string(r.position()) + " bytes, " +
                         std::to_string(bytes - got) +
                         " bytes short of what its header describes (did it change while being read?)");
  return {};
}

Status fromProbe(const ProbeResult& p) { return p.ok ? Status{} : Status::error(p.error); }

}  // namespace dtl::rt::data::detail
