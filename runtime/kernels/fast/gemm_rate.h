// The machine's GEMM rate as the fast kernels reach it: what an achieved
// FLOP/s is compared with to give `dtlc run`'s MFU (docs/running.md, "What
// you see"). Measured, not looked up: a CPU's peak depends on its vector
// units, clock and how many cores the rank really has.
#pragma once

namespace dtl::rt::fast {

// FLOP/s of a square f32 SGEMM (oneDNN, the kernels' GEMM) on `threads`
// threads: the best of a few 512³ products run for about 50 ms. Measured
// once per thread count in a process and cached; 0 when the GEMM fails.
double measuredGemmRate(int threads);

}  // namespace dtl::rt::fast
