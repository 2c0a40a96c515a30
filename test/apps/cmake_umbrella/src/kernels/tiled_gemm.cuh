// C = alpha * A·B + beta * C (row-major, M×K by K×N) with 2D block tiling: each block computes a
// BM×BN tile of C from BK-wide slabs of A and B staged in shared memory, each thread a TM×TN
// sub-tile held in registers. Requires M % BM == 0, N % BN == 0, K % BK == 0 and
// (BM/TM)·(BN/TN) threads per block.
#pragma once
#include "umb/config.h"

template <const int BM, const int BN, const int BK, const int TM, const int TN>
__global__ void __launch_bounds__((BM * BN) / (TM * TN))
    sgemm_tiled(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
  constexpr int THREADS = (BM * BN) / (TM * TN);
  __shared__ float As[BK * BM];  // transposed: As[k][m]
  __shared__ float Bs[BK * BN];
  const int tileRow = blockIdx.y, tileCol = blockIdx.x;
  const int tRow = threadIdx.x / (BN / TN), tCol = threadIdx.x % (BN / TN);
  A += tileRow * BM * K;
  B += tileCol * BN;
  C += tileRow * BM * N + tileCol * BN;
  umb_acc_t acc[TM * TN] = {0};
  float regM[TM], regN[TN];
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int i = threadIdx.x; i < BM * BK; i += THREADS) {
      const int r = i / BK, c = i % BK;
      As[c * BM + r] = A[r * K + c];
    }
    for (int i = threadIdx.x; i < BK * BN; i += THREADS) {
      const int r = i / BN, c = i % BN;
      Bs[r * BN + c] = B[r * N + c];
    }
    __syncthreads();
    A += BK;
    B += BK * N;
#pragma unroll
    for (int k = 0; k < BK; ++k) {
#pragma unroll
      for (int m = 0; m < TM; ++m) regM[m] = As[k * BM + tRow * TM + m];
#pragma unroll
      for (int n = 0; n < TN; ++n) regN[n] = Bs[k * BN + tCol * TN + n];
#pragma unroll
      for (int m = 0; m < TM; ++m)
#pragma unroll
        for (int n = 0; n < TN; ++n) acc[m * TN + n] += regM[m] * regN[n];
    }
    __syncthreads();
  }
#pragma unroll
  for (int m = 0; m < TM; ++m)
#pragma unroll
    for (int n = 0; n < TN; ++n) {
      float* c = &C[(tRow * TM + m) * N + tCol * TN + n];
      *c = alpha * (float)acc[m * TN + n] + beta * *c;
    }
}

/** Launch sgemm_tiled for one tile shape on the default stream. */
template <const int BM, const int BN, const int BK, const int TM, const int TN>
void launch_sgemm_tiled(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
  dim3 grid(N / BN, M / BM), block((BM * BN) / (TM * TN));
  sgemm_tiled<BM, BN, BK, TM, TN><<<grid, block>>>(M, N, K, alpha, A, B, beta, C);
}
