// Kernels whose verdicts need care (issue 12), one per mode (argv[1]):
//   sum     fp32 partial sums with atomicAdd into 8 accumulators (nondeterministic order)
//   hist    integer histogram with atomicAdd (deterministic result)
//   oob     a kernel that writes far out of bounds (illegal address: the app fails)
//   assert  a device-side assert fires (the app fails)
//   fma     a compute-bound kernel of ~150 µs (for timing agreement)
//   compact stream compaction: the indices of selected elements appended through an atomic
//           counter (4096 blocks: the order differs from run to run, the multiset does not)
// Each mode launches its kernel twice (dispatch 0 and 1), except the faulting ones (once).
#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

__global__ void partial_sums(const float *x, int n, float *acc) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&acc[i & 7], x[i]);
}
__global__ void histogram(const unsigned *x, int n, unsigned *bins) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&bins[x[i] & 255], 1u);
}
__global__ void write_oob(float *y, long stride) {
  y[(long)threadIdx.x * stride] = 1.0f;  // stride 1<<40: far outside any allocation
}
__global__ void check_index(const int *idx, int n, int limit, float *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    assert(idx[i] < limit);
    out[i] = idx[i];
  }
}
__global__ void fma_loop(float *y, int n, int iters) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a = y[i], b = 1.0001f;
  for (int k = 0; k < iters; k++) a = fmaf(a, b, 0.5f);
  y[i] = a;
}

__global__ void compact(const unsigned *x, int n, unsigned *out, unsigned *count) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && x[i] % 3 != 0) out[atomicAdd(count, 1u)] = (unsigned)i;
}

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "sum";
  const int n = 1 << 22;
  if (!strcmp(mode, "sum") || !strcmp(mode, "hist")) {
    float *h = (float *)malloc(n * 4);
    for (int i = 0; i < n; i++) h[i] = (float)((i * 2654435761u) % 100003) / 7.0f - 7000.0f;
    void *x, *acc;
    CK(cudaMalloc(&x, n * 4));
    CK(cudaMalloc(&acc, 256 * 4));
    CK(cudaMemcpy(x, h, n * 4, cudaMemcpyHostToDevice));
    for (int r = 0; r < 2; r++) {
      CK(cudaMemset(acc, 0, 256 * 4));
      if (!strcmp(mode, "sum")) partial_sums<<<n / 256, 256>>>((float *)x, n, (float *)acc);
      else histogram<<<n / 256, 256>>>((unsigned *)x, n, (unsigned *)acc);
      CK(cudaDeviceSynchronize());
    }
    float out[8];
    CK(cudaMemcpy(out, acc, 32, cudaMemcpyDeviceToHost));
    printf("%s: %.6g %.6g\n", mode, out[0], out[1]);
    return 0;
  }
  if (!strcmp(mode, "oob")) {
    float *y;
    CK(cudaMalloc(&y, 4096));
    write_oob<<<1, 32>>>(y, 1l << 40);
    CK(cudaDeviceSynchronize());
    return 0;
  }
  if (!strcmp(mode, "assert")) {
    int h[1024];
    for (int i = 0; i < 1024; i++) h[i] = i == 777 ? 5000 : i;  // one index out of range
    int *idx;
    float *out;
    CK(cudaMalloc(&idx, sizeof h));
    CK(cudaMalloc(&out, 1024 * 4));
    CK(cudaMemcpy(idx, h, sizeof h, cudaMemcpyHostToDevice));
    check_index<<<4, 256>>>(idx, 1024, 1024, out);
    CK(cudaDeviceSynchronize());
    return 0;
  }
  if (!strcmp(mode, "fma")) {
    float *y;
    CK(cudaMalloc(&y, n * 4));
    CK(cudaMemset(y, 0, n * 4));
    for (int r = 0; r < 2; r++) fma_loop<<<n / 256, 256>>>(y, n, 2000);
    CK(cudaDeviceSynchronize());
    printf("fma done\n");
    return 0;
  }
  if (!strcmp(mode, "compact")) {
    const int m = 1 << 20;
    unsigned *h = (unsigned *)malloc(m * 4);
    for (int i = 0; i < m; i++) h[i] = i * 2654435761u;
    unsigned *x, *out, *count;
    CK(cudaMalloc(&x, m * 4));
    CK(cudaMalloc(&out, m * 4));
    CK(cudaMalloc(&count, 4));
    CK(cudaMemcpy(x, h, m * 4, cudaMemcpyHostToDevice));
    for (int r = 0; r < 2; r++) {
      CK(cudaMemset(out, 0, m * 4));
      CK(cudaMemset(count, 0, 4));
      compact<<<m / 256, 256>>>(x, m, out, count);
      CK(cudaDeviceSynchronize());
    }
    unsigned c;
    CK(cudaMemcpy(&c, count, 4, cudaMemcpyDeviceToHost));
    printf("compact: %u selected\n", c);
    return 0;
  }
  fprintf(stderr, "unknown mode %s\n", mode);
  return 2;
}
