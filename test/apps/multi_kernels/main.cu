// Test app: one TU with several kernels, non-template and template, in the TU itself (one inside a
// namespace, one inside an #if block, one using assert() and printf(), whose device functions
// __assertfail and vprintf the CUDA driver resolves at load) and in headers included before and
// after the one that defines rows_scale. Built by the tests to check that a reproducer's slice
// compiles only what the captured kernel needs. Prints a checksum.
#include <cassert>
#include <cstdio>
#include <cuda_runtime.h>
#include "kernels/early.cuh"
#include "kernels/rows.cuh"
#include "kernels/late.cuh"

__device__ float mk_bias(int i) { return 0.25f * (i & 7); }

__global__ void add_bias(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += mk_bias(i);
}

namespace mk {
struct Pair { float a; int b; };
__global__ void pair_fill(float* y, Pair p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = p.a * i + p.b;  // braces in a comment: { }
}
}  // namespace mk

#ifndef MK_NO_CHECKED
__global__ void checked_copy(float* y, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  assert(n > 0);
  if (i == 0) printf("checked_copy n=%d '{'\n", n);
  if (i < n) y[i] = x[i];
}
#endif

template <int K>
__global__ void stride_sum(float* y, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float s = 0;
#pragma unroll
  for (int k = 0; k < K; k++) s += x[(i + k) % n];
  if (i < n) y[i] = s;
}

__global__ void last_kernel(int* c) { atomicAdd(c, 1); }

int main() {
  const int n = 1 << 12;
  float *x, *y;
  int* c;
  cudaMalloc(&x, n * sizeof(float));
  cudaMalloc(&y, n * sizeof(float));
  cudaMalloc(&c, sizeof(int));
  cudaMemset(x, 0, n * sizeof(float));
  early_fill<<<n / 256, 256>>>(x, n);
  rows_scale<<<n / 256, 256>>>(y, x, 2.0f, n);
  late_square<<<n / 256, 256>>>(y, n);
  add_bias<<<n / 256, 256>>>(y, n);
  mk::pair_fill<<<n / 256, 256>>>(x, mk::Pair{0.5f, 1}, n);
  checked_copy<<<n / 256, 256>>>(y, x, n);
  stride_sum<4><<<n / 256, 256>>>(y, x, n);
  last_kernel<<<1, 32>>>(c);
  float h[4];
  cudaMemcpy(h, y, sizeof h, cudaMemcpyDeviceToHost);
  printf("checksum %.3f\n", h[0] + h[1] + h[2] + h[3]);
  return 0;
}
