// CUDA graphs (issue 11): one eager launch of `scale`, then a graph built by stream capture
// (scale → add_one) and a graph built by hand with a kernel node, a memcpy node and a child graph
// holding `add_one`; each graph is launched 3 times, with cuGraphExecKernelNodeSetParams between
// the hand-built graph's launches. Prints the result so a run can be checked.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void scale(float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
__global__ void add_one(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

int main() {
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
  CK(cudaStreamSynchronize(s));
  float hx, hy;
  CK(cudaMemcpy(&hx, x, 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(&hy, y, 4, cudaMemcpyDeviceToHost));
  printf("x[0]=%g y[0]=%g\n", hx, hy);
  return 0;
}
