// dtl-print-region: a developer's look at the kernel generator. Builds one
// of a few example regions and prints it at a stage: the region, its LLVM
// IR for this machine (before or after O3), its NVPTX IR, or its PTX; with
// --time, how long the x86 JIT takes to compile it. `dtlc --emit=llvm|ptx`
// follows once regions come from the per-rank program (issue 11).
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>

#include "compiler/codegen/jit_x86.h"
#include "compiler/codegen/ptx.h"

namespace {

using namespace dtl::codegen;
using dtl::Shape;

const std::map<std::string, std::function<Region()>>& examples() {
  static const std::map<std::string, std::function<Region()>> all = {
      {"bias_relu",
       [] {
         Region r("bias_relu");
         int x = r.input("x", Shape{{{"batch", 256}, {"hidden", 1024}}});
         int b = r.input("bias", Shape{{{"hidden", 1024}}});
         r.output("y", r.unary(UnaryFn::Relu, r.binary(BinaryFn::Add, x, b)));
         return r;
       }},
      {"gelu_grad_bias",  // char GPT's MLP gradient and its bias's: a sum over batch and seq (deferred)
       [] {
         Region r("gelu_grad_bias");
         const Shape s{{{"batch", 32}, {"seq", 64}, {"hidden", 512}}};
         int dx = r.unaryGrad(UnaryFn::Gelu, r.input("x", s), r.input("dy", s));
         r.output("dx", dx);
         r.output("db", r.reduce(ReduceFn::Sum, r.reduce(ReduceFn::Sum, dx, "batch"), "seq"));
         return r;
       }},
      {"softmax",
       [] {
         Region r("softmax");
         r.output("y", r.softmax(r.input("logits", Shape{{{"batch", 256}, {"classes", 10}}}), "classes"));
         return r;
       }},
      {"log_softmax",
       [] {
         Region r("log_softmax");
         r.output("y", r.logSoftmax(r.input("logits", Shape{{{"batch", 256}, {"classes", 10}}}), "classes"));
         return r;
       }},
      {"gelu_residual",
       [] {
         Region r("gelu_residual");
         int x = r.input("x", Shape{{{"seq", 128}, {"d", 768}}});
         int res = r.input("residual", Shape{{{"seq", 128}, {"d", 768}}});
         r.output("y", r.binary(BinaryFn::Add, res, r.unary(UnaryFn::GeluTanh, x)));
         return r;
       }},
      {"layer_norm",
       [] {
         Region r("layer_norm");
         r.output("y", r.normalize(r.input("x", Shape{{{"seq", 128}, {"d", 768}}}), "d", 1e-5f));
         return r;
       }},
      {"layer_norm_grad",
       [] {
         Region r("layer_norm_grad");
         int x = r.input("x", Shape{{{"seq", 128}, {"d", 768}}});
         int dy = r.input("dy", Shape{{{"seq", 128}, {"d", 768}}});
         r.output("dx", r.normalizeGrad(x, dy, "d", 1e-5f));
         return r;
       }},
      {"gelu_tanh_grad",
       [] {
         Region r("gelu_tanh_grad");
         int x = r.input("x", Shape{{{"seq", 128}, {"d", 768}}});
         r.output("dx", r.unaryGrad(UnaryFn::GeluTanh, x, r.input("dy", Shape{{{"seq", 128}, {"d", 768}}})));
         return r;
       }},
  };
  return all;
}

int usage() {
  std::fprintf(stderr, "usage: dtl-print-region REGION [--emit=region|llvm|llvm-opt|nvptx|ptx] [--time]\nregions:");
  for (const auto& [name, make] : examples()) std::fprintf(stderr, " %s", name.c_str());
  std::fprintf(stderr, "\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !examples().count(argv[1])) return usage();
  Region r = examples().at(argv[1])();
  std::string emit = "region";
  bool time = false;
  for (int i = 2; i < argc; ++i) {
    if (std::strncmp(argv[i], "--emit=", 7) == 0)
      emit = argv[i] + 7;
    else if (std::strcmp(argv[i], "--time") == 0)
      time = true;
    else
      return usage();
  }
  if (emit == "region") {
    std::printf("%s", printRegion(r).c_str());
  } else if (emit == "llvm" || emit == "llvm-opt") {
    HostTarget h = hostTarget();
    std::printf("; host %s, cpu %s (avx2 %d, avx512f %d)\n%s", h.triple.c_str(), h.cpu.c_str(), h.avx2, h.avx512,
                x86Ir(r, emit == "llvm-opt").c_str());
  } else if (emit == "nvptx") {
    std::printf("%s", nvptxIr(r, true).c_str());
  } else if (emit == "ptx") {
    PtxModule m;
    std::string error;
    if (!compilePtx(r, &m, &error)) {
      std::fprintf(stderr, "dtl-print-region: %s\n", error.c_str());
      return 1;
    }
    for (const PtxKernel& k : m.kernels)
      std::printf("// kernel %s: %lld threads\n", k.name.c_str(), static_cast<long long>(k.threads));
    std::printf("%s", m.ptx.c_str());
  } else {
    return usage();
  }
  if (time) {
    std::string error;
    auto first = compileX86(r, &error);
    auto second = compileX86(r, &error);
    if (!first || !second) {
      std::fprintf(stderr, "dtl-print-region: %s\n", error.c_str());
      return 1;
    }
    std::fprintf(stderr, "x86 JIT compile: %.1f ms (first, includes starting LLJIT), %.1f ms (second)\n",
                 first->compileMs(), second->compileMs());
  }
  return 0;
}
