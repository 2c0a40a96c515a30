// Two kernels of about a microsecond, for the replay's kernel clock (scripts/exp-kernel-time.sh,
// test/gpu/kernel-clock.test.ts): `empty_kernel` (no work; its pointer parameter gives the capture
// a region) and `tiny_kernel` (one warp writes 32 floats). Each round launches a 30 µs spin, then
// empty_kernel<<<1, 32>>>, another spin, then tiny_kernel<<<1, 32>>>, so that each kernel starts on
// a busy stream, as the replay's timed launches do.
// Usage: tiny_kernels [ROUNDS]   (default 4; capture the 2nd launch: --kernel empty_kernel --dispatch 1)
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CK(x)                                                                         \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

__global__ void empty_kernel(float *p) { (void)p; }

__global__ void tiny_kernel(float *p, float v) { p[threadIdx.x] = v * (float)threadIdx.x; }

__global__ void spin(unsigned long long ns) {
  unsigned long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (;;) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 >= ns) break;
  }
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 4;
  float *p = nullptr;
  CK(cudaMalloc(&p, 4096 * sizeof(float)));
  CK(cudaMemset(p, 0, 4096 * sizeof(float)));
  for (int r = 0; r < rounds; r++) {
    spin<<<1, 1>>>(30000);
    empty_kernel<<<1, 32>>>(p);
    spin<<<1, 1>>>(30000);
    tiny_kernel<<<1, 32>>>(p, 1.0f + r);
  }
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  float h[32];
  CK(cudaMemcpy(h, p, sizeof h, cudaMemcpyDeviceToHost));
  printf("tiny_kernels: %d rounds, p[31] = %g\n", rounds, h[31]);
  CK(cudaFree(p));
  return 0;
}
