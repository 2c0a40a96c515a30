/**
 * The HIP frontend (AMD, captured by c/kerncap_hsa.c, replayed by the HSA backend). Its reproducer
 * renderer (./repro.ts renderHipReproducer) is not wired into capture yet, and `kerncap validate`
 * does not rebuild HIP reproducers so far.
 */
import type { Frontend } from "../frontend.ts";

export const hipFrontend: Frontend = {
  name: "hip",
  validates: false,
};
