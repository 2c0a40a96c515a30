// Test app: launches several instantiations of a header-defined kernel template (kernels/tiled.cuh)
// so that a capture of one of them can be sliced. Built with CMake-style flags by the tests
// (-DKC_SCALE, -I include). Prints a checksum.
#include <cstdio>
#include <cuda_runtime.h>
#include "kernels/tiled.cuh"

#ifndef KC_SCALE
#error "build with -DKC_SCALE=<float>"
#endif

template <typename T, int BLOCK, kc::Op OP>
static void run(T* y, const T* x, int n) {
  int per = BLOCK * TILE_ROWS;
  kc::tiled_apply<T, BLOCK, OP><<<(n + per - 1) / per, BLOCK>>>(y, x, kc::Coef<T>{(T)KC_SCALE}, n);
}

int main(int argc, char** argv) {
  int n = 1 << 20, rounds = argc > 1 ? atoi(argv[1]) : 2;
  float *x, *y;
  double *xd, *yd;
  cudaMalloc(&x, n * sizeof(float));
  cudaMalloc(&y, n * sizeof(float));
  cudaMalloc(&xd, n * sizeof(double));
  cudaMalloc(&yd, n * sizeof(double));
  float* h = (float*)malloc(n * sizeof(float));
  for (int i = 0; i < n; i++) h[i] = (float)(i % 101) * 0.125f;
  cudaMemcpy(x, h, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(y, h, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemset(xd, 0, n * sizeof(double));
  cudaMemset(yd, 0, n * sizeof(double));
  for (int r = 0; r < rounds; r++) {
    run<float, 128, kc::Op::Add>(y, x, n);
    run<float, 256, kc::Op::Mul>(y, x, n);
    run<double, 128, kc::Op::Add>(yd, xd, n);
  }
  if (cudaDeviceSynchronize() != cudaSuccess) return 1;
  cudaMemcpy(h, y, n * sizeof(float), cudaMemcpyDeviceToHost);
  double s = 0;
  for (int i = 0; i < n; i++) s += h[i];
  printf("checksum %.6f\n", s);
  return 0;
}
