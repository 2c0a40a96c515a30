/**
 * The one owner of libcuda in the kerncap process (bun:ffi). Every call's CUresult is checked and
 * turned into a KerncapError carrying the driver's own string (cuGetErrorName/cuGetErrorString).
 * Raw pointers stay inside this module; callers see numbers (device VAs as bigint) and buffers.
 * Where the library is looked for, and why one does not load: ./libcuda-search.ts.
 *
 * Struct layouts below were read off CUDA 13's cuda.h with gcc's sizeof/offsetof:
 * CUmemAllocationProp 32 B (location @8), CUmemAccessDesc 12 B (flags @8), CUlaunchConfig 56 B
 * (hStream @32, attrs @40, numAttrs @48), CUlaunchAttribute 72 B (value @8, 64 B).
 */
import { dlopen, FFIType, ptr, CString, toArrayBuffer, type Pointer } from "bun:ffi";
import { libcudaOverride } from "../env.ts";
import { KerncapError } from "../errors.ts";
import { libcudaCandidates, loaderReason, missingSymbol, noDriverError, overrideDoesNotLoad } from "./libcuda-search.ts";
export {
  bareLibraryNames,
  describeLibcudaSearch,
  describeTried,
  GPU_VERBS,
  libcudaCandidates,
  loaderReason,
  missingSymbol,
  NEEDS_GPU,
  NO_GPU_VERBS,
  noDriverError,
  overrideDoesNotLoad,
  WITHOUT_GPU,
} from "./libcuda-search.ts";

const { i32, u32, u64, ptr: P } = FFIType;

export const SYMBOLS = {
  cuInit: { args: [u32], returns: i32 },
  cuDriverGetVersion: { args: [P], returns: i32 },
  cuDeviceGetCount: { args: [P], returns: i32 },
  cuDeviceGet: { args: [P, i32], returns: i32 },
  cuDeviceGetName: { args: [P, i32, i32], returns: i32 },
  cuDeviceGetAttribute: { args: [P, i32, i32], returns: i32 },
  cuDevicePrimaryCtxRetain: { args: [P, i32], returns: i32 },
  cuDevicePrimaryCtxReset_v2: { args: [i32], returns: i32 },
  cuCtxSetCurrent: { args: [u64], returns: i32 },
  cuCtxSynchronize: { args: [], returns: i32 },
  cuGetErrorString: { args: [i32, P], returns: i32 },
  cuGetErrorName: { args: [i32, P], returns: i32 },
  cuMemGetAllocationGranularity: { args: [P, P, i32], returns: i32 },
  cuMemAddressReserve: { args: [P, u64, u64, u64, u64], returns: i32 },
  cuMemAddressFree: { args: [u64, u64], returns: i32 },
  cuMemCreate: { args: [P, u64, P, u64], returns: i32 },
  cuMemMap: { args: [u64, u64, u64, u64, u64], returns: i32 },
  cuMemUnmap: { args: [u64, u64], returns: i32 },
  cuMemRelease: { args: [u64], returns: i32 },
  cuMemSetAccess: { args: [u64, u64, P, u64], returns: i32 },
  cuMemAlloc_v2: { args: [P, u64], returns: i32 },
  cuMemFree_v2: { args: [u64], returns: i32 },
  cuMemAllocHost_v2: { args: [P, u64], returns: i32 },
  cuMemFreeHost: { args: [P], returns: i32 },
  cuMemHostRegister_v2: { args: [P, u64, u32], returns: i32 },
  cuMemHostUnregister: { args: [P], returns: i32 },
  cuMemcpyHtoD_v2: { args: [u64, P, u64], returns: i32 },
  cuMemcpyHtoDAsync_v2: { args: [u64, P, u64, u64], returns: i32 },
  cuMemcpyDtoH_v2: { args: [P, u64, u64], returns: i32 },
  cuMemcpyDtoD_v2: { args: [u64, u64, u64], returns: i32 },
  cuMemsetD8_v2: { args: [u64, FFIType.u8, u64], returns: i32 },
  cuModuleLoadData: { args: [P, P], returns: i32 },
  cuModuleUnload: { args: [u64], returns: i32 },
  cuModuleGetFunction: { args: [P, u64, P], returns: i32 },
  cuModuleGetGlobal_v2: { args: [P, P, u64, P], returns: i32 },
  cuFuncGetAttribute: { args: [P, i32, u64], returns: i32 },
  cuFuncSetAttribute: { args: [u64, i32, i32], returns: i32 },
  cuLaunchKernelEx: { args: [P, u64, P, P], returns: i32 },
  cuEventCreate: { args: [P, u32], returns: i32 },
  cuEventRecord: { args: [u64, u64], returns: i32 },
  cuEventDestroy_v2: { args: [u64], returns: i32 },
  cuEventSynchronize: { args: [u64], returns: i32 },
  cuEventElapsedTime_v2: { args: [P, u64, u64], returns: i32 },
} as const;
type Lib = ReturnType<typeof dlopen<typeof SYMBOLS>>["symbols"];
/** CUresult values this tool reacts to (cuda.h). */
export const CU = {
  SUCCESS: 0,
  ERROR_NO_DEVICE: 100,
  ERROR_NO_BINARY_FOR_GPU: 209,
  ERROR_INVALID_IMAGE: 200,
  ERROR_UNSUPPORTED_PTX_VERSION: 222,
  ERROR_NOT_FOUND: 500,
  ERROR_OUT_OF_MEMORY: 2,
  ERROR_ALREADY_MAPPED: 208,
} as const;
/** Raised for a failing driver call; `result` is the CUresult. */
export class CudaError extends KerncapError {
  constructor(
    readonly call: string,
    readonly result: number,
    text: string,
    hint?: string,
  ) {
    super("E_CUDA", `${call} failed: ${text} (CUresult ${result})`, { hint });
  }
}
/** cuInit and cuDeviceGetCount alone: a look at the GPUs without the full symbol table or a context. */
const PROBE_SYMBOLS = { cuInit: { args: [u32], returns: i32 }, cuDeviceGetCount: { args: [P], returns: i32 } } as const;
/**
 * cuInit(0) and cuDeviceGetCount through the library `name` (a candidate of libcudaCandidates).
 * @returns cuInit's CUresult (or cuDeviceGetCount's, when cuInit succeeded) and the device count
 * @throws the loader's error when `name` does not load
 */
