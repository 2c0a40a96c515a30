// NVTX ranges around launches, for test/gpu/nvtx.test.ts (kerncap run|list --nvtx-include): one
// kernel, `mark`, launched with a distinct tag in each place below (its second parameter), and
// `inner` once, inside B. The first range is pushed before any CUDA call (cuInit comes inside it).
//   tag 0: inside "init" (pushed before cuInit)     tag 1: no range
//   tag 2: A                                        tag 3: A/B        (inner: A/B too)
//   tag 4: A, after B                               tag 5: C
//   tag 6: start/end range "S" (default domain)     tag 7: domain "lib", push/pop range "A"
// Each tag's launch writes x[tag] = tag + 1; the app checks every write and exits 0.
#include <cstdio>
#include <nvtx3/nvToolsExt.h>

__global__ void mark(int *x, int tag) { if (threadIdx.x == 0) x[tag] = tag + 1; }
__global__ void inner(int *x) { if (threadIdx.x == 0) x[15] = 99; }

int main() {
  nvtxRangePushA("init");
  int *x;
  if (cudaMalloc(&x, 16 * sizeof(int)) != cudaSuccess) { fprintf(stderr, "cudaMalloc failed\n"); return 1; }
  cudaMemset(x, 0, 16 * sizeof(int));
  mark<<<1, 32>>>(x, 0);
  nvtxRangePop();
  mark<<<1, 32>>>(x, 1);
  nvtxRangePushA("A");
  mark<<<1, 32>>>(x, 2);
  nvtxRangePushA("B");
  mark<<<1, 32>>>(x, 3);
  inner<<<1, 32>>>(x);
  nvtxRangePop();
  mark<<<1, 32>>>(x, 4);
  nvtxRangePop();
  nvtxRangePushA("C");
  mark<<<1, 32>>>(x, 5);
  nvtxRangePop();
  nvtxRangeId_t s = nvtxRangeStartA("S");
  mark<<<1, 32>>>(x, 6);
  nvtxRangeEnd(s);
  nvtxDomainHandle_t lib = nvtxDomainCreateA("lib");
  nvtxEventAttributes_t a = {};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = "A";
  nvtxDomainRangePushEx(lib, &a);
  mark<<<1, 32>>>(x, 7);
  nvtxDomainRangePop(lib);
  int h[16];
  cudaMemcpy(h, x, sizeof h, cudaMemcpyDeviceToHost);
  for (int t = 0; t < 8; t++)
    if (h[t] != t + 1) { fprintf(stderr, "tag %d: got %d\n", t, h[t]); return 1; }
  printf("nvtx_ranges: ok\n");
  return 0;
}
