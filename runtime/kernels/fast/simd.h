// How the fast kernels (and the data loader's synthetic values) vectorise
// hot loops without any global -march flag (the binary must run on any
// x86-64). Each hot loop function is cloned for AVX-512, AVX2+FMA and the
// baseline, and the dynamic loader picks the best clone for the CPU (GCC
// function multiversioning); the loop itself carries `#pragma omp simd`,
// because GCC 12 at -O2 otherwise refuses loops that need a remainder
// epilogue.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DTL_FAST_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DTL_FAST_CLONES
#endif

#define DTL_PRAGMA(x) _Pragma(#x)
#define DTL_SIMD DTL_PRAGMA(omp simd)
#define DTL_SIMD_SUM(var) DTL_PRAGMA(omp simd reduction(+ : var))
#define DTL_SIMD_MAX(var) DTL_PRAGMA(omp simd reduction(max : var))
#define DTL_RESTRICT __restrict__
