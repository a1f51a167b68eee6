// Readers for the binary array formats: idx (big-endian, byte-swapped here),
// npy and safetensors (little-endian, kept as stored). The probe validates the
// header and the size first; the reader then only skips to the data and
// copies it.
#include <algorithm>

#include "runtime/data/gzip_reader.h"
#include "runtime/data/literal.h"
#include "runtime/data/probe_internal.h"
#include "runtime/data/sources.h"

namespace dtl::rt::data::detail {

namespace {

Status skipBytes(GzReader& r, int64_t n) {
  std::vector<unsigned char> scratch;
  while (n > 0) {
    int64_t chunk = std::min<int64_t>(n, 1 << 20);
    Status s = readExact(r, chunk, scratch);
    if (!s.ok) return s;
    n -= chunk;
  }
  return {};
}

// Fills out's layout from a probe: one contiguous sample after another.
Status layout(const ProbeResult& p, const std::string& path, Column& out) {
  if (!elemFromName(p.info.dtype, out.elem))
    return Status::error(path + ": element type " + p.info.dtype + " cannot be loaded");
  out.samples = p.info.samples;
  out.elements = p.info.sample_elements;
  out.stride = out.elements;
  out.offset = 0;
  out.file_dims = p.info.sample_dims;
  return {};
}

int64_t dataBytes(const Column& c) { return c.samples * c.elements * elemSize(c.elem); }

uint64_t littleEndian(const unsigned char* p, int n) {
  uint64_t v = 0;
  for (int k = n - 1; k >= 0; --k) v = (v << 8) | p[k];
  return v;
}

Status finish(GzReader& r, Column& out, bool big_endian) {
  auto bytes = std::make_shared<std::vector<unsigned char>>();
  Status s = readExact(r, dataBytes(out), *bytes);
  if (!s.ok) return s;
  if (big_endian) swapToHost(*bytes, elemSize(out.elem));
  out.bytes = std::move(bytes);
  return {};
}

// The data the probe inflated (keepInflatedData, already in the host's
// order), shared instead of inflating the file again. Either way the probes'
// memory lets go of it.
bool adoptInflated(const ProbeResult& p, const std::string& path, Column& out) {
  if (!p.inflated) return false;
  forgetInflated(path);
  if (static_cast<int64_t>(p.inflated->size()) != dataBytes(out)) return false;
  out.bytes = p.inflated;
  return true;
}

}  // namespace

Status readIdx(const FieldSpec& f, Column& out) {
  ProbeResult p = probeIdx(f.path);
  if (!p.ok) return fromProbe(p);
  Status s = layout(p, f.path, out);
  if (!s.ok) return s;
  if (adoptInflated(p, f.path, out)) return {};
  GzReader r;
  if (!r.open(f.path)) return Status::error(r.error());
  int64_t header = 4 + 4 * (1 + static_cast<int64_t>(p.info.sample_dims.size()));
  s = skipBytes(r, header);
  if (!s.ok) return s;
  return finish(r, out, true);
}

Status readNpy(const FieldSpec& f, Column& out) {
  ProbeResult p = probeNpy(f.path);
  if (!p.ok) return fromProbe(p);
  Status s = layout(p, f.path, out);
  if (!s.ok) return s;
  if (adoptInflated(p, f.path, out)) return {};
  GzReader r;
  if (!r.open(f.path)) return Status::error(r.error());
  std::vector<unsigned char> pre;
  s = readExact(r, 8, pre);
  if (!s.ok) return s;
  int len_bytes = pre[6] == 1 ? 2 : 4;
  s = readExact(r, len_bytes, pre);
  if (!s.ok) return s;
  s = skipBytes(r, static_cast<int64_t>(littleEndian(pre.data(), len_bytes)));
  if (!s.ok) return s;
  return finish(r, out, false);
}

Status readSafetensors(const FieldSpec& f, Column& out) {
  ProbeResult p = probeSafetensors(f.path, f.key);
  if (!p.ok) return fromProbe(p);
  Status s = layout(p, f.path, out);
  if (!s.ok) return s;
  GzReader r;
  if (!r.open(f.path)) return Status::error(r.error());
  std::vector<unsigned char> buf;
  s = readExact(r, 8, buf);
  if (!s.ok) return s;
  int64_t hlen = static_cast<int64_t>(littleEndian(buf.data(), 8));  // the probe bounded it
  s = readExact(r, hlen, buf);
  if (!s.ok) return s;
  Literal root;
  std::string err;
  std::string_view text(reinterpret_cast<const char*>(buf.data()), buf.size());
  const Literal* offsets = nullptr;
  if (parseLiteral(text, Syntax::Json, root, err))
    if (const Literal* t = root.get(f.key)) offsets = t->get("data_offsets");
  if (!offsets || offsets->items.size() != 2 || offsets->items[0].type != Literal::Type::Int)
    return Status::error(f.path + ": safetensors header changed while being read (tensor '" + f.key +
                         "' or its data_offsets disappeared)");
  s = skipBytes(r, offsets->items[0].i);
  if (!s.ok) return s;
  return finish(r, out, false);
}

}  // namespace dtl::rt::data::detail
