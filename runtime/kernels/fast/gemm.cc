// Contraction planning and the oneDNN SGEMM call.
#include "runtime/kernels/fast/gemm.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>

#include "runtime/kernels/fast/strided.h"

namespace dtl::rt::fast {

namespace {

thread_local int requested_threads = 1;  // from setGemmThreads
thread_local int omp_threads = 0;        // what omp_set_num_threads last set on this thread
thread_local bool split_columns = true;  // setGemmColumnSplit
thread_local std::optional<bool> pad_rows;  // setGemmRowPadding: unset, the host's rule

// Small GEMMs run on one thread: splitting them costs more in OpenMP wake-ups
// and barriers than it saves. Measured on 2 busy cores: 256×1024×10 ran at
// ~1 GFLOP/s on 2 threads against ~55 on one. Below this many flops per
// thread, use fewer threads.
constexpr double kMinFlopsPerThread = 32e6;

int threadsFor(int64_t m, int64_t n, int64_t k) {
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  int t = requested_threads;
  while (t > 1 && flops < kMinFlopsPerThread * t) --t;
  return t;
}

void applyThreads(int64_t m, int64_t n, int64_t k) {
  const int t = threadsFor(m, n, k);
  if (t == omp_threads) return;  // omp_set_num_threads is not free; it sets the calling thread's ICV
  omp_set_num_threads(t);
  omp_threads = t;
}

// oneDNN splits a GEMM with few rows (M = 256: the MLP's batch, GPT-2's
// tokens) less well over 2 threads than one single-threaded call per core
// on its own block of columns: gemm_bench's column section (Sapphire
// Rapids, 2 cores, the two alternated, best of 40) 256×1024×1024 'NT'
// 1.10–1.20x, 'NN' and 256×784×1024 1.06–1.14x; with M ≥ 512 (the weight
// gradients) oneDNN's own partition is as fast or faster (0.92–0.99x). No
// block splits K. The bits are fixed for a given thread count (the rule
// depends on the shape and the count alone); across counts they may differ
// in the last place, as oneDNN's own threading may: it picks a kernel per
// call from N and the strides, and a block is a narrower call (the suite's
// thread-count tests have found the same bits so far). Blocks are whole
// cache lines of columns.
constexpr int64_t kSplitBelowRows = 512;
constexpr int64_t kMinBlockColumns = 64;

int64_t columnBlocks(int64_t m, int64_t n, int threads) {
  if (!split_columns || threads < 2 || m >= kSplitBelowRows) return 1;
  return std::clamp<int64_t>(n / kMinBlockColumns, 1, threads);
}

// Block q's first column of n in `blocks`: a multiple of 16 floats, the last block ends at n.
int64_t blockStart(int64_t q, int64_t blocks, int64_t n) {
  return q == blocks ? n : n * q / blocks / 16 * 16;
}

// A GEMM with a dim of at most kSkinnyDim — a classifier's logits (N = 10)
// and their two gradients (K = 10; N = 10 with A transposed) — is far below
// threadsFor's bar, and oneDNN's own partition of it ran at ~1 GFLOP/s on 2
// threads. Split by us instead, one single-threaded call per thread on its
// block of C's rows (or of its columns, when C is wider than tall), it runs
// at twice one thread's rate: 256×1024×10 'NN' 48.6 µs against 95.8 on one
// thread, 256×10×1024 'NT' 56.4 against 106.6, 1024×256×10 'TN' 102.6
// against 200.7, Fashion's 128×512×10 12.4 against 23.2 (a scratch driver
// over dnnl_sgemm, best of 300, the Zen 3; gemm_bench's column section).
// The rule reads the shape and the thread count only, so bits repeat run to
// run; a row block is a shorter call, which may round otherwise than the
// whole (as the column split above).
constexpr int64_t kSkinnyDim = 16;
constexpr double kMinSkinnyFlopsPerThread = 0.5e6;

int skinnyThreads(int64_t m, int64_t n, int64_t k) {
  if (!split_columns || std::min({m, n, k}) > kSkinnyDim) return 1;
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  int t = requested_threads;
  while (t > 1 && flops < kMinSkinnyFlopsPerThread * t) --t;
  return t;
}

// One single-threaded call per block, on `blocks` threads: blocks of C's rows
// (`by_rows`, the skinny rule) or of its columns (blockStart: the column rule
// above, and a skinny C wider than tall). Empty blocks make no call.
dnnl_status_t blockCalls(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                         const float* b, int64_t ldb, float beta, float* c, int64_t ldc, int blocks, bool by_rows) {
  dnnl_status_t st = dnnl_success;
#pragma omp parallel for num_threads(blocks) schedule(static, 1)
  for (int q = 0; q < blocks; ++q) {
    omp_set_num_threads(1);  // this worker's calls: oneDNN plans for one thread
    dnnl_status_t s = dnnl_success;
    if (by_rows) {
      const int64_t r0 = m * q / blocks, r1 = m * (q + 1) / blocks;
      if (r1 > r0)
        s = dnnl_sgemm(ta, tb, r1 - r0, n, k, alpha, ta == 'N' ? a + r0 * lda : a + r0, lda, b, ldb, beta,
                       c + r0 * ldc, ldc);
    } else {
      const int64_t j0 = blockStart(q, blocks, n), j1 = blockStart(q + 1, blocks, n);
      if (j1 > j0)
        s = dnnl_sgemm(ta, tb, m, j1 - j0, k, alpha, a, lda, tb == 'N' ? b + j0 : b + j0 * ldb, ldb, beta, c + j0,
                       ldc);
    }
    if (s != dnnl_success) {
#pragma omp critical(dtl_sgemm_status)
      st = s;
    }
  }
  return st;
}

std::string sgemmError(char ta, char tb, int64_t m, int64_t n, int64_t k, dnnl_status_t st) {
  return "dnnl_sgemm(" + std::string(1, ta) + std::string(1, tb) + ", M=" + std::to_string(m) +
         ", N=" + std::to_string(n) + ", K=" + std::to_string(k) + ") failed with status " +
         std::to_string(static_cast<int>(st));
}

}  // namespace

bool sgemm(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc, std::string* error) {
  dnnl_status_t st = dnnl_success;
  if (const int t = skinnyThreads(m, n, k); t > 1) {
    st = blockCalls(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, t, m >= n);
  } else {
    applyThreads(m, n, k);
    const auto blocks = static_cast<int>(columnBlocks(m, n, omp_threads));
    st = blocks == 1 ? dnnl_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
                     : blockCalls(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, blocks, false);
  }
  if (st == dnnl_success) return true;
  if (error) *error = sgemmError(ta, tb, m, n, k, st);
  return false;
}

void setGemmThreads(int threads) { requested_threads = threads < 1 ? 1 : threads; }

int skinnyGemmThreads(int64_t m, int64_t n, int64_t k) { return skinnyThreads(m, n, k); }

void setGemmColumnSplit(bool on) { split_columns = on; }

void setGemmRowPadding(std::optional<bool> on) { pad_rows = on; }

namespace {

// A matmul primitive and its memory objects, whose data handles each call sets.
struct Matmul {
  dnnl::matmul primitive;
  dnnl::memory a, b, bias, c;
};

// oneDNN sizes its blocking and thread partition for the threads present
// when a primitive is created: the key holds the count it was made for, so
// a thread count never runs a primitive planned for another one (results
// are bitwise the same from run to run for a given count).
using MatmulKey = std::tuple<int64_t, int64_t, int64_t, int64_t, char, char, int>;

struct MatmulCache {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<MatmulKey, std::unique_ptr<Matmul>> made;
};

// Per calling thread, as the thread count is (setGemmThreads): a backend runs on one thread.
MatmulCache& matmulCache() {
  thread_local MatmulCache cache;
  return cache;
}

Matmul& matmulFor(char ta, char tb, int64_t m, int64_t n, int64_t k, int64_t ldb) {
  MatmulCache& cache = matmulCache();
  std::unique_ptr<Matmul>& mm = cache.made[MatmulKey{m, n, k, ldb, ta, tb, omp_threads}];
  if (mm) return *mm;
  using dnnl::memory;
  const memory::data_type f32 = memory::data_type::f32;
  // op(A) is [M, K]: A stored as [M, K] ('N') or [K, M] ('T'); op(B) [K, N] likewise, its rows ldb apart.
  const memory::desc a({m, k}, f32, ta == 'N' ? memory::dims{k, 1} : memory::dims{1, m});
  const memory::desc b({k, n}, f32, tb == 'N' ? memory::dims{ldb, 1} : memory::dims{1, ldb});
  const memory::desc bias({1, n}, f32, memory::dims{n, 1});
  const memory::desc c({m, n}, f32, memory::dims{n, 1});
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, bias, c), cache.engine);
  mm = std::make_unique<Matmul>(Matmul{dnnl::matmul(pd), memory(a, cache.engine, nullptr), memory(b, cache.engine, nullptr),
                                       memory(bias, cache.engine, nullptr), memory(c, cache.engine, nullptr)});
  return *mm;
}

}  // namespace

