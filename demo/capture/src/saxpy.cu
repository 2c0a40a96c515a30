// The application behind `kerncap demo`: y = a·x + y, with the operands reached through a block of
// parameters in device memory. The kernel's one parameter is a pointer; the pointers to x and y
// live in captured memory, so a replay is only right when every region is back at its own VA.
//
// Build and run it on a GPU:  nvcc -arch=sm_90 -o saxpy saxpy.cu && ./saxpy
// Capture it yourself:        kerncap run -k saxpy -o saxpy-capture -- ./saxpy
#include <cstdio>
#include <cuda_runtime.h>

struct Vec {
  float *data;
  int n;
};

struct Saxpy {
  float a;
  Vec x, y;
};

__global__ void saxpy(const Saxpy *p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p->y.n) p->y.data[i] = p->a * p->x.data[i] + p->y.data[i];
}

// Inputs with few significant bits: a·x + y is exact in fp32, fused or not, so a CPU reference
// (scripts/make-demo.ts) gives the GPU's bits.
static float x_at(int i) { return ((i * 37) % 101 - 50) / 8.0f; }
static float y_at(int i) { return ((i * 11) % 53) / 4.0f; }

int main() {
  const int n = 4000, block = 256;
  float hx[n], hy[n];
  for (int i = 0; i < n; i++) hx[i] = x_at(i), hy[i] = y_at(i);
  Saxpy h = {1.5f, {nullptr, n}, {nullptr, n}};
  Saxpy *d = nullptr;
  cudaMalloc(&d, sizeof h);
  cudaMalloc(&h.x.data, n * sizeof(float));
  cudaMalloc(&h.y.data, n * sizeof(float));
  cudaMemcpy(h.x.data, hx, sizeof hx, cudaMemcpyHostToDevice);
  cudaMemcpy(h.y.data, hy, sizeof hy, cudaMemcpyHostToDevice);
  cudaMemcpy(d, &h, sizeof h, cudaMemcpyHostToDevice);
  saxpy<<<(n + block - 1) / block, block>>>(d);
  cudaMemcpy(hy, h.y.data, sizeof hy, cudaMemcpyDeviceToHost);
  double sum = 0;
  for (int i = 0; i < n; i++) sum += hy[i];
  cudaError_t e = cudaGetLastError();
  printf("saxpy: n=%d sum=%.4f (%s)\n", n, sum, cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
