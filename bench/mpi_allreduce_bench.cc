// MPI_Allreduce (float32 sum, in place) over the same sweep and with the same
// method as allreduce_bench (checked warm-up, iterations chosen by rank 0,
// best of 3 timed blocks of the slowest rank), so the two sit side by side.
// Built with mpicxx by bench/allreduce_vs_mpi.sh, not by CMake.
// Output: "size count time(us) algbw busbw" lines, busbw = algbw * 2(n-1)/n.
// Arguments: [max MiB = 256] [repeat = 1] (repeat multiplies the blocks).
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  size_t minBytes = 4 << 10, maxBytes = size_t(256) << 20;
  double blockSeconds = 0.05;
  int blocks = 3;
  int repeat = 1;
  if (argc > 1) maxBytes = size_t(std::atof(argv[1]) * (1 << 20));
  if (argc > 2) repeat = std::atoi(argv[2]);
  std::vector<float> buf(maxBytes / 4);
  const double factor = 2.0 * (n - 1) / n;
  if (rank == 0)
    std::printf("# mpi_allreduce_bench: %d ranks, float32 sum in place; best of %d blocks, slowest rank\n"
                "#%11s %10s %10s %8s %8s\n", n, blocks, "size(B)", "count", "time(us)", "algbw", "busbw");
  for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= 2) {
    int count = int(bytes / 4);
    std::fill(buf.begin(), buf.begin() + count, float(rank + 1));
    MPI_Allreduce(MPI_IN_PLACE, buf.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    bool correct = true;
    for (int i = 0; i < count; ++i) correct = correct && buf[i] == n * (n + 1) / 2.0f;
    std::fill(buf.begin(), buf.begin() + count, 0.0f);
    double t0 = MPI_Wtime();
    MPI_Allreduce(MPI_IN_PLACE, buf.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double iters = std::clamp(std::floor(blockSeconds / std::max(MPI_Wtime() - t0, 1e-7)), 1.0, 2000.0);
    MPI_Bcast(&iters, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    double best = 1e30;
    for (int b = 0; b < blocks * repeat; ++b) {
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      for (int i = 0; i < int(iters); ++i)
        MPI_Allreduce(MPI_IN_PLACE, buf.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double mine = (MPI_Wtime() - t0) / iters, slowest;
      MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      best = std::min(best, slowest);
    }
    double alg = bytes / best / 1e9;
    if (rank == 0)
      std::printf("%12zu %10d %10.1f %8.3f %8.3f%s\n", bytes, count, best * 1e6, alg, alg * factor,
                  correct ? "" : " WRONG");
  }
  MPI_Finalize();
  return 0;
}
