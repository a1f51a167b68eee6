// Internal to the fast kernels: vector versions of expf, logf, erff and tanhf.
// glibc's libmvec has SSE, AVX2 and AVX-512 variants of them, but its headers
// only announce them under -ffast-math, which we do not want (it would change
// NaN handling and summation order everywhere). Declaring the functions
// `omp declare simd` here lets `#pragma omp simd` loops call the variant
// matching each target_clones build (about 20x faster than scalar libm here,
// within 2e-7 relative). Include this before any loop that calls std::exp,
// std::log, std::erf or std::tanh on floats. Without libmvec (DTL_HAVE_LIBMVEC
// unset) the loops call scalar libm and stay correct.
#pragma once

#include <cmath>

#if defined(DTL_HAVE_LIBMVEC) && defined(__GLIBC__) && defined(__x86_64__) && defined(__GNUC__) && \
    !defined(__clang__)
extern "C" {
#pragma omp declare simd notinbranch
float expf(float) noexcept;
#pragma omp declare simd notinbranch
float logf(float) noexcept;
#pragma omp declare simd notinbranch
float erff(float) noexcept;
#pragma omp declare simd notinbranch
float tanhf(float) noexcept;
}
#endif
