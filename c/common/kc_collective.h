/*
 * Collective kernels: kernels of communication libraries that wait on their peer ranks (NCCL and
 * RCCL: ncclDevKernel_*, ncclDevKernelDebug_*, ncclKernel_*; NVSHMEM's nvshmemi_/nvshmemx_ host
 * side kernels). Captured alone they could not run (a replay has no peers), and the capture's
 * synchronize and snapshot around one would stall every rank of the job waiting on it; so the
 * library never makes one a target (target_mask in c/cuda/kerncap_cuda.c): it counts its launches and
 * nothing more. The same list is src/capture/collective.ts's (test: test/cpu/capture/collective.test.ts
 * runs c/test/collective_main.c on the same names).
 */
#ifndef KC_COLLECTIVE_H
#define KC_COLLECTIVE_H
#include <string.h>

/* 1 when a kernel name (mangled or demangled) is one of a collective library's, else 0. */
static inline int kc_is_collective(const char *name) {
  static const char *const marks[] = {"ncclDevKernel", "ncclKernel", "nvshmemi_", "nvshmemx_"};
  if (!name) return 0;
  for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
    if (strstr(name, marks[i])) return 1;
  return 0;
}
#endif
