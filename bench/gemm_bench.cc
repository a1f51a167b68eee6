// GFLOP/s of the fast backend's Contract kernel (oneDNN SGEMM underneath) on
// 1024³ and the MLP 784→1024→1024→10 shapes at batch 256, forward and both
// backward layouts, against the 134 GFLOP/s FP32 single-core peak of the CI
// machines (shared/design/measured.md). When an OpenBLAS library can be
// loaded (default libopenblas.so.0, or --openblas=PATH) the same GEMMs run
// through its cblas_sgemm side by side and the ratio is printed; it is loaded
// with dlopen so the project never links or depends on it.
//
// Then the epilogue (runtime/kernels/fast/gemm.h matmulBiasPanels): for
// M 256, N 1024, K 784 and 1024, (a) matmulBias on the whole C then relu
// over C, against (b) the GEMM in panels of epiloguePanelRows rows, each
// relu'd right after (and other panel heights for comparison); and for the
// logits' N 10 (and 32 to 128), matmulBias against sgemm then a bias add,
// and plain sgemm. Then where a 2 KiB-strided B starts against padding its
// rows (the rule of gemm.cc padsRowsOfB). Each line times its variants alternately,
// best of reps.
//
//   gemm_bench [--threads=N] [--reps=N] [--openblas=PATH]
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "runtime/exec/backend.h"
#include "runtime/kernels/fast/gemm.h"
#include "runtime/kernels/fast/kernels.h"

namespace {

using dtl::Dim;
using dtl::Shape;
using dtl::rt::TensorView;

constexpr double kPeakGflops = 134.0;  // 2.1 GHz × 2 FMA ports × 16 lanes × 2

struct Case {
  const char* label;
  Shape a, b, out;  // the contraction a @ b → out
  int64_t m, n, k;
  char ta, tb;  // the same GEMM for cblas (row-major)
};

Shape sh(std::vector<Dim> d) { return Shape{std::move(d)}; }

std::vector<Case> cases() {
  const Dim M{"m", 1024}, N{"n", 1024}, K{"k", 1024};
  const Dim b{"batch", 256}, in{"in", 784}, h{"hidden", 1024}, h2{"hidden2", 1024}, c{"classes", 10};
  return {
      {"1024^3            ", sh({M, K}), sh({K, N}), sh({M, N}), 1024, 1024, 1024, 'N', 'N'},
      {"fc1  fwd 256x784x1024 ", sh({b, in}), sh({in, h}), sh({b, h}), 256, 1024, 784, 'N', 'N'},
      {"fc1  dW  784x256x1024 ", sh({b, in}), sh({b, h}), sh({in, h}), 784, 1024, 256, 'T', 'N'},
      {"fc2  fwd 256x1024x1024", sh({b, h}), sh({h, h2}), sh({b, h2}), 256, 1024, 1024, 'N', 'N'},
      {"fc2  dX  256x1024x1024", sh({b, h2}), sh({h, h2}), sh({b, h}), 256, 1024, 1024, 'N', 'T'},
      {"fc2  dW  1024x256x1024", sh({b, h}), sh({b, h2}), sh({h, h2}), 1024, 1024, 256, 'T', 'N'},
      {"fc3  fwd 256x1024x10  ", sh({b, h2}), sh({h2, c}), sh({b, c}), 256, 10, 1024, 'N', 'N'},
      {"fc3  dX  256x10x1024  ", sh({b, c}), sh({h2, c}), sh({b, h2}), 256, 1024, 10, 'N', 'T'},
      {"fc3  dW  1024x256x10  ", sh({b, h2}), sh({b, c}), sh({h2, c}), 1024, 10, 256, 'T', 'N'},
  };
}

TensorView view(std::vector<float>& v, const Shape& s) {
  TensorView t;
  t.shape = s;
  t.data = v.data();
  t.elements = static_cast<int64_t>(v.size());
  return t;
}

// Best-of-reps seconds for one call of f and of g (after a warm-up call of
// each), the two timed alternately so that the machine's slow periods (it is
// shared and noisy) fall on both alike; g may be empty.
template <class F, class G>
std::pair<double, double> bestSeconds(int reps, F&& f, G&& g, bool with_g) {
  auto time = [](auto& fn) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  f();
  if (with_g) g();
  double bf = 1e30, bg = 1e30;
  for (int r = 0; r < reps; ++r) {
    bf = std::min(bf, time(f));
    if (with_g) bg = std::min(bg, time(g));
  }
  return {bf, bg};
}

using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                            int);
struct OpenBlas {
  CblasSgemm sgemm = nullptr;
  const char* core = "?";
};

