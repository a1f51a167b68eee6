// Probes for each data source of language.md section 7. Each reads only what
// it must (headers; for .gz and text, a streaming pass that counts bytes or
// rows) and turns every problem into one sentence that names the file.
#include "runtime/data/probe.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "runtime/data/gzip_reader.h"
#include "runtime/data/literal.h"
#include "runtime/data/probe_internal.h"

namespace dtl::rt::data {

using namespace detail;

namespace {

constexpr int64_t kMaxNpyHeader = 1 << 20;
constexpr int64_t kMaxSafetensorsHeader = 100 << 20;

uint64_t littleEndian(const unsigned char* p, int n) {
  uint64_t v = 0;
  for (int k = n - 1; k >= 0; --k) v = (v << 8) | p[k];
  return v;
}

std::string hexBytes(const unsigned char* p, int64_t n) {
  std::string s;
  for (int64_t k = 0; k < n; ++k) {
    char buf[4];
    std::snprintf(buf, sizeof buf, "%s%02x", k ? " " : "", p[k]);
    s += buf;
  }
  return s;
}

std::string sizeMismatch(const std::string& path, const GzReader& r, int64_t found, const std::vector<int64_t>& shape,
                         const char* dtype, int64_t data, int64_t header) {
  return path + ": file " + isOrDecompresses(r) + std::to_string(found) + " bytes but the header describes " +
         dimsText(shape) + " " + dtype + " (" + std::to_string(data) + " bytes of data after a " +
         std::to_string(header) + "-byte header, " + std::to_string(data + header) + " in all)";
}

// After a header: the rest of the file's size (-1 on a read error, in
// r.error()). With keepingInflatedData() and a gzip file, its first `data`
// bytes also go to *kept when the file holds that many. `data` comes from an
// untrusted header: the buffer is reserved for no more than deflate can
// inflate the file to (1032:1), and a buffer the memory cannot give is
// simply not kept (the loader inflates the file itself, as it did before).
int64_t restOfFile(GzReader& r, int64_t data, std::shared_ptr<std::vector<unsigned char>>* kept) {
  if (!keepingInflatedData() || !r.compressed() || data <= 0) return r.skipToEnd();
  int64_t got = 0;
  try {
    auto bytes = std::make_shared<std::vector<unsigned char>>();
    bytes->reserve(static_cast<size_t>(std::min(data, r.fileSize() * 1032 + 64)));
    constexpr int64_t kPiece = int64_t{16} << 20;
    while (got < data) {
      const int64_t want = std::min(kPiece, data - got);
      bytes->resize(static_cast<size_t>(got + want));
      const int64_t n = r.read(bytes->data() + got, want);
      if (n < 0) return -1;
      got += n;
      if (n < want) break;  // the file ends early: the caller says by how much
    }
    if (got == data) *kept = std::move(bytes);
  } catch (const std::bad_alloc&) {
    kept->reset();
  }
  const int64_t more = r.skipToEnd();
  return more < 0 ? -1 : got + more;
}

}  // namespace

static ProbeResult probeIdxOnce(const std::string& path) {
  return guarded(path, [&]() -> ProbeResult {
    GzReader r;
    if (!r.open(path)) return fail(r.error());
    unsigned char head[4];
    int64_t n = r.read(head, 4);
    if (n < 0) return fail(r.error());
    if (n < 4)
      return fail(path + ": file " + isOrDecompresses(r) + std::to_string(n) +
                  " bytes, too short for an IDX header (expected at least 4)");
    if (head[0] != 0 || head[1] != 0)
      return fail(path + ": not an IDX file (magic bytes " + hexBytes(head, 4) + "; expected 00 00 then a type byte)");
    static const struct {
      unsigned char code;
      DtypeInfo dt;
    } kTypes[] = {{0x08, {"u8", 1, ElemKind::Int}},    {0x09, {"i8", 1, ElemKind::Int}},
                  {0x0B, {"i16", 2, ElemKind::Int}},   {0x0C, {"i32", 4, ElemKind::Int}},
                  {0x0D, {"f32", 4, ElemKind::Float}}, {0x0E, {"f64", 8, ElemKind::Float}}};
    const DtypeInfo* dt = nullptr;
    for (const auto& t : kTypes)
      if (t.code == head[2]) dt = &t.dt;
    if (!dt)
      return fail(path + ": unknown IDX element type 0x" + hexBytes(head + 2, 1) +
                  " (expected 08 u8, 09 i8, 0b i16, 0c i32, 0d f32 or 0e f64)");
    int64_t ndims = head[3];
    if (ndims == 0) return fail(path + ": IDX header has 0 dimensions (expected at least 1, the sample axis)");
    unsigned char raw[4 * 255];
    int64_t header = 4 + 4 * ndims;
    n = r.read(raw, 4 * ndims);
    if (n < 0) return fail(r.error());
    if (n < 4 * ndims)
      return fail(path + ": IDX header declares " + std::to_string(ndims) + " dimensions (" + std::to_string(header) +
                  " header bytes) but the file ends after " + std::to_string(4 + n) + " bytes");
    std::vector<int64_t> shape;
    for (int64_t k = 0; k < ndims; ++k) {
      const unsigned char* p = raw + 4 * k;
      uint32_t v = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
      if (v > 0x7fffffffu)
        return fail(path + ": IDX dimension " + std::to_string(k) + " is " + hexBytes(p, 4) +
                    ", negative as a big-endian int32");
      shape.push_back(v);
    }
    int64_t data = 0;
    if (!checkedProduct(shape, dt->size, data))
      return fail(path + ": IDX header describes " + dimsText(shape) + " " + dt->name +
                  ", which is more than 2^63 bytes");
    std::shared_ptr<std::vector<unsigned char>> kept;
    int64_t rest = restOfFile(r, data, &kept);
    if (rest < 0) return fail(r.error());
    if (rest < data) return fail(sizeMismatch(path, r, header + rest, shape, dt->name, data, header));
    ProbeResult done = finish(path, shape, *dt);
    if (done.ok && kept) {
      swapToHost(*kept, dt->size);  // kept in the host's order: the loader shares it as it is
      done.inflated = std::move(kept);
    }
    return done;
  });
}

static ProbeResult probeNpyOnce(const std::string& path) {
  return guarded(path, [&]() -> ProbeResult {
    GzReader r;
    if (!r.open(path)) return fail(r.error());
    unsigned char pre[12];
    int64_t n = r.read(pre, 8);
    if (n < 0) return fail(r.error());
    if (n < 8 || std::memcmp(pre, "\x93NUMPY", 6) != 0)
      return fail(path + ": not a .npy file (starts with " + (n ? hexBytes(pre, std::min<int64_t>(n, 8)) : "nothing") +
                  "; expected 93 4e 55 4d 50 59, \"\\x93NUMPY\", then a version)");
    int major = pre[6];
    if (major < 1 || major > 3)
      return fail(path + ": unsupported .npy format version " + std::to_string(major) + "." + std::to_string(pre[7]) +
                  " (expected 1.0, 2.0 or 3.0)");
    int len_bytes = major == 1 ? 2 : 4;
    n = r.read(pre + 8, len_bytes);
    if (n < 0) return fail(r.error());
    if (n < len_bytes) return fail(path + ": .npy file ends inside its header length field");
    int64_t hlen = static_cast<int64_t>(littleEndian(pre + 8, len_bytes));
    int64_t header = 8 + len_bytes + hlen;
    if (hlen > kMaxNpyHeader)
      return fail(path + ": .npy header length is " + std::to_string(hlen) + " bytes (more than the 1 MiB limit)");
    std::string text(static_cast<size_t>(hlen), '\0');
    n = r.read(text.data(), hlen);
    if (n < 0) return fail(r.error());
    if (n < hlen)
      return fail(path + ": .npy header is " + std::to_string(hlen) + " bytes but the file ends after " +
                  std::to_string(8 + len_bytes + n));
    Literal dict;
    std::string err;
    if (!parseLiteral(text, Syntax::Python, dict, err) || dict.type != Literal::Type::Dict)
      return fail(path + ": .npy header is not a Python dict literal (" + (err.empty() ? "found another value" : err) +
                  ")");
    const Literal* descr = dict.get("descr");
    const Literal* fortran = dict.get("fortran_order");
    const Literal* shape_lit = dict.get("shape");
    if (!descr || !fortran || !shape_lit)
      return fail(path + ": .npy header lacks '" +
                  (!descr     ? "descr"
                   : !fortran ? "fortran_order"
                              : "shape") +
                  "' (expected keys 'descr', 'fortran_order' and 'shape')");
    if (descr->type != Literal::Type::String)
      return fail(path + ": .npy array has a structured dtype; only plain numeric dtypes are supported");
    static const struct {
      const char* descr;
      DtypeInfo dt;
    } kTypes[] = {{"<f4", {"f32", 4, ElemKind::Float}}, {"<f8", {"f64", 8, ElemKind::Float}},
                  {"<f2", {"f16", 2, ElemKind::Float}}, {"<i4", {"i32", 4, ElemKind::Int}},
                  {"<i8", {"i64", 8, ElemKind::Int}},   {"<i2", {"i16", 2, ElemKind::Int}},
                  {"|i1", {"i8", 1, ElemKind::Int}},    {"|u1", {"u8", 1, ElemKind::Int}},
                  {"<u2", {"u16", 2, ElemKind::Int}},   {"<u4", {"u32", 4, ElemKind::Int}},
                  {"<u8", {"u64", 8, ElemKind::Int}}};
    std::string d = descr->s;
    if (d.size() == 3 && d[1] != 'f' && d[2] == '1' && (d[0] == '<' || d[0] == '>' || d[0] == '=')) d[0] = '|';
    if (d.size() == 3 && d[0] == '=') d[0] = '<';  // native order; this runtime is little-endian only
    const DtypeInfo* dt = nullptr;
    for (const auto& t : kTypes)
      if (d == t.descr) dt = &t.dt;
    if (!dt) {
      std::string why = !d.empty() && d[0] == '>' ? "big-endian dtypes are not supported" : "unsupported dtype";
      return fail(path + ": .npy " + why + " ('" + descr->s +
                  "'; expected one of <f4 <f8 <f2 <i4 <i8 <i2 |i1 |u1 <u2 <u4 <u8)");
    }
    if (fortran->type != Literal::Type::Bool)
      return fail(path + ": .npy header's 'fortran_order' is not True or False");
    if (fortran->b)
      return fail(path +
                  ": .npy array is stored in Fortran (column-major) order; only C order is supported "
                  "(save np.ascontiguousarray(a) instead)");
    if (shape_lit->type != Literal::Type::List) return fail(path + ": .npy header's 'shape' is not a tuple");
    std::vector<int64_t> shape;
    for (const Literal& v : shape_lit->items) {
      if (v.type != Literal::Type::Int || v.i < 0)
        return fail(path + ": .npy header's 'shape' holds something other than non-negative integers");
      shape.push_back(v.i);
    }
    int64_t data = 0;
    if (!checkedProduct(shape, dt->size, data) || data > INT64_MAX - header)
      return fail(path + ": .npy header describes " + dimsText(shape) + " " + dt->name + ", more than 2^63 bytes");
    std::shared_ptr<std::vector<unsigned char>> kept;
    int64_t rest = restOfFile(r, data, &kept);
    if (rest < 0) return fail(r.error());
    if (rest != data) return fail(sizeMismatch(path, r, header + rest, shape, dt->name, data, header));
    ProbeResult done = finish(path, shape, *dt);
    if (done.ok) done.inflated = std::move(kept);
    return done;
  });
}

static ProbeResult probeSafetensorsOnce(const std::string& path, const std::string& key) {
  return guarded(path, [&]() -> ProbeResult {
    GzReader r;
    if (!r.open(path)) return fail(r.error());
    unsigned char pre[8];
    int64_t n = r.read(pre, 8);
    if (n < 0) return fail(r.error());
    if (n < 8)
      return fail(path + ": file " + isOrDecompresses(r) + std::to_string(n) +
                  " bytes, too short for a safetensors file (expected an 8-byte header length first)");
    uint64_t hlen = littleEndian(pre, 8);
    if (hlen > static_cast<uint64_t>(kMaxSafetensorsHeader))
      return fail(path + ": safetensors header length is " + std::to_string(hlen) +
                  " bytes, more than the 100 MiB limit (is this a safetensors file?)");
    if (!r.compressed() && static_cast<int64_t>(hlen) > r.fileSize() - 8)
      return fail(path + ": safetensors header length is " + std::to_string(hlen) + " bytes but the file is only " +
                  std::to_string(r.fileSize()) + " bytes");
    // Grow as data arrives so a lying length in a .gz file cannot make us allocate 100 MiB up front.
    std::string text;
    while (static_cast<int64_t>(text.size()) < static_cast<int64_t>(hlen)) {
      int64_t want = std::min<int64_t>(static_cast<int64_t>(hlen) - static_cast<int64_t>(text.size()), 1 << 20);
      size_t old = text.size();
      text.resize(old + static_cast<size_t>(want));
      n = r.read(text.data() + old, want);
      if (n < 0) return fail(r.error());
      text.resize(old + static_cast<size_t>(n));
      if (n < want)
        return fail(path + ": safetensors header length is " + std::to_string(hlen) +
                    " bytes but the file ends after " + std::to_string(8 + text.size()));
    }
    Literal root;
    std::string err;
    if (!parseLiteral(text, Syntax::Json, root, err))
      return fail(path + ": safetensors header is not valid JSON (" + err + ")");
    if (root.type != Literal::Type::Dict) return fail(path + ": safetensors header is not a JSON object");
    const Literal* t = key == "__metadata__" ? nullptr : root.get(key);
    if (!t) {
      std::string avail;
      int64_t count = 0;
      for (const std::string& k : root.keys) {
        if (k == "__metadata__") continue;
        if (count < 5) avail += (count ? ", '" : "'") + k + "'";
        ++count;
      }
      if (count > 5) avail += ", and " + std::to_string(count - 5) + " more";
      return fail(path + ": no tensor named '" + key + "' (" +
                  (count ? "available: " + avail : std::string("the file holds no tensors")) + ")");
    }
    std::string what = path + ": tensor '" + key + "'";
    const Literal* dtype = t->get("dtype");
    const Literal* shape_lit = t->get("shape");
    const Literal* offsets = t->get("data_offsets");
    if (!dtype || dtype->type != Literal::Type::String || !shape_lit || shape_lit->type != Literal::Type::List ||
        !offsets || offsets->type != Literal::Type::List)
      return fail(what + " lacks a string 'dtype', a list 'shape' or a list 'data_offsets' in the header");
    static const struct {
      const char* tag;
      DtypeInfo dt;
    } kTypes[] = {{"F64", {"f64", 8, ElemKind::Float}},        {"F32", {"f32", 4, ElemKind::Float}},
                  {"F16", {"f16", 2, ElemKind::Float}},        {"BF16", {"bf16", 2, ElemKind::Float}},
                  {"F8_E4M3", {"f8e4m3", 1, ElemKind::Float}}, {"F8_E5M2", {"f8e5m2", 1, ElemKind::Float}},
                  {"I64", {"i64", 8, ElemKind::Int}},          {"I32", {"i32", 4, ElemKind::Int}},
                  {"I16", {"i16", 2, ElemKind::Int}},          {"I8", {"i8", 1, ElemKind::Int}},
                  {"U64", {"u64", 8, ElemKind::Int}},          {"U32", {"u32", 4, ElemKind::Int}},
                  {"U16", {"u16", 2, ElemKind::Int}},          {"U8", {"u8", 1, ElemKind::Int}},
                  {"BOOL", {"bool", 1, ElemKind::Int}}};
    const DtypeInfo* dt = nullptr;
    for (const auto& k : kTypes)
      if (dtype->s == k.tag) dt = &k.dt;
    if (!dt)
      return fail(what + " has unsupported dtype '" + dtype->s +
                  "' (expected F64, F32, F16, BF16, F8_E4M3, F8_E5M2, I64, I32, I16, I8, U64, U32, U16, U8 or BOOL)");
    std::vector<int64_t> shape;
    for (const Literal& v : shape_lit->items) {
      if (v.type != Literal::Type::Int || v.i < 0)
        return fail(what + " has a 'shape' with something other than non-negative integers");
      shape.push_back(v.i);
    }
    if (offsets->items.size() != 2 || offsets->items[0].type != Literal::Type::Int ||
        offsets->items[1].type != Literal::Type::Int || offsets->items[0].i < 0 ||
        offsets->items[1].i < offsets->items[0].i)
      return fail(what + " has bad 'data_offsets' (expected [begin, end] with 0 <= begin <= end)");
    int64_t begin = offsets->items[0].i, end = offsets->items[1].i;
    int64_t data = 0;
    if (!checkedProduct(shape, dt->size, data))
      return fail(what + " has shape " + dimsText(shape) + " " + dtype->s + ", more than 2^63 bytes");
    if (end - begin != data)
      return fail(what + " has data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] (" +
                  std::to_string(end - begin) + " bytes) but shape [" + dimsText(shape) + "] " + dtype->s + " needs " +
                  std::to_string(data) + " bytes");
    int64_t total = r.compressed() ? -1 : r.fileSize();
    if (total < 0) {
      int64_t rest = r.skipToEnd();
      if (rest < 0) return fail(r.error());
      total = r.position();
    }
    int64_t data_start = 8 + static_cast<int64_t>(hlen);
    if (end > total - data_start)
      return fail(what + " ends at byte " +
                  (end > INT64_MAX - data_start ? "8 + " + std::to_string(hlen) + " + " + std::to_string(end)
                                                : std::to_string(data_start + end)) +
                  " (the data starts after the " + std::to_string(data_start) + "-byte header) but the file " +
                  isOrDecompresses(r) + std::to_string(total) + " bytes");
    return finish(path, shape, *dt);
  });
}

namespace {

// Windows of seq+1 elements overlapping by one: the targets are the inputs shifted by one.
ProbeResult windows(const std::string& path, int64_t count, int64_t seq, const std::string& unit,
                    const std::string& source) {
  int64_t need = 0;
  bool huge = __builtin_add_overflow(seq, 1, &need);
  if (huge || count < need) {
    std::string at_least = huge ? std::to_string(static_cast<uint64_t>(seq) + 1) : std::to_string(need);
    return fail(path + ": " + source + " needs at least " + at_least + " " + unit +
                " (seq + 1, one window) but the file holds " + std::to_string(count));
  }
  ProbeResult r;
  r.ok = true;
  r.info.samples = (count - 1) / seq;
  r.info.sample_dims = {seq};
  r.info.sample_elements = seq;
  r.info.dtype = "i32";
  r.info.kind = ElemKind::Int;
  return r;
}

}  // namespace

static ProbeResult probeTextOnce(const std::string& path, int64_t seq) {
  return guarded(path, [&]() -> ProbeResult {
    std::string source = "text(seq = " + std::to_string(seq) + ")";
    if (seq < 1) return fail(path + ": " + source + " needs seq >= 1");
    GzReader r;
    if (!r.open(path)) return fail(r.error());
    int64_t bytes = r.skipToEnd();
    if (bytes < 0) return fail(r.error());
    return windows(path, bytes, seq, "bytes", source);
  });
}

static ProbeResult probeTokensOnce(const std::string& path, const std::string& dtype, int64_t seq) {
  return guarded(path, [&]() -> ProbeResult {
    std::string source = "tokens(dtype = " + dtype + ", seq = " + std::to_string(seq) + ")";
    int64_t size = dtype == "u16" ? 2 : (dtype == "u32" || dtype == "i32") ? 4 : 0;
    if (size == 0) return fail(path + ": " + source + " has an unsupported dtype (expected u16, u32 or i32)");
    if (seq < 1) return fail(path + ": " + source + " needs seq >= 1");
    GzReader r;
    bool gz_name = path.size() >= 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
    if (!r.open(path, gz_name)) return fail(r.error());
    int64_t bytes = r.skipToEnd();
    if (bytes < 0) return fail(r.error());
    if (bytes % size != 0)
      return fail(path + ": file " + isOrDecompresses(r) + std::to_string(bytes) + " bytes, not a whole number of " +
                  dtype + " tokens (" + std::to_string(size) + " bytes each)");
    return windows(path, bytes / size, seq, dtype + " tokens", source);
  });
}

// Each file's probe once per process while it stays the same (probe_internal.h).
ProbeResult probeIdx(const std::string& path) {
  return remembered("idx", path, [&] { return probeIdxOnce(path); });
}
ProbeResult probeNpy(const std::string& path) {
  return remembered("npy", path, [&] { return probeNpyOnce(path); });
}
ProbeResult probeSafetensors(const std::string& path, const std::string& key) {
  return remembered("safetensors\n" + key, path, [&] { return probeSafetensorsOnce(path, key); });
}
ProbeResult probeText(const std::string& path, int64_t seq) {
  return remembered("text " + std::to_string(seq), path, [&] { return probeTextOnce(path, seq); });
}
ProbeResult probeTokens(const std::string& path, const std::string& dtype, int64_t seq) {
  return remembered("tokens " + dtype + " " + std::to_string(seq), path,
                    [&] { return probeTokensOnce(path, dtype, seq); });
}

}  // namespace dtl::rt::data
