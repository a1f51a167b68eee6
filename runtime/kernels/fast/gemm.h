// Named contraction on one vendor SGEMM (oneDNN's dnnl_sgemm, row-major).
//
// Why oneDNN: it picks its kernels from CPUID on its own (AVX2, AVX-512, AMX),
// while Debian's OpenBLAS 0.3.21 misdetects the Sapphire Rapids CI machines
// and runs SSE3 kernels at ~20% of peak (27 vs 80–121 GFLOP/s) unless the
// user sets an environment variable (shared/design/measured.md). On an AMD
// EPYC (Zen 3, AVX2), where OpenBLAS does detect the CPU, the two were within
// 0.9–1.2x of each other on the MLP shapes, oneDNN 2x faster on the skinny
// ones (N or K = 10); bench/gemm_bench.cc measures both side by side.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/shape.h"

namespace dtl::rt::fast {

// C[M, N] = alpha · op(A) · op(B) + beta · C, row-major; trans 'N' or 'T'.
// Returns false (with a message) when the library reports an error.
bool sgemm(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc, std::string* error);

// The most OpenMP threads oneDNN's GEMMs may use on the calling thread
// (oneDNN follows omp_set_num_threads). Each sgemm sets the actual count only
// when it changes, and uses fewer threads for GEMMs too small to split.
void setGemmThreads(int threads);

// The skinny rule, exposed for its tests: the threads sgemm and matmulBias
// split an m × n × k product over (one single-threaded call each), 1 when
// it is not split — a dim of at most 16 and enough flops per thread.
int skinnyGemmThreads(int64_t m, int64_t n, int64_t k);

// Whether a GEMM with few rows runs as one column block per thread (gemm.cc
// columnBlocks), and one with a dim of at most 16 as one block of rows or
// columns per thread (gemm.cc skinnyThreads), on the calling thread: the
// rules, on by default; off only for bench/gemm_bench's comparisons.
void setGemmColumnSplit(bool on);

// Whether contract and contractBias copy a row-major B whose rows are a
// multiple of 2 KiB into padded rows where oneDNN reads B in place (gemm.cc
// padsRowsOfB), and contract a transposed A likewise (padsRowsOfA): by
// default the host's rule (AMD only, and only a B that starts 32-byte
// aligned); tests force either path on any host. The calling thread's.
// Padded or not, the results have the same bits.
void setGemmRowPadding(std::optional<bool> on);

// The rule, exposed for its tests: whether one oneDNN call of call_m rows
// and call_n columns (after the column split and the epilogue's panels)
// reading B (`tb`, n columns in all) gets B's rows padded; `b` is where B
// starts, or nullopt for a B permuted into scratch, placed later (padded
// whenever the shape asks).
bool padsRowsOfB(char tb, int64_t call_m, int64_t call_n, int64_t n, std::optional<uintptr_t> b);
// The same for a transposed A (`ta` 'T', stored [K, M], m columns): padded
// on AMD wherever it starts, for calls of at least 256 columns (gemm.cc), by
// contract only (matmulBias reads A dense); setGemmRowPadding forces it as
// it forces B's.
bool padsRowsOfA(char ta, int64_t call_m, int64_t call_n, int64_t m);

// How one contraction maps onto a GEMM. a's names split into M (a only, a's
// order) and K (shared); b's into K and N (b only). An operand is used in
// place when it is laid out as [M…, K…] / [K…, M…] (b: [K…, N…] / [N…, K…])
// with the K names in the order the other operand uses; otherwise it is
// permuted into scratch as [M…, K…] (b: [K…, N…]) first. Size-1 dims never
// matter for layout. The result is C[M…, N…]; if the node wants another
// order, it is computed in scratch and permuted.
struct ContractPlan {
  int64_t m = 1, n = 1, k = 1;
  char ta = 'N', tb = 'N';
  bool permute_a = false, permute_b = false, permute_c = false;
  Shape a_as, b_as, c_as;  // the layouts a, b and C are used in
};

ContractPlan planContract(const Shape& a, const Shape& b, const Shape& out);

// C[M, N] = op(A) · op(B) + bias (a row of N added to every row of C), row-major, A and C dense
// (lda and ldc are the rows' lengths), B's rows `ldb` floats apart (contractBias pads them as
// contract does), through oneDNN's matmul primitive with the bias as a post-op: the product
// rounded to f32 plus the bias in f32, the sum of an unfused add node. The primitive is created
// once per (M, N, K, transposes, B's row stride, threads) and calling thread, and reused.
bool matmulBias(char ta, char tb, int64_t m, int64_t n, int64_t k, const float* a, const float* b, int64_t ldb,
                const float* bias, float* c, std::string* error);

// What runs on a panel of C (whole rows, `elements` floats) right after
// the GEMM wrote it, while it is still in cache: the post-ops oneDNN cannot
// run with our numerics (relu: epilogue.cc).
using PanelFn = std::function<void(float* c, int64_t elements)>;

// The rows of C's panels in matmulBiasPanels: a fixed rule on the shape
// (never a timing, so runs repeat bitwise), in gemm.cc with its measurement.
int64_t epiloguePanelRows(int64_t m, int64_t n, int64_t k);

// matmulBias, then `after` on each panel: C's rows cut into ceil(m /
// panel_rows) panels of equal height (A's rows too, so only for ta == 'N';
// with 'T' one panel), each computed by one matmulBias call and handed to
// `after` at once.
bool matmulBiasPanels(char ta, char tb, int64_t m, int64_t n, int64_t k, const float* a, const float* b,
                      int64_t ldb, const float* bias, float* c, int64_t panel_rows, const PanelFn& after,
                      std::string* error);

// Whether contractBias can take this contraction: its result needs no
// permuting (C is [M…, N…]) and `bias` names exactly C's N names of size
// > 1, in C's order (a Linear's bias).
bool biasFits(const Shape& a, const Shape& b, const Shape& out, const Shape& bias);

// out[out_shape] = a @ b + bias over the N names (biasFits), by
// matmulBiasPanels: with `after`, in panels of epiloguePanelRows, `after` on
// each; without, in one call. B's rows are padded by contract's rule (padsRowsOfB).
bool contractBias(const float* a, const Shape& a_shape, const float* b, const Shape& b_shape, const float* bias,
                  float* out, const Shape& out_shape, std::vector<float>& scratch, std::string* error,
                  const PanelFn& after = {});

// out[out_shape] = a @ b; scratch is reused between calls.
bool contract(const float* a, const Shape& a_shape, const float* b, const Shape& b_shape, float* out,
              const Shape& out_shape, std::vector<float>& scratch, std::string* error);

// out[out_shape] = base + a @ b, base laid out as out (it may be out itself:
// in place, the planner's usual case). When the GEMM writes C straight into
// out, it adds the product itself (beta = 1); when C must be permuted into
// out's order, the permuted product is added after. The product's sum is
// not rounded to f32 before base joins it, so the result may differ from
// add(base, a @ b) in the last bits, as a GEMM's blocking may.
bool contractInto(const float* a, const Shape& a_shape, const float* b, const Shape& b_shape, const float* base,
                  float* out, const Shape& out_shape, std::vector<float>& scratch, std::string* error);

}  // namespace dtl::rt::fast
