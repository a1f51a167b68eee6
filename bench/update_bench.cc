// update_bench: the optimiser step's time for two parameter sets, `fast`
// (Optimizer::update tensor by tensor on one thread, what `--kernels fast`
// runs) next to the generated multi-tensor kernel (`--kernels jit`) on 1
// and 2 threads, interleaved round by round, with the memory-bandwidth
// bound beside them: the bytes the step must move over what one core (and
// two) can stream, measured here with a += s·b in place. The MLP's 37 MB
// may sit in the last-level cache, where that bound does not bind.
//
//   GPT-2 small: 148 tensors, 124,439,808 f32 parameters, AdamW (wd 0.1):
//                reads param, grad, exp_avg, exp_avg_sq, writes three: 28 B/element
//   MLP 784-1024-1024-10: 6 tensors, 1,863,690 parameters, SGD momentum 0.9:
//                reads param, grad, buffer, writes two: 20 B/element
//
//   Fashion MLP 784-512-512-10: 669,706 parameters, AdamW, with and without
//                subnormal first moments as late in the sample's training
//                (3.8% of them, in 63% of the 64-element blocks): 28 B/element
//
// "2 threads" is two threads however small the step (the runner's own
// threshold, kUpdateParallelElements, is lowered for the bench).
//
// build/bin/update_bench [--rounds N] [--only gpt2|mlp|fashion]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/jit/jit_update.h"

namespace {

using dtl::rt::optim::Optimizer;
using dtl::rt::optim::OptimizerConfig;
using dtl::rt::optim::ParamState;
using dtl::rt::optim::TensorStep;

struct ParamSet {
  std::string name;
  OptimizerConfig config;
  std::vector<int64_t> sizes;
  double bytes_per_element = 0;
  bool late = false;  // Fashion late in training: zero gradients and subnormal exp_avg (lateSubnormals)
};

ParamSet gpt2Small() {
  ParamSet s{"GPT-2 small (AdamW)", {}, {}, 28};
  s.config.name = "adamw";
  s.config.lr = 6e-4;
  s.config.weight_decay = 0.1;
  const int64_t d = 768, vocab = 50257, ctx = 1024, layers = 12;
  s.sizes = {vocab * d, ctx * d};
  for (int64_t l = 0; l < layers; ++l)
    for (int64_t n : {d, d, d * 3 * d, 3 * d, d * d, d, d, d, d * 4 * d, 4 * d, 4 * d * d, d}) s.sizes.push_back(n);
  s.sizes.push_back(d);
  s.sizes.push_back(d);
  return s;
}

// The Fashion-MNIST sample's parameters late in training (`late`): weights
// whose gradient stays exactly zero have an exp_avg decayed to subnormal
// (runtime/optim/subnormal.h). `late` false: the same step with normal
// moments, the cost without the rule.
ParamSet fashion(bool late) {
  ParamSet s{late ? "Fashion MLP (AdamW), subnormal exp_avg as late in training"
                  : "Fashion MLP (AdamW), no subnormal exp_avg",
             {}, {784 * 512, 512, 512 * 512, 512, 512 * 10, 10}, 28, late};
  s.config.name = "adamw";
  s.config.lr = 1e-3;
  s.config.weight_decay = 0.01;
  return s;
}

ParamSet mlp() {
  ParamSet s{"MLP 784-1024-1024-10 (SGD momentum)", {}, {784 * 1024, 1024, 1024 * 1024, 1024, 1024 * 10, 10}, 20};
  s.config.name = "sgd";
  s.config.lr = 0.05;
  s.config.momentum = 0.9;
  return s;
}

struct Model {
  std::vector<std::vector<float>> params, grads;
  std::vector<ParamState> states;
  std::vector<TensorStep> steps;
};

Model makeModel(const ParamSet& s) {
  Model m;
  for (int64_t n : s.sizes) {
    std::vector<float> p(static_cast<size_t>(n)), g(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      p[static_cast<size_t>(i)] = 0.01f * static_cast<float>(i % 97 - 48);
      g[static_cast<size_t>(i)] = 1e-3f * static_cast<float>(i % 31 - 15);
    }
    m.params.push_back(std::move(p));
    m.grads.push_back(std::move(g));
  }
  m.states.resize(s.sizes.size());
  for (size_t k = 0; k < s.sizes.size(); ++k)
    m.steps.push_back({"p" + std::to_string(k), m.params[k].data(), m.grads[k].data(), s.sizes[k], &m.states[k]});
  return m;
}

// Subnormal first moments placed as a `dtlc run` of the sample had them
// near step 1000 of its 1872 (counted in the run: 3.2% of all moments, in
// 63% of the 64-element blocks; none before step ~650), approximately:
// whole rows of fc2 and fc3, the weights out of ReLU units that stopped
// firing (7% of h1, 5% of h2), and 8 columns of fc1 (weights into h1
// units), one element in every block they cross: 3.8% of the moments, in
// 63% of the blocks. Their gradients are exactly 0; exp_avg = 1e-39 decays
// by 0.9 a step and stays subnormal for the whole bench (M ~ 713,000 falls
// to ~100 in 85 steps; rint(M·0.9) = M from M <= 4 on).
void lateSubnormals(Model& m) {
  auto dead = [&](size_t tensor, int64_t i) {
    m.grads[tensor][static_cast<size_t>(i)] = 0.0f;
    m.states[tensor].a[static_cast<size_t>(i)] = 1e-39f;
  };
  auto dead_h1 = [](int64_t u) { return u % 14 == 3; };  // 37 of 512
  auto dead_h2 = [](int64_t u) { return u % 19 == 5; };  // 27 of 512
  for (int64_t i = 0; i < 784 * 512; ++i)  // fc1.weight [pixels, h1]: 8 columns
    if (i % 64 == 3) dead(0, i);
  for (int64_t i = 0; i < 512 * 512; ++i)  // fc2.weight [h1, h2]
    if (dead_h1(i / 512)) dead(2, i);
  for (int64_t u = 0; u < 512; ++u)
    if (dead_h2(u)) dead(3, u);
  for (int64_t i = 0; i < 512 * 10; ++i)  // fc3.weight [h2, classes]
    if (dead_h2(i / 10)) dead(4, i);
}

double seconds(const std::chrono::steady_clock::time_point& a) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
}

