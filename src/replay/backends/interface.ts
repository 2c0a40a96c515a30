/**
 * The replay backend interface: what the one replay engine (src/replay/engine.ts) asks of a
 * vendor's runtime. Two implementations: CUDA (./cuda.ts over the libcuda wrapper
 * src/native/libcuda.ts) and HSA (./hsa.ts over the libhsa-runtime64 wrapper
 * src/native/libhsa.ts). ./factory.ts is the one place that branches on the vendor.
 *
 * Addresses are device virtual addresses (bigint), sizes bytes. Every call is synchronous unless
 * its name says Async; `sync` waits for the device.
 */
import type { Manifest } from "../../format/manifest.ts";

/** The kc64 scan of a device range: one entry per chunk. */
export interface ChunkScan {
  /** kc64 of each chunk, 16 hex digits. */
  hash: string[];
  /** 1 when the chunk holds a non-zero byte. */
  nonzero: Uint32Array;
}

/** The GPU's clock state while the timed launches ran (ReplayBackend.clocks; CUDA: ./cuda-clocks.ts, from nvidia-smi). */
export interface ClockState {
  /** MHz, null where nvidia-smi says [N/A] or [Not Supported]. */
  smMHz: number | null;
  memMHz: number | null;
  applicationsSmMHz: number | null;
  maxSmMHz: number | null;
  /** Where the figures come from. */
  source: string;
}

/** Device and host memory operations (the subset of the CUDA driver API the engine uses). */
export interface DeviceMemory {
  memAlloc(size: number): bigint;
  memFree(dptr: bigint): void;
  /** Page-locked host memory, or plain host memory where the backend has no cheaper staging. */
  hostAlloc(size: number): Uint8Array;
  /** Give back a hostAlloc buffer (never throws: cleanup paths). */
  hostFree(view: Uint8Array): void;
  /** Pin a host range for asynchronous copies; false when the runtime refuses (the engine stages instead). */
  hostRegister(view: Uint8Array, readOnly: boolean): boolean;
  hostUnregister(view: Uint8Array): void;
  htod(dst: bigint, src: Uint8Array): void;
  /** Asynchronous host→device copy from a registered range (complete at sync). */
  htodAsync(dst: bigint, src: Uint8Array): void;
  dtoh(dst: Uint8Array, src: bigint): void;
  dtod(dst: bigint, src: bigint, size: number): void;
  /** Set `size` bytes at dst to `value` (0..255). */
  memset(dst: bigint, value: number, size: number): void;
  sync(): void;
}

/** kc64 per chunk of a device range (on the GPU for CUDA, on the host for HSA) and a busy-wait to hide the launch path. */
export interface DeviceScanner {
  /** Shapes: arrays of ceil(size / chunkBytes) entries. */
  scan(va: bigint, size: number, chunkBytes: number): ChunkScan;
  /** Keep the device busy `us` µs before a timed launch; no-op where the backend times otherwise. */
  spin(us: number): void;
  /**
   * Read [va, va + size) on the device, asynchronously, results discarded: an L2 flush that leaves
   * clean lines (a memset leaves dirty ones, written back while the next kernel runs: measured on
   * the H200, a 46 µs Triton kernel timed 12% slower after a memset flush than ncu's
   * --cache-control all gives). @returns false where the backend cannot (the engine memsets then)
   */
  evict?(va: bigint, size: number): boolean;
}

/** A kernel of a loaded module, ready to be launched with the captured launch configuration. */
export interface ReplayKernel {
  /** Apply the captured function attributes (CUDA cuFuncSetAttribute; none on HSA). */
  applyAttributes(attrs: Manifest["functionAttributes"]): void;
  /**
   * A launch of this kernel with the captured grid, block, dynamic shared memory, parameter bytes
   * and launch attributes. Calling it queues one launch (CUDA, asynchronous) or dispatches and
   * waits (HSA).
   */
  launcher(m: Manifest, params: Uint8Array): () => void;
}

