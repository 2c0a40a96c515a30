// Elementwise kernels: y = a·x, vectorized by VEC floats per thread.
#pragma once
#include "umb/config.h"

template <int VEC>
__global__ void scale_vec(float* y, const float* x, float a, int n) {
  const int i = (blockIdx.x * blockDim.x + threadIdx.x) * VEC;
#pragma unroll
  for (int v = 0; v < VEC; ++v)
    if (i + v < n) y[i + v] = a * x[i + v];
}
