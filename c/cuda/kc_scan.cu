// kc_scan.cu — the snapshot scan kernel: kc64 (c/common/kc_hash.h) and a non-zero flag for every chunk of
// one memory range, in one pass over device memory. Shipped as c/cuda/kc_scan.fatbin (sm_90 SASS + PTX
// for JIT elsewhere; scripts/build-scan.sh), loaded by the capture library (capture mode only) and
// by the replay engine (restore check, changed-chunk compare).
//
// kc_scan(base, len, chunk, hash, nz): block c handles bytes [c*chunk, min(len, (c+1)*chunk)) of
// base; hash[c] = kc64 of those bytes, nz[c] = 1 when any is non-zero. chunk is a multiple of 16.
#include <stdint.h>

__device__ __forceinline__ uint32_t fmix32(uint32_t h) {
  h ^= h >> 16; h *= 0x85EBCA6Bu; h ^= h >> 13; h *= 0xC2B2AE35u; h ^= h >> 16;
  return h;
}

__device__ __forceinline__ void mix(uint32_t w, uint32_t j, uint32_t &A, uint32_t &B, uint32_t &any) {
  any |= w;
  uint32_t t = fmix32(w ^ (j * 0x9E3779B1u + 0x7F4A7C15u));
  A += t;
  B += t * (2u * j + 1u);
}

extern "C" __global__ void __launch_bounds__(256) kc_scan(const unsigned char *base, unsigned long long len,
                                                          unsigned chunk, unsigned long long *hash, unsigned *nz) {
  const unsigned long long c = blockIdx.x + (unsigned long long)blockIdx.y * gridDim.x;
  const unsigned long long start = c * chunk;
  if (start >= len) return;
  const unsigned long long n = len - start < chunk ? len - start : chunk;
  const unsigned char *p = base + start;
  uint32_t A = 0, B = 0, any = 0;
  const uint32_t words = (uint32_t)((n + 3) / 4);
  if ((((uintptr_t)p) & 15) == 0) {
    const uint32_t vecs = (uint32_t)(n / 16);
    const uint4 *v = reinterpret_cast<const uint4 *>(p);
    for (uint32_t i = threadIdx.x; i < vecs; i += blockDim.x) {
      uint4 q = __ldg(v + i);
      mix(q.x, 4 * i, A, B, any); mix(q.y, 4 * i + 1, A, B, any);
      mix(q.z, 4 * i + 2, A, B, any); mix(q.w, 4 * i + 3, A, B, any);
    }
    for (uint32_t j = vecs * 4 + threadIdx.x; j < words; j += blockDim.x) {
      uint32_t w = 0;
      for (uint32_t k = 0; k < 4 && 4ull * j + k < n; k++) w |= (uint32_t)p[4ull * j + k] << (8 * k);
      mix(w, j, A, B, any);
    }
  } else {
    for (uint32_t j = threadIdx.x; j < words; j += blockDim.x) {
      uint32_t w = 0;
      for (uint32_t k = 0; k < 4 && 4ull * j + k < n; k++) w |= (uint32_t)p[4ull * j + k] << (8 * k);
      mix(w, j, A, B, any);
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    A += __shfl_xor_sync(0xffffffffu, A, o);
    B += __shfl_xor_sync(0xffffffffu, B, o);
    any |= __shfl_xor_sync(0xffffffffu, any, o);
  }
  __shared__ uint32_t sA[8], sB[8], sZ[8];
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) { sA[warp] = A; sB[warp] = B; sZ[warp] = any; }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (unsigned i = 1; i < blockDim.x / 32; i++) { A += sA[i]; B += sB[i]; any |= sZ[i]; }
    const uint32_t L = (uint32_t)n;
    hash[c] = ((unsigned long long)fmix32(A ^ L) << 32) | fmix32(B + L * 0x85EBCA6Bu);
    nz[c] = any != 0;
  }
}

// kc_spin(ns): one thread waits `ns` nanoseconds of the GPU's global timer, touching no memory.
// Queued on a stream just before a start event, it keeps the stream busy while the host submits
// the kernel that follows, so the event pair times the kernel, not the launch path.
extern "C" __global__ void kc_spin(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}
