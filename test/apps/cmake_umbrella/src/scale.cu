#include "umbrella.cuh"

void umb_scale(float* y, const float* x, float a, int n) {
  if (n % 4 == 0) scale_vec<4><<<(n / 4 + 255) / 256, 256>>>(y, x, a, n);
  else scale_vec<1><<<(n + 255) / 256, 256>>>(y, x, a, n);
}
