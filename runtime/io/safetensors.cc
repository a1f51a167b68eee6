// safetensors writer and validating reader. The reader checks what Python's
// safetensors checks (tensor.rs: Metadata::validate), in an order that names
// the likeliest cause first: a truncated copy before a bad offset.
#include "runtime/io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <numeric>
#include <set>

#include "core/json.h"
#include "runtime/data/literal.h"
#include "runtime/io/file_ops.h"

namespace dtl::rt::io {

namespace {

using data::Literal;

constexpr int64_t kMaxHeader = int64_t{100} << 20;

struct DtypeEntry {
  const char* tag;
  int64_t size;
};
// In safetensors' own order (increasing alignment).
constexpr DtypeEntry kDtypes[] = {{"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
                                  {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
                                  {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8}};

std::string knownDtypes() {
  std::string s;
  for (const auto& d : kDtypes) s += (s.empty() ? "" : ", ") + std::string(d.tag);
  return s;
}

std::string shapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t k = 0; k < shape.size(); ++k) s += (k ? ", " : "") + std::to_string(shape[k]);
  return s + "]";
}

// Bytes of `shape` × `elem`; false when a dim is negative or the product passes 2^63.
bool byteCount(const std::vector<int64_t>& shape, int64_t elem, int64_t& out) {
  int64_t n = elem;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d != 0 && n > INT64_MAX / d) return false;
    n *= d;
  }
  out = n;
  return true;
}

Status checkForWriting(const std::string& path, const std::vector<TensorBlob>& tensors) {
  std::set<std::string> names;
  for (const TensorBlob& t : tensors) {
    std::string what = path + ": tensor " + json::quote(t.name);
    if (t.name == "__metadata__") return Status::error(what + ": the name is reserved for the metadata");
    if (!names.insert(t.name).second) return Status::error(what + ": two tensors have this name");
    int64_t elem = dtypeSize(t.dtype);
    if (elem == 0)
      return Status::error(what + ": unknown dtype " + json::quote(t.dtype) + " (known: " + knownDtypes() + ")");
    int64_t need = 0;
    if (!byteCount(t.shape, elem, need))
      return Status::error(what + ": shape " + shapeText(t.shape) + " has a negative dimension or over 2^63 bytes");
    if (static_cast<uint64_t>(need) != t.bytes.size())
      return Status::error(what + ": shape " + shapeText(t.shape) + " " + t.dtype + " needs " + std::to_string(need) +
                           " bytes, got " + std::to_string(t.bytes.size()));
  }
  return {};
}

// Closes a descriptor on every return path.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads up to `size` bytes at `offset`; returns the count (short only at end of file) or -1 with errno set.
int64_t preadAll(int fd, void* buf, int64_t size, int64_t offset) {
  char* p = static_cast<char*>(buf);
  int64_t done = 0;
  while (done < size) {
    ssize_t n = ::pread(fd, p + done, static_cast<size_t>(std::min<int64_t>(size - done, int64_t{1} << 30)),
                        static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) break;
    done += n;
  }
  return done;
}

struct Entry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0;
};