bool matmulBias(char ta, char tb, int64_t m, int64_t n, int64_t k, const float* a, const float* b, int64_t ldb,
                const float* bias, float* c, std::string* error) {
  if (const int t = skinnyThreads(m, n, k); t > 1) {
    // Split as sgemm's, then the bias: the primitive's arithmetic (the product rounded to f32, plus the bias in f32).
    const dnnl_status_t st = blockCalls(ta, tb, m, n, k, 1.0f, a, ta == 'N' ? k : m, b, ldb, 0.0f, c, n, t, m >= n);
    if (st != dnnl_success) {
      if (error) *error = sgemmError(ta, tb, m, n, k, st) + " (a matmul with a bias, split)";
      return false;
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * n + j] += bias[j];
    return true;
  }
  applyThreads(m, n, k);
  try {
    Matmul& mm = matmulFor(ta, tb, m, n, k, ldb);
    mm.a.set_data_handle(const_cast<float*>(a));
    mm.b.set_data_handle(const_cast<float*>(b));
    mm.bias.set_data_handle(const_cast<float*>(bias));
    mm.c.set_data_handle(c);
    MatmulCache& cache = matmulCache();
    mm.primitive.execute(cache.stream, {{DNNL_ARG_SRC, mm.a}, {DNNL_ARG_WEIGHTS, mm.b}, {DNNL_ARG_BIAS, mm.bias},
                                        {DNNL_ARG_DST, mm.c}});
    cache.stream.wait();
  } catch (const dnnl::error& e) {
    if (error)
      *error = "oneDNN matmul(" + std::string(1, ta) + std::string(1, tb) + ", M=" + std::to_string(m) +
               ", N=" + std::to_string(n) + ", K=" + std::to_string(k) + ") with a bias failed: " + e.what();
    return false;
  }
  return true;
}

