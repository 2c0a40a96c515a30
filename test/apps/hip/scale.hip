// The kernel the HSA replay test (test/cpu/hsa-replay.test.ts) replays against test/apps/hip/fake_libhsa.c, whose
// "_Z5scalePffi.kd" does the same on the host. Build: hipcc --cuda-device-only -c --offload-arch=gfx90a
#include <hip/hip_runtime.h>
__global__ void scale(float* data, float factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= factor;
}