// One tensor's header entry, checked on its own: fields, dtype, shape, offsets, size.
Status parseEntry(const std::string& path, const std::string& name, const Literal& v, Entry& e) {
  std::string what = path + ": tensor " + json::quote(name);
  const Literal* dtype = v.get("dtype");
  const Literal* shape = v.get("shape");
  const Literal* offsets = v.get("data_offsets");
  if (!dtype || dtype->type != Literal::Type::String || !shape || shape->type != Literal::Type::List || !offsets ||
      offsets->type != Literal::Type::List)
    return Status::error(what + ": expected {\"dtype\": \"…\", \"shape\": […], \"data_offsets\": [begin, end]}");
  e.name = name;
  e.dtype = dtype->s;
  int64_t elem = dtypeSize(e.dtype);
  if (elem == 0)
    return Status::error(what + ": unknown dtype " + json::quote(e.dtype) + " (known: " + knownDtypes() + ")");
  for (const Literal& d : shape->items) {
    if (d.type != Literal::Type::Int || d.i < 0)
      return Status::error(what + ": \"shape\" must be a list of non-negative integers");
    e.shape.push_back(d.i);
  }
  const auto& o = offsets->items;
  if (o.size() != 2 || o[0].type != Literal::Type::Int || o[1].type != Literal::Type::Int || o[0].i < 0 ||
      o[1].i < o[0].i)
    return Status::error(what + ": \"data_offsets\" must be [begin, end] with 0 <= begin <= end");
  e.begin = o[0].i;
  e.end = o[1].i;
  int64_t need = 0;
  if (!byteCount(e.shape, elem, need))
    return Status::error(what + ": shape " + shapeText(e.shape) + " " + e.dtype + " is over 2^63 bytes");
  if (need != e.end - e.begin)
    return Status::error(what + ": shape " + shapeText(e.shape) + " " + e.dtype + " needs " + std::to_string(need) +
                         " bytes but data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                         "] span " + std::to_string(e.end - e.begin));
  return {};
}

Status parseHeader(const std::string& path, const std::string& text, std::vector<Entry>& entries,
                   std::map<std::string, std::string>* metadata) {
  Literal root;
  std::string err;
  if (!data::parseLiteral(text, data::Syntax::Json, root, err))
    return Status::error(path + ": header is not valid JSON (" + err + ")");
  if (root.type != Literal::Type::Dict) return Status::error(path + ": header is not a JSON object");
  for (size_t k = 0; k < root.keys.size(); ++k) {
    const Literal& v = root.items[k];
    if (root.keys[k] == "__metadata__") {
      if (v.type != Literal::Type::Dict) return Status::error(path + ": \"__metadata__\" is not a JSON object");
      for (size_t m = 0; m < v.keys.size(); ++m) {
        if (v.items[m].type != Literal::Type::String)
          return Status::error(path + ": \"__metadata__\" value of " + json::quote(v.keys[m]) + " is not a string");
        if (metadata) (*metadata)[v.keys[m]] = v.items[m].s;
      }
      continue;
    }
    entries.emplace_back();
    if (Status s = parseEntry(path, root.keys[k], v, entries.back()); !s.ok) return s;
  }
  return {};
}

// The tensors must tile [0, data_bytes) exactly, as Python's safetensors demands.
Status checkTiling(const std::string& path, const std::vector<Entry>& entries, int64_t data_bytes) {
  int64_t max_end = 0;
  for (const Entry& e : entries) max_end = std::max(max_end, e.end);
  if (max_end > data_bytes)
    return Status::error(path + ": truncated: header says " + std::to_string(max_end) + " bytes of data, file has " +
                         std::to_string(data_bytes));
  std::vector<const Entry*> order;
  for (const Entry& e : entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  int64_t covered = 0;
  const Entry* prev = nullptr;
  auto range = [](const Entry* e) { return "[" + std::to_string(e->begin) + ", " + std::to_string(e->end) + "]"; };
  for (const Entry* e : order) {
    if (e->begin < covered)
      return Status::error(path + ": tensors " + json::quote(prev->name) + " (data_offsets " + range(prev) + ") and " +
                           json::quote(e->name) + " (" + range(e) + ") overlap");
    if (e->begin > covered)
      return Status::error(path + ": no tensor covers data bytes [" + std::to_string(covered) + ", " +
                           std::to_string(e->begin) + ") before " + json::quote(e->name));
    covered = e->end;
    prev = e;
  }
  if (covered < data_bytes)
    return Status::error(path + ": the tensors cover " + std::to_string(covered) + " bytes of data but the file has " +
                         std::to_string(data_bytes) + " (trailing bytes after the last tensor)");
  return {};
}

}  // namespace

int64_t dtypeSize(const std::string& dtype) {
  for (const auto& d : kDtypes)
    if (dtype == d.tag) return d.size;
  return 0;
}