namespace {

// Panels of at least this many bytes of C and kMinPanelRows rows: each
// matmul call re-reads (and oneDNN re-blocks) all of B, which a panel's rows
// must amortise, and on 2 threads each call is a fork and a join more.
// gemm_bench's epilogue section (N 1024, K 1024; a loaded 2-core Sapphire
// Rapids, best of 30-40): M 256 whole 4.86 ms on 1 thread, in 2 panels of
// 128 rows 5.71, in 4 of 64 6.51 (2 threads: 5.6-6.9, 11.0-12.6, 23-27);
// M 1024 whole 22.1 ms, in 4 panels of 256 rows 21.6 on 1 thread but 30.7-31.5
// against 23.9-24.3 on 2. So a C of up to 4 MiB (the MLP's [256, 1024] is 1
// MiB, in the 2 MiB L2; 4 MiB is in the 105 MiB L3) is one panel: relu runs
// right after the one GEMM call, over C as the GEMM left it in cache.
constexpr int64_t kPanelBytes = 4 << 20;
constexpr int64_t kMinPanelRows = 256;

// The rows of matmulBiasPanels's calls with A untransposed: ceil(m / panel_rows) equal panels.
int64_t panelHeight(int64_t m, int64_t panel_rows) {
  const int64_t panels = (m + std::max<int64_t>(1, panel_rows) - 1) / std::max<int64_t>(1, panel_rows);
  return (m + panels - 1) / std::max<int64_t>(1, panels);
}

}  // namespace

