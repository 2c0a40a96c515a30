/**
 * CUDA replay: restore a capture's memory at its exact VAs, launch the kernel with the captured
 * parameter bytes and launch attributes, compare every region with the app's after state, time.
 */
import { FileImage } from "../format/file-image.ts";
import { chunkBytesOf, chunkExpectation, chunkLen, runs, type Range } from "../format/chunks.ts";
import { kc64 } from "../format/kc64.ts";
import { Scanner } from "./scan.ts";
import { join } from "node:path";
import { faultVaTaken } from "../env.ts";
import { KerncapError } from "../errors.ts";
import { readManifest, verifyFiles } from "../format/capture-dir.ts";
import type { Manifest } from "../format/manifest.ts";
import { log } from "../log.ts";
import { describeModule } from "../codeobj/index.ts";
import { median, vaSpans } from "./compare.ts";
import { CU, cuda, type Cuda } from "./cuda.ts";
import { overallVerdict, RegionAccumulator, type ElementType, type RegionNumerics } from "./tolerance.ts";
import { regionNumericsPlan } from "./tolerance-plan.ts";

export interface RegionMismatch {
  va: string;
  kind: string;
  size: number;
  /** True when the app changed this region (compared with the after state), else with before. */
  changedInApp: boolean;
  firstDiffOffset: number;
  bytesDiffering: number;
}

export interface ReplayResult {
  dir: string;
  kernel: string;
  verdict: "match" | "mismatch";
  regionsChecked: number;
  bytesChecked: number;
  mismatches: RegionMismatch[];
  /** Kernel time per launch from CUDA events (µs). */
  timing: { iters: number; medianUs: number; minUs: number; appUs: number | null };
  /** bytes: live bytes restored (zeros included); storedBytes: bytes copied from memory/before.bin; gbPerS over storedBytes. */
  restore: { bytes: number; storedBytes: number; seconds: number; gbPerS: number; hostRegistered: boolean };
  /** GPU checks: the restored state against the manifest's kc64 (verifySeconds), the replayed state (compareSeconds); bytes copied back to the host for element-wise comparison. */
  check: { verifySeconds: number; compareSeconds: number; bytesCopiedBack: number };
  reserve: { spans: number; bytes: number; seconds: number };
  /** loadSeconds: cuModuleLoadData + attributes; waitSeconds: time spent waiting for a module still being built. */
  module: { file: string; loadSeconds: number; waitSeconds?: number; image?: string };
  device: { name: string; arch: string };
  /** Element-wise report (src/replay/tolerance.ts): verdict bit-exact | within-tolerance | mismatch. */
  numerics: { verdict: RegionNumerics["verdict"]; atol: number; rtol: number; regions: RegionNumerics[] };
}

export interface ReplayOptions {
  iters: number;
  verify: boolean;
  /**
   * Use this module image instead of the captured one (validate after a rebuild). A promise lets
   * the caller build it while the replay reserves, restores and verifies (awaited just before the
   * module load; its rejection is the replay's error).
   */
  modulePath?: string | Promise<string>;
  /** Kernel symbol to look up in that module (default: the captured mangled name). */
  kernelName?: string;
  /** Tolerance compare (absolute, relative; default 0, 0) and element type where none is known. */
  atol?: number;
  rtol?: number;
  dtype?: string;
}

// Attributes that carry handles of the app's process (events): meaningless in another process.
const DROPPED_LAUNCH_ATTRIBUTES = new Set([7 /* PROGRAMMATIC_EVENT */, 12 /* LAUNCH_COMPLETION_EVENT */]);
// Function attributes the driver reports but does not let a caller set.
const READ_ONLY_FUNC_ATTRIBUTES = new Set([12 /* CLUSTER_SIZE_MUST_BE_SET */]);

function hexBytes(hex: string): Uint8Array {
  const out = new Uint8Array(64);
  for (let i = 0; i < Math.min(64, hex.length / 2); i++) out[i] = parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return out;
}


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

