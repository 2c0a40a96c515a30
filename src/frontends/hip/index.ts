/**
 * The HIP frontend (AMD, captured by c/hsa/kerncap_hsa.c, replayed by the HSA backend). Its templates
 * are registered (embedded in the executable); its reproducer renderer (./repro.ts
 * renderHipReproducer) needs the kernel's source and compile flags, which the HSA capture does
 * not locate yet, so it is not run at capture, and `kerncap validate` does not rebuild HIP
 * reproducers so far.
 */
import type { Frontend } from "../frontend.ts";
import { CUDA_SOURCE_SUFFIXES } from "../cuda/index.ts";
import { HIP_TEMPLATES } from "./templates.ts";

export const hipFrontend: Frontend = {
  name: "hip",
  label: "HIP",
  validates: false,
  templates: HIP_TEMPLATES,
  sourceSuffixes: [...CUDA_SOURCE_SUFFIXES, ".hip"],
};
