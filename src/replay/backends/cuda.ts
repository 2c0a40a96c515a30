/**
 * The CUDA replay backend (./interface.ts) over the libcuda wrapper (src/native/libcuda.ts): fixed-VA
 * spans through the VMM API, the scan kernel on the GPU (./cuda-scan.ts), cuLaunchKernelEx with the
 * captured launch attributes, CUDA events around each timed launch, or the GPU's own kernel
 * timestamps from CUPTI (./cuda-kernel-clock.ts) when the session asks (useKernelClock).
 */
import { cubinGlobals } from "../../codeobj/cubin.ts";
import { pickCubin } from "../../codeobj/fatbin.ts";
import { describeModule, jitPtx } from "../../codeobj/index.ts";
import { KerncapError } from "../../errors.ts";
import { log } from "../../log.ts";
import type { Manifest } from "../../format/manifest.ts";
import type { DeviceScanner, ReplayBackend, ReplayKernel, ReplayModule } from "./interface.ts";
import { CU, CudaError, cuda, cudaResetCount, resetCuda, type Cuda } from "../../native/libcuda.ts";
import { queryClocks } from "./cuda-clocks.ts";
import { openCuptiClock, type CuptiClock } from "./cuda-kernel-clock.ts";
import { Scanner } from "./cuda-scan.ts";

// Attributes that carry handles of the app's process (events): meaningless in another process.
const DROPPED_LAUNCH_ATTRIBUTES = new Set([7 /* PROGRAMMATIC_EVENT */, 12 /* LAUNCH_COMPLETION_EVENT */]);
// Function attributes the driver reports but does not let a caller set.
const READ_ONLY_FUNC_ATTRIBUTES = new Set([12 /* CLUSTER_SIZE_MUST_BE_SET */]);

/**
 * Alignment (bytes) of the spans reserved at fixed VAs. Measured on an H200 node (driver 580,
 * CUDA 13; scripts in the issue note): cuMemAddressReserve takes `addr` as a hint only; a 2 MiB
 * request is carved out of the driver's own VA heap wherever the hint is, while a request whose
 * address and size are multiples of 32 MiB was granted at exactly the hint anywhere free in the
 * user address space (0x5000_0000_0000 … 0x7ff7_f000_0000, with and without ASLR).
 */
export const RESERVE_ALIGN = 32 << 20;
export function reserveAlignment(granularity: number): number {
  return Math.max(granularity, RESERVE_ALIGN);
}

function hexBytes(hex: string): Uint8Array {
  const out = new Uint8Array(64);
  for (let i = 0; i < Math.min(64, hex.length / 2); i++) out[i] = parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return out;
}

/** cuModuleLoadData, with E_ARCH naming the architectures the image holds when the GPU can't run it. */
function loadCudaModule(cu: Cuda, image: Uint8Array, m: Manifest, file: string): bigint {
  const r = cu.moduleLoad(image);
  if (r.module !== undefined) {
    noteJit(cu, image, m);
    return r.module;
  }
  if (r.result === CU.ERROR_NO_BINARY_FOR_GPU || r.result === CU.ERROR_INVALID_IMAGE || r.result === CU.ERROR_UNSUPPORTED_PTX_VERSION) {
    let has = "";
    try {
      const d = describeModule(image);
      if (d.archs.length) has = `; the module holds code for ${d.archs.join(", ")}`;
    } catch {
      /* unreadable image: the driver's message says enough */
    }
    throw new KerncapError("E_ARCH", `${file} cannot run on this GPU (${cu.deviceName()}, ${cu.arch()})${has}: ${r.text}`, {
      hint: `It needs a GPU of that architecture (captured on ${m.device.name}, ${m.device.arch}); replay there, or rebuild the reproducer for ${cu.arch()}.`,
    });
  }
  throw new KerncapError("E_CUDA", `cuModuleLoadData(${file}) failed: ${r.text}`);
}

