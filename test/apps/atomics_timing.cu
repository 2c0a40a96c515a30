// The verdict benchmark's kernels (scripts/bench-verdicts.sh, test/gpu/verdicts.test.ts), one per mode:
//   atomics   the 8 warps of each block add their partial sums into one float per block with
//             atomicAdd; the accumulators and inputs are reached through a table of structs in
//             device memory, one entry per region: entry 0 and 1 sum 8 warps each (the order of
//             their atomics changes the float result), entry 2 sums 3 warps, entry 3 one warp
//             (adding +0.0 in any order: it never varies). Each warp waits before its atomic for
//             a time taken from its SM and the global timer, so that the order follows the GPU's
//             timing. Entry 4 sums 8 warps in an order set by the L2 instead: warps 4-7 wait for
//             a load of a line only they read (an L2 hit in a replay, whose restore and earlier runs
//             leave it there; DRAM in the app's 2nd launch, after the eviction below), warps 0-3
//             for fixed clock64 spins placed between: meant to give one order in every replay and
//             another in the app (the held-back case: a region quiet in every replay while the
//             app's value differs). On the H200 its sums still varied between replays (the test
//             records heldBackRegions: none so far). Launched 3 times; before the 2nd (the one the tests capture)
//             the app makes its timing unlike a replay's: it evicts L2 (a 256 MiB buffer written
//             and freed) and keeps a second stream busy with a spin kernel until just before the launch.
//   spin N    a compute-bound loop of N dependent FMAs per thread over 132x4 blocks of 256 threads
//             (N is a kernel parameter: two captures with other N time another amount of work on
//             the same memory); launched twice.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

struct Entry {
  const float *x;  // blocks * 256 inputs
  float *acc;      // one accumulator per block
  int warps;       // warps of a block that contribute (the others add +0.0)
  const float *probe;  // entry 4: 4 lines per block, one per warp 4-7 (nullptr elsewhere)
};

__device__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ unsigned smid() {
  unsigned s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}

__global__ void block_sums(const Entry *table) {
  const Entry e = table[blockIdx.y];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float v = warp < e.warps ? e.x[blockIdx.x * blockDim.x + threadIdx.x] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  if (lane == 0 && e.probe) {
    // warps 0-3: spins of 1000, 1800, 2600, 3400 cycles; warps 4-7: 400, 1200, 2000, 2800 cycles and
    // then one load. An L2 hit (~300-450 cycles) puts warp 4 before warp 0, warp 5 between 0 and 1…;
    // a DRAM access (~1000+ cycles) puts each after the warp it preceded
    const long long spin = warp < 4 ? 1000 + 800 * warp : 400 + 800 * (warp - 4);
    const long long t0 = clock64();
    while (clock64() - t0 < spin) {
    }
    if (warp >= 4) {
      const float p = *(volatile const float *)&e.probe[(blockIdx.x * 4 + (warp - 4)) * 32];
      v += p * 0.0f;  // the atomic waits for the load (the line holds zeros: the sum is unchanged)
    }
    atomicAdd(&e.acc[blockIdx.x], v);
  } else if (lane == 0) {
    // a wait of 0-7 × 200 ns chosen by the SM, the warp and the time: the order of the block's atomics follows the GPU's timing
    unsigned d = (smid() * 7 + warp * 3 + (unsigned)(globaltimer() >> 12)) & 7;
    unsigned long long t0 = globaltimer();
    while (globaltimer() - t0 < d * 200ull) {
    }
    atomicAdd(&e.acc[blockIdx.x], v);
  }
}

__global__ void busy(unsigned long long ns) {
  unsigned long long t0 = globaltimer();
  while (globaltimer() - t0 < ns) {
  }
}

// SPIN_PCT: the work in percent of `iters` (a module built with -DSPIN_PCT=110 does 10% more on the
// same memory and parameters: the timing compare's planted difference, kerncap replay --against it)
#ifndef SPIN_PCT
#define SPIN_PCT 100
#endif
__global__ void fma_spin(float *y, int iters) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float a = y[i], b = 1.0000001f;
  const long long n = (long long)iters * SPIN_PCT / 100;
  for (long long k = 0; k < n; k++) a = fmaf(a, b, 1e-7f);
  y[i] = a;
}

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); return 1; } } while (0)

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "atomics";
  if (!strcmp(mode, "atomics")) {
    const int blocks = 512, T = 5, n = blocks * 256;
    const int warps[T] = {8, 8, 3, 1, 8};
    Entry h[T];
    float *hx = (float *)malloc(n * sizeof(float));
    for (int t = 0; t < T; t++) {
      // magnitudes spread over 6 decades: the sum's rounding depends on the order of the additions
      for (int i = 0; i < n; i++) hx[i] = (float)(((i * 2654435761u + t * 97u) % 20011) - 10005) * powf(10.0f, (float)((i / 32 + t) % 6) - 3.0f);
      float *x, *acc;
      CK(cudaMalloc(&x, n * sizeof(float)));
      CK(cudaMalloc(&acc, blocks * sizeof(float)));
      CK(cudaMemcpy(x, hx, n * sizeof(float), cudaMemcpyHostToDevice));
      float *probe = nullptr;
      if (t == 4) {
        CK(cudaMalloc(&probe, blocks * 4 * 32 * sizeof(float)));
        CK(cudaMemset(probe, 0, blocks * 4 * 32 * sizeof(float)));
      }
      h[t] = {x, acc, warps[t], probe};
    }
    Entry *table;
    CK(cudaMalloc(&table, sizeof h));
    CK(cudaMemcpy(table, h, sizeof h, cudaMemcpyHostToDevice));
    cudaStream_t s1, s2;
    CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    for (int r = 0; r < 3; r++) {
      for (int t = 0; t < T; t++) CK(cudaMemsetAsync(h[t].acc, 0, blocks * sizeof(float), s1));
      if (r == 1) {
        // cold L2: 256 MiB written and freed (not live at the capture), then other work on another stream
        void *evict;
        CK(cudaMalloc(&evict, 256u << 20));
        CK(cudaMemsetAsync(evict, r, 256u << 20, s2));
        busy<<<264, 64, 0, s2>>>(2000000ull);
        CK(cudaStreamSynchronize(s1));
        CK(cudaFree(evict));  // synchronizes with the busy kernel's end: the launch starts on a GPU just released
      }
      block_sums<<<dim3(blocks, T), 256, 0, s1>>>(table);
      CK(cudaStreamSynchronize(s1));
    }
    float out[4], out4[4];
    CK(cudaMemcpy(out, h[0].acc, sizeof out, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(out4, h[4].acc, sizeof out4, cudaMemcpyDeviceToHost));
    printf("atomics: %.9g %.9g %.9g %.9g; entry 4: %.9g %.9g\n", out[0], out[1], out[2], out[3], out4[0], out4[1]);
    return 0;
  }
  if (!strcmp(mode, "spin")) {
    const int iters = argc > 2 ? atoi(argv[2]) : 1000, blocks = 132 * 4, n = blocks * 256;
    float *y;
    CK(cudaMalloc(&y, n * sizeof(float)));
    CK(cudaMemset(y, 0, n * sizeof(float)));
    for (int r = 0; r < 2; r++) fma_spin<<<blocks, 256>>>(y, iters);
    CK(cudaDeviceSynchronize());
    printf("spin %d done\n", iters);
    return 0;
  }
  fprintf(stderr, "unknown mode %s (atomics, spin N)\n", mode);
  return 2;
}
