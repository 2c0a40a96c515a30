// CUDA graphs (issue 11): one eager launch of `scale`, then
//  graph 0, built by stream capture (scale → add_one), launched 3 times;
//  graph 1, built by hand: kernel node → memcpy node → child graph holding `add_one`, launched 3
//    times with cuGraphExecKernelNodeSetParams between launches;
//  graph 2, stream-captured `update_me(z, 2)`, launched once, then updated with cuGraphExecUpdate
//    from a second capture `update_me(z, 5)` and launched again;
//  graph 3, built by hand: one `cluster_k` node with a cluster dimension of 2 (node attribute),
//    launched twice;
//  graph 4, built by hand: stage_a → child graph [stage_b → child graph [child_k]], launched twice;
//    child_k traps unless stage_a and stage_b ran just before it in the same launch (cnt).
// Prints the results on one line so a run can be checked.
// `graphs bench eager|graph N MIB`: only `scale` on MIB MiB, N times, eagerly or from a graph (N
// launches of a one-node graph), for scripts/bench-graphs.sh.
#include <cooperative_groups.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
namespace cg = cooperative_groups;

__global__ void scale(float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
__global__ void add_one(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}

__global__ void update_me(float *z, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[i] = z[i] * a + 1.0f;
}
// adds (rank of the block in its cluster) + 1: a launch without the cluster gives another result
__global__ void cluster_k(float *w, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) w[i] += (float)cg::this_cluster().block_rank() + 1.0f;
}
__global__ void stage_a(float *v, int *cnt, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] = v[i] * 2.0f + 1.0f;
  if (i == 0) cnt[0] += 1;
}
__global__ void stage_b(float *v, int *cnt, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] *= 3.0f;
  if (i == 0) cnt[1] = cnt[0];
}
__global__ void child_k(float *v, int *cnt, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i == 0) {
    if (cnt[1] != cnt[0] || cnt[2] + 1 != cnt[0]) __trap(); // stage_a and stage_b did not run just before
    cnt[2] = cnt[0];
  }
  if (i < n) v[i] = v[i] * 0.5f + 3.0f;
}

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

