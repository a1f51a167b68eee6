// Strided spaces and the data movement built on them (align, sum-to, slice).
#include "runtime/kernels/fast/strided.h"

#include <algorithm>
#include <cstring>

#include "runtime/kernels/fast/simd.h"

namespace dtl::rt::fast {

std::vector<int64_t> rowMajor(const Shape& s) {
  std::vector<int64_t> st(s.rank(), 1);
  for (size_t d = s.rank(); d-- > 1;) st[d - 1] = st[d] * s.dims[d].size;
  return st;
}

std::vector<int64_t> stridesIn(const Shape& part, const Shape& space) {
  std::vector<int64_t> pst = rowMajor(part), st(space.rank(), 0);
  for (size_t d = 0; d < space.rank(); ++d) {
    int j = part.find(space.dims[d].name);
    if (j >= 0) st[d] = pst[static_cast<size_t>(j)];
  }
  return st;
}

int64_t count(const Shape& s) {
  int64_t n = 1;
  for (const Dim& d : s.dims) n *= d.size;
  return n;
}

Space makeSpace(const Shape& shape, const std::vector<std::vector<int64_t>>& strides) {
  Space s;
  s.operands = static_cast<int>(strides.size());
  for (size_t d = 0; d < shape.rank(); ++d) {
    int64_t n = shape.dims[d].size;
    if (n == 0) s.empty = true;
    if (n == 1) continue;  // visits one coordinate: no loop needed
    Offsets st{};
    for (int k = 0; k < s.operands; ++k) st[k] = strides[k][d];
    // Merge into the previous (outer) dim when every operand steps across the
    // boundary as if the two were one dim: outer stride = inner stride × size.
    if (!s.size.empty()) {
      bool merge = true;
      for (int k = 0; k < s.operands; ++k) merge = merge && s.stride.back()[k] == st[k] * n;
      if (merge) {
        s.size.back() *= n;
        s.stride.back() = st;
        continue;
      }
    }
    s.size.push_back(n);
    s.stride.push_back(st);
  }
  return s;
}

namespace {

DTL_FAST_CLONES void gather32(uint32_t* DTL_RESTRICT dst, const uint32_t* DTL_RESTRICT src, int64_t step, int64_t n) {
  DTL_SIMD
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i * step];
}

void copyRun(uint32_t* dst, const uint32_t* src, int64_t step, int64_t n) {
  if (step == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n) * 4);
  } else if (step == 0) {
    const uint32_t v = *src;
    for (int64_t i = 0; i < n; ++i) dst[i] = v;
  } else {
    gather32(dst, src, step, n);
  }
}

// dst[i·ds] += src[i] for a run of src (unit stride): ds = 0 is a reduction.
DTL_FAST_CLONES void accumulateRun(float* DTL_RESTRICT dst, int64_t ds, const float* DTL_RESTRICT src, int64_t n) {
  if (ds == 0) {
    float acc = 0;
    DTL_SIMD_SUM(acc)
    for (int64_t i = 0; i < n; ++i) acc += src[i];
    *dst += acc;
  } else if (ds == 1) {
    DTL_SIMD
    for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i * ds] += src[i];
  }
}

}  // namespace

namespace {

// The dim (other than the innermost) along which the source is contiguous,
// when the innermost dst run gathers with a large stride: a transpose.
int transposedDim(const Space& s) {
  const size_t r = s.size.size();
  if (r < 2 || s.stride[r - 1][1] == 1 || s.stride[r - 1][1] == 0) return -1;
  for (size_t d = r - 1; d-- > 0;)
    if (s.stride[d][1] == 1) return static_cast<int>(d);
  return -1;
}

// A transpose copied in 64×64 tiles through a local buffer: each source row
// segment is read whole (one cache line at a time, contiguous) and each
// destination row segment written whole, so power-of-two strides cannot make
// the tile's lines evict each other. ~5x faster than a plain gather here.
void tiledTranspose(const Space& s, int p, uint32_t* d, const uint32_t* x) {
  constexpr int64_t kTile = 64;
  const size_t r = s.size.size();
  Space outer;  // every dim but p and the innermost
  outer.operands = 2;
  for (size_t k = 0; k + 1 < r; ++k)
    if (static_cast<int>(k) != p) {
      outer.size.push_back(s.size[k]);
      outer.stride.push_back(s.stride[k]);
    }
  const int64_t np = s.size[static_cast<size_t>(p)], ni = s.size[r - 1];
  const int64_t dp = s.stride[static_cast<size_t>(p)][0], si = s.stride[r - 1][1];
  uint32_t tile[kTile][kTile];
  // d[j·dp + i] = x[j + i·si] for j < np, i < ni, from the given bases.
  auto transpose = [&](uint32_t* dd, const uint32_t* xx) {
    for (int64_t ib = 0; ib < ni; ib += kTile)
      for (int64_t jb = 0; jb < np; jb += kTile) {
        const int64_t je = std::min(np - jb, kTile), ie = std::min(ni - ib, kTile);
        for (int64_t i = 0; i < ie; ++i)
          for (int64_t j = 0; j < je; ++j) tile[j][i] = xx[jb + j + (ib + i) * si];
        for (int64_t j = 0; j < je; ++j)
          for (int64_t i = 0; i < ie; ++i) dd[(jb + j) * dp + ib + i] = tile[j][i];
      }
  };
  forEachRun(outer, [&](const Offsets& off, int64_t n, const Offsets& in) {
    for (int64_t k = 0; k < n; ++k) transpose(d + off[0] + k * in[0], x + off[1] + k * in[1]);
  });
}

}  // namespace

