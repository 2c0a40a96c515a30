// A tiny HIP application for kerncap's HIP tests: three kernels, launched a few times each.
// Build: HIP_PLATFORM=amd hipcc --offload-arch=gfx90a -O2 vecops.hip -o vecops
#include <hip/hip_runtime.h>
#include <cstdio>
#include "vecops_params.h"

extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void scale_inplace(ScaleParams p, float* data) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p.n) data[i] = data[i] * p.factor + p.bias;
}

// Pointer table stored in device memory: replay works only if every region keeps its VA.
__global__ void gather(float* const* tables, const int* idx, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tables[i & 1][idx[i]];
}

#define CHECK(x) do { hipError_t e = (x); if (e != hipSuccess) { \
  std::fprintf(stderr, "%s: %s\n", #x, hipGetErrorString(e)); return 1; } } while (0)

int main() {
  const int n = 1 << 12;
  float *x, *y, *t0, *t1, **tables, *out;
  int* idx;
  CHECK(hipMalloc(&x, n * sizeof(float)));
  CHECK(hipMalloc(&y, n * sizeof(float)));
  CHECK(hipMalloc(&t0, n * sizeof(float)));
  CHECK(hipMalloc(&t1, n * sizeof(float)));
  CHECK(hipMalloc(&out, n * sizeof(float)));
  CHECK(hipMalloc(&idx, n * sizeof(int)));
  CHECK(hipMalloc(&tables, 2 * sizeof(float*)));
  float* h = new float[n];
  int* hi = new int[n];
  for (int i = 0; i < n; i++) { h[i] = (float)i; hi[i] = (i * 7) % n; }
  CHECK(hipMemcpy(x, h, n * sizeof(float), hipMemcpyHostToDevice));
  CHECK(hipMemcpy(y, h, n * sizeof(float), hipMemcpyHostToDevice));
  CHECK(hipMemcpy(t0, h, n * sizeof(float), hipMemcpyHostToDevice));
  CHECK(hipMemcpy(t1, h, n * sizeof(float), hipMemcpyHostToDevice));
  CHECK(hipMemcpy(idx, hi, n * sizeof(int), hipMemcpyHostToDevice));
  float* ht[2] = {t0, t1};
  CHECK(hipMemcpy(tables, ht, sizeof(ht), hipMemcpyHostToDevice));
  for (int it = 0; it < 3; it++) {
    saxpy<<<n / 256, 256>>>(2.0f, x, y, n);
    scale_inplace<<<n / 256, 256>>>(ScaleParams{n, 0.5f, 1.0f}, y);
    gather<<<n / 256, 256>>>(tables, idx, out, n);
  }
  CHECK(hipDeviceSynchronize());
  CHECK(hipMemcpy(h, out, n * sizeof(float), hipMemcpyDeviceToHost));
  std::printf("out[1]=%g\n", h[1]);
  return 0;
}