// GB/s of a += s·b in place over two 256 MiB arrays (far past any cache)
// on `threads` threads: 12 bytes an element, the update's own pattern
// (every line written was read first, so no write-allocate traffic).
double streamGBs(int threads) {
  const size_t n = size_t{64} << 20;
  std::vector<float> av(n, 0.0f), bv(n, 1.0f);
  float* __restrict a = av.data();  // restrict: vectorised without overlap checks, as the update loops are
  const float* __restrict b = bv.data();
  double best = 1e30;
  for (int r = 0; r < 8; ++r) {
    auto t = std::chrono::steady_clock::now();
#pragma omp parallel for simd num_threads(threads) schedule(static)
    for (size_t i = 0; i < n; ++i) a[i] += 0.5f * b[i];
    best = std::min(best, seconds(t));
  }
  if (a[n / 2] != 4.0f) std::abort();  // keeps the loop
  return 12.0 * static_cast<double>(n) / best / 1e9;
}

std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string s;
  std::getline(f, s);
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void bench(const ParamSet& s, int rounds, double gbs1, double gbs2) {
  int64_t total = 0;
  for (int64_t n : s.sizes) total += n;
  Model m = makeModel(s);
  Optimizer opt(s.config);
  std::string error;
  dtl::jit::UpdateOptions two_means_two;
  two_means_two.parallel_elements = 0;  // "2 threads" is two, however small the step
  auto gen = dtl::jit::makeJitUpdate(s.config, two_means_two, &error);
  if (!gen) {
    std::fprintf(stderr, "update_bench: %s\n", error.c_str());
    std::exit(1);
  }
  int64_t step = 1;
  auto fast = [&] {
    for (const TensorStep& t : m.steps) opt.update(t.param, t.grad, t.n, *t.state, step, s.config.lr);
  };
  auto generated = [&](int threads) {
    if (std::string why = gen->run(opt, m.steps, step, s.config.lr, threads); !why.empty()) {
      std::fprintf(stderr, "update_bench: %s\n", why.c_str());
      std::exit(1);
    }
  };
  fast();  // the states exist and every page is touched before anything is timed
  ++step;
  if (s.late) lateSubnormals(m);
  std::vector<double> t_fast, t_gen1, t_gen2;
  for (int r = 0; r < rounds; ++r) {
    for (int k = 0; k < 3; ++k) {  // the order rotates round by round
      const int which = (k + r) % 3;
      auto t = std::chrono::steady_clock::now();
      if (which == 0) fast();
      if (which == 1) generated(1);
      if (which == 2) generated(2);
      (which == 0 ? t_fast : which == 1 ? t_gen1 : t_gen2).push_back(seconds(t) * 1e3);
      ++step;
    }
  }
  const double bytes = s.bytes_per_element * static_cast<double>(total);
  const double bound1 = bytes / (gbs1 * 1e9) * 1e3, bound2 = bytes / (gbs2 * 1e9) * 1e3;
  std::printf("\n%s: %zu tensors, %lld parameters, %.0f MB moved per step\n", s.name.c_str(), s.sizes.size(),
              static_cast<long long>(total), bytes / 1e6);
  std::printf("  %-34s %9s %9s %10s\n", "", "best ms", "median ms", "x bound");
  auto row = [&](const char* what, const std::vector<double>& t, double bound) {
    const double best = *std::min_element(t.begin(), t.end());
    std::printf("  %-34s %9.2f %9.2f %10.2f\n", what, best, median(t), best / bound);
  };
  row("fast, 1 thread, tensor by tensor", t_fast, bound1);
  row("generated multi-tensor, 1 thread", t_gen1, bound1);
  row("generated multi-tensor, 2 threads", t_gen2, bound2);
  std::printf("  %-34s %9.2f            (1 core %.1f GB/s)\n", "bandwidth bound, 1 core", bound1, gbs1);
  std::printf("  %-34s %9.2f            (2 cores %.1f GB/s)\n", "bandwidth bound, 2 cores", bound2, gbs2);
  std::printf("  fast / generated (best): %.2fx on 1 thread, %.2fx on 2\n",
              *std::min_element(t_fast.begin(), t_fast.end()) / *std::min_element(t_gen1.begin(), t_gen1.end()),
              *std::min_element(t_fast.begin(), t_fast.end()) / *std::min_element(t_gen2.begin(), t_gen2.end()));
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 7;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr, "usage: update_bench [--rounds N] [--only gpt2|mlp|fashion]\n");
      return 2;
    }
  }
  std::printf("load before: %s\n", loadavg().c_str());
  const double gbs1 = streamGBs(1), gbs2 = streamGBs(2);
  if (only.empty() || only == "mlp") bench(mlp(), rounds * 4, gbs1, gbs2);
  if (only.empty() || only == "fashion") {
    bench(fashion(false), rounds * 4, gbs1, gbs2);
    bench(fashion(true), rounds * 4, gbs1, gbs2);
  }
  if (only.empty() || only == "gpt2") bench(gpt2Small(), rounds, gbs1, gbs2);
  std::printf("\nload after: %s\n", loadavg().c_str());
  return 0;
}
