// Test app: one kernel reads buffers of the allocation kinds that are not plain cudaMalloc:
// managed memory (cudaMallocManaged), mapped pinned host memory (cudaHostAlloc + DeviceMap),
// and stream-ordered memory (cudaMallocAsync from the default pool), and writes into a
// managed output. A replay must have all of them at their captured addresses.
// argv: rounds. Prints a checksum.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

__global__ void mix_kinds(const float* managed, const float* mapped, const float* pooled, float* out, int n, int round) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    out[i] = managed[i] * 2.0f + mapped[i % 1024] - pooled[(i * 7) % n] + (float)round;
}

int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 3;
  const int n = 1 << 20;
  float *managed, *out, *host, *mapped, *pooled;
  CK(cudaMallocManaged(&managed, n * sizeof(float)));
  CK(cudaMallocManaged(&out, n * sizeof(float)));
  CK(cudaHostAlloc(&host, 1024 * sizeof(float), cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer(&mapped, host, 0));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  CK(cudaMallocAsync(&pooled, n * sizeof(float), s));
  for (int i = 0; i < n; i++) managed[i] = (float)(i % 1009) * 0.5f;
  for (int i = 0; i < 1024; i++) host[i] = (float)i * 0.125f;
  float* tmp = (float*)malloc(n * sizeof(float));
  for (int i = 0; i < n; i++) tmp[i] = (float)((i * 13) % 997);
  CK(cudaMemcpyAsync(pooled, tmp, n * sizeof(float), cudaMemcpyHostToDevice, s));
  CK(cudaStreamSynchronize(s));
  double sum = 0;
  for (int r = 0; r < rounds; r++) {
    host[r] += 1.0f;  // the mapped host buffer changes between launches
    mix_kinds<<<256, 256, 0, s>>>(managed, mapped, pooled, out, n, r);
    CK(cudaStreamSynchronize(s));
    sum += out[r * 1000];
  }
  CK(cudaFreeAsync(pooled, s));
  CK(cudaStreamSynchronize(s));
  printf("checksum %.4f\n", sum);
  return 0;
}