/** Say when the driver JIT-compiled the module's PTX (cuModuleLoadData does it itself for a fatbin without this GPU's machine code). */
function noteJit(cu: Cuda, image: Uint8Array, m: Manifest): void {
  if (m.module.kind !== "fatbin" && m.module.kind !== "ptx") return;
  try {
    const archs = describeModule(image).archs;
    const ptx = jitPtx(archs, cu.arch());
    if (ptx) log.info(`the module has no machine code for ${cu.arch()} (it holds ${archs.join(", ")}): the driver JIT-compiled its PTX (${ptx})`);
  } catch {
    /* an image the readers do not know: nothing to say */
  }
}

class CudaKernel implements ReplayKernel {
  constructor(
    private readonly cu: Cuda,
    private readonly f: bigint,
  ) {}

  applyAttributes(attrs: Manifest["functionAttributes"]): void {
    for (const a of attrs) {
      if (READ_ONLY_FUNC_ATTRIBUTES.has(a.id)) continue;
      let cur: number | undefined;
      try {
        cur = this.cu.funcGetAttribute(this.f, a.id);
      } catch {
        cur = undefined;
      }
      if (cur !== a.value) this.cu.funcSetAttribute(this.f, a.id, a.value);
    }
  }

  launcher(m: Manifest, params: Uint8Array): () => void {
    const attrs = m.launch.attributes.filter((a) => !DROPPED_LAUNCH_ATTRIBUTES.has(a.id)).map((a) => ({ id: a.id, value: hexBytes(a.valueHex) }));
    if (m.launch.api === "cuLaunchCooperativeKernel" && !attrs.some((a) => a.id === 2)) {
      const v = new Uint8Array(64);
      v[0] = 1;
      attrs.push({ id: 2, value: v });
    }
    return () => this.cu.launch(this.f, m.launch.grid, m.launch.block, m.launch.sharedMemBytes, params, attrs);
  }
}

class CudaBackend implements ReplayBackend {
  readonly vendor = "nvidia" as const;
  readonly scansOn = "device" as const;
  private events: [bigint, bigint] | undefined;
  /** The CUPTI kernel clock, once useKernelClock started it. */
  private kclock: CuptiClock | undefined;
  private scan: Scanner | undefined;
  /** What mapAt reserved and mapped, undone at close. */
  private readonly spans: { va: bigint; size: number; handle: bigint }[] = [];

  constructor(private readonly cu: Cuda) {}

  deviceName = () => this.cu.deviceName();
  arch = () => this.cu.arch();
  l2Bytes = () => this.cu.l2Bytes();
  clocks = () => queryClocks(this.cu.pciBusId());
  reserveAlignment = () => reserveAlignment(this.cu.granularity());
  mapAt = (va: bigint, size: number) => void this.spans.push({ va, size, handle: this.cu.mapAt(va, size) });
  memAlloc = (size: number) => this.cu.memAlloc(size);
  memFree = (p: bigint) => this.cu.memFree(p);
  hostAlloc = (size: number) => this.cu.hostAlloc(size);
  hostFree = (view: Uint8Array) => void this.cu.hostFree(view);
  hostRegister = (view: Uint8Array, readOnly: boolean) => this.cu.hostRegister(view, readOnly);
  hostUnregister = (view: Uint8Array) => this.cu.hostUnregister(view);
  htod = (dst: bigint, src: Uint8Array) => this.cu.htod(dst, src);
  htodAsync = (dst: bigint, src: Uint8Array) => this.cu.htodAsync(dst, src);
  dtoh = (dst: Uint8Array, src: bigint) => this.cu.dtoh(dst, src);
  dtod = (dst: bigint, src: bigint, size: number) => this.cu.dtod(dst, src, size);
  memset = (dst: bigint, value: number, size: number) => this.cu.memset(dst, value, size);
  sync = () => this.cu.sync();

  async scanner(): Promise<DeviceScanner> {
    return (this.scan ??= await Scanner.load(this.cu));
  }

  loadModule(image: Uint8Array, file: string, m: Manifest): ReplayModule {
    const cu = this.cu;
    const mod = loadCudaModule(cu, image, m, file);
    return {
      kernel: (name) => {
        const f = cu.moduleGetFunction(mod, name);
        return f === undefined ? undefined : new CudaKernel(cu, f);
      },
      global: (name) => cu.moduleGetGlobal(mod, name),
      writableGlobals: () => writableGlobalsOf(cu, mod, image, this.arch()),
      unload: () => void cu.moduleUnload(mod), // its globals go with it
    };
  }