int64_t epiloguePanelRows(int64_t m, int64_t n, int64_t k) {
  (void)k;
  const int64_t rows = std::max<int64_t>(kMinPanelRows, kPanelBytes / (4 * std::max<int64_t>(n, 1)));
  return std::min(rows, std::max<int64_t>(m, 1));
}

bool matmulBiasPanels(char ta, char tb, int64_t m, int64_t n, int64_t k, const float* a, const float* b,
                      int64_t ldb, const float* bias, float* c, int64_t panel_rows, const PanelFn& after,
                      std::string* error) {
  if (m == 0 || n == 0) return true;
  // Panels of equal height (none a sliver): ceil(m / panel_rows) of them.
  const int64_t rows = ta == 'N' ? panelHeight(m, panel_rows) : m;
  for (int64_t r = 0; r < m; r += rows) {
    const int64_t h = std::min(rows, m - r);
    if (!matmulBias(ta, tb, h, n, k, a + r * k, b, ldb, bias, c + r * n, error)) return false;
    if (after) after(c + r * n, h * n);
  }
  return true;
}

namespace {

using Names = std::vector<std::string>;

// Names of the dims that affect memory layout (size > 1), in order.
Names big(const std::vector<Dim>& dims) {
  Names out;
  for (const Dim& d : dims)
    if (d.size != 1) out.push_back(d.name);
  return out;
}

Names cat(Names a, const Names& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Shape join(const Shape& a, const Shape& b) {
  Shape s = a;
  s.dims.insert(s.dims.end(), b.dims.begin(), b.dims.end());
  return s;
}

// Which of the two in-place layouts an operand has: [first…, second…] → 'N',
// [second…, first…] → 'T', neither → 0.
char layoutOf(const Shape& x, const Shape& first, const Shape& second) {
  Names bx = big(x.dims), f = big(first.dims), s = big(second.dims);
  if (bx == cat(f, s)) return 'N';
  if (bx == cat(s, f)) return 'T';
  return 0;
}

}  // namespace

ContractPlan planContract(const Shape& a, const Shape& b, const Shape& out) {
  Shape m, ka, kb, n;
  for (const Dim& d : a.dims) (b.has(d.name) ? ka : m).dims.push_back(d);
  for (const Dim& d : b.dims) (a.has(d.name) ? kb : n).dims.push_back(d);
  ContractPlan p;
  p.m = count(m);
  p.n = count(n);
  p.k = count(ka);
  char la = layoutOf(a, m, ka), lb = layoutOf(b, kb, n);
  bool keep_a = la != 0, keep_b = lb != 0;
  if (keep_a && keep_b && big(ka.dims) != big(kb.dims)) {
    // Both usable but their K orders differ: permute the smaller operand.
    if (count(b) <= count(a)) keep_b = false;
    else keep_a = false;
  }
  const Shape& k_order = keep_a || !keep_b ? ka : kb;
  p.permute_a = !keep_a;
  p.permute_b = !keep_b;
  p.ta = keep_a ? la : 'N';
  p.tb = keep_b ? lb : 'N';
  p.a_as = keep_a ? a : join(m, k_order);
  p.b_as = keep_b ? b : join(k_order, n);
  p.c_as = join(m, n);
  p.permute_c = big(out.dims) != big(p.c_as.dims);
  return p;
}

namespace {

// oneDNN 2.6 reads a row-major B ('N') in place, unpacked, when a call's M
// and N are small (gemm_driver.cpp, its "nocopy" kernels). On AMD, such a B
// whose rows are a multiple of 2 KiB apart runs at about half speed when it
// starts 32-byte aligned, and at full speed 16 bytes further on or with its
// rows padded by 64 bytes; where malloc puts a tensor changes from run to
// run, and so did which GEMM of a step was slow. There a B that starts
// 32-byte aligned is copied with padded rows; elsewhere the copy costs as
// much as it saves or more. Figures (bench/gemm_bench's last section) and
// the Intel measurement that keeps other hosts unpadded: bench/README.md,
// "B's rows on AMD". The copy is O(K·N) against the GEMM's O(M·K·N). It
// changes no bits (EpilogueTest.PaddedRowsOfBGiveTheUnpaddedBits), so the
// rule may look at the address: where malloc put B sets the speed, never
// the results.
constexpr int64_t kPadRows = 16;  // floats: one cache line
bool hostPadsRows() {
#if defined(__x86_64__)
  static const bool amd = [] {
    __builtin_cpu_init();
    return __builtin_cpu_is("amd") != 0;
  }();
  return amd;
#else
  return false;
#endif
}

// The first of oneDNN 2.6's tests for reading A and B in place, for the
// kernels it runs here (nocopy_checker_avx2 / _avx512: 1/M + 1/N at or above
// 0.0038 / 0.00196): sufficient, not the whole rule; its other cases are
// smaller calls. Measured on AVX2 only (an AMD host with AVX-512 is not
// measured either way).
bool readsInPlace(int64_t m, int64_t n) {
  static const double threshold = [] {
    const int isa = static_cast<int>(dnnl_get_effective_cpu_isa());
    return (isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core ? 0.00196 : 0.0038;
  }();
  return 1.0 / static_cast<double>(std::max<int64_t>(m, 1)) + 1.0 / static_cast<double>(std::max<int64_t>(n, 1)) >=
         threshold;
}

// On the GEMM's threads: a copy on one left the other core idle (Fashion's
// fc2 forward in a jit_bench step, B's 512×512 copied: 0.152 → 0.046 ms).
void padRows(float* dst, const float* src, int64_t rows, int64_t n) {
  const int threads = requested_threads;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1 && rows * n >= (int64_t{1} << 16))
  for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * (n + kPadRows), src + r * n, static_cast<size_t>(n) * 4);
}

}  // namespace

