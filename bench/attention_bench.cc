// attention_bench: the figures issue 11 asks of the fused attention kernels
// (not a test). Causal attention, batch 1, heads 12, head_dim 64, at seq
// 1024 and 4096: forward and backward time and scratch bytes of the kernels
// before fusion (attention_unfused.cc: P materialised per head, three
// backward nodes) against the fused ones (runtime/kernels/fast/attention.cc),
// on 1 and 2 threads; median of RUNS after one warm-up. It also prints the
// largest difference between the two paths' results, as a sanity check.
// usage: attention_bench [--batch B] [--heads H] [--dim D] [RUNS] [SEQ…]
//   (defaults: batch 1, heads 12, dim 64, 3 runs, seq 1024 4096; char GPT's
//   heads are --batch 32 --heads 4 --dim 32 … 64)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench/attention_unfused.h"
#include "runtime/kernels/fast/gemm.h"
#include "runtime/kernels/fast/kernels.h"

namespace {

using namespace dtl;
using rt::TensorView;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Tensor {
  Shape shape;
  std::vector<float> data;
  Tensor(Shape s, std::mt19937* rng) : shape(std::move(s)), data(static_cast<size_t>(shape.elements().value())) {
    std::normal_distribution<float> d(0.0f, 1.0f);
    if (rng)
      for (float& v : data) v = d(*rng);
  }
  TensorView view() {
    TensorView v;
    v.shape = shape;
    v.data = data.data();
    v.elements = static_cast<int64_t>(data.size());
    return v;
  }
};

// Median milliseconds of `runs` calls of f after one warm-up; exits on an error.
double medianMs(int runs, const std::function<std::string()>& f) {
  std::vector<double> ms;
  for (int r = 0; r <= runs; ++r) {
    const double t = now();
    if (std::string err = f(); !err.empty()) {
      std::fprintf(stderr, "attention_bench: %s\n", err.c_str());
      std::exit(1);
    }
    if (r > 0) ms.push_back((now() - t) * 1e3);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

double maxDiff(const Tensor& a, const Tensor& b) {
  double d = 0;
  for (size_t k = 0; k < a.data.size(); ++k) d = std::max(d, std::fabs(static_cast<double>(a.data[k]) - b.data[k]));
  return d;
}

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, bytes >= (1 << 20) ? "%.1f MiB" : "%.1f KiB",
                static_cast<double>(bytes) / (bytes >= (1 << 20) ? 1 << 20 : 1 << 10));
  return buf;
}

struct Layout {
  int64_t batch = 1, heads = 12, dim = 64;
};

void bench(const Layout& at, int64_t seq, int threads, int runs) {
  const Shape qs{{{"batch", at.batch}, {"seq", seq}, {"heads", at.heads}, {"head_dim", at.dim}}};
  const Shape ls{{{"batch", at.batch}, {"seq", seq}, {"heads", at.heads}}};
  std::mt19937 rng(7);
  Tensor q(qs, &rng), k(qs, &rng), v(qs, &rng), dy(qs, &rng);
  Tensor y_old(qs, nullptr), y(qs, nullptr), lse(ls, nullptr);
  Tensor g_old[3] = {Tensor(qs, nullptr), Tensor(qs, nullptr), Tensor(qs, nullptr)};
  Tensor g[3] = {Tensor(qs, nullptr), Tensor(qs, nullptr), Tensor(qs, nullptr)};
  TensorView qv = q.view(), kv = k.view(), vv = v.view(), dyv = dy.view(), yov = y_old.view(), yv = y.view(),
             lv = lse.view();
  TensorView gov[3] = {g_old[0].view(), g_old[1].view(), g_old[2].view()};
  TensorView gv[3] = {g[0].view(), g[1].view(), g[2].view()};
  rt::fast::Scratch s_old, s;
  rt::fast::setGemmThreads(threads);
  const double old_fwd = medianMs(runs, [&] { return rt::fast::attentionUnfused(qv, kv, vv, true, yov, s_old); });
  const double old_bwd = medianMs(runs, [&] {
    for (int which = 0; which < 3; ++which)
      if (std::string err = rt::fast::attentionGradUnfused(qv, kv, vv, dyv, true, which, gov[which], s_old); !err.empty())
        return err;
    return std::string();
  });
  const int64_t old_fwd_bytes = seq * seq * 4, old_bwd_bytes = 2 * seq * seq * 4;  // P; P and dP (one head's)
  const double fwd = medianMs(runs, [&] { return rt::fast::attention(qv, kv, vv, true, yv, lv, threads, s); });
  const double bwd = medianMs(runs, [&] {
    return rt::fast::attentionGrad(qv, kv, vv, yv, lv, dyv, true, gv[0], gv[1], gv[2], threads, s);
  });
  double diff = maxDiff(y, y_old);
  for (int k3 = 0; k3 < 3; ++k3) diff = std::max(diff, maxDiff(g[k3], g_old[k3]));
  // Milliseconds to three places where the kernels are small (char GPT's heads).
  if (old_fwd < 10)
    std::printf("| %lld | %d | %.3f / %.3f ms | %.3f / %.3f ms", static_cast<long long>(seq), threads, old_fwd, fwd,
                old_bwd, bwd);
  else
    std::printf("| %lld | %d | %.0f / %.0f ms | %.0f / %.0f ms", static_cast<long long>(seq), threads, old_fwd, fwd,
                old_bwd, bwd);
  std::printf(" | %s / %s | %s / %s | %.1e |\n", mib(old_fwd_bytes).c_str(),
              mib(rt::fast::attentionScratchBytes(qs, qs, false, threads)).c_str(), mib(old_bwd_bytes).c_str(),
              mib(rt::fast::attentionScratchBytes(qs, qs, true, threads)).c_str(), diff);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Layout at;
  std::vector<std::string> rest;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    int64_t* field = arg == "--batch" ? &at.batch : arg == "--heads" ? &at.heads : arg == "--dim" ? &at.dim : nullptr;
    if (field && a + 1 < argc) {
      *field = std::max<int64_t>(1, std::atoll(argv[++a]));
    } else if (field || arg.rfind("--", 0) == 0) {
      std::fprintf(stderr, "usage: attention_bench [--batch B] [--heads H] [--dim D] [RUNS] [SEQ...]\n");
      return 2;
    } else {
      rest.push_back(arg);
    }
  }
  const int runs = !rest.empty() ? std::max(1, std::atoi(rest[0].c_str())) : 3;
  std::vector<int64_t> seqs;
  for (size_t a = 1; a < rest.size(); ++a) seqs.push_back(std::atoll(rest[a].c_str()));
  if (seqs.empty()) seqs = {1024, 4096};
  std::printf("causal attention, batch %lld, heads %lld, head_dim %lld; before fusion / fused, median of %d\n",
              static_cast<long long>(at.batch), static_cast<long long>(at.heads), static_cast<long long>(at.dim), runs);
  std::printf("| seq | threads | forward | backward (dq, dk, dv) | forward scratch | backward scratch | max diff |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (int64_t seq : seqs)
    for (int threads : {1, 2}) bench(at, seq, threads, runs);
  return 0;
}
