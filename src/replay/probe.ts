/** A cheap check for an NVIDIA GPU before starting an application (cuInit + cuDeviceGetCount only). */
import { dlopen, FFIType } from "bun:ffi";
import { libcudaOverride } from "../env.ts";
import { KerncapError } from "../errors.ts";
import { libcudaCandidates, loaderReason, noDriverError, overrideDoesNotLoad } from "./cuda.ts";

/**
 * @returns the number of CUDA devices (≥ 1).
 * @throws KerncapError E_NO_GPU saying what was tried.
 */
export function probeGpu(): number {
  const tried: { name: string; reason: string }[] = [];
  for (const n of libcudaCandidates()) {
    let lib;
    try {
      lib = dlopen(n, { cuInit: { args: [FFIType.u32], returns: FFIType.i32 }, cuDeviceGetCount: { args: [FFIType.ptr], returns: FFIType.i32 } });
    } catch (e) {
      tried.push({ name: n, reason: loaderReason(e) });
      continue;
    }
    const r = lib.symbols.cuInit(0);
    const c = new Int32Array(1);
    const r2 = r === 0 ? lib.symbols.cuDeviceGetCount(c) : r;
    lib.close();
    if (r !== 0 || r2 !== 0 || c[0] === 0) {
      throw new KerncapError("E_NO_GPU", `no usable NVIDIA GPU: cuInit returned ${r}${r === 100 ? " (CUDA_ERROR_NO_DEVICE)" : ""}`, {
        hint: "Check nvidia-smi and CUDA_VISIBLE_DEVICES; kerncap captures on a machine with an NVIDIA GPU.",
      });
    }
    return c[0]!;
  }
  if (libcudaOverride(process.env)) throw overrideDoesNotLoad(tried);
  throw noDriverError(tried);
}
