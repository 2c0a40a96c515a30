/**
 * Collective kernels: kernels of communication libraries that wait on their peer ranks. A capture
 * cannot replay one alone (the replay has no peers), and the capture library's synchronize and
 * snapshot around one would stall the job; so c/cuda/kerncap_cuda.c never makes one a target (the same
 * names: c/common/kc_collective.h) and only counts it; `kerncap run` says why (E_COLLECTIVE) and `list`
 * marks them. Pure, no GPU.
 */

/** Name marks, in mangled or demangled names (the identifier appears in both), and their library. */
const MARKS: { mark: string; library: string }[] = [
  { mark: "ncclDevKernel", library: "NCCL" }, // ncclDevKernel_AllReduce_Sum_f32_RING_LL, ncclDevKernelDebug_*
  { mark: "ncclKernel", library: "NCCL" }, // NCCL < 2.19 and RCCL: ncclKernel_*
  { mark: "nvshmemi_", library: "NVSHMEM" },
  { mark: "nvshmemx_", library: "NVSHMEM" },
];

/** The communication library a kernel belongs to ("NCCL", "NVSHMEM"), or undefined for any other kernel. */
export function collectiveLibrary(name: string, demangled = ""): string | undefined {
  return MARKS.find((m) => name.includes(m.mark) || demangled.includes(m.mark))?.library;
}

/** Every mark the classifier knows (the C header's list must hold the same ones). */
export const COLLECTIVE_MARKS: readonly string[] = MARKS.map((m) => m.mark);
