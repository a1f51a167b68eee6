// Helpers shared by the probe implementations (probe.cc, probe_csv.cc); not
// part of the public API. Everything here is about turning untrusted sizes
// into checked numbers and failures into ProbeResult sentences.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "runtime/data/gzip_reader.h"
#include "runtime/data/probe.h"

namespace dtl::rt::data::detail {

struct DtypeInfo {
  const char* name;
  int64_t size;
  ElemKind kind;
};

inline ProbeResult fail(std::string msg) {
  ProbeResult r;
  r.error = std::move(msg);
  return r;
}

inline std::string dimsText(const std::vector<int64_t>& dims) {
  std::string s;
  for (size_t k = 0; k < dims.size(); ++k) s += (k ? "×" : "") + std::to_string(dims[k]);
  return s;
}

inline std::string isOrDecompresses(const GzReader& r) { return r.compressed() ? "decompresses to " : "is "; }

// False on int64 overflow: sizes come from untrusted headers.
inline bool checkedProduct(const std::vector<int64_t>& dims, int64_t elem_size, int64_t& out) {
  out = elem_size;
  for (int64_t d : dims)
    if (__builtin_mul_overflow(out, d, &out)) return false;
  return true;
}

// Fills info from a full shape whose first axis is the sample axis. The caller
// has already checked that the whole shape's byte size fits in int64.
inline ProbeResult finish(const std::string& path, const std::vector<int64_t>& shape, const DtypeInfo& dt) {
  if (shape.empty())
    return fail(path + ": holds a single scalar (shape ()); expected at least one dimension, the sample axis");
  if (shape[0] == 0) return fail(path + ": holds no samples (the first dimension of " + dimsText(shape) + " is 0)");
  ProbeResult r;
  r.ok = true;
  r.info.samples = shape[0];
  r.info.sample_dims.assign(shape.begin() + 1, shape.end());
  checkedProduct(r.info.sample_dims, 1, r.info.sample_elements);
  // Samples of no values cost no bytes, so a 20-byte header could promise
  // 2^31 of them and the loader would walk them all.
  if (r.info.sample_elements == 0)
    return fail(path + ": holds no values (" + dimsText(shape) + ": each of its " + std::to_string(shape[0]) +
                " samples is empty)");
  r.info.dtype = dt.name;
  r.info.kind = dt.kind;
  return r;
}

// A probe of a gzip file this process has probed before, unchanged since
// (the same device, inode, size, mtime and compressed bytes): its result
// again, without inflating the whole file a second time. One run probes each
// file two or three times (its spec is compiled again for the run folder's
// plan, and the loader probes before it reads). `key` names the probe and
// its arguments. Files that are not gzip are probed every time.
ProbeResult remembered(const std::string& key, const std::string& path, const std::function<ProbeResult()>& probe);
// The loader adopted a remembered probe's inflated data (or could not use
// it): the memory lets go of it, and later probes of the file answer
// without it. "" lets go of every file's.
void forgetInflated(const std::string& path);

// Elements of `size` bytes, stored big-endian, to this (little-endian) host's order.
inline void swapToHost(std::vector<unsigned char>& bytes, int64_t size) {
  if (size <= 1) return;
  const size_t n = static_cast<size_t>(size);
  for (size_t k = 0; k + n <= bytes.size(); k += n)
    for (size_t a = k, b = k + n - 1; a < b; ++a, --b) std::swap(bytes[a], bytes[b]);
}

// The probes promise not to throw; this is the boundary.
template <class F>
ProbeResult guarded(const std::string& path, F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(path + ": ran out of memory while probing the file");
  } catch (const std::exception& e) {
    return fail(path + ": internal error while probing the file (" + e.what() + ")");
  } catch (...) {
    return fail(path + ": internal error while probing the file");
  }
}

}  // namespace dtl::rt::data::detail