export function countDevices(name: string): { result: number; count: number } {
  const lib = dlopen(name, PROBE_SYMBOLS);
  try {
    const r = lib.symbols.cuInit(0);
    const c = new Int32Array(1);
    return { result: r === 0 ? lib.symbols.cuDeviceGetCount(c) : r, count: c[0]! };
  } finally {
    lib.close();
  }
}
/** One CUDA device as `kerncap doctor --json` lists it: its ordinal, name, architecture (sm_XY) and memory (bytes). */
export interface DeviceInfo {
  index: number;
  name: string;
  arch: string;
  memoryBytes: number;
}

/** What listDevices loads: cuInit, the count, and each device's name, attributes and memory (no context is made). */
const LIST_SYMBOLS = {
  ...PROBE_SYMBOLS,
  cuDeviceGet: { args: [P, i32], returns: i32 },
  cuDeviceGetName: { args: [P, i32, i32], returns: i32 },
  cuDeviceGetAttribute: { args: [P, i32, i32], returns: i32 },
  cuDeviceTotalMem_v2: { args: [P, i32], returns: i32 },
} as const;

/**
 * Every CUDA device the driver `name` (a candidate of libcudaCandidates) sees, in ordinal order
 * (CUDA_VISIBLE_DEVICES applies): cuInit, cuDeviceGetCount, then for each cuDeviceGet,
 * cuDeviceGetName, the compute capability (attributes 75/76) and cuDeviceTotalMem; no context.
 * [] when cuInit or the count fails (no device); a device whose query fails is left out.
 * @throws the loader's error when `name` does not load
 */