OpenBlas loadOpenBlas(const std::string& path, int threads) {
  OpenBlas ob;
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) return ob;
  ob.sgemm = reinterpret_cast<CblasSgemm>(dlsym(lib, "cblas_sgemm"));
  if (auto set = reinterpret_cast<void (*)(int)>(dlsym(lib, "openblas_set_num_threads"))) set(threads);
  if (auto name = reinterpret_cast<char* (*)()>(dlsym(lib, "openblas_get_corename"))) ob.core = name();
  return ob;
}

// Best and median seconds of each function, timed in turn each rep.
std::vector<std::pair<double, double>> bestAndMedian(int reps, const std::vector<std::function<void()>>& fs) {
  std::vector<std::vector<double>> t(fs.size());
  for (const auto& f : fs) f();
  for (int r = 0; r < reps; ++r)
    for (size_t i = 0; i < fs.size(); ++i) {
      auto t0 = std::chrono::steady_clock::now();
      fs[i]();
      t[i].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  std::vector<std::pair<double, double>> out;
  for (auto& v : t) {
    std::sort(v.begin(), v.end());
    out.emplace_back(v.front(), v[v.size() / 2]);
  }
  return out;
}

// Best-of-reps seconds of each function, timed in turn each rep.
std::vector<double> bestOf(int reps, const std::vector<std::function<void()>>& fs) {
  std::vector<double> best;
  for (auto [b, median] : bestAndMedian(reps, fs)) best.push_back(b);
  return best;
}

// n floats ~ N(0, 1).
std::vector<float> normals(std::mt19937& rng, int64_t n) {
  std::normal_distribution<float> nd;
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = nd(rng);
  return v;
}

void ok(bool done, const std::string& err) {
  if (!done) std::fprintf(stderr, "%s\n", err.c_str()), std::abort();
}

void epilogueSection(int threads, int reps) {
  namespace f = dtl::rt::fast;
  f::setGemmThreads(threads);
  std::mt19937 rng(2);
  auto randv = [&](int64_t n) { return normals(rng, n); };
  std::string err;
  const f::PanelFn relu = [](float* c, int64_t n) { f::reluInPlace(c, n); };
  std::printf("\nepilogue, N 1024: (a) matmulBias on all of C, then relu over C; (b) panels, relu each\n");
  std::printf("%-11s %10s %12s %20s %10s %10s\n", "M K", "(a) us", "no relu us", "(b) rule us (rows)", "M/2 rows",
              "M/4 rows");
  for (auto [m, k] : {std::pair<int64_t, int64_t>{256, 784}, {256, 1024}, {1024, 1024}}) {
    const int64_t n = 1024;
    std::vector<float> a = randv(m * k), b = randv(k * n), bias = randv(n), c(static_cast<size_t>(m * n));
    const int64_t rule = f::epiloguePanelRows(m, n, k);
    auto whole = [&] { ok(f::matmulBias('N', 'N', m, n, k, a.data(), b.data(), n, bias.data(), c.data(), &err), err); };
    auto panels = [&](int64_t rows) {
      return [&, rows] { ok(f::matmulBiasPanels('N', 'N', m, n, k, a.data(), b.data(), n, bias.data(), c.data(), rows, relu, &err), err); };
    };
    const std::vector<double> t = bestOf(reps, {[&] {
                                                  whole();
                                                  f::reluInPlace(c.data(), m * n);
                                                },
                                                whole, panels(rule), panels(m / 2), panels(m / 4)});
    std::printf("%4lld %-6lld %10.1f %12.1f %13.1f (%4lld) %10.1f %10.1f   (b)/(a) %.3f\n", static_cast<long long>(m),
                static_cast<long long>(k), t[0] * 1e6, t[1] * 1e6, t[2] * 1e6, static_cast<long long>(rule), t[3] * 1e6,
                t[4] * 1e6, t[2] / t[0]);
  }
  std::printf("\nsmall N, M 256 K 1024: matmulBias, sgemm then a bias add, plain sgemm\n");
  std::printf("%-8s %12s %14s %12s %16s\n", "N", "matmul us", "sgemm+bias us", "sgemm us", "matmul/(sgemm+b)");
  for (int64_t n : {10, 32, 64, 128}) {
    const int64_t m = 256, k = 1024;
    std::vector<float> a = randv(m * k), b = randv(k * n), bias = randv(n), c(static_cast<size_t>(m * n));
    const std::vector<double> t = bestOf(
        reps, {[&] { ok(f::matmulBias('N', 'N', m, n, k, a.data(), b.data(), n, bias.data(), c.data(), &err), err); },
               [&] {
                 ok(f::sgemm('N', 'N', m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n, &err), err);
                 for (int64_t r = 0; r < m; ++r)
                   for (int64_t j = 0; j < n; ++j) c[static_cast<size_t>(r * n + j)] += bias[static_cast<size_t>(j)];
               },
               [&] { ok(f::sgemm('N', 'N', m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n, &err), err); }});
    std::printf("%-8lld %12.1f %14.1f %12.1f %16.2f\n", static_cast<long long>(n), t[0] * 1e6, t[1] * 1e6, t[2] * 1e6,
                t[0] / t[1]);
  }
}

// gemm.cc's column blocks (and, for fc3, its skinny blocks of rows or
// columns) against oneDNN's own threading on the same call, alternately:
// the MLP's contractions and its forward matmuls with a bias.
void columnSection(int threads, int reps) {
  namespace f = dtl::rt::fast;
  if (threads < 2) return;
  f::setGemmThreads(threads);
  std::mt19937 rng(3);
  auto randv = [&](int64_t n) { return normals(rng, n); };
  std::string err;
  std::printf("\ncolumn (or skinny) blocks, one single-threaded call per thread, against oneDNN's %d threads "
              "(GFLOP/s best / median)\n",
              threads);
  std::printf("%-26s %18s %18s %8s\n", "call (MxKxN)", "blocks", "oneDNN", "best");
  auto line = [&](const std::string& label, double flop, const std::function<void()>& call) {
    const auto t = bestAndMedian(reps, {[&] {
                                          f::setGemmColumnSplit(true);
                                          call();
                                        },
                                        [&] {
                                          f::setGemmColumnSplit(false);
                                          call();
                                        }});
    f::setGemmColumnSplit(true);
    std::printf("%-26s %8.1f / %7.1f %8.1f / %7.1f %7.2fx\n", label.c_str(), flop / t[0].first / 1e9,
                flop / t[0].second / 1e9, flop / t[1].first / 1e9, flop / t[1].second / 1e9, t[1].first / t[0].first);
  };
  for (const Case& c : cases()) {
    std::vector<float> a = randv(c.m * c.k), b = randv(c.k * c.n), y(static_cast<size_t>(c.m * c.n));
    const int64_t lda = c.ta == 'N' ? c.k : c.m, ldb = c.tb == 'N' ? c.n : c.k;
    line(std::string("sgemm ") + c.label, 2.0 * c.m * c.n * c.k, [&] {
      ok(f::sgemm(c.ta, c.tb, c.m, c.n, c.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, y.data(), c.n, &err), err);
    });
  }
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{256, 784, 1024}, {256, 1024, 1024}, {256, 1024, 10}}) {
    std::vector<float> a = randv(m * k), b = randv(k * n), bias = randv(n), y(static_cast<size_t>(m * n));
    line("matmulBias " + std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n), 2.0 * m * n * k,
         [&] { ok(f::matmulBias('N', 'N', m, n, k, a.data(), b.data(), n, bias.data(), y.data(), &err), err); });
  }
}