bool padsRowsOfB(char tb, int64_t call_m, int64_t call_n, int64_t n, std::optional<uintptr_t> b) {
  if (tb != 'N' || n % 512 != 0 || !readsInPlace(call_m, call_n)) return false;
  return pad_rows.value_or(hostPadsRows() && (!b || *b % 32 == 0));
}

// A transposed A (stored [K, M], a weight gradient's activations) read in
// place with rows a multiple of 2 KiB runs at the same reduced speed on AMD,
// wherever it starts: Fashion's fc2 weight gradient ('TN' 512×128×512, the
// Zen 3, two threads, best of 200) 125–126 GFLOP/s at offsets 0, 16 and 32
// bytes, 170 with A's rows padded by 64 bytes (174–175 with B's padded
// too). The copy, K·M floats against the product's 2·M·N·K flops, must be
// small: char_gpt's fc1 weight gradients ('TN' 512×2048×128) ran 131 → 175
// GFLOP/s padded alone (2.05 → 1.54 ms), but in a step the 4 MiB copy took
// that back (jit_bench profile, alternated: no faster), so only a call of
// at least kPadAColumns columns pads A. Intel hosts are not measured for A.
constexpr int64_t kPadAColumns = 256;
bool padsRowsOfA(char ta, int64_t call_m, int64_t call_n, int64_t m) {
  if (ta != 'T' || m % 512 != 0 || call_n < kPadAColumns || !readsInPlace(call_m, call_n)) return false;
  return pad_rows.value_or(hostPadsRows());
}