export function listDevices(name: string): DeviceInfo[] {
  const lib = dlopen(name, LIST_SYMBOLS);
  try {
    const f = lib.symbols;
    const c = new Int32Array(1);
    if (f.cuInit(0) !== 0 || f.cuDeviceGetCount(c) !== 0) return [];
    const out: DeviceInfo[] = [];
    for (let i = 0; i < c[0]!; i++) {
      const dev = new Int32Array(1);
      const b = new Uint8Array(256);
      const major = new Int32Array(1);
      const minor = new Int32Array(1);
      const mem = new BigUint64Array(1);
      if (f.cuDeviceGet(dev, i) !== 0 || f.cuDeviceGetName(b, 256, dev[0]!) !== 0) continue;
      if (f.cuDeviceGetAttribute(major, 75, dev[0]!) !== 0 || f.cuDeviceGetAttribute(minor, 76, dev[0]!) !== 0) continue;
      if (f.cuDeviceTotalMem_v2(mem, dev[0]!) !== 0) continue;
      out.push({ index: i, name: new TextDecoder().decode(b.subarray(0, b.indexOf(0))), arch: `sm_${major[0]}${minor[0]}`, memoryBytes: Number(mem[0]) });
    }
    return out;
  } finally {
    lib.close();
  }
}

/**
 * A cheap check for an NVIDIA GPU before starting an application (cuInit + cuDeviceGetCount only).
 * @returns the number of CUDA devices (≥ 1).
 * @throws KerncapError E_NO_GPU saying what was tried.
 */
export function probeGpu(): number {
  const tried: { name: string; reason: string }[] = [];
  for (const n of libcudaCandidates()) {
    let d;
    try {
      d = countDevices(n);
    } catch (e) {
      tried.push({ name: n, reason: loaderReason(e) });
      continue;
    }
    if (d.result !== 0 || d.count === 0) {
      throw new KerncapError("E_NO_GPU", `no usable NVIDIA GPU: cuInit returned ${d.result}${d.result === 100 ? " (CUDA_ERROR_NO_DEVICE)" : ""}`, {
        hint: "Check nvidia-smi and CUDA_VISIBLE_DEVICES; kerncap captures on a machine with an NVIDIA GPU.",
      });
    }
    return d.count;
  }
  if (libcudaOverride(process.env)) throw overrideDoesNotLoad(tried);
  throw noDriverError(tried);
}
/**
 * The driver's CUDA version through the library `name` (cuDriverGetVersion: no cuInit needed), and
 * the first entry point of SYMBOLS it lacks (an older driver), for `kerncap doctor`.
 * @returns cuDriverGetVersion's CUresult, the version (13000 for 13.0), and `lacks`: the missing
 *   symbol or the loader's reason, undefined when every entry point replay calls is there
 * @throws the loader's error when `name` does not load
 */
export function driverVersion(name: string): { result: number; version: number; lacks?: string } {
  const lib = dlopen(name, { cuDriverGetVersion: { args: [P], returns: i32 } });
  const v = new Int32Array(1);
  const result = lib.symbols.cuDriverGetVersion(v);
  lib.close();
  try {
    dlopen(name, SYMBOLS).close();
    return { result, version: v[0]! };
  } catch (e) {
    return { result, version: v[0]!, lacks: missingSymbol(loaderReason(e)) ?? loaderReason(e) };
  }
}
let cached: Cuda | undefined;
/**
 * The CUDA driver, initialised (cuInit) with device `ordinal`'s primary context current.
 * @throws KerncapError E_NO_GPU when libcuda cannot be loaded or no CUDA device is present.
 */