// Where B starts, against padding its rows (gemm.cc padsRowsOfB): a row-major B
// whose rows are a multiple of 2 KiB, read in place by oneDNN's AVX2 kernels
// (small M), at 0, 16, 32 and 48 bytes past a 64-byte boundary, unpadded
// against copied into rows padded by 64 bytes (the copy inside the time),
// alternately, best of reps. The rule pads only a B that starts 32-byte
// aligned, on AMD hosts.
void alignmentSection(int threads, int reps) {
  namespace f = dtl::rt::fast;
  f::setGemmThreads(threads);
  f::setGemmColumnSplit(true);
  std::mt19937 rng(5);
  std::string err;
  std::printf("\nB's start and padded rows (ms, best of %d; unpadded / padded with the copy)\n", reps);
  struct Shape3 {
    const char* label;
    char ta;
    int64_t m, n, k;
  };
  constexpr int64_t kPad = 16;  // floats, as gemm.cc's kPadRows
  for (const Shape3& c : {Shape3{"MLP fc2 forward", 'N', 256, 1024, 1024},
                          Shape3{"Fashion fc1 forward", 'N', 128, 512, 784},
                          Shape3{"char GPT fc1 dW", 'T', 128, 512, 2048}}) {
    std::vector<float> a = normals(rng, c.m * c.k), b = normals(rng, c.k * c.n + 64), y(static_cast<size_t>(c.m * c.n));
    std::vector<float> padded(static_cast<size_t>(c.k * (c.n + kPad) + 16));
    // 64-byte boundaries inside the vectors (their data is 16-byte aligned).
    auto at64 = [](std::vector<float>& v) {
      const auto p = reinterpret_cast<uintptr_t>(v.data());
      return v.data() + ((64 - p % 64) % 64) / 4;
    };
    float* b0 = at64(b);
    float* pad0 = at64(padded);
    std::printf("%-20s %c%c %4lldx%4lldx%4lld:", c.label, c.ta, 'N', static_cast<long long>(c.m),
                static_cast<long long>(c.n), static_cast<long long>(c.k));
    const int64_t lda = c.ta == 'N' ? c.k : c.m;
    auto gemm = [&](const float* bb, int64_t ldb) {
      ok(f::sgemm(c.ta, 'N', c.m, c.n, c.k, 1.0f, a.data(), lda, bb, ldb, 0.0f, y.data(), c.n, &err), err);
    };
    for (int64_t off : {0, 4, 8, 12}) {
      const float* bb = b0 + off;
      const std::vector<double> t = bestOf(reps, {[&] { gemm(bb, c.n); },
                                                  [&] {
                                                    for (int64_t r = 0; r < c.k; ++r)
                                                      std::memcpy(pad0 + r * (c.n + kPad), bb + r * c.n,
                                                                  static_cast<size_t>(c.n) * 4);
                                                    gemm(pad0, c.n + kPad);
                                                  }});
      std::printf("  +%2lld: %.2f / %.2f", static_cast<long long>(off * 4), t[0] * 1e3, t[1] * 1e3);
    }
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, reps = 5;
  std::string openblas = "libopenblas.so.0";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--threads=", 0) == 0) threads = std::max(1, std::stoi(a.substr(10)));
    else if (a.rfind("--reps=", 0) == 0) reps = std::max(1, std::stoi(a.substr(7)));
    else if (a.rfind("--openblas=", 0) == 0) openblas = a.substr(11);
    else return std::fprintf(stderr, "usage: gemm_bench [--threads=N] [--reps=N] [--openblas=PATH]\n"), 2;
  }
  auto fast = dtl::rt::makeFastBackend();
  dtl::rt::RunContext ctx;
  ctx.threads = threads;
  OpenBlas ob = loadOpenBlas(openblas, threads);
  std::string blas = ob.sgemm ? openblas + " (core " + ob.core + ")" : "not loaded";
  std::printf("threads %d, best of %d; peak %.0f GFLOP/s per core (CI machine); OpenBLAS: %s\n", threads, reps,
              kPeakGflops, blas.c_str());
  std::printf("%-24s %10s %8s %12s %8s\n", "contraction (MxKxN)", "dtl GF/s", "% peak", "OpenBLAS GF/s", "ratio");
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (const Case& c : cases()) {
    std::vector<float> a(static_cast<size_t>(c.a.elements().value())), b(static_cast<size_t>(c.b.elements().value()));
    std::vector<float> y(static_cast<size_t>(c.out.elements().value()));
    for (float& v : a) v = nd(rng);
    for (float& v : b) v = nd(rng);
    dtl::ir::Node n;
    n.op = dtl::ir::Op::Contract;
    n.shape = c.out;
    TensorView va = view(a, c.a), vb = view(b, c.b), vy = view(y, c.out);
    std::vector<const TensorView*> in = {&va, &vb};
    const double flop = 2.0 * static_cast<double>(c.m) * static_cast<double>(c.n) * static_cast<double>(c.k);
    std::vector<float> z(y.size());
    // Row-major cblas with the same transposes the plan uses for these layouts.
    const int lda = c.ta == 'N' ? static_cast<int>(c.k) : static_cast<int>(c.m);
    const int ldb = c.tb == 'N' ? static_cast<int>(c.n) : static_cast<int>(c.k);
    auto [t, tb] = bestSeconds(
        reps, [&] { if (!fast->run(n, in, vy, ctx).ok) std::abort(); },
        [&] {
          ob.sgemm(101, c.ta == 'N' ? 111 : 112, c.tb == 'N' ? 111 : 112, static_cast<int>(c.m),
                   static_cast<int>(c.n), static_cast<int>(c.k), 1.0f, a.data(), lda, b.data(), ldb, 0.0f, z.data(),
                   static_cast<int>(c.n));
        },
        ob.sgemm != nullptr);
    double gf = flop / t / 1e9;
    std::printf("%-24s %10.1f %7.0f%%", c.label, gf, 100.0 * gf / (kPeakGflops * threads));
    if (ob.sgemm) {
      double diff = 0;
      for (size_t i = 0; i < z.size(); ++i) diff = std::max(diff, static_cast<double>(std::fabs(z[i] - y[i])));
      std::printf(" %12.1f %7.2fx  (max |diff| %.1e)", flop / tb / 1e9, tb / t, diff);
    }
    std::printf("\n");
  }
  epilogueSection(threads, std::max(reps, 20));
  columnSection(threads, std::max(reps, 20));
  alignmentSection(threads, std::max(reps, 10));
  return 0;
}
