// Test app of issue 25 (CMakeLists.txt says why): runs the library's kernels on a 512×512 problem
// `rounds` times (default 2), and shape `sweep` of the GEMM sweep once when given, and prints a
// checksum of the results.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#include "launch.h"

int main(int argc, char** argv) {
  const int n = 512, rounds = argc > 1 ? atoi(argv[1]) : 2, sweep = argc > 2 ? atoi(argv[2]) : -1;
  if (sweep >= umb_gemm_sweep_count()) {
    fprintf(stderr, "sweep shape %d: there are %d (0..%d)\n", sweep, umb_gemm_sweep_count(), umb_gemm_sweep_count() - 1);
    return 2;
  }
  const size_t bytes = (size_t)n * n * sizeof(float);
  std::vector<float> h(n * n);
  for (int i = 0; i < n * n; i++) h[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
  float *a, *b, *c64, *c128, *sums, *soft, *scaled;
  cudaMalloc(&a, bytes);
  cudaMalloc(&b, bytes);
  cudaMalloc(&c64, bytes);
  cudaMalloc(&c128, bytes);
  cudaMalloc(&soft, bytes);
  cudaMalloc(&scaled, bytes);
  cudaMalloc(&sums, n * sizeof(float));
  cudaMemcpy(a, h.data(), bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(b, h.data(), bytes, cudaMemcpyHostToDevice);
  cudaMemset(c64, 0, bytes);
  cudaMemset(c128, 0, bytes);
  for (int r = 0; r < rounds; r++) {
    umb_gemm_64(n, n, n, 1.0f, a, b, 0.5f, c64);
    umb_gemm_128(n, n, n, 1.0f, a, b, 0.5f, c128);
    umb_softmax(soft, c128, n, n);
    umb_scale(scaled, soft, 2.0f, n * n);
    umb_row_sum(scaled, sums, n, n);
  }
  if (sweep >= 0) umb_gemm_sweep(sweep, n, n, n, 1.0f, a, b, 0.0f, soft);
  cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(err));
    return 1;
  }
  std::vector<float> o(n * n), s(n);
  double checksum = 0;
  cudaMemcpy(o.data(), c128, bytes, cudaMemcpyDeviceToHost);
  for (float v : o) checksum += v;
  cudaMemcpy(o.data(), c64, bytes, cudaMemcpyDeviceToHost);
  for (float v : o) checksum += v;
  cudaMemcpy(s.data(), sums, n * sizeof(float), cudaMemcpyDeviceToHost);
  for (float v : s) checksum += v;
  printf("checksum %.6f\n", checksum);
  return 0;
}
