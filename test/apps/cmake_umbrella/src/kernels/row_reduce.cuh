// Per-row sum and softmax of a rows×cols matrix: one block per row, a shared-memory tree reduction.
#pragma once
#include "umb/config.h"

template <int BLOCK>
__device__ umb_acc_t block_sum(umb_acc_t v, umb_acc_t* smem) {
  smem[threadIdx.x] = v;
  __syncthreads();
  for (int s = BLOCK / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) smem[threadIdx.x] += smem[threadIdx.x + s];
    __syncthreads();
  }
  umb_acc_t r = smem[0];
  __syncthreads();
  return r;
}

template <int BLOCK>
__global__ void row_sum(const float* x, float* y, int cols) {
  __shared__ umb_acc_t smem[BLOCK];
  const float* row = x + (size_t)blockIdx.x * cols;
  umb_acc_t v = 0;
  for (int c = threadIdx.x; c < cols; c += BLOCK) v += row[c];
  v = block_sum<BLOCK>(v, smem);
  if (threadIdx.x == 0) y[blockIdx.x] = (float)v;
}

template <int BLOCK>
__global__ void row_softmax(const float* x, float* y, int cols) {
  __shared__ umb_acc_t smem[BLOCK];
  const float* row = x + (size_t)blockIdx.x * cols;
  float* out = y + (size_t)blockIdx.x * cols;
  umb_acc_t m = -1e30f;
  for (int c = threadIdx.x; c < cols; c += BLOCK) m = fmaxf(m, row[c]);
  smem[threadIdx.x] = m;
  __syncthreads();
  for (int s = BLOCK / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) smem[threadIdx.x] = fmaxf(smem[threadIdx.x], smem[threadIdx.x + s]);
    __syncthreads();
  }
  m = smem[0];
  __syncthreads();
  umb_acc_t s = 0;
  for (int c = threadIdx.x; c < cols; c += BLOCK) s += __expf(row[c] - m);
  s = block_sum<BLOCK>(s, smem);
  for (int c = threadIdx.x; c < cols; c += BLOCK) out[c] = __expf(row[c] - m) / s;
}
