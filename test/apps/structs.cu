// Test app: one kernel gets a single pointer to a device array of structs that hold more device
// pointers, so most buffers it touches appear in no kernel parameter. A second kernel updates a
// buffer in place (reads and writes the same memory). scale_jobs also reads a __constant__ table
// that the host rewrites each round (cudaMemcpyToSymbol) and counts its launches in a __device__
// variable: module globals, which a replay must restore by name. Prints a checksum of the results.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

struct Job {
  const float* in;
  float* out;
  int n;
  float scale;
};

__constant__ float c_gain[4] = {1.0f, 1.0f, 1.0f, 1.0f};  // rewritten by the host every round
__device__ unsigned d_launches;                             // written by the kernel

__global__ void scale_jobs(const Job* jobs, int njobs) {
  int j = blockIdx.y;
  if (j >= njobs) return;
  if (blockIdx.x == 0 && j == 0 && threadIdx.x == 0) d_launches += 1;
  Job job = jobs[j];
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < job.n; i += gridDim.x * blockDim.x)
    job.out[i] = job.in[i] * job.scale * c_gain[j % 4] + (float)j;
}

template <typename T, int UNROLL>
__global__ void axpy_inplace(T* y, const T* x, T a, int n) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * UNROLL;
#pragma unroll
  for (int u = 0; u < UNROLL; u++)
    if (i + u < n) y[i + u] = a * x[i + u] + y[i + u];
}

// Launched with cudaLaunchKernelEx, a cluster-dimension attribute and 64 KiB of dynamic shared
// memory (needs cudaFuncSetAttribute): its output depends on both, so a replay must re-apply them.
__global__ void cluster_rank(int* out, int n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900  // thread block clusters exist from sm_90 on
  extern __shared__ int smem[];
  cg::cluster_group cluster = cg::this_cluster();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  smem[threadIdx.x] = (int)cluster.block_rank() * 1000 + (int)cluster.num_blocks();
  __syncthreads();
  if (i < n) out[i] = smem[(threadIdx.x + 1) % blockDim.x] + (int)(sizeof(int) * 16384 <= 65536);
#endif
}

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 3;
  const int njobs = 8;
  Job h[njobs];
  float* bufs[2 * njobs];
  for (int j = 0; j < njobs; j++) {
    int n = (1 << 16) + j * 1000;
    float* hin = (float*)malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) hin[i] = (float)((i * 7 + j) % 101) * 0.25f;
    CK(cudaMalloc(&bufs[2 * j], n * sizeof(float)));
    CK(cudaMalloc(&bufs[2 * j + 1], n * sizeof(float)));
    CK(cudaMemcpy(bufs[2 * j], hin, n * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaMemset(bufs[2 * j + 1], 0, n * sizeof(float)));
    free(hin);
    h[j] = Job{bufs[2 * j], bufs[2 * j + 1], n, 1.5f + j};
  }
  Job* d;
  CK(cudaMalloc(&d, sizeof h));
  CK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));
  int n = 1 << 20;
  float *x, *y;
  CK(cudaMalloc(&x, n * sizeof(float)));
  CK(cudaMalloc(&y, n * sizeof(float)));
  float* hx = (float*)malloc(n * sizeof(float));
  for (int i = 0; i < n; i++) hx[i] = (float)(i % 977) / 977.0f;
  CK(cudaMemcpy(x, hx, n * sizeof(float), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(y, hx, n * sizeof(float), cudaMemcpyHostToDevice));
  int* ranks;
  CK(cudaMalloc(&ranks, 64 * 128 * sizeof(int)));
  CK(cudaFuncSetAttribute(cluster_rank, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536));
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(64);
  cfg.blockDim = dim3(128);
  cfg.dynamicSmemBytes = 65536;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 4;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  CK(cudaLaunchKernelEx(&cfg, cluster_rank, ranks, 64 * 128));
  for (int r = 0; r < rounds; r++) {
    for (int j = 0; j < njobs; j++) h[j].scale += 0.5f;
    CK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));
    float gain[4] = {1.25f + r, 0.75f, 2.0f, 0.5f + 0.25f * r};
    CK(cudaMemcpyToSymbol(c_gain, gain, sizeof gain));
    scale_jobs<<<dim3(64, njobs), 256>>>(d, njobs);
    axpy_inplace<float, 4><<<(n / 4 + 255) / 256, 256>>>(y, x, 0.5f, n);
  }
  CK(cudaDeviceSynchronize());
  double sum = 0;
  CK(cudaMemcpy(hx, y, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; i++) sum += hx[i];
  printf("checksum %.6f\n", sum);
  return 0;
}
