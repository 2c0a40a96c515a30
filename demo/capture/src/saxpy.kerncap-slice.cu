// kerncap slice of src/saxpy.cu sha256=b9407f68be50e59553867eb7cfc5f5fef45ae771f288f3db66046d5478061bdd body=6d5dd2c7d61f439ab8f81468ef4324f7b00f58d1d08d3afbc23364034a8fa135
#line 1 "src/saxpy.cu"
// The application behind `kerncap demo`: y = a·x + y, with the operands reached through a block of
// parameters in device memory. The kernel's one parameter is a pointer; the pointers to x and y
// live in captured memory, so a replay is only right when every region is back at its own VA.
//
// Build and run it on a GPU:  nvcc -arch=sm_90 -o saxpy saxpy.cu && ./saxpy
// Capture it yourself:        kerncap run -k saxpy -o saxpy-capture -- ./saxpy
#include <cstdio>
#include <cuda_runtime.h>

struct Vec {
  float *data;
  int n;
};

struct Saxpy {
  float a;
  Vec x, y;
};

__global__ void saxpy(const Saxpy *p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p->y.n) p->y.data[i] = p->a * p->x.data[i] + p->y.data[i];
}
// ── kerncap: src/saxpy.cu ends here for the slice; 0 other kernel bodies above were left out ──
