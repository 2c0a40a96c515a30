// Templated kernels defined in a header, instantiated from main.cu: the reproducer's slice mode
// compiles only the captured instantiation.
#pragma once
#include "tile_config.h"

namespace kc {
enum class Op : int { Add = 0, Mul = 1 };

// Passed by value: editing its members changes the parameter layout but not the mangled name.
template <typename T>
struct Coef {
  T a;
};

template <typename T, int BLOCK, Op OP>
__global__ void tiled_apply(T* __restrict__ y, const T* __restrict__ x, Coef<T> c, int n) {
  int base = (blockIdx.x * BLOCK + threadIdx.x) * TILE_ROWS;
#pragma unroll
  for (int r = 0; r < TILE_ROWS; r++) {
    int i = base + r;
    if (i < n) y[i] = OP == Op::Add ? y[i] + c.a * x[i] : y[i] * (c.a + x[i]);
  }
}
}  // namespace kc
