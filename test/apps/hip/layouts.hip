// Device side of the layout fixture. Uses only clang builtins for work-item ids so it builds
// with -nogpulib (gfx1100 without device libraries).
#include <hip/hip_runtime.h>
#include "layouts.h"

#define TID() ((int)__builtin_amdgcn_workitem_id_x())

extern "C" __global__ void k_scalars(float a, const float* x, float* y, int n) {
  int i = TID();
  if (i < n) y[i] = a * x[i] + y[i];
  // Touch the implicit kernel arguments so that the metadata lists the hidden_* arguments
  // (clang drops them from kernels that never read them).
  if (n < 0) y[0] = *(const float*)__builtin_amdgcn_implicitarg_ptr();
}

extern "C" __global__ void k_structs(Pair p, long* out, short s, Vec4 v, Tiny t, double d) {
  out[TID()] = p.a + (long)p.b + p.c + s + (long)(v.x + v.w) + t.tag + (long)d;
}

template <typename T>
__global__ void k_template(T* out, T v) { out[TID()] = v; }
template __global__ void k_template<double>(double*, double);

extern "C" __global__ void k_dynshared(float* out) {
  extern __shared__ float buf[];
  buf[TID()] = (float)TID();
  __builtin_amdgcn_s_barrier();
  out[TID()] = buf[TID() ^ 1];
}