/** A loaded module (CUDA module / HSA executable). */
export interface ReplayModule {
  /** The kernel named `name` (mangled), or undefined when the module has none. */
  kernel(name: string): ReplayKernel | undefined;
  /** A module-scope variable's address and size in this loaded module, or undefined. */
  global(name: string): { va: bigint; size: number } | undefined;
  /**
   * Every module-scope variable a kernel of this module can write (CUDA: `__device__` variables,
   * sections `.nv.global` and `.nv.global.init` of the image's symbol table, src/codeobj/cubin.ts
   * cubinGlobals, `__managed__` ones too; `__constant__` left out), at its address in this loaded
   * module, sizes in bytes. The engine keeps their state as loaded and puts it back before every
   * launch of a rebuilt module (src/replay/module-state.ts). Absent where the backend cannot list
   * them (HSA: not built); [] for an image it cannot read (PTX only).
   */
  writableGlobals?(): { name: string; va: bigint; size: number }[];
  unload(): void;
}

/** One vendor's runtime on one device, as the replay engine uses it. */
export interface ReplayBackend extends DeviceMemory {
  readonly vendor: Manifest["device"]["vendor"];
  deviceName(): string;
  arch(): string;
  /** Alignment (bytes) of the VA spans reserved at fixed addresses. */
  reserveAlignment(): number;
  /** Reserve [va, va + size) at exactly va and back it with device memory. @throws KerncapError E_VA_TAKEN */
  mapAt(va: bigint, size: number): void;
  scanner(): Promise<DeviceScanner>;
  /** Load a module image. @throws KerncapError E_ARCH (no code for this device), E_CUDA / E_HSA */
  loadModule(image: Uint8Array, file: string, m: Manifest): ReplayModule;
  /** Time one launch (µs): `launch` is called between the backend's timers, after `spinUs` µs of DeviceScanner.spin where the backend hides the launch path so. */
  timedLaunch(launch: () => void, spinUs: number): number;
  /**
   * Time launches by the GPU's own kernel timestamps instead of timers around the launch, where
   * the backend can (CUDA: CUPTI's kernel activity records, ./cuda-kernel-clock.ts).
   * @returns undefined when it is on; else why not (one line), and timedLaunch keeps its timers
   */
  useKernelClock?(): string | undefined;
  /** How timedLaunch measures (the result's timing.method): the spin, the warm-up launches and `l2`, the session's words for the L2 state. */
  timingMethod(o: { spinUs: number; warmup: number; l2: string }): string;
  /** L2 cache size (bytes), where the runtime says (CUDA); sizes the L2 flush. */
  l2Bytes?(): number;
  /**
   * Start reading the device's clocks as the timed launches start (read after them: the clocks
   * of a busy GPU), where the backend can (CUDA: nvidia-smi on the device's PCI address).
   * @returns a promise of the state, null when unknown; never rejects
   */
  clocks?(): Promise<ClockState | null>;
  /** Whether the scans run on the device ("device") or read memory back to the host ("host"). */
  readonly scansOn: "device" | "host";
  /** The runtime error of a faulting launch as { code, name }, or null when `e` is not one. */
  launchFault(e: unknown): { code: number; name: string } | null;
  /** Whether `e` (from a launch) left the device context unusable (CUDA: any driver error after a kernel fault), so that only reset() and a new session go on. */
  isContextLost(e: unknown): boolean;
  /**
   * Release what the backend holds for this replay: events, queues, the scan kernel's module and
   * buffers, and every span mapAt reserved (unmapped, its memory released, the VA range freed), so
   * that one process replays capture after capture in one context (`kerncap check`). Never throws.
   */
  close(): void;
  /** After close: destroy the device context (CUDA: the primary context, and with it every allocation and VA reservation; HSA: close freed them). */
  reset(): void;
}
