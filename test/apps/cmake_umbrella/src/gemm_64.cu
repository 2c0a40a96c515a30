// The small-tile GEMM: instantiated through the launcher template with literal tile sizes.
#include "umbrella.cuh"

void umb_gemm_64(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
  launch_sgemm_tiled<64, 64, 8, 4, 4>(M, N, K, alpha, A, B, beta, C);
}
