// Internal to runtime/optim: the two builds of every per-element loop. On x86-64
// each loop is compiled twice, once for the baseline ISA and once with AVX2+FMA,
// and the FMA build is picked at run time; both round exactly alike because the
// library is compiled with -ffp-contract=off and spells every fused step std::fma.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#define DTL_OPTIM_FMA_CLONE 1
#define DTL_OPTIM_TARGET_FMA __attribute__((target("avx2,fma")))
#else
#define DTL_OPTIM_FMA_CLONE 0
#define DTL_OPTIM_TARGET_FMA
#endif

#if defined(__GNUC__)
#define DTL_OPTIM_INLINE inline __attribute__((always_inline))
#define DTL_OPTIM_RESTRICT __restrict__
#else
#define DTL_OPTIM_INLINE inline
#define DTL_OPTIM_RESTRICT
#endif

namespace dtl::rt::optim::detail {

// Tests set this to force the baseline build (true) and compare the builds.
inline bool& forceBaselineBuild() {
  static bool force = false;
  return force;
}

// True where the AVX2+FMA build of the loops runs; off x86-64 there is one
// build (whose std::fma is the hardware instruction or a correct library fmaf).
inline bool useFmaBuild() {
#if DTL_OPTIM_FMA_CLONE
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has && !forceBaselineBuild();
#else
  return false;
#endif
}

// Calls f.template operator()<b0, b1, ...>() with the run-time bools as
// template arguments, so option branches are resolved outside the loops.
template <bool... Done, class F>
void withBools(F&& f) {
  f.template operator()<Done...>();
}
template <bool... Done, class F, class... Rest>
void withBools(F&& f, bool b, Rest... rest) {
  if (b) {
    withBools<Done..., true>(f, rest...);
  } else {
    withBools<Done..., false>(f, rest...);
  }
}

}  // namespace dtl::rt::optim::detail