export function cuda(ordinal = 0): Cuda {
  if (cached) return cached;
  const tried: { name: string; reason: string }[] = [];
  let lib: Lib | undefined;
  for (const name of libcudaCandidates()) {
    try {
      lib = dlopen(name, SYMBOLS).symbols;
      break;
    } catch (e) {
      tried.push({ name, reason: loaderReason(e) });
    }
  }
  if (!lib) {
    // a libcuda that loads but lacks an entry point kerncap calls: an older driver, not a missing one
    const lacking = tried.map((t) => ({ ...t, symbol: missingSymbol(t.reason) })).find((t) => t.symbol);
    if (lacking) {
      throw new KerncapError(
        "E_NO_GPU",
        `${lacking.name} loads but lacks ${lacking.symbol}, which kerncap calls: the NVIDIA driver is older than kerncap needs, or this is not the driver's libcuda`,
        {
          hint: "Update the NVIDIA driver (kerncap is built against CUDA 13), or set KERNCAP_LIBCUDA to the driver's libcuda.so.1; `kerncap doctor` checks the same.",
        },
      );
    }
    if (libcudaOverride(process.env)) throw overrideDoesNotLoad(tried);
    throw noDriverError(tried);
  }
  cached = new Cuda(lib, ordinal);
  return cached;
}
/**
 * Destroy the primary context of the process's Cuda instance, if one was created: frees every
 * device allocation and VA reservation it holds (e.g. before another process replays instead).
 */
export function resetCuda(): void {
  if (!cached) return;
  cached.lib.cuDevicePrimaryCtxReset_v2(cached.device);
  cached = undefined;
  resets++;
}
let resets = 0;
/**
 * How many times this process reset its device context (resetCuda: after a kernel fault). The
 * driver does not always give a context back after a sticky fault: on the H200 (driver 580) the
 * next cuDevicePrimaryCtxRetain failed with CUDA_ERROR_ILLEGAL_ADDRESS, so a process that must
 * go on (kerncap check's worker) ends after one and is started again.
 */
export function cudaResetCount(): number {
  return resets;
}
/** Typed wrapper over libcuda; one instance per process. */
export class Cuda {
  readonly device: number;
  readonly context: bigint;

  constructor(
    readonly lib: Lib,
    ordinal: number,
  ) {
    const r = lib.cuInit(0);
    if (r !== 0) {
      throw new KerncapError("E_NO_GPU", `cuInit failed: ${this.errorText(r)}`, {
        hint: "No usable NVIDIA GPU is visible to this process (check nvidia-smi and CUDA_VISIBLE_DEVICES).",
      });
    }
    const n = new Int32Array(1);
    this.check("cuDeviceGetCount", lib.cuDeviceGetCount(n));
    if (n[0]! <= ordinal) {
      throw new KerncapError("E_NO_GPU", `CUDA device ${ordinal} does not exist (${n[0]} visible)`, {
        hint: "Check CUDA_VISIBLE_DEVICES.",
      });
    }
    const d = new Int32Array(1);
    this.check("cuDeviceGet", lib.cuDeviceGet(d, ordinal));
    this.device = d[0]!;
    const ctx = new BigUint64Array(1);
    this.check("cuDevicePrimaryCtxRetain", lib.cuDevicePrimaryCtxRetain(ctx, this.device));
    this.context = ctx[0]!;
    this.check("cuCtxSetCurrent", lib.cuCtxSetCurrent(this.context));
  }

  /** "NAME: description" for a CUresult, from cuGetErrorName/cuGetErrorString. */
  errorText(r: number): string {
    const p = new BigUint64Array(1);
    let name = "";
    let desc = "";
    if (this.lib.cuGetErrorName(r, p) === 0 && p[0]) name = new CString(Number(p[0]) as Pointer).toString();
    if (this.lib.cuGetErrorString(r, p) === 0 && p[0]) desc = new CString(Number(p[0]) as Pointer).toString();
    return name ? `${name}: ${desc}` : `error ${r}`;
  }

  check(call: string, r: number, hint?: string): void {
    if (r !== 0) throw new CudaError(call, r, this.errorText(r), hint);
  }

  driverVersion(): number {
    const v = new Int32Array(1);
    this.check("cuDriverGetVersion", this.lib.cuDriverGetVersion(v));
    return v[0]!;
  }

  deviceName(): string {
    const b = new Uint8Array(256);
    this.check("cuDeviceGetName", this.lib.cuDeviceGetName(b, 256, this.device));
    return new TextDecoder().decode(b.subarray(0, b.indexOf(0)));
  }