namespace {

// The columns of sgemm's first call: its block of the column split.
int64_t sgemmCallColumns(int64_t m, int64_t n, int64_t k) {
  return blockStart(1, columnBlocks(m, n, threadsFor(m, n, k)), n);
}

// A and B as the GEMM reads them: in place, or permuted into scratch (the
// plan's layouts), B's rows (and a transposed A's) then padded (padsRowsOfB,
// padsRowsOfA, for oneDNN calls of call_m × call_n); `rest` is the scratch past them, `extra` floats sized
// for the caller.
struct GemmOperands {
  const float *a, *b;
  int64_t lda, ldb;
  float* rest;
};

// `pad_a`: whether A's rows may be padded too (padsRowsOfA); matmulBias reads A dense.
GemmOperands gemmOperands(const ContractPlan& p, const float* a, const Shape& a_shape, const float* b,
                          const Shape& b_shape, std::vector<float>& scratch, int64_t extra, int64_t call_m,
                          int64_t call_n, bool pad_a) {
  // A B permuted into scratch is placed later: it is padded whenever the shape asks (a second copy).
  const std::optional<uintptr_t> at =
      p.permute_b ? std::nullopt : std::optional<uintptr_t>(reinterpret_cast<uintptr_t>(b));
  const bool pad = padsRowsOfB(p.tb, call_m, call_n, p.n, at);
  pad_a = pad_a && padsRowsOfA(p.ta, call_m, call_n, p.m);
  const int64_t na = p.permute_a ? p.m * p.k : 0, nb = p.permute_b ? p.k * p.n : 0;
  const int64_t np = pad ? p.k * (p.n + kPadRows) : 0, npa = pad_a ? p.k * (p.m + kPadRows) : 0;
  if (static_cast<int64_t>(scratch.size()) < na + nb + np + npa + extra)
    scratch.resize(static_cast<size_t>(na + nb + np + npa + extra));
  float* sa = scratch.data();
  float* sb = sa + na;
  float* sp = sb + nb;
  float* spa = sp + np;
  if (p.permute_a) alignCopy(a, a_shape, sa, p.a_as);
  if (p.permute_b) alignCopy(b, b_shape, sb, p.b_as);
  GemmOperands o{p.permute_a ? sa : a, p.permute_b ? sb : b, p.ta == 'N' ? p.k : p.m, p.tb == 'N' ? p.n : p.k,
                 spa + npa};
  if (pad) {
    padRows(sp, o.b, p.k, p.n);
    o.b = sp;
    o.ldb = p.n + kPadRows;
  }
  if (pad_a) {  // Aᵀ: K rows of M
    padRows(spa, o.a, p.k, p.m);
    o.a = spa;
    o.lda = p.m + kPadRows;
  }
  return o;
}

// Elements a plan copies (operands or C permuted through scratch).
int64_t copied(const ContractPlan& p) {
  return (p.permute_a ? p.m * p.k : 0) + (p.permute_b ? p.k * p.n : 0) + (p.permute_c ? p.m * p.n : 0);
}

// The GEMM into out; with `accumulate`, out already holds the base the
// product is added to.
bool gemmInto(const float* a, const Shape& a_shape, const float* b, const Shape& b_shape, float* out,
              const Shape& out_shape, bool accumulate, std::vector<float>& scratch, std::string* error) {
  ContractPlan p = planContract(a_shape, b_shape, out_shape);
  if (p.permute_c) {
    // out wants [N…, M…]: b @ a gives that order directly (Cᵀ = Bᵀ·Aᵀ), e.g.
    // a weight's gradient [vocab, d] from x [tokens, d] and dy [tokens, vocab].
    ContractPlan q = planContract(b_shape, a_shape, out_shape);
    if (copied(q) < copied(p)) return gemmInto(b, b_shape, a, a_shape, out, out_shape, accumulate, scratch, error);
  }
  if (p.m == 0 || p.n == 0) return true;
  if (p.k == 0) {  // an empty sum: 0, added as add(base, 0) would (−0 becomes +0)
    if (!accumulate) std::memset(out, 0, static_cast<size_t>(p.m * p.n) * sizeof(float));
    else
      for (int64_t i = 0; i < p.m * p.n; ++i) out[i] += 0.0f;
    return true;
  }
  // Scratch: [operand copies | C | C permuted], each part only when needed.
  const int64_t nc = p.permute_c ? p.m * p.n : 0, nd = p.permute_c && accumulate ? p.m * p.n : 0;
  const GemmOperands o =
      gemmOperands(p, a, a_shape, b, b_shape, scratch, nc + nd, p.m, sgemmCallColumns(p.m, p.n, p.k), true);
  float* sc = o.rest;
  float* sd = sc + nc;
  float* c = p.permute_c ? sc : out;
  const float beta = accumulate && !p.permute_c ? 1.0f : 0.0f;  // C = A·B + C: the base is out
  if (!sgemm(p.ta, p.tb, p.m, p.n, p.k, 1.0f, o.a, o.lda, o.b, o.ldb, beta, c, p.n, error))
    return false;
  if (!p.permute_c) return true;
  if (!accumulate) {
    alignCopy(sc, p.c_as, out, out_shape);
    return true;
  }
  alignCopy(sc, p.c_as, sd, out_shape);
  for (int64_t i = 0; i < p.m * p.n; ++i) out[i] += sd[i];
  return true;
}

}  // namespace

