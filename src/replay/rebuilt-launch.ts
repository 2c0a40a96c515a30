/**
 * A rebuilt module's own launch configuration (a Triton build's num_warps and shared memory):
 * the captured launch with its block and dynamic shared memory.
 */
import type { Manifest } from "../format/manifest.ts";

/** MAX_DYNAMIC_SHARED_SIZE_BYTES (CUfunction_attribute 8): a kernel's dynamic shared memory above 48 KiB needs it raised. */
export const MAX_DYNAMIC_SHARED = 8;

/**
 * The captured launch with a rebuilt module's block and dynamic shared memory (RunOptions.launchOf),
 * the function's dynamic shared memory limit raised to it where it needs more than captured.
 */
export function withRebuiltLaunch(m: Manifest, r: { block: [number, number, number]; sharedMemBytes: number }): Manifest {
  const attrs = m.functionAttributes.filter((a) => a.id !== MAX_DYNAMIC_SHARED);
  const cap = m.functionAttributes.find((a) => a.id === MAX_DYNAMIC_SHARED)?.value ?? 0;
  const need =
    r.sharedMemBytes > cap
      ? [{ id: MAX_DYNAMIC_SHARED, name: "MAX_DYNAMIC_SHARED_SIZE_BYTES", value: r.sharedMemBytes }]
      : m.functionAttributes.filter((a) => a.id === MAX_DYNAMIC_SHARED);
  return { ...m, launch: { ...m.launch, block: r.block, sharedMemBytes: r.sharedMemBytes }, functionAttributes: [...attrs, ...need] };
}