  /** cuDeviceGetAttribute(attr) of this device (a CUdevice_attribute number, cuda.h). */
  attribute(attr: number): number {
    const v = new Int32Array(1);
    this.check("cuDeviceGetAttribute", this.lib.cuDeviceGetAttribute(v, attr, this.device));
    return v[0]!;
  }

  /** "sm_90" from CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR/MINOR (75/76). */
  arch(): string {
    return `sm_${this.attribute(75)}${this.attribute(76)}`;
  }

  /** L2 cache size in bytes (CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 38): 50 MiB on an H200. */
  l2Bytes(): number {
    return this.attribute(38);
  }

  /** "00000000:1B:00.0", nvidia-smi's spelling of the PCI address (CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID 50, PCI_BUS_ID 33, PCI_DEVICE_ID 34). */
  pciBusId(): string {
    const hex = (x: number, n: number) => x.toString(16).toUpperCase().padStart(n, "0");
    return `${hex(this.attribute(50), 8)}:${hex(this.attribute(33), 2)}:${hex(this.attribute(34), 2)}.0`;
  }

  private allocProp(): Uint8Array {
    const prop = new Uint8Array(32);
    const dv = new DataView(prop.buffer);
    dv.setUint32(0, 1, true); // CU_MEM_ALLOCATION_TYPE_PINNED
    dv.setUint32(8, 1, true); // location.type = CU_MEM_LOCATION_TYPE_DEVICE
    dv.setInt32(12, this.device, true);
    return prop;
  }

  /** Minimum VMM allocation granularity in bytes (cuMemGetAllocationGranularity). */
  granularity(): number {
    const g = new BigUint64Array(1);
    this.check("cuMemGetAllocationGranularity", this.lib.cuMemGetAllocationGranularity(g, this.allocProp(), 0));
    return Number(g[0]);
  }

  /**
   * Map device memory at exactly [va, va+size): reserve the VA range at that address, create
   * physical memory, map it, grant read/write. size and va must be granularity multiples.
   * @returns the physical allocation's handle, for unmapAt
   * @throws KerncapError E_VA_TAKEN when the driver grants another address or refuses; a CudaError
   *   when the memory cannot be created or mapped (what was done is undone first).
   */
  mapAt(va: bigint, size: number): bigint {
    const out = new BigUint64Array(1);
    const r = this.lib.cuMemAddressReserve(out, size, 0, va, 0);
    const range = `0x${va.toString(16)}-0x${(va + BigInt(size)).toString(16)}`;
    if (r !== 0 || out[0] !== va) {
      if (r === 0) this.lib.cuMemAddressFree(out[0]!, size);
      throw new KerncapError(
        "E_VA_TAKEN",
        `captured VA range ${range} (${size} bytes) is not free in this process` +
          (r === 0 ? ` (the driver offered 0x${out[0]!.toString(16)})` : `: ${this.errorText(r)}`),
        {
          hint: "Something already occupies it (another CUDA allocation or a host mapping); replay in a fresh process without other GPU work, e.g. `kerncap replay` on its own.",
        },
      );
    }
    const h = new BigUint64Array(1);
    let mapped = false;
    try {
      this.check("cuMemCreate", this.lib.cuMemCreate(h, size, this.allocProp(), 0), "Not enough free device memory for the captured regions?");
      this.check("cuMemMap", this.lib.cuMemMap(va, size, 0, h[0]!, 0));
      mapped = true;
      const desc = new Uint8Array(12);
      const dv = new DataView(desc.buffer);
      dv.setUint32(0, 1, true);
      dv.setInt32(4, this.device, true);
      dv.setUint32(8, 3, true); // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
      this.check("cuMemSetAccess", this.lib.cuMemSetAccess(va, size, desc, 1));
    } catch (e) {
      if (mapped) this.lib.cuMemUnmap(va, size);
      if (h[0]) this.lib.cuMemRelease(h[0]);
      this.lib.cuMemAddressFree(va, size);
      throw e;
    }
    return h[0]!;
  }