void alignCopy(const void* src, const Shape& src_shape, void* dst, const Shape& dst_shape) {
  Space s = makeSpace(dst_shape, {rowMajor(dst_shape), stridesIn(src_shape, dst_shape)});
  auto* d = static_cast<uint32_t*>(dst);
  const auto* x = static_cast<const uint32_t*>(src);
  if (int p = transposedDim(s); p >= 0 && !s.empty) return tiledTranspose(s, p, d, x);
  forEachRun(s, [&](const Offsets& off, int64_t n, const Offsets& in) { copyRun(d + off[0], x + off[1], in[1], n); });
}

void sumTo(const float* src, const Shape& src_shape, float* dst, const Shape& dst_shape) {
  std::memset(dst, 0, static_cast<size_t>(count(dst_shape)) * sizeof(float));
  Space s = makeSpace(src_shape, {stridesIn(dst_shape, src_shape), rowMajor(src_shape)});
  forEachRun(s, [&](const Offsets& off, int64_t n, const Offsets& in) {
    // The source is row-major over its own space, so its runs have unit stride.
    accumulateRun(dst + off[0], in[0], src + off[1], n);
  });
}

namespace {

// The copy's shape (full without `name`) and, over it, the full tensor's
// strides; `base` is where copy `index` starts.
struct SliceMap {
  Shape copy;
  std::vector<int64_t> full_strides;
  int64_t base = 0;
};

SliceMap sliceMap(const Shape& full, const std::string& name, int64_t index) {
  SliceMap m;
  std::vector<int64_t> st = rowMajor(full);
  for (size_t d = 0; d < full.rank(); ++d) {
    if (full.dims[d].name == name) {
      m.base = index * st[d];
      continue;
    }
    m.copy.dims.push_back(full.dims[d]);
    m.full_strides.push_back(st[d]);
  }
  return m;
}

}  // namespace

void sliceCopy(const void* full, const Shape& full_shape, const std::string& name, int64_t index, void* copy) {
  SliceMap m = sliceMap(full_shape, name, index);
  Space s = makeSpace(m.copy, {rowMajor(m.copy), m.full_strides});
  auto* d = static_cast<uint32_t*>(copy);
  const auto* x = static_cast<const uint32_t*>(full) + m.base;
  forEachRun(s, [&](const Offsets& off, int64_t n, const Offsets& in) { copyRun(d + off[0], x + off[1], in[1], n); });
}

void sliceScatter(const void* copy, const Shape& full_shape, const std::string& name, int64_t index, void* full) {
  SliceMap m = sliceMap(full_shape, name, index);
  Space s = makeSpace(m.copy, {m.full_strides, rowMajor(m.copy)});
  auto* d = static_cast<uint32_t*>(full) + m.base;
  const auto* x = static_cast<const uint32_t*>(copy);
  forEachRun(s, [&](const Offsets& off, int64_t n, const Offsets& in) {
    if (in[0] == 1) {
      std::memcpy(d + off[0], x + off[1], static_cast<size_t>(n) * 4);
    } else {
      for (int64_t i = 0; i < n; ++i) d[off[0] + i * in[0]] = x[off[1] + i];
    }
  });
}

void sliceGather(const std::vector<const TensorView*>& copies, const Shape& full_shape, const std::string& name,
                 int64_t first, void* full) {
  const int d = full_shape.find(name);
  const int64_t size = full_shape.dims[static_cast<size_t>(d)].size, k = static_cast<int64_t>(copies.size());
  const int64_t last = first + k;  // exclusive
  if (first > 0 || last < size) {
    if (d == 0) {  // leading dim: the missing copies are two contiguous blocks
      const int64_t per = count(full_shape) / std::max<int64_t>(size, 1);
      auto* f = static_cast<uint32_t*>(full);
      std::memset(f, 0, static_cast<size_t>(first * per) * 4);
      std::memset(f + last * per, 0, static_cast<size_t>((size - last) * per) * 4);
    } else {
      std::memset(full, 0, static_cast<size_t>(count(full_shape)) * 4);
    }
  }
  for (int64_t c = 0; c < k; ++c) {
    const void* src = copies[static_cast<size_t>(c)]->data;
    if (d == 0) {
      const int64_t per = copies[static_cast<size_t>(c)]->elements;
      const uint32_t* dst = static_cast<const uint32_t*>(full) + (first + c) * per;
      if (src == dst) continue;  // written in place by its producer
    }
    sliceScatter(src, full_shape, name, first + c, full);
  }
}

}  // namespace dtl::rt::fast