static int bench(int argc, char **argv) {
  int graph = argc > 2 && !strcmp(argv[2], "graph");
  int reps = argc > 3 ? atoi(argv[3]) : 10;
  size_t mib = argc > 4 ? (size_t)atoi(argv[4]) : 256;
  int n = (int)(mib * 1024 * 1024 / 4);
  float *x;
  CK(cudaMalloc(&x, (size_t)n * 4));
  CK(cudaMemset(x, 0, (size_t)n * 4));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  if (!graph) {
    for (int r = 0; r < reps; r++) scale<<<(n + 255) / 256, 256, 0, s>>>(x, 1.5f, n);
  } else {
    cudaGraph_t bg;
    cudaGraphExec_t be;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    scale<<<(n + 255) / 256, 256, 0, s>>>(x, 1.5f, n);
    CK(cudaStreamEndCapture(s, &bg));
    CK(cudaGraphInstantiate(&be, bg, 0));
    for (int r = 0; r < reps; r++) CK(cudaGraphLaunch(be, s));
  }
  CK(cudaStreamSynchronize(s));
  printf("bench %s %d launches on %zu MiB ok\n", graph ? "graph" : "eager", reps, mib);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "bench")) return bench(argc, argv);
  const int n = 1 << 16;
  float *x, *y;
  CK(cudaMalloc(&x, n * 4));
  CK(cudaMalloc(&y, n * 4));
  CK(cudaMemset(x, 0, n * 4));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  scale<<<n / 256, 256, 0, s>>>(x, 2.0f, n);  // eager
  // 1. stream capture
  cudaGraph_t g1;
  cudaGraphExec_t e1;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  scale<<<n / 256, 256, 0, s>>>(x, 2.0f, n);
  add_one<<<n / 256, 256, 0, s>>>(x, n);
  CK(cudaStreamEndCapture(s, &g1));
  CK(cudaGraphInstantiate(&e1, g1, 0));
  for (int r = 0; r < 3; r++) CK(cudaGraphLaunch(e1, s));
  // 2. explicit graph: kernel node → memcpy node → child graph (add_one on y)
  cudaGraph_t g2, child;
  CK(cudaGraphCreate(&g2, 0));
  CK(cudaGraphCreate(&child, 0));
  float a = 3.0f;
  int nn = n;
  void *sargs[] = {&x, &a, &nn};
  cudaKernelNodeParams kp = {};
  kp.func = (void *)scale; kp.gridDim = dim3(n / 256); kp.blockDim = dim3(256); kp.kernelParams = sargs;
  cudaGraphNode_t k1, m1, c1, k2;
  CK(cudaGraphAddKernelNode(&k1, g2, nullptr, 0, &kp));
  CK(cudaGraphAddMemcpyNode1D(&m1, g2, &k1, 1, y, x, n * 4, cudaMemcpyDeviceToDevice));
  void *aargs[] = {&y, &nn};
  cudaKernelNodeParams ap = {};
  ap.func = (void *)add_one; ap.gridDim = dim3(n / 256); ap.blockDim = dim3(256); ap.kernelParams = aargs;
  CK(cudaGraphAddKernelNode(&k2, child, nullptr, 0, &ap));
  CK(cudaGraphAddChildGraphNode(&c1, g2, &m1, 1, child));
  cudaGraphExec_t e2;
  CK(cudaGraphInstantiate(&e2, g2, 0));
  for (int r = 0; r < 3; r++) {
    a = 1.0f + r;  // update the kernel node in place between launches
    CK(cudaGraphExecKernelNodeSetParams(e2, k1, &kp));
    CK(cudaGraphLaunch(e2, s));
  }
  // 3. cuGraphExecUpdate: the same topology captured again with another scalar
  float *z;
  CK(cudaMalloc(&z, n * 4));
  CK(cudaMemsetAsync(z, 0, n * 4, s));
  cudaGraph_t g3, g3b;
  cudaGraphExec_t e3;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  update_me<<<n / 256, 256, 0, s>>>(z, 2.0f, n);
  CK(cudaStreamEndCapture(s, &g3));
  CK(cudaGraphInstantiate(&e3, g3, 0));
  CK(cudaGraphLaunch(e3, s));  // z = 0 * 2 + 1 = 1
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  update_me<<<n / 256, 256, 0, s>>>(z, 5.0f, n);
  CK(cudaStreamEndCapture(s, &g3b));
  cudaGraphExecUpdateResultInfo info;
  CK(cudaGraphExecUpdate(e3, g3b, &info));
  CK(cudaGraphDestroy(g3b));  // the app may drop the update's graph at once
  CK(cudaGraphLaunch(e3, s));  // z = 1 * 5 + 1 = 6
  // 4. a kernel node with a cluster dimension (node launch attribute)
  float *w;
  CK(cudaMalloc(&w, n * 4));
  CK(cudaMemsetAsync(w, 0, n * 4, s));
  cudaGraph_t g4;
  cudaGraphExec_t e4;
  CK(cudaGraphCreate(&g4, 0));
  void *wargs[] = {&w, &nn};
  cudaKernelNodeParams wp = {};
  wp.func = (void *)cluster_k; wp.gridDim = dim3(n / 256); wp.blockDim = dim3(256); wp.kernelParams = wargs;
  cudaGraphNode_t kc;
  CK(cudaGraphAddKernelNode(&kc, g4, nullptr, 0, &wp));
  cudaKernelNodeAttrValue cv = {};
  cv.clusterDim.x = 2; cv.clusterDim.y = 1; cv.clusterDim.z = 1;
  CK(cudaGraphKernelNodeSetAttribute(kc, cudaLaunchAttributeClusterDimension, &cv));
  CK(cudaGraphInstantiate(&e4, g4, 0));
  CK(cudaGraphDestroy(g4));
  for (int r = 0; r < 2; r++) CK(cudaGraphLaunch(e4, s));  // w[0] = 2 (rank 0), w[256] = 4 (rank 1)
  // 5. nested child graphs: stage_a → [stage_b → [child_k]]
  float *v;
  int *cnt;
  CK(cudaMalloc(&v, n * 4));
  CK(cudaMalloc(&cnt, 16));
  CK(cudaMemsetAsync(cnt, 0, 16, s));
  {
    float one = 1.0f;
    CK(cudaMemcpyAsync(v, &one, 4, cudaMemcpyHostToDevice, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaMemsetAsync(v + 1, 0, (n - 1) * 4, s));
  }
  cudaGraph_t g5, mid, inner;
  CK(cudaGraphCreate(&g5, 0));
  CK(cudaGraphCreate(&mid, 0));
  CK(cudaGraphCreate(&inner, 0));
  void *vargs[] = {&v, &cnt, &nn};
  cudaKernelNodeParams vp = {};
  vp.gridDim = dim3(n / 256); vp.blockDim = dim3(256); vp.kernelParams = vargs;
  cudaGraphNode_t na, nb, nd, ninner, nmid;
  vp.func = (void *)child_k;
  CK(cudaGraphAddKernelNode(&nd, inner, nullptr, 0, &vp));
  vp.func = (void *)stage_b;
  CK(cudaGraphAddKernelNode(&nb, mid, nullptr, 0, &vp));
  CK(cudaGraphAddChildGraphNode(&ninner, mid, &nb, 1, inner));
  vp.func = (void *)stage_a;
  CK(cudaGraphAddKernelNode(&na, g5, nullptr, 0, &vp));
  CK(cudaGraphAddChildGraphNode(&nmid, g5, &na, 1, mid));
  cudaGraphExec_t e5;
  CK(cudaGraphInstantiate(&e5, g5, 0));
  for (int r = 0; r < 2; r++) CK(cudaGraphLaunch(e5, s));  // v[0]: 3, 9, 7.5; then 16, 48, 27
  CK(cudaStreamSynchronize(s));
  float hx, hy, hz, hw0, hw1, hv;
  int hc[3];
  CK(cudaMemcpy(&hx, x, 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(&hy, y, 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(&hz, z, 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(&hw0, w, 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(&hw1, w + 256, 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(&hv, v, 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hc, cnt, 12, cudaMemcpyDeviceToHost));
  printf("x[0]=%g y[0]=%g z[0]=%g w[0]=%g w[256]=%g v[0]=%g cnt=%d,%d,%d\n", hx, hy, hz, hw0, hw1, hv, hc[0], hc[1], hc[2]);
  return 0;
}
