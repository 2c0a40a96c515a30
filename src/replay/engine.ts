/**
 * CUDA replay: restore a capture's memory at its exact VAs, launch the kernel with the captured
 * parameter bytes and launch attributes, compare every region with the app's after state, time.
 */
import { FileImage, pieces } from "../format/file-image.ts";
import { join } from "node:path";
import { faultVaTaken, hostRegisterRestore } from "../env.ts";
import { KerncapError } from "../errors.ts";
import { readManifest, verifyFiles, verifyRegions } from "../format/capture-dir.ts";
import type { Manifest } from "../format/manifest.ts";
import { log } from "../log.ts";
import { describeModule } from "../codeobj/index.ts";
import { median, vaSpans } from "./compare.ts";
import { CU, cuda, type Cuda } from "./cuda.ts";
import { overallVerdict, RegionAccumulator, type RegionNumerics } from "./tolerance.ts";
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
  restore: { bytes: number; seconds: number; gbPerS: number; hostRegistered: boolean };
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

const CHUNK = 64 << 20;

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
  if (o.verify) {
    verifyFiles(dir, m);
    verifyRegions(dir, m);
  } else verifyFiles(dir, { ...m, files: [] });

  // 1. Reserve every span at its exact VA before anything large is mapped on the host side.
  const cu = cuda(m.device.ordinal);
  const t0 = performance.now();
  const spans = vaSpans(m.regions.map((r) => ({ va: BigInt(r.va), size: r.size })), reserveAlignment(cu.granularity()));
  // Fault injection for the test suite: occupy the first span first, as another mapping would.
  if (faultVaTaken() && spans[0]) cu.mapAt(spans[0].va, spans[0].size);
  for (const s of spans) cu.mapAt(s.va, s.size);
  const reserve = { spans: spans.length, bytes: spans.reduce((a, s) => a + s.size, 0), seconds: (performance.now() - t0) / 1000 };
  log.debug(`reserved ${spans.length} spans, ${reserve.bytes} bytes, at the captured VAs`);

  // 2. Restore the before state with zero copy: mmap the image, pin it in place, copy.
  const t1 = performance.now();
  const beforePath = join(dir, m.memory.before);
  const afterPath = join(dir, m.memory.after);
  const beforeBytes = m.memory.beforeBytes;
  // memory images of any size, read through mmap windows (Bun.mmap maps at most 4 GiB at once)
  const before = new FileImage(beforePath);
  const host = cu.hostAlloc(CHUNK);
  // Zero-copy (pin the mmap in place with cuMemHostRegister) hung on an H200 node under driver 580
  // (replay never returned from the restore); the default copies through a pinned staging buffer.
  // KERNCAP_HOST_REGISTER=1 pins each piece of the mapping in place instead (for investigation).
  let registered = hostRegisterRestore() && beforeBytes > 0;
  for (const r of m.regions) {
    pieces(r.size, (done, n) => {
      const src = before.view(r.offset + done, n);
      const dst = BigInt(r.va) + BigInt(done);
      if (registered && cu.hostRegister(src, true)) {
        cu.htod(dst, src);
        cu.hostUnregister(src);
        return;
      }
      registered = false;
      host.set(src);
      cu.htod(dst, host.subarray(0, n));
    }, CHUNK);
  }
  log.debug(`restored ${m.regions.length} regions (host-registered: ${registered})`);
  const restoreSeconds = (performance.now() - t1) / 1000;
  const restore = { bytes: beforeBytes, seconds: restoreSeconds, gbPerS: beforeBytes / 1e9 / Math.max(restoreSeconds, 1e-9), hostRegistered: Boolean(registered) };

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
  const restoreGlobal = (g: (typeof globals)[number]) => pieces(g.size, (done, n) => cu.htod(g.dva + BigInt(done), before.view(g.offset + done, n)), CHUNK);
  globals.forEach(restoreGlobal);
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

  // 4. Keep a device copy of the regions the kernel writes, to restore them between timed runs.
  const changed = m.regions.filter((r) => r.changed);
  const changedBytes = changed.reduce((a, r) => a + r.size, 0);
  let backup: bigint | undefined;
  try {
    backup = changedBytes ? cu.memAlloc(changedBytes) : undefined;
  } catch {
    log.warn("not enough device memory for a device-side backup; restoring from the host between runs");
  }
  const backupOffsets: number[] = [];
  {
    let off = 0;
    for (const r of changed) {
      backupOffsets.push(off);
      if (backup !== undefined) cu.dtod(backup + BigInt(off), BigInt(r.va), r.size);
      off += r.size;
    }
  }
  const restoreChanged = () => {
    for (const g of globals) if (g.changed) restoreGlobal(g);
    changed.forEach((r, i) => {
      if (backup !== undefined) cu.dtod(BigInt(r.va), backup + BigInt(backupOffsets[i]!), r.size);
      else pieces(r.size, (done, n) => cu.htod(BigInt(r.va) + BigInt(done), before.view(r.offset + done, n)), CHUNK);
    });
  };

  // 5. First launch: the one that is checked.
  log.debug(`launching grid ${m.launch.grid} block ${m.launch.block} with ${params.byteLength} parameter bytes`);
  launch();
  cu.sync();
  log.debug("first launch done; comparing");
  const after = new FileImage(afterPath);
  const mismatches: RegionMismatch[] = [];
  const numerics: RegionNumerics[] = [];
  const plan = regionNumericsPlan(m, params, o, (ri, off) => {
    const r = m.regions[ri]!;
    if (!r.changed) return false;
    const n = Math.min(64, r.size - off);
    const a = before.view(r.offset + off, n);
    const b = after.view(r.offset + off, n);
    return !Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
  });
  let bytesChecked = 0;
  for (const [ri, r] of m.regions.entries()) {
    const expected = r.changed ? after : before;
    const acc = new RegionAccumulator({ va: r.va, kind: r.kind, size: r.size, changedInApp: r.changed }, plan[ri]!.dtype, plan[ri]!.source, plan.tol);
    pieces(r.size, (done, n) => {
      const got = host.subarray(0, n);
      cu.dtoh(got, BigInt(r.va) + BigInt(done));
      acc.add(done, got, expected.view(r.offset + done, n), r.changed ? before.view(r.offset + done, n) : undefined);
    }, CHUNK);
    bytesChecked += r.size;
    const res = acc.result();
    numerics.push(res);
    if (res.bytesDiffering) mismatches.push({ va: r.va, kind: r.kind, size: r.size, changedInApp: r.changed, firstDiffOffset: res.firstDiffOffset, bytesDiffering: res.bytesDiffering });
  }

  for (const g of globals) {
    const acc = new RegionAccumulator({ va: g.va, kind: `global ${g.name}`, size: g.size, changedInApp: g.changed }, "u8", "default", plan.tol);
    pieces(g.size, (done, n) => {
      const got = host.subarray(0, n);
      cu.dtoh(got, g.dva + BigInt(done));
      acc.add(done, got, (g.changed ? after : before).view(g.offset + done, n), g.changed ? before.view(g.offset + done, n) : undefined);
    }, CHUNK);
    bytesChecked += g.size;
    const res = acc.result();
    numerics.push(res);
    if (res.bytesDiffering) mismatches.push({ va: g.va, kind: `global ${g.name}`, size: g.size, changedInApp: g.changed, firstDiffOffset: res.firstDiffOffset, bytesDiffering: res.bytesDiffering });
  }

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
    module: { file: modFile, loadSeconds, waitSeconds: moduleWaitSeconds },
    device: { name: cu.deviceName(), arch: cu.arch() },
    numerics: { verdict: overallVerdict(numerics), atol: plan.tol.atol, rtol: plan.tol.rtol, regions: numerics.filter((x) => x.verdict !== "bit-exact") },
  };
}
