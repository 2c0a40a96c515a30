/**
 * The one place that branches on a capture's device vendor for replay: which ReplayBackend
 * (./interface.ts) opens, what the device is, how often this process reset a device context.
 * A new backend is one more file beside ./cuda.ts and ./hsa.ts and one more branch here.
 */
import type { Manifest } from "../../format/manifest.ts";
import { cudaBackend, cudaDeviceArch, cudaDeviceResets } from "./cuda.ts";
import { hsaBackend } from "./hsa.ts";
import type { ReplayBackend } from "./interface.ts";
import { setStdoutAside } from "../../native/stdout-aside.ts";

/**
 * The backend for a capture's device vendor: CUDA for NVIDIA, HSA for AMD, on device `ordinal`
 * (default: the captured one, manifest device.ordinal).
 * @throws KerncapError E_NO_GPU, E_CUDA_NOT_FOUND / E_HSA_NOT_FOUND, E_HSA_VMEM, E_ARCH
 */
export function openBackend(m: Manifest, ordinal = m.device.ordinal): ReplayBackend {
  const backend = m.device.vendor === "amd" ? hsaBackend(m, ordinal) : cudaBackend(m, ordinal);
  // before any module of the capture runs: its printf reaches fd 1 raw (a received module's strings are anyone's)
  setStdoutAside();
  return backend;
}

/**
 * The architecture of device `ordinal` of `vendor` as the manifest writes it (NVIDIA: "sm_90",
 * from the driver's compute capability), without opening a replay; undefined for a vendor whose
 * captures are not rebuilt for another architecture (AMD).
 * @throws KerncapError E_NO_GPU, E_CUDA_NOT_FOUND
 */
export function deviceArch(vendor: Manifest["device"]["vendor"], ordinal = 0): string | undefined {
  return vendor === "nvidia" ? cudaDeviceArch(ordinal) : undefined;
}

/**
 * How many times this process reset a device context after a kernel fault (CUDA: resetCuda; HSA
 * queues are not reset). A process that must go on after one starts afresh instead: the driver
 * may not give a context back after a sticky fault (src/native/libcuda.ts cudaResetCount).
 */
export function deviceResets(): number {
  return cudaDeviceResets();
}