  useKernelClock(): string | undefined {
    if (this.kclock) return undefined;
    const r = openCuptiClock();
    if ("why" in r) return r.why;
    this.kclock = r.clock;
    return undefined;
  }

  /**
   * `spinUs` µs of kc_spin so the stream is busy while the launch is submitted (none at 0), then an
   * event pair around it; on the CUPTI clock, the launch tagged and its own GPU duration taken
   * once the end event completed (the pair's time where its record is missing).
   */
  timedLaunch(launch: () => void, spinUs: number): number {
    const [e0, e1] = (this.events ??= [this.cu.eventCreate(), this.cu.eventCreate()]);
    if (spinUs > 0) this.scan?.spin(spinUs);
    this.cu.eventRecord(e0);
    const tag = this.kclock?.tagged(launch);
    if (tag === undefined) launch();
    this.cu.eventRecord(e1);
    const eventsUs = this.cu.eventElapsedMs(e0, e1) * 1000;
    return tag === undefined ? eventsUs : this.kclock!.take(tag, eventsUs);
  }

  timingMethod(o: { spinUs: number; warmup: number; l2: string }): string {
    const spin = o.spinUs > 0 ? ` after ${o.spinUs} µs of kc_spin (launch path hidden)` : " (no spin: the launch path included)";
    const clock = this.kclock ? this.kclock.describe() : "CUDA events around each launch";
    return `${clock}${spin}, ${o.warmup} warm-up launches, ${o.l2}`;
  }

  launchFault(e: unknown): { code: number; name: string } | null {
    if (!(e instanceof CudaError)) return null;
    return { code: e.result, name: this.cu.errorText(e.result).split(":")[0]! };
  }

  isContextLost(e: unknown): boolean {
    return e instanceof CudaError;
  }

  close(): void {
    this.kclock?.stop();
    this.kclock = undefined;
    for (const e of this.events ?? []) this.cu.eventDestroy(e);
    this.events = undefined;
    this.scan?.unload();
    this.scan = undefined;
    for (const s of this.spans.splice(0).reverse()) {
      const r = this.cu.unmapAt(s.va, s.size, s.handle);
      // after a kernel fault every call fails: the context's reset frees the rest
      if (r !== 0) log.debug(`releasing the span at 0x${s.va.toString(16)} (${s.size} bytes): ${this.cu.errorText(r)}`);
    }
  }

  reset(): void {
    resetCuda();
  }
}

/**
 * The CUDA backend on device `ordinal` (default: the capture's; the process's one primary
 * context, on the device of the first call: src/native/libcuda.ts cuda).
 * @throws KerncapError E_NO_GPU
 */
export function cudaBackend(m: Manifest, ordinal = m.device.ordinal): ReplayBackend {
  return new CudaBackend(cuda(ordinal));
}

/** The architecture ("sm_90") of CUDA device `ordinal`, from its compute capability. @throws KerncapError E_NO_GPU */
export function cudaDeviceArch(ordinal: number): string {
  return cuda(ordinal).arch();
}

/** How many times this process reset its primary context after a kernel fault (src/native/libcuda.ts cudaResetCount). */
export function cudaDeviceResets(): number {
  return cudaResetCount();
}

/**
 * The writable module-scope variables of a loaded CUDA module (ReplayModule.writableGlobals): the
 * `.nv.global*` objects of the cubin for `arch` in `image` (a cubin or a fatbin), located with
 * cuModuleGetGlobal. [] where the image holds no cubin for `arch` (PTX the driver compiled).
 */
function writableGlobalsOf(cu: Cuda, mod: bigint, image: Uint8Array, arch: string): { name: string; va: bigint; size: number }[] {
  let cubin: Uint8Array;
  try {
    cubin = pickCubin(image, arch).cubin;
  } catch (e) {
    log.debug(`module globals not listed: ${(e as Error).message}`);
    return [];
  }
  return cubinGlobals(cubin)
    .filter((g) => g.section.startsWith(".nv.global") && g.size > 0)
    .flatMap((g) => {
      const d = cu.moduleGetGlobal(mod, g.name);
      return d ? [{ name: g.name, ...d }] : [];
    });
}