  /**
   * Undo mapAt: unmap [va, va+size), release its physical memory, free the VA reservation
   * (cuMemUnmap, cuMemRelease, cuMemAddressFree). Returns the first failing CUresult (0: all
   * done) and never throws: it runs in cleanup paths, after a kernel fault too.
   */
  unmapAt(va: bigint, size: number, handle: bigint): number {
    const rs = [this.lib.cuMemUnmap(va, size), this.lib.cuMemRelease(handle), this.lib.cuMemAddressFree(va, size)];
    return rs.find((r) => r !== 0) ?? 0;
  }

  memAlloc(size: number): bigint {
    const p = new BigUint64Array(1);
    this.check("cuMemAlloc", this.lib.cuMemAlloc_v2(p, size));
    return p[0]!;
  }

  memFree(dptr: bigint): void {
    this.check("cuMemFree", this.lib.cuMemFree_v2(dptr));
  }

  /** Page-locked host buffer of `size` bytes (cuMemAllocHost), as a Uint8Array view. */
  hostAlloc(size: number): Uint8Array {
    const p = new BigUint64Array(1);
    this.check("cuMemAllocHost", this.lib.cuMemAllocHost_v2(p, size));
    return new Uint8Array(toArrayBuffer(Number(p[0]) as Pointer, 0, size));
  }

  /** Free a hostAlloc buffer (cuMemFreeHost); the CUresult is returned, never thrown (cleanup paths). */
  hostFree(view: Uint8Array): number {
    return this.lib.cuMemFreeHost(view);
  }

  /** Pin host memory in place (cuMemHostRegister, READ_ONLY when readOnly). Returns false if refused. */
  hostRegister(view: Uint8Array, readOnly: boolean): boolean {
    return this.lib.cuMemHostRegister_v2(view, view.byteLength, readOnly ? 0x08 : 0) === 0;
  }

  hostUnregister(view: Uint8Array): void {
    this.lib.cuMemHostUnregister(view);
  }

  htod(dst: bigint, src: Uint8Array): void {
    if (src.byteLength) this.check("cuMemcpyHtoD", this.lib.cuMemcpyHtoD_v2(dst, src, src.byteLength));
  }

  /** Asynchronous host→device copy on the null stream: src must be pinned (hostAlloc or hostRegister) and stay so until sync(). */
  htodAsync(dst: bigint, src: Uint8Array): void {
    if (src.byteLength) this.check("cuMemcpyHtoDAsync", this.lib.cuMemcpyHtoDAsync_v2(dst, src, src.byteLength, 0n));
  }

  dtoh(dst: Uint8Array, src: bigint): void {
    if (dst.byteLength) this.check("cuMemcpyDtoH", this.lib.cuMemcpyDtoH_v2(dst, src, dst.byteLength));
  }

  dtod(dst: bigint, src: bigint, size: number): void {
    if (size) this.check("cuMemcpyDtoD", this.lib.cuMemcpyDtoD_v2(dst, src, size));
  }

  /** Set `size` bytes at dst to `value` (cuMemsetD8). */
  memset(dst: bigint, value: number, size: number): void {
    if (size) this.check("cuMemsetD8", this.lib.cuMemsetD8_v2(dst, value, size));
  }

  /** Load a cubin/fatbin/PTX image (cuModuleLoadData). Returns the raw CUresult on failure too. */
  moduleLoad(image: Uint8Array): { module?: bigint; result: number; text: string } {
    const m = new BigUint64Array(1);
    // PTX must be NUL-terminated; copying also keeps the buffer alive across the call.
    const buf = new Uint8Array(image.byteLength + 1);
    buf.set(image);
    const r = this.lib.cuModuleLoadData(m, buf);
    return r === 0 ? { module: m[0]!, result: 0, text: "" } : { result: r, text: this.errorText(r) };
  }

  /**
   * Unload a module (cuModuleUnload): its functions and globals are gone. Returns the CUresult
   * and never throws: it runs in cleanup paths, where a kernel fault (a sticky error that every
   * later call returns) is the error to report.
   */
  moduleUnload(mod: bigint): number {
    return this.lib.cuModuleUnload(mod);
  }

