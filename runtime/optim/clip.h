// Global gradient-norm clipping, PyTorch 1.13's clip_grad_norm_(max_norm,
// norm_type=2) reproduced to the bit on f32 gradients.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace dtl::rt::optim {

// The 2-norm of x[0, n) in f32, accumulated in PyTorch 1.13's CPU order (the
// AVX2 kernel as built by GCC): 8 lanes of fused x*x + acc over the first
// n - n % 8 elements, the lanes summed left to right, then of the remaining r
// elements the first 4 (if r >= 4) added as rounded squares, the rest fused;
// finally sqrt. 0 for n = 0.
float normTwo(const float* x, int64_t n);

// Whether x[0, n) holds no NaN and no infinity (an exponent of all ones):
// the check before every update (step_guard.h), so it must cost little — an
// integer max over the exponent bits, 8 lanes wide (~30 GB/s with AVX2 on one
// core, against ~5 for the plain loop).
bool allFinite(const float* x, int64_t n);

// total_norm = normTwo of the per-tensor normTwo's (torch.norm(torch.stack(
// [torch.norm(g) for g in grads]))); clip_coef = max_norm / (total_norm + 1e-6)
// computed as PyTorch does, all in f32: reciprocal(total_norm + 1e-6f) *
// float(max_norm), clamped to at most 1 (NaN stays NaN); every gradient is
// multiplied by it unless it is exactly 1 (a no-op). So a NaN or infinite norm
// makes the gradients NaN or zero, as in PyTorch. Returns total_norm (0 for no
// tensors).
double clipGradNorm(const std::vector<std::pair<float*, int64_t>>& grads, double max_norm);

// The same from per-tensor norms already taken (norms[i] of grads[i]): for
// gradients held in pieces, whose norms come from the pieces' summed squares.
double clipGradNormFrom(const std::vector<std::pair<float*, int64_t>>& grads, const std::vector<float>& norms,
                        double max_norm);

}  // namespace dtl::rt::optim