bool contract(const float* a, const Shape& a_shape, const float* b, const Shape& b_shape, float* out,
              const Shape& out_shape, std::vector<float>& scratch, std::string* error) {
  return gemmInto(a, a_shape, b, b_shape, out, out_shape, false, scratch, error);
}

bool contractInto(const float* a, const Shape& a_shape, const float* b, const Shape& b_shape, const float* base,
                  float* out, const Shape& out_shape, std::vector<float>& scratch, std::string* error) {
  if (base != out) std::memcpy(out, base, static_cast<size_t>(count(out_shape)) * sizeof(float));
  return gemmInto(a, a_shape, b, b_shape, out, out_shape, true, scratch, error);
}

bool biasFits(const Shape& a, const Shape& b, const Shape& out, const Shape& bias) {
  const ContractPlan p = planContract(a, b, out);
  if (p.permute_c) return false;
  Shape n;
  for (const Dim& d : b.dims)
    if (!a.has(d.name)) n.dims.push_back(d);
  for (const Dim& d : bias.dims)
    if (!n.has(d.name) || n.dims[static_cast<size_t>(n.find(d.name))].size != d.size) return false;
  return big(bias.dims) == big(n.dims);
}

bool contractBias(const float* a, const Shape& a_shape, const float* b, const Shape& b_shape, const float* bias,
                  float* out, const Shape& out_shape, std::vector<float>& scratch, std::string* error,
                  const PanelFn& after) {
  const ContractPlan p = planContract(a_shape, b_shape, out_shape);
  if (p.m == 0 || p.n == 0) return true;
  if (p.k == 0) {  // an empty sum: the bias, as 0 + bias
    for (int64_t r = 0; r < p.m; ++r)
      for (int64_t j = 0; j < p.n; ++j) out[r * p.n + j] = 0.0f + bias[j];
    if (after) after(out, p.m * p.n);
    return true;
  }
  // Operands laid out otherwise are permuted into scratch, and B's rows padded, as for contract.
  const int64_t rows = after ? epiloguePanelRows(p.m, p.n, p.k) : p.m;  // nothing to run on panels: one call
  const int64_t call_m = p.ta == 'N' ? panelHeight(p.m, rows) : p.m;  // matmulBiasPanels: one panel for Aᵀ
  const GemmOperands o = gemmOperands(p, a, a_shape, b, b_shape, scratch, 0, call_m, p.n, false);
  return matmulBiasPanels(p.ta, p.tb, p.m, p.n, p.k, o.a, o.b, o.ldb, bias, out, rows, after, error);
}

}  // namespace dtl::rt::fast
