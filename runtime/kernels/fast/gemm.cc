// Contraction planning and the oneDNN SGEMM call.
#include "runtime/kernels/fast/gemm.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <cstring>

#include "runtime/kernels/fast/strided.h"

namespace dtl::rt::fast {

bool sgemm(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc, std::string* error) {
  dnnl_status_t st = dnnl_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (st == dnnl_success) return true;
  if (error)
    *error = "dnnl_sgemm(" + std::string(1, ta) + std::string(1, tb) + ", M=" + std::to_string(m) +
             ", N=" + std::to_string(n) + ", K=" + std::to_string(k) + ") failed with status " +
             std::to_string(static_cast<int>(st));
  return false;
}

void setGemmThreads(int threads) {
  // omp_set_num_threads sets the calling thread's ICV, so remember per thread.
  thread_local int current = 0;
  if (threads < 1) threads = 1;
  if (threads == current) return;
  omp_set_num_threads(threads);
  current = threads;
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

bool contract(const float* a, const Shape& a_shape, const float* b, const Shape& b_shape, float* out,
              const Shape& out_shape, std::vector<float>& scratch, std::string* error) {
  ContractPlan p = planContract(a_shape, b_shape, out_shape);
  if (p.m == 0 || p.n == 0) return true;
  if (p.k == 0) {  // an empty sum
    std::memset(out, 0, static_cast<size_t>(p.m * p.n) * sizeof(float));
    return true;
  }
  // One scratch block: [a copy | b copy | C], each part only when needed.
  const int64_t na = p.permute_a ? p.m * p.k : 0, nb = p.permute_b ? p.k * p.n : 0;
  const int64_t nc = p.permute_c ? p.m * p.n : 0;
  if (static_cast<int64_t>(scratch.size()) < na + nb + nc) scratch.resize(static_cast<size_t>(na + nb + nc));
  float* sa = scratch.data();
  float* sb = sa + na;
  float* sc = sb + nb;
  if (p.permute_a) alignCopy(a, a_shape, sa, p.a_as);
  if (p.permute_b) alignCopy(b, b_shape, sb, p.b_as);
  const int64_t lda = p.ta == 'N' ? p.k : p.m, ldb = p.tb == 'N' ? p.n : p.k;
  float* c = p.permute_c ? sc : out;
  if (!sgemm(p.ta, p.tb, p.m, p.n, p.k, 1.0f, p.permute_a ? sa : a, lda, p.permute_b ? sb : b, ldb, 0.0f, c, p.n,
             error))
    return false;
  if (p.permute_c) alignCopy(sc, p.c_as, out, out_shape);
  return true;
}

}  // namespace dtl::rt::fast