  moduleGetFunction(mod: bigint, name: string): bigint | undefined {
    const f = new BigUint64Array(1);
    const r = this.lib.cuModuleGetFunction(f, mod, Buffer.from(name + "\0"));
    if (r === CU.ERROR_NOT_FOUND) return undefined;
    this.check("cuModuleGetFunction", r);
    return f[0]!;
  }

  moduleGetGlobal(mod: bigint, name: string): { va: bigint; size: number } | undefined {
    const d = new BigUint64Array(1);
    const s = new BigUint64Array(1);
    const r = this.lib.cuModuleGetGlobal_v2(d, s, mod, Buffer.from(name + "\0"));
    if (r !== 0) return undefined;
    return { va: d[0]!, size: Number(s[0]) };
  }

  funcGetAttribute(f: bigint, attr: number): number {
    const v = new Int32Array(1);
    this.check("cuFuncGetAttribute", this.lib.cuFuncGetAttribute(v, attr, f));
    return v[0]!;
  }

  funcSetAttribute(f: bigint, attr: number, value: number): void {
    this.check("cuFuncSetAttribute", this.lib.cuFuncSetAttribute(f, attr, value));
  }

  /**
   * Launch through cuLaunchKernelEx with a packed parameter buffer
   * (CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE) and raw launch attributes (id + 64-byte value each).
   */
  launch(
    f: bigint,
    grid: readonly [number, number, number],
    block: readonly [number, number, number],
    sharedMemBytes: number,
    params: Uint8Array,
    attrs: { id: number; value: Uint8Array }[],
    stream = 0n,
  ): void {
    const attrBuf = new Uint8Array(Math.max(1, attrs.length) * 72);
    const adv = new DataView(attrBuf.buffer);
    attrs.forEach((a, i) => {
      adv.setUint32(i * 72, a.id, true);
      attrBuf.set(a.value.subarray(0, 64), i * 72 + 8);
    });
    const cfg = new Uint8Array(56);
    const dv = new DataView(cfg.buffer);
    [...grid, ...block, sharedMemBytes].forEach((x, i) => dv.setUint32(i * 4, x, true));
    dv.setBigUint64(32, stream, true);
    dv.setBigUint64(40, attrs.length ? BigInt(ptr(attrBuf)) : 0n, true);
    dv.setUint32(48, attrs.length, true);
    // An empty buffer still needs a valid pointer; size 0 tells the driver there is nothing.
    const pbuf = params.byteLength ? params : new Uint8Array(8);
    const size = new BigUint64Array([BigInt(params.byteLength)]);
    const extra = new BigUint64Array([1n, BigInt(ptr(pbuf)), 2n, BigInt(ptr(size)), 0n]);
    this.check("cuLaunchKernelEx", this.lib.cuLaunchKernelEx(cfg, f, null, extra));
    // keep the buffers referenced until after the call
    void [attrBuf, pbuf, size, extra];
  }

  sync(): void {
    this.check("cuCtxSynchronize", this.lib.cuCtxSynchronize(), "The kernel faulted or ran out of resources on replay.");
  }

  eventCreate(): bigint {
    const e = new BigUint64Array(1);
    this.check("cuEventCreate", this.lib.cuEventCreate(e, 0));
    return e[0]!;
  }

  /** Destroy an event (cuEventDestroy); the CUresult is returned, never thrown (cleanup paths). */
  eventDestroy(e: bigint): number {
    return this.lib.cuEventDestroy_v2(e);
  }

  eventRecord(e: bigint, stream = 0n): void {
    this.check("cuEventRecord", this.lib.cuEventRecord(e, stream));
  }

  /** Milliseconds between two recorded events (cuEventElapsedTime). */
  eventElapsedMs(a: bigint, b: bigint): number {
    this.check("cuEventSynchronize", this.lib.cuEventSynchronize(b));
    const ms = new Float32Array(1);
    this.check("cuEventElapsedTime", this.lib.cuEventElapsedTime_v2(ms, a, b));
    return ms[0]!;
  }
}
