// A tile-size sweep, as a tuning study keeps one: the BK=16 and BK=32 shapes of the GEMM template,
// chosen at run time by index (umb_gemm_sweep_count() of them). None is the shape gemm_64.cu or
// gemm_128.cu launches, so that this TU names the template without instantiating those; it is the
// library's heaviest TU, as the one holding every instantiation is in a real project.
#include "umbrella.cuh"

namespace {
using gemm_fn = void (*)(int, int, int, float, const float*, const float*, float, float*);
#define UMB_SHAPE(BM, BN, BK, TM, TN) &launch_sgemm_tiled<BM, BN, BK, TM, TN>
#define UMB_SHAPES_TT(BM, BN, BK) UMB_SHAPE(BM, BN, BK, 4, 4), UMB_SHAPE(BM, BN, BK, 4, 8), UMB_SHAPE(BM, BN, BK, 8, 4), UMB_SHAPE(BM, BN, BK, 8, 8)
#define UMB_SHAPES(BK) UMB_SHAPES_TT(64, 64, BK), UMB_SHAPES_TT(64, 128, BK), UMB_SHAPES_TT(128, 64, BK), UMB_SHAPES_TT(128, 128, BK)
const gemm_fn kSweep[] = {UMB_SHAPES(16), UMB_SHAPES(32)};
}  // namespace

int umb_gemm_sweep_count() { return (int)(sizeof(kSweep) / sizeof(kSweep[0])); }

void umb_gemm_sweep(int shape, int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
  kSweep[shape](M, N, K, alpha, A, B, beta, C);
}