std::string safetensorsHeader(const std::vector<TensorBlob>& tensors, const std::map<std::string, std::string>& metadata) {
  json::Writer w;
  w.beginObject();
  if (!metadata.empty()) {
    w.key("__metadata__").beginObject();
    for (const auto& [k, v] : metadata) w.key(k).value(v);
    w.endObject();
  }
  int64_t offset = 0;
  for (const TensorBlob& t : tensors) {
    w.key(t.name).beginObject().key("dtype").value(t.dtype).key("shape").beginArray();
    for (int64_t d : t.shape) w.value(d);
    int64_t end = offset + static_cast<int64_t>(t.bytes.size());
    w.endArray().key("data_offsets").beginArray().value(offset).value(end).endArray().endObject();
    offset = end;
  }
  w.endObject();
  return w.str();
}

Status writeSafetensors(const std::string& path, const std::vector<TensorBlob>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  if (Status s = checkForWriting(path, tensors); !s.ok) return s;
  std::string header = safetensorsHeader(tensors, metadata);
  header.append((8 - header.size() % 8) % 8, ' ');
  unsigned char prefix[8];
  for (int k = 0; k < 8; ++k) prefix[k] = static_cast<unsigned char>(static_cast<uint64_t>(header.size()) >> (8 * k));
  std::vector<Chunk> chunks = {{prefix, 8}, {header.data(), header.size()}};
  for (const TensorBlob& t : tensors)
    if (!t.bytes.empty()) chunks.push_back({t.bytes.data(), t.bytes.size()});
  return writeFileAtomic(path, chunks);
}

Status readSafetensors(const std::string& path, std::vector<TensorBlob>& out,
                       std::map<std::string, std::string>* metadata) {
  out.clear();
  if (metadata) metadata->clear();
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) return ioError(path, "open", errno);
  struct stat st;
  if (::fstat(f.fd, &st) != 0) return ioError(path, "stat", errno);
  if (S_ISDIR(st.st_mode)) return ioError(path, "read", EISDIR);
  int64_t size = st.st_size;
  unsigned char prefix[8];
  int64_t n = preadAll(f.fd, prefix, 8, 0);
  if (n < 0) return ioError(path, "read", errno);
  if (n < 8)
    return Status::error(path + ": truncated: the file has " + std::to_string(n) +
                         " bytes, fewer than the 8-byte header length");
  uint64_t hlen = 0;
  for (int k = 7; k >= 0; --k) hlen = (hlen << 8) | prefix[k];
  if (hlen > static_cast<uint64_t>(kMaxHeader))
    return Status::error(path + ": header length " + std::to_string(hlen) +
                         " is absurd (over 100 MiB); is this a safetensors file?");
  if (static_cast<int64_t>(hlen) > size - 8)
    return Status::error(path + ": truncated: header says its JSON is " + std::to_string(hlen) + " bytes, file has " +
                         std::to_string(size - 8) + " after the 8-byte length");
  std::string text(hlen, '\0');
  n = preadAll(f.fd, text.data(), static_cast<int64_t>(hlen), 8);
  if (n < 0) return ioError(path, "read", errno);
  if (n != static_cast<int64_t>(hlen)) return Status::error(path + ": file shrank while being read");
  std::vector<Entry> entries;
  Status s = parseHeader(path, text, entries, metadata);
  if (s.ok) s = checkTiling(path, entries, size - 8 - static_cast<int64_t>(hlen));
  if (!s.ok) {
    if (metadata) metadata->clear();
    return s;
  }
  int64_t data_start = 8 + static_cast<int64_t>(hlen);
  for (Entry& e : entries) {
    TensorBlob t{std::move(e.name), std::move(e.dtype), std::move(e.shape), {}};
    t.bytes.resize(static_cast<size_t>(e.end - e.begin));
    n = preadAll(f.fd, t.bytes.data(), e.end - e.begin, data_start + e.begin);
    if (n != e.end - e.begin) {
      Status err = n < 0 ? ioError(path, "read", errno) : Status::error(path + ": file shrank while being read");
      out.clear();
      if (metadata) metadata->clear();
      return err;
    }
    out.push_back(std::move(t));
  }
  return {};
}

}  // namespace dtl::rt::io