function loadModule(cu: Cuda, image: Uint8Array, m: Manifest, file: string): bigint {
  const r = cu.moduleLoad(image);
  if (r.module !== undefined) return r.module;
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

/** Host→device restore of stored chunks: pinned file mappings (cuMemHostRegister) where the driver takes them, else a pinned staging buffer. */
export class Restorer {
  registered = 0;
  staged = 0;
  private img: FileImage;
  private pinned: Uint8Array | undefined;
  private stage: Uint8Array | undefined;
  private canRegister = true;

  constructor(
    private readonly cu: Cuda,
    path: string,
  ) {
    // MAP_SHARED windows: the only kind cuMemHostRegister pins (FileImage's doc has the measurement)
    this.img = new FileImage(path, undefined, true);
    this.img.onWindow = (win) => {
      if (this.pinned) this.cu.hostUnregister(this.pinned);
      this.pinned = undefined;
      if (this.canRegister && win.byteLength >= 1 << 20) {
        if (this.cu.hostRegister(win, true)) this.pinned = win;
        else this.canRegister = false;
      }
    };
  }

  /** Zero [base, base + r.size), then copy r's stored before-chunks to base + their offsets. */
  restore(base: bigint, r: Range, chunkBytes: number): void {
    this.cu.memset(base, 0, r.size);
    for (const run of runs(r, r.before, chunkBytes)) {
      for (let done = 0; done < run.bytes; ) {
        const n = Math.min(run.bytes - done, 256 << 20);
        const src = this.img.view(run.fileOffset + done, n);
        const dst = base + BigInt(run.vaOffset + done);
        if (this.pinned && src.buffer === this.pinned.buffer) {
          this.cu.htod(dst, src);
          this.registered++;
        } else {
          this.stage ??= this.cu.hostAlloc(64 << 20);
          for (let k = 0; k < n; k += this.stage.byteLength) {
            const m = Math.min(this.stage.byteLength, n - k);
            this.stage.set(src.subarray(k, k + m));
            this.cu.htod(dst + BigInt(k), this.stage.subarray(0, m));
          }
          this.staged++;
        }
        done += n;
      }
    }
  }
}

/**
 * Check restored memory on the GPU: every stored chunk's kc64 equals the manifest's, every other
 * chunk is zero. @throws KerncapError E_CHECKSUM naming the range and the chunk.
 */
function checkRestored(scanner: Scanner, base: bigint, r: Range, C: number, file: string, what: string): void {
  const s = scanner.scan(base, r.size, C);
  const e = chunkExpectation(r, C);
  for (let c = 0; c < s.hash.length; c++) {
    const want = e.beforeHash[c];
    const ok = want === undefined ? s.nonzero[c] === 0 : s.hash[c] === want;
    if (!ok) {
      throw new KerncapError("E_CHECKSUM", `checksum mismatch in ${file}: ${what}, chunk ${c} (bytes ${c * C}..${c * C + chunkLen(r.size, c, C)}) restored ${want === undefined ? "non-zero where the capture holds zeros" : `kc64 ${s.hash[c]}, the manifest says ${want}`}`, {
        hint: "The memory image was altered after capture; capture again (or pass --no-verify to replay it anyway).",
      });
    }
  }
}

const zeroHashes = new Map<number, string>();
function zeroHash(len: number): string {
  let h = zeroHashes.get(len);
  if (!h) zeroHashes.set(len, (h = kc64(new Uint8Array(len)).hex));
  return h;
}

/**
 * Compare a replayed range with what the app left (after state for the chunks the app changed,
 * else the before state) on the GPU: only chunks whose kc64 differs are copied back and compared
 * element-wise into `acc`; the whole-range facts (all zero, unchanged) come from the hashes.
 */
function compareChunks(scanner: Scanner, cu: Cuda, host: Uint8Array, base: bigint, r: Range, C: number, before: FileImage, after: FileImage, acc: RegionAccumulator): { bytesCopiedBack: number } {
  const s = scanner.scan(base, r.size, C);
  const e = chunkExpectation(r, C);
  let gotAllZero = true;
  let expAllZero = true;
  let gotEqualsBefore = true;
  let back = 0;
  for (let c = 0; c < s.hash.length; c++) {
    const len = chunkLen(r.size, c, C);
    if (s.nonzero[c]) gotAllZero = false;
    const want = e.state[c] === "zero" ? undefined : e.hash[c];
    if (want !== undefined && want !== zeroHash(len)) expAllZero = false;
    const bh = e.beforeHash[c];
    if (bh === undefined ? s.nonzero[c] !== 0 : s.hash[c] !== bh) gotEqualsBefore = false;
    const match = want === undefined ? s.nonzero[c] === 0 : s.hash[c] === want;
    if (match) continue;
    const got = host.subarray(0, len);
    cu.dtoh(got, base + BigInt(c * C));
    back += len;
    const expBytes = chunkBytesOf(e, c, len, "after", before, after);
    const beforeBytes = r.changed ? chunkBytesOf(e, c, len, "before", before, after) : undefined;
    acc.add(c * C, got, expBytes, beforeBytes);
  }
  acc.setWholeRegion({ bytes: r.size, gotAllZero, expAllZero: expAllZero && r.changed, gotEqualsBefore });
  return { bytesCopiedBack: back };
}

/**
 * Replay a capture folder on device 0.
 * @throws KerncapError for unreadable or damaged captures (E_NOT_CAPTURE, E_MANIFEST, E_CHECKSUM),
 *   no GPU (E_NO_GPU), a taken VA (E_VA_TAKEN), a module the GPU can't run (E_ARCH).
 */
export async function replayCuda(dir: string, o: ReplayOptions): Promise<ReplayResult> {
  const m = readManifest(dir);
  if (m.device.vendor !== "nvidia") {
    throw new KerncapError("E_FRONTEND", `${dir} is an ${m.device.vendor.toUpperCase()} capture; the CUDA replay engine cannot run it`, {
      hint: "`kerncap replay` sends AMD captures to the HSA backend; `kerncap validate` supports CUDA and Triton captures only so far (rebuild a HIP reproducer with its build.sh).",
    });
  }
  // Small files (SHA-256) and the memory files' sizes; the memory itself is checked on the GPU
  // once restored (kc64 of every chunk against the manifest), which reads it at device speed.
  verifyFiles(dir, o.verify ? m : { ...m, files: [] });

  // 1. Reserve every span at its exact VA before anything large is mapped on the host side.
  const cu = cuda(m.device.ordinal);
  const t0 = performance.now();
  const spans = vaSpans(m.regions.map((r) => ({ va: BigInt(r.va), size: r.size })), reserveAlignment(cu.granularity()));
  // Fault injection for the test suite: occupy the first span first, as another mapping would.
  if (faultVaTaken() && spans[0]) cu.mapAt(spans[0].va, spans[0].size);
  for (const s of spans) cu.mapAt(s.va, s.size);
  const reserve = { spans: spans.length, bytes: spans.reduce((a, s) => a + s.size, 0), seconds: (performance.now() - t0) / 1000 };
  log.debug(`reserved ${spans.length} spans, ${reserve.bytes} bytes, at the captured VAs`);

  // 2. Restore the before state: zero every range, then copy the stored chunks.
  const t1 = performance.now();
  const C = m.memory.chunkBytes;
  const restorer = new Restorer(cu, join(dir, m.memory.before));
  for (const r of m.regions) restorer.restore(BigInt(r.va), r, C);
  const restoreSeconds = (performance.now() - t1) / 1000;
  const restore = {
    bytes: m.memory.beforeBytes,
    storedBytes: m.memory.storedBeforeBytes,
    seconds: restoreSeconds,
    gbPerS: m.memory.storedBeforeBytes / 1e9 / Math.max(restoreSeconds, 1e-9),
    hostRegistered: restorer.registered > 0,
  };
  log.debug(`restored ${m.regions.length} regions (${restorer.registered} pieces from pinned file mappings, ${restorer.staged} staged)`);
  const scanner = await Scanner.load(cu);
  const tv = performance.now();
  if (o.verify) for (const r of m.regions) checkRestored(scanner, BigInt(r.va), r, C, m.memory.before, `region ${r.va}`);
  const verifySeconds = (performance.now() - tv) / 1000;

  // 3. Module, function, attributes.
  const tw = performance.now();
  const modFile = await (o.modulePath ?? join(dir, m.module.file));
  const moduleWaitSeconds = (performance.now() - tw) / 1000;
  const t2 = performance.now();
  const image = new Uint8Array(await Bun.file(modFile).arrayBuffer());
  const mod = loadModule(cu, image, m, modFile);
  const name = o.kernelName ?? m.kernel.name;
  const f = cu.moduleGetFunction(mod, name);
  if (f === undefined) {
    throw new KerncapError("E_KERNEL_NOT_IN_MODULE", `kernel ${name} is not in ${modFile}`, {
      hint: "The module does not export the captured kernel symbol; check the kernel name (extern \"C\" or templates change the mangled name).",
    });
  }
  for (const a of m.functionAttributes) {
    if (READ_ONLY_FUNC_ATTRIBUTES.has(a.id)) continue;
    let cur: number | undefined;
    try {
      cur = cu.funcGetAttribute(f, a.id);
    } catch {
      cur = undefined;
    }
    if (cur !== a.value) cu.funcSetAttribute(f, a.id, a.value);
  }
  // Module globals (__device__/__constant__ variables): the loaded module has its own copies,
  // at addresses of the driver's choosing; write the captured before state into them by name.
  const rebuilt = o.modulePath !== undefined;
  const absent: string[] = [];
  const globals = m.globals.flatMap((g) => {
    const d = cu.moduleGetGlobal(mod, g.name);
    if (!d && rebuilt) {
      // a rebuilt slice holds only the captured kernel's TU (or instantiation): the other TUs'
      // variables are not in it, and a variable the kernel uses is (it would not link otherwise)
      absent.push(g.name);
      return [];
    }
    if (!d) {
      throw new KerncapError("E_GLOBAL", `the module ${modFile} has no global ${g.name} (${g.size} bytes), which the captured kernel's module had`, {
        hint: "A rebuilt module must keep the module-scope variables the capture restores (same names); rename it back or capture again.",
      });
    }
    if (d.size !== g.size) {
      throw new KerncapError("E_GLOBAL", `global ${g.name} is ${d.size} bytes in ${modFile}, ${g.size} bytes in the capture`, {
        hint: "Keep the variable's type and size, or capture again after the change.",
      });
    }
    return [{ ...g, dva: d.va }];
  });
  if (absent.length) log.debug(`${absent.length} captured module globals are not in the rebuilt module (not restored): ${absent.slice(0, 8).join(", ")}${absent.length > 8 ? ", …" : ""}`);
  const restoreGlobal = (g: (typeof globals)[number]) => restorer.restore(g.dva, g, C);
  globals.forEach(restoreGlobal);
  if (o.verify) for (const g of globals) checkRestored(scanner, g.dva, g, C, m.memory.before, `global ${g.name}`);
  const loadSeconds = (performance.now() - t2) / 1000;
  log.debug(`module loaded, function ${name} found, attributes applied, ${globals.length} module globals restored`);

  const params = new Uint8Array(await Bun.file(join(dir, m.params.file)).arrayBuffer());
  const attrs = m.launch.attributes.filter((a) => !DROPPED_LAUNCH_ATTRIBUTES.has(a.id)).map((a) => ({ id: a.id, value: hexBytes(a.valueHex) }));
  if (m.launch.api === "cuLaunchCooperativeKernel" && !attrs.some((a) => a.id === 2)) {
    const v = new Uint8Array(64);
    v[0] = 1;
    attrs.push({ id: 2, value: v });
  }
  const launch = () => cu.launch(f, m.launch.grid, m.launch.block, m.launch.sharedMemBytes, params, attrs);

  // 4. Keep a device copy of the chunks the kernel writes, to restore them between timed runs.
  const changedRuns = m.regions.flatMap((r) => runs(r, r.after, C).map((x) => ({ va: BigInt(r.va) + BigInt(x.vaOffset), bytes: x.bytes })));
  const changedBytes = changedRuns.reduce((a, x) => a + x.bytes, 0);
  let backup: bigint | undefined;
  try {
    backup = changedBytes ? cu.memAlloc(changedBytes) : undefined;
  } catch {
    log.warn("not enough device memory for a device-side backup; restoring from the host between runs");
  }
  {
    let off = 0n;
    for (const x of changedRuns) {
      if (backup !== undefined) cu.dtod(backup + off, x.va, x.bytes);
      off += BigInt(x.bytes);
    }
  }
  const restoreChanged = () => {
    for (const g of globals) if (g.changed) restoreGlobal(g);
    if (backup === undefined) {
      for (const r of m.regions) if (r.changed) restorer.restore(BigInt(r.va), r, C);
      return;
    }
    let off = 0n;
    for (const x of changedRuns) {
      cu.dtod(x.va, backup + off, x.bytes);
      off += BigInt(x.bytes);
    }
  };

  // 5. First launch: the one that is checked.
  log.debug(`launching grid ${m.launch.grid} block ${m.launch.block} with ${params.byteLength} parameter bytes`);
  launch();
  cu.sync();
  log.debug("first launch done; comparing on the GPU (kc64 per chunk)");
  const tc = performance.now();
  const before = new FileImage(join(dir, m.memory.before));
  const after = new FileImage(join(dir, m.memory.after));
  const host = cu.hostAlloc(C);
  const mismatches: RegionMismatch[] = [];
  const numerics: RegionNumerics[] = [];
  const plan = regionNumericsPlan(m, params, o, (ri, off) => {
    const r = m.regions[ri]!;
    const c = Math.floor(off / C);
    return r.after.extents.some(([first, count]) => c >= first && c < first + count);
  });
  let bytesChecked = 0;
  let bytesCopiedBack = 0;
  const compareRange = (r: Range, base: bigint, kind: string, dtype: ElementType, source: RegionNumerics["dtypeSource"]) => {
    const acc = new RegionAccumulator({ va: r.va, kind, size: r.size, changedInApp: r.changed }, dtype, source, plan.tol);
    const res = compareChunks(scanner, cu, host, base, r, C, before, after, acc);
    bytesCopiedBack += res.bytesCopiedBack;
    bytesChecked += r.size;
    const out = acc.result();
    numerics.push(out);
    if (out.bytesDiffering || out.verdict === "mismatch") mismatches.push({ va: r.va, kind, size: r.size, changedInApp: r.changed, firstDiffOffset: out.firstDiffOffset, bytesDiffering: out.bytesDiffering });
  };
  for (const [ri, r] of m.regions.entries()) compareRange(r, BigInt(r.va), r.kind, plan[ri]!.dtype, plan[ri]!.source);
  for (const g of globals) compareRange(g, g.dva, `global ${g.name}`, "u8", "default");
  const compareSeconds = (performance.now() - tc) / 1000;

  // 6. Timed launches, each from the before state.
  const times: number[] = [];
  const e0 = cu.eventCreate();
  const e1 = cu.eventCreate();
  for (let i = 0; i < o.iters; i++) {
    restoreChanged();
    cu.eventRecord(e0);
    launch();
    cu.eventRecord(e1);
    times.push(cu.eventElapsedMs(e0, e1) * 1000);
  }
  cu.sync();
  const appUs = typeof m.timing.app_launch_us === "number" && m.timing.app_launch_us >= 0 ? m.timing.app_launch_us : null;
  return {
    dir,
    kernel: m.kernel.demangled || m.kernel.name,
    verdict: overallVerdict(numerics) === "mismatch" ? "mismatch" : "match",
    regionsChecked: m.regions.length + globals.length,
    bytesChecked,
    mismatches,
    timing: { iters: times.length, medianUs: times.length ? median(times) : NaN, minUs: times.length ? Math.min(...times) : NaN, appUs },
    restore,
    reserve,
    check: { verifySeconds, compareSeconds, bytesCopiedBack },
    module: { file: modFile, loadSeconds, waitSeconds: moduleWaitSeconds },
    device: { name: cu.deviceName(), arch: cu.arch() },
    numerics: { verdict: overallVerdict(numerics), atol: plan.tol.atol, rtol: plan.tol.rtol, regions: numerics.filter((x) => x.verdict !== "bit-exact") },
  };
}
