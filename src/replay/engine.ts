/**
 * The replay engine, one for every vendor: restore a capture's memory at its exact VAs, check it
 * against the manifest's kc64, launch the kernel with the captured parameter bytes and launch
 * attributes, compare every region with the app's after state (bit-exact, tolerance, run-to-run
 * envelope), time. The device work goes through a ReplayBackend (src/replay/backend.ts: CUDA or
 * HSA, chosen by the manifest's device vendor in openBackend).
 */
import { FileImage } from "../format/file-image.ts";
import { chunkBytesOf, chunkExpectation, chunkLen, runs, type Range } from "../format/chunks.ts";
import { kc64 } from "../format/kc64.ts";
import type { ChunkScan } from "./scan.ts";
import { isFloatType, judgeEnvelope, judgeHeld, judgeMultiset, kernelNoise, maxSpread, mergeEnvelopes, type Envelope, type MultisetJudgement } from "./envelope.ts";
import { faultVaTaken } from "../env.ts";
import { isKerncapError, KerncapError } from "../errors.ts";
import { verifyFiles, type OpenedCapture } from "../format/capture-dir.ts";
import { capturePath, readCaptureBytes } from "../format/paths.ts";
import type { Manifest } from "../format/manifest.ts";
import { log } from "../log.ts";
import { diffBytes, median, vaSpans } from "./compare.ts";
import { openBackend, type DeviceMemory, type DeviceScanner, type ReplayBackend, type ReplayModule } from "./backend.ts";
import { ELEMENT_BYTES, overallVerdict, RegionAccumulator, type ElementType, type RegionNumerics } from "./tolerance.ts";
import { multisetRegions, regionNumericsPlan, type RegionTypes } from "./tolerance-plan.ts";
import { mergeJudging, readJudging, type JudgeSettings } from "./judge-settings.ts";
import { JUDGE_FILE } from "../format/file-names.ts";
import { adaptiveCompare, blockOf, COMPARE_SECONDS, MIN_PAIRS, roundOrder, type TimingComparison } from "./stats.ts";
import { queryClocks, type ClockState } from "./clocks.ts";
import { selfName } from "../util/self-exec.ts";

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
  timing: {
    iters: number;
    medianUs: number;
    minUs: number;
    p10Us: number;
    p90Us: number;
    appUs: number | null;
    method: string;
    appMethod: string;
    /** Whether L2 was flushed before each timed launch (--flush-l2) or left warm from the previous one. */
    l2?: "flushed" | "warm";
    /** The GPU's clocks while the timed launches ran (null: unknown, or no timed launch). */
    clocks?: ClockState | null;
    /** Every timed launch's time (µs, in launch order): only with keepSamples. */
    samplesUs?: number[];
  };
  /** bytes: live bytes restored (zeros included); storedBytes: bytes copied from memory/before.bin; gbPerS over storedBytes. */
  restore: { bytes: number; storedBytes: number; seconds: number; gbPerS: number; hostRegistered: boolean };
  /** The capture faulted in the app: whether the replay reproduced the same fault, and the compute-sanitizer command for it. */
  fault?: { expected: { code: number; name: string; message: string }; observed: { code: number; name: string } | null; reproduced: boolean; sanitizer: string };
  /** Checked runs from the same before state; runsDiffering: runs whose result differed from the first (a nondeterministic kernel). */
  determinism: { runs: number; runsDiffering: number; nondeterministic: boolean; /** What the capture's judging settings say: runs that differ where "deterministic" is expected make the verdict a mismatch. */ expected?: "deterministic" | "nondeterministic" };
  /** GPU checks: the restored state against the manifest's kc64 (verifySeconds), the replayed state (compareSeconds); bytes copied back to the host for element-wise comparison. */
  check: { verifySeconds: number; compareSeconds: number; bytesCopiedBack: number; /** Only when the scans read memory back to the host (HSA). */ scannedOn?: "host" };
  reserve: { spans: number; bytes: number; seconds: number };
  /** loadSeconds: cuModuleLoadData + attributes; waitSeconds: time spent waiting for a module still being built. */
  module: { file: string; loadSeconds: number; waitSeconds?: number; image?: string };
  device: { name: string; arch: string };
  /** Element-wise report (src/replay/tolerance.ts): verdict bit-exact | within-tolerance | mismatch. */
  numerics: { verdict: RegionNumerics["verdict"]; atol: number; rtol: number; regions: RegionNumerics[]; /** The capture's judging settings used (kerncap judge: those this run's options did not override). */ settings?: { file: string; used: string[] } };
  /** Regions compared as multisets of elements (--multiset), every one asked for, with its judgement; absent without --multiset. */
  multiset?: MultisetRegion[];
}

/** One region of --multiset: which region, as what element type, and how the app's elements compare with each checked run's. */
export interface MultisetRegion extends MultisetJudgement {
  index: number;
  va: string;
  dtype: ElementType;
  verdict: "bit-exact" | "multiset-equal" | "mismatch";
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
  /** Flush L2 before each timed launch (a read of 256 MiB, or of twice the L2 where that is more: clean lines, as ncu's --cache-control all). */
  flushL2?: boolean;
  /**
   * Launch with this configuration instead of the captured one (another capture's launch of the
   * same kernel on the same memory, a tuned Triton config): grid, block, dynamic shared memory,
   * launch and function attributes, parameter bytes.
   */
  launch?: { launch: Manifest["launch"]; functionAttributes: Manifest["functionAttributes"]; params: Uint8Array };
  /**
   * The launch a rebuilt module needs, once its path is known (a build may still be running when
   * the run starts): the frontend's reading of the build's own metadata (Triton: the compiled
   * kernel's num_warps and shared memory, src/frontends/frontend.ts rebuiltLaunch). Only the block
   * and dynamic shared memory change; undefined keeps the captured launch. `launch` wins over it.
   */
  launchOf?: (modulePath: string) => { block: [number, number, number]; sharedMemBytes: number } | undefined;
  /**
   * The element types the capture's frontend knows for its regions (src/frontends/index.ts
   * regionTypesOf: Triton's signature pointer types, through the parameter buffer); a region
   * without one is compared as `dtype`, else fp32. Required so that no caller forgets its
   * frontend's; undefined where the caller has none.
   */
  regionTypes: RegionTypes | undefined;
  /** Checked launches from the same before state (default 3, then 8 when they differ): tells nondeterministic kernels. */
  runs?: number;
  /** Regions to compare as multisets of elements (order-dependent outputs: atomic append, compaction); names as multisetRegions (src/replay/tolerance-plan.ts) takes them. */
  multiset?: string[];
  /** Element type per region (a region name as multiset's → a type name): `--dtype REGION=T`; wins over the signature's type. */
  dtypes?: Record<string, string>;
  /** Expected nondeterministic (8 checked runs from the start) or deterministic (checked runs that differ make the verdict a mismatch); undefined: found out (3 runs, 8 when they differ). */
  nondeterministic?: boolean;
  /** Device to replay on (default: the captured ordinal, manifest device.ordinal). */
  ordinal?: number;
  /** Keep every timed launch's time in the result (timing.samplesUs, µs, in launch order). */
  keepSamples?: boolean;
  /**
   * Two kernels compared (runCompared): wall-clock seconds it may spend on more timed rounds
   * after the first `iters`, until the comparison is decided (src/replay/stats.ts
   * adaptiveCompare; default COMPARE_SECONDS). 0: `iters` rounds only.
   */
  compareBudgetSeconds?: number;
}

export { RESERVE_ALIGN, reserveAlignment } from "./cuda-backend.ts";

/** Host→device restore of stored chunks: pinned file mappings (cuMemHostRegister) where the driver takes them and the file can be mapped (FileImage.mapped: a file the user cannot write cannot), else a pinned staging buffer. */
export class Restorer {
  registered = 0;
  staged = 0;
  private img: FileImage;
  private pinned: Uint8Array | undefined;
  private stage: Uint8Array | undefined;
  private canRegister = true;

  constructor(
    private readonly cu: DeviceMemory,
    path: string,
  ) {
    // MAP_SHARED windows: the only kind cuMemHostRegister pins (FileImage's doc has the measurement)
    this.img = new FileImage(path, undefined, true);
    // a file the user cannot write (read-only capture folder): Bun.mmap needs write access, so
    // FileImage reads with pread and every copy goes through the pinned staging buffer
    this.img.onReadFallback = (e) => log.info(`${path} cannot be mapped (${e.message}; a read-only capture folder?): restoring through a pinned staging buffer instead of pinning the file`);
    // Copies from a pinned window are asynchronous: the next window is registered while the DMA
    // of the previous one runs (registering costs about as much as copying: 0.14 s vs 0.12 s for
    // 4 GiB on the H200 node), and the previous one is unpinned once its copies are done.
    this.img.onWindow = (win) => {
      const old = this.pinned;
      this.pinned = undefined;
      if (this.canRegister && win.byteLength >= 1 << 20) {
        if (this.cu.hostRegister(win, true)) this.pinned = win;
        else this.canRegister = false;
      }
      if (old) {
        this.cu.sync();
        this.cu.hostUnregister(old);
      }
    };
  }

  /** Wait for the asynchronous copies and unpin the last window. */
  finish(): void {
    this.cu.sync();
    if (this.pinned) this.cu.hostUnregister(this.pinned);
    this.pinned = undefined;
  }

  /** Unpin what is pinned and free the staging buffer (64 MiB of page-locked memory); never throws. */
  dispose(): void {
    try {
      this.finish();
    } catch {
      /* after a kernel fault the sync fails: the context's reset unpins */
    }
    if (this.stage) this.cu.hostFree(this.stage);
    this.stage = undefined;
  }

  /** Zero [base, base + r.size), then copy r's stored before-chunks to base + their offsets (asynchronous until finish()). */
  restore(base: bigint, r: Range, chunkBytes: number): void {
    this.cu.memset(base, 0, r.size);
    for (const run of runs(r, r.before, chunkBytes)) this.copy(base + BigInt(run.vaOffset), run.fileOffset, run.bytes);
  }

  /**
   * Put chunks `chunks` (ascending indices) of a range of `size` bytes at `base` back to the
   * before state: zero each, then copy the stored ones (beforeOffset[c] ≥ 0: file offset in
   * before.bin, chunkExpectation(...).beforeOffset); neighbours are merged into one memset/copy.
   * @returns bytes put back (asynchronous until finish()).
   */
  restoreChunks(base: bigint, size: number, chunkBytes: number, chunks: number[], beforeOffset: number[]): number {
    let bytes = 0;
    for (let i = 0; i < chunks.length; ) {
      let j = i + 1;
      while (j < chunks.length && chunks[j] === chunks[j - 1]! + 1) j++;
      const c0 = chunks[i]!;
      const end = Math.min(size, chunks[j - 1]! * chunkBytes + chunkBytes);
      this.cu.memset(base + BigInt(c0 * chunkBytes), 0, end - c0 * chunkBytes);
      bytes += end - c0 * chunkBytes;
      // stored chunks whose file bytes follow each other: one copy
      for (let k = i; k < j; ) {
        const c = chunks[k]!;
        if (beforeOffset[c]! < 0) {
          k++;
          continue;
        }
        let l = k + 1;
        while (l < j && beforeOffset[chunks[l]!] === beforeOffset[chunks[l - 1]!]! + chunkBytes) l++;
        const last = chunks[l - 1]!;
        this.copy(base + BigInt(c * chunkBytes), beforeOffset[c]!, Math.min(size, last * chunkBytes + chunkBytes) - c * chunkBytes);
        k = l;
      }
      i = j;
    }
    return bytes;
  }

  /** Copy `bytes` of before.bin at fileOffset to dst: pinned window asynchronously, else through the staging buffer. */
  private copy(dst0: bigint, fileOffset: number, bytes: number): void {
    for (let done = 0; done < bytes; ) {
      const n = Math.min(bytes - done, 256 << 20);
      const src = this.img.view(fileOffset + done, n);
      const dst = dst0 + BigInt(done);
      if (this.pinned && src.buffer === this.pinned.buffer) {
        this.cu.htodAsync(dst, src);
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

/**
 * Check restored memory on the GPU: every stored chunk's kc64 equals the manifest's, every other
 * chunk is zero. @throws KerncapError E_CHECKSUM naming the range and the chunk.
 */
function checkRestored(scanner: DeviceScanner, base: bigint, r: Range, C: number, file: string, what: string): void {
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

/** The command line that runs this replay under compute-sanitizer's memcheck. */
export function sanitizerCommand(dir: string): string {
  return `compute-sanitizer --tool memcheck ${selfName()} replay ${dir} --runs 1 --iters 0`;
}

function replayFault(
  dir: string,
  m: Manifest,
  be: ReplayBackend,
  launch: () => void,
  module: ReplayResult["module"],
  restore: ReplayResult["restore"],
  reserve: ReplayResult["reserve"],
  verifySeconds: number,
): ReplayResult {
  let observed: { code: number; name: string } | null = null;
  try {
    launch();
    be.sync();
  } catch (e) {
    observed = be.launchFault(e);
    if (!observed) throw e;
  }
  const reproduced = observed?.code === m.fault!.code;
  log.debug(`fault expected ${m.fault!.name}, observed ${observed ? observed.name : "none"}`);
  return {
    dir,
    kernel: m.kernel.demangled || m.kernel.name,
    verdict: reproduced ? "match" : "mismatch",
    regionsChecked: 0,
    bytesChecked: 0,
    mismatches: [],
    timing: { iters: 0, medianUs: NaN, minUs: NaN, p10Us: NaN, p90Us: NaN, appUs: null, method: "none (the launch faults)", appMethod: "none" },
    restore,
    reserve,
    check: { verifySeconds, compareSeconds: 0, bytesCopiedBack: 0 },
    determinism: { runs: 1, runsDiffering: 0, nondeterministic: false },
    module,
    device: { name: be.deviceName(), arch: be.arch() },
    numerics: { verdict: reproduced ? "bit-exact" : "mismatch", atol: 0, rtol: 0, regions: [] },
    fault: { expected: m.fault!, observed, reproduced, sanitizer: sanitizerCommand(dir) },
  };
}

/** A baseline and a candidate kernel judged on the same memory and timed interleaved (ReplaySession.runCompared). */
export interface ComparedRuns {
  /** The baseline's result (null when the capture's launch faults: nothing is timed then). */
  baseline: ReplayResult | null;
  candidate: ReplayResult;
  /** Candidate against baseline (src/replay/stats.ts); null with fewer than MIN_PAIRS timed launches or a faulting launch. */
  compare: TimingComparison | null;
}

/** One kernel of ReplaySession.runSet: its result and timed launches (µs), or why it could not run. */
export type SetRun = { result: ReplayResult; times: number[] } | { error: KerncapError };

/** A loaded module and how long its wait and load took. */
interface Loaded {
  mod: ReplayModule;
  modFile: string;
  /** RunOptions.launchOf's answer for a rebuilt module (undefined: the captured block and shared memory). */
  rebuiltLaunch?: { block: [number, number, number]; sharedMemBytes: number };
  moduleWaitSeconds: number;
  /** performance.now() when the load began. */
  t2: number;
}

/**
 * Checked runs of a nondeterministic kernel: 8, then 8 more while the last 8 still changed the
 * run-to-run envelope, up to MAX_CHECKED_RUNS or CHECKED_RUNS_SECONDS of checking (ReplayOptions.runs fixes the count).
 */
export const MAX_CHECKED_RUNS = 32;
export const CHECKED_RUNS_SECONDS = 2;

/** MAX_DYNAMIC_SHARED_SIZE_BYTES (CUfunction_attribute 8): a kernel's dynamic shared memory above 48 KiB needs it raised. */
export const MAX_DYNAMIC_SHARED = 8;

/**
 * The captured launch with a rebuilt module's block and dynamic shared memory (RunOptions.launchOf),
 * the function's dynamic shared memory limit raised to it where it needs more than captured.
 */
export function withRebuiltLaunch(m: Manifest, r: { block: [number, number, number]; sharedMemBytes: number }): Manifest {
  const attrs = m.functionAttributes.filter((a) => a.id !== MAX_DYNAMIC_SHARED);
  const cap = m.functionAttributes.find((a) => a.id === MAX_DYNAMIC_SHARED)?.value ?? 0;
  const need = r.sharedMemBytes > cap ? [{ id: MAX_DYNAMIC_SHARED, name: "MAX_DYNAMIC_SHARED_SIZE_BYTES", value: r.sharedMemBytes }] : m.functionAttributes.filter((a) => a.id === MAX_DYNAMIC_SHARED);
  return { ...m, launch: { ...m.launch, block: r.block, sharedMemBytes: r.sharedMemBytes }, functionAttributes: [...attrs, ...need] };
}

/** A kernel checked and ready to time: its launch, the restore before each, and its result given the timed launches (µs). */
interface Prepared {
  /** The capture faulted in the app: the replay's outcome, nothing to time. */
  fault?: ReplayResult;
  launch: () => void;
  restoreChanged: () => void;
  finish: (times: number[], interleaved: boolean, clocks: ClockState | null) => ReplayResult;
}

/** Options of one run of a prepared session: ReplayOptions less verify and ordinal (the session's). */
export type RunOptions = Omit<ReplayOptions, "verify" | "ordinal">;

/** What a session's reset put back before a run: chunks of the regions that differed from the before state. */
export interface ResetStats {
  /** Chunks and bytes put back from memory/before.bin because a previous run wrote them outside the app's changed chunks (or wrote them differently after the device backup's restore). */
  chunks: number;
  bytes: number;
  /** Ranges scanned (kc64 per chunk on the GPU) and the wall time of the whole reset (s). */
  regionsScanned: number;
  seconds: number;
}

/**
 * A capture's memory resident on the GPU at its captured VAs, checked, ready for any number of
 * runs (kernel launches of the captured or a rebuilt module). One per process: the captured VAs
 * are reserved once.
 */
export interface ReplaySession {
  readonly dir: string;
  readonly manifest: Manifest;
  /** The restore, the VA reservation and the GPU check of open (reported in every run's result). */
  readonly opened: { restore: ReplayResult["restore"]; reserve: ReplayResult["reserve"]; verifySeconds: number };
  /** The last reset (null before the first). */
  readonly lastReset: ResetStats | null;
  /**
   * One replay: module load, globals restore, checked runs, compare, timed launches (the result
   * replay returns). From the second run on, the memory is first put back to the before state
   * (reset()). The module is unloaded at the end.
   * @throws as replay; an error for which isContextLost(e) holds (a kernel fault) leaves the
   *   context unusable: close the session with the context (close({ resetDevice: true })) and open another.
   */
  run(o: RunOptions): Promise<ReplayResult>;
  /**
   * Two kernels on the same memory: each judged as run() judges it (checked runs, compare), one
   * after the other from the before state, then timed interleaved (timeInterleaved) with a
   * second load of each module, in rounds taken until the comparison (src/replay/stats.ts
   * adaptiveCompare) is decided or `candidate.compareBudgetSeconds` ends. `candidate.modulePath` may be a promise (a build still
   * running): the baseline is checked meanwhile. iters: the larger of the two.
   * @throws as run()
   */
  runCompared(baseline: RunOptions, candidate: RunOptions): Promise<ComparedRuns>;
  /**
   * Several kernels on the same memory (kerncap tune's configs): each judged as run() judges it,
   * from the before state, then all timed interleaved with `timing`'s iters and L2 flush. With
   * `tolerate`, a kernel that fails to load or launch (a KerncapError: too much shared memory, a
   * kernel not in its module) is that entry's error and the others go on.
   * @returns one entry per kernel, in order: its result and its times (µs), or its error
   */
  runSet(list: RunOptions[], timing: RunOptions, tolerate?: boolean): Promise<SetRun[]>;
  /**
   * Put back the before state of every chunk the previous runs wrote: the app's changed chunks
   * from the device backup, then a kc64 scan of every region against the manifest's before hashes
   * (chunkExpectation(...).beforeHash) and the chunks that still differ from memory/before.bin
   * (a wrong kernel may write anywhere). No-op when nothing ran since the last reset. run() calls
   * it; a caller with idle time (the watch between saves) calls it earlier to take it off the
   * next run's path.
   * @throws KerncapError E_CHECKSUM when verify is on and a chunk put back does not hash as the manifest says.
   */
  reset(): ResetStats | undefined;
  /** Whether an error of run() left the device context unusable (the backend's isContextLost). */
  isContextLost(e: unknown): boolean;
  /**
   * Free what the session holds on the device and the host: its allocations, pinned buffers and
   * the VA reservations (ReplayBackend.close); the context stays for the next capture, unless
   * `resetDevice` destroys it (after a kernel fault: isContextLost).
   */
  close(o?: { resetDevice?: boolean }): void;
}

/**
 * Open an opened capture (src/format/capture-dir.ts openCapture) for replay on its device (the
 * backend of its vendor, src/replay/backend.ts): check the small files, reserve every span at its
 * captured VA, restore the before state, check it (kc64 per chunk, when verify) and load the scan
 * kernel. Steps 1-2 of replay, done once.
 * @throws KerncapError E_CHECKSUM, E_NO_GPU, E_VA_TAKEN, the
 *   backend's (E_HSA_NOT_FOUND, E_HSA_VMEM, E_ARCH).
 */
export async function openReplay(c: OpenedCapture, o: Pick<ReplayOptions, "verify" | "ordinal">): Promise<ReplaySession> {
  const { dir, manifest: m } = c;
  // Small files (SHA-256) and the memory files' sizes; the memory itself is checked on the GPU
  // once restored (kc64 of every chunk against the manifest), which reads it at device speed.
  verifyFiles(dir, o.verify ? m : { ...m, files: [] });

  // 1. Reserve every span at its exact VA before anything large is mapped on the host side.
  const cu = openBackend(m, o.ordinal);
  try {
    return await openOn(cu, dir, m, o);
  } catch (e) {
    // nothing stays reserved (close unmaps): the no-ASLR retry (src/replay/aslr.ts) is another process that needs these VAs
    cu.close();
    if (cu.isContextLost(e)) cu.reset();
    throw e;
  }
}

async function openOn(cu: ReplayBackend, dir: string, m: Manifest, o: Pick<ReplayOptions, "verify">): Promise<ReplaySession> {
  const t0 = performance.now();
  const spans = vaSpans(m.regions.map((r) => ({ va: BigInt(r.va), size: r.size })), cu.reserveAlignment());
  // Fault injection for the test suite: occupy the first span first, as another mapping would.
  if (faultVaTaken() && spans[0]) cu.mapAt(spans[0].va, spans[0].size);
  for (const s of spans) cu.mapAt(s.va, s.size);
  const reserve = { spans: spans.length, bytes: spans.reduce((a, s) => a + s.size, 0), seconds: (performance.now() - t0) / 1000 };
  log.debug(`reserved ${spans.length} spans, ${reserve.bytes} bytes, at the captured VAs`);

  // 2. Restore the before state: zero every range, then copy the stored chunks.
  const t1 = performance.now();
  const C = m.memory.chunkBytes;
  const restorer = new Restorer(cu, capturePath(dir, m.memory.before));
  for (const r of m.regions) restorer.restore(BigInt(r.va), r, C);
  restorer.finish();
  const restoreSeconds = (performance.now() - t1) / 1000;
  const restore = {
    bytes: m.memory.beforeBytes,
    storedBytes: m.memory.storedBeforeBytes,
    seconds: restoreSeconds,
    gbPerS: m.memory.storedBeforeBytes / 1e9 / Math.max(restoreSeconds, 1e-9),
    hostRegistered: restorer.registered > 0,
  };
  log.debug(`restored ${m.regions.length} regions (${restorer.registered} pieces from pinned file mappings, ${restorer.staged} staged)`);
  const scanner = await cu.scanner();
  const tv = performance.now();
  if (o.verify) for (const r of m.regions) checkRestored(scanner, BigInt(r.va), r, C, m.memory.before, `region ${r.va}`);
  const verifySeconds = (performance.now() - tv) / 1000;
  return new Session(dir, m, cu, restorer, scanner, o.verify, { restore, reserve, verifySeconds });
}

class Session implements ReplaySession {
  lastReset: ResetStats | null = null;
  /** The capture's judging settings (src/replay/judge-settings.ts), read once at open: each run's options override them. */
  private readonly judging: JudgeSettings | undefined;
  private readonly C: number;
  /** Some run launched since the last reset. */
  private dirty = false;
  /** The app's changed chunks of every region, and their before state on the device (step 4). */
  private readonly changedRuns: { va: bigint; bytes: number }[];
  private backup: bigint | undefined;
  private backupMade = false;
  private flush: bigint | undefined;
  /** The last timed launches had L2 flushed before each. */
  private flushed = false;
  /** The clocks during the last timed launches (src/replay/clocks.ts). */
  private clocks: Promise<ClockState | null> = Promise.resolve(null);
  private readonly before: FileImage;
  private readonly after: FileImage;
  private readonly regionExpect: ReturnType<typeof chunkExpectation>[];

  constructor(
    readonly dir: string,
    readonly manifest: Manifest,
    private readonly cu: ReplayBackend,
    private readonly restorer: Restorer,
    private readonly scanner: DeviceScanner,
    private readonly verify: boolean,
    readonly opened: ReplaySession["opened"],
  ) {
    const m = manifest;
    this.C = m.memory.chunkBytes;
    this.changedRuns = m.regions.flatMap((r) => runs(r, r.after, this.C).map((x) => ({ va: BigInt(r.va) + BigInt(x.vaOffset), bytes: x.bytes })));
    this.before = new FileImage(capturePath(dir, m.memory.before));
    this.after = new FileImage(capturePath(dir, m.memory.after));
    this.regionExpect = m.regions.map((r) => chunkExpectation(r, this.C));
    this.judging = readJudging(dir);
  }

  /** The regions' app-changed chunks back to the before state: from the device backup, else whole changed regions from the host. */
  private restoreChangedRegions(): void {
    const { cu, restorer, C } = this;
    if (this.backup === undefined) {
      for (const r of this.manifest.regions) if (r.changed) restorer.restore(BigInt(r.va), r, C);
      restorer.finish();
      return;
    }
    let off = 0n;
    for (const x of this.changedRuns) {
      cu.dtod(x.va, this.backup + off, x.bytes);
      off += BigInt(x.bytes);
    }
  }

  reset(): ResetStats | undefined {
    if (!this.dirty) return undefined;
    const t0 = performance.now();
    const { m, C } = { m: this.manifest, C: this.C };
    this.restoreChangedRegions();
    let chunks = 0;
    let bytes = 0;
    const touched: number[] = [];
    for (const [i, r] of m.regions.entries()) {
      const s = this.scanner.scan(BigInt(r.va), r.size, C);
      const e = this.regionExpect[i]!;
      const bad: number[] = [];
      for (let c = 0; c < s.hash.length; c++) {
        const want = e.beforeHash[c];
        if (!(want === undefined ? s.nonzero[c] === 0 : s.hash[c] === want)) bad.push(c);
      }
      if (!bad.length) continue;
      bytes += this.restorer.restoreChunks(BigInt(r.va), r.size, C, bad, e.beforeOffset);
      chunks += bad.length;
      touched.push(i);
    }
    this.restorer.finish();
    if (this.verify) for (const i of touched) checkRestored(this.scanner, BigInt(m.regions[i]!.va), m.regions[i]!, C, m.memory.before, `region ${m.regions[i]!.va}`);
    this.dirty = false;
    this.lastReset = { chunks, bytes, regionsScanned: m.regions.length, seconds: (performance.now() - t0) / 1000 };
    if (chunks) log.debug(`reset: ${chunks} chunks (${bytes} bytes) written outside the app's changed chunks put back from ${m.memory.before}`);
    return this.lastReset;
  }

  isContextLost(e: unknown): boolean {
    return this.cu.isContextLost(e);
  }

  close(o: { resetDevice?: boolean } = {}): void {
    // best effort: after a kernel fault the context refuses every call, and the error to report is the fault
    for (const p of [this.backup, this.flush]) {
      try {
        if (p !== undefined) this.cu.memFree(p);
      } catch {
        /* the context is gone with the fault */
      }
    }
    this.restorer.dispose();
    this.cu.close();
    if (o.resetDevice) this.cu.reset();
    this.backup = this.flush = undefined;
  }

  async run(o: RunOptions): Promise<ReplayResult> {
    this.reset();
    const l = await this.load(o);
    try {
      const p = await this.prepare(o, l);
      if (p.fault) return p.fault;
      const times = this.time([p], o);
      return p.finish(times, false, await this.clocks);
    } finally {
      l.mod.unload(); // its globals go with it; the next run loads its own module
    }
  }

  async runCompared(baseline: RunOptions, candidate: RunOptions): Promise<ComparedRuns> {
    // a launch that faults in the app ends the context: nothing to time, the candidate alone is judged
    if (this.manifest.fault) return { baseline: null, candidate: await this.run(candidate), compare: null };
    const iters = Math.max(baseline.iters, candidate.iters);
    const timing = { ...candidate, iters };
    if (iters < MIN_PAIRS) {
      const [a, b] = await this.runSet([baseline, candidate], timing, false);
      if ("error" in a!) throw a.error;
      if ("error" in b!) throw b.error;
      return { baseline: a.result, candidate: b.result, compare: null };
    }
    // each module loaded a second time (one checked run: the same module again) and timed in the
    // same rounds: the placement's share of a difference halves, and each A/A difference is the
    // kernel's own noise floor (src/replay/stats.ts); more rounds until the comparison is decided
    // or the budget ends
    let compare: TimingComparison | null = null;
    const [a, b] = await this.withPrepared([baseline, candidate, { ...baseline, runs: 1 }, { ...candidate, runs: 1 }], false, async (ps) => {
      let round = 0;
      const out = await adaptiveCompare(
        (n) => {
          const t = this.timeInterleaved(ps, { ...timing, iters: n }, round);
          round += n;
          return { a: t[0]!, b: t[1]!, aa: t[2]!, bb: t[3]! };
        },
        { minRounds: iters, block: blockOf(ps.length), budgetSeconds: candidate.compareBudgetSeconds ?? COMPARE_SECONDS },
      );
      compare = out.compare;
      return this.roundTimes;
    });
    if ("error" in a!) throw a.error;
    if ("error" in b!) throw b.error;
    return { baseline: a.result, candidate: b.result, compare };
  }

  async runSet(list: RunOptions[], timing: RunOptions, tolerate = true): Promise<SetRun[]> {
    return this.withPrepared(list, tolerate, (ps) => this.timeInterleaved(ps, timing, 0));
  }

  /**
   * Load and prepare (check) each kernel of `list` from the before state, then time them with
   * `time` (each kernel's times, µs) and finish each result; modules unloaded at the end.
   */
  private async withPrepared(list: RunOptions[], tolerate: boolean, time: (ps: Prepared[]) => number[][] | Promise<number[][]>): Promise<SetRun[]> {
    const loaded: Loaded[] = [];
    const ready: { k: number; p: Prepared }[] = [];
    const out: SetRun[] = [];
    try {
      for (const [k, o] of list.entries()) {
        this.reset();
        try {
          const l = await this.load(o);
          loaded.push(l);
          ready.push({ k, p: await this.prepare(o, l) });
        } catch (e) {
          if (!tolerate || !isKerncapError(e)) throw e;
          log.debug(`kernel ${k} of the set: ${e.message}`);
          out[k] = { error: e };
        }
      }
      const times = await time(ready.map((x) => x.p));
      const clocks = await this.clocks;
      for (const [j, { k, p }] of ready.entries()) out[k] = { result: p.finish(times[j]!, ready.length > 1, clocks), times: times[j]! };
      return out;
    } finally {
      for (const l of loaded) l.mod.unload();
    }
  }

  /** 3. The module (waiting for a build still running), loaded. */
  private async load(o: RunOptions): Promise<Loaded> {
    const { dir, cu } = this;
    const m = this.manifest;
    const tw = performance.now();
    const rebuilt = await o.modulePath; // an absolute path that the reproducer's build printed
    const modFile = rebuilt ?? capturePath(dir, m.module.file);
    const moduleWaitSeconds = (performance.now() - tw) / 1000;
    const t2 = performance.now();
    const image = new Uint8Array(rebuilt ? await Bun.file(rebuilt).arrayBuffer() : readCaptureBytes(dir, m.module.file, m.module.size));
    const rebuiltLaunch = rebuilt && !o.launch ? o.launchOf?.(rebuilt) : undefined;
    return { mod: cu.loadModule(image, modFile, m), modFile, moduleWaitSeconds, t2, ...(rebuiltLaunch ? { rebuiltLaunch } : {}) };
  }

  /** Timed launches of one prepared kernel (the list finish takes). */
  private time(ps: [Prepared], o: RunOptions): number[] {
    return this.timeInterleaved(ps, o, 0)[0]!;
  }

  /** Every kernel's times of the timeInterleaved calls since the last one at round 0 (µs, in launch order). */
  private roundTimes: number[][] = [];

  /**
   * 6. Timed launches, each from the before state: 2 warm-up launches each (none when iters is 0:
   * under a profiler or compute-sanitizer; none when `firstRound` > 0, a continuation), then
   * `iters` timed ones each. With several kernels, one launch of each per round in the balanced
   * order of src/replay/stats.ts roundOrder (A B, B A, …; rounds numbered from `firstRound`), so
   * that a position effect (the launch right after the restore) falls on all alike. A flush of L2 with
   * flushL2 before each launch: a read of a buffer larger than L2 (DeviceScanner.evict: clean
   * lines, as ncu's --cache-control all leaves), a memset where the backend cannot read. The clocks are read meanwhile (this.clocks).
   * @returns each kernel's times of this call (µs), in launch order; this.roundTimes holds them since round 0
   */
  private timeInterleaved(ps: Prepared[], o: RunOptions, firstRound: number): number[][] {
    const { cu } = this;
    let flush: bigint | undefined;
    // a buffer of 256 MiB, or of twice the L2 where that is more (H200: 50 MiB): reading it evicts every line the previous launch left
    const flushBytes = Math.max(256 << 20, 2 * (cu.l2Bytes?.() ?? 0));
    if (o.flushL2) {
      try {
        if (this.flush === undefined) {
          this.flush = cu.memAlloc(flushBytes);
          cu.memset(this.flush, 0, flushBytes);
        }
        flush = this.flush;
      } catch {
        log.warn(`--flush-l2: no device memory for the ${flushBytes >> 20} MiB flush buffer; timing with a warm L2`);
      }
    }
    this.flushed = flush !== undefined;
    if (firstRound === 0) {
      this.clocks = o.iters ? queryClocks(cu.pciBusId?.()) : Promise.resolve(null);
      this.roundTimes = ps.map(() => []);
    }
    const times = ps.map(() => [] as number[]);
    for (let i = o.iters && firstRound === 0 ? -2 : 0; i < o.iters; i++) {
      const order = roundOrder(ps.length, i < 0 ? i + 2 : firstRound + i);
      for (const k of order) {
        ps[k]!.restoreChanged();
        // a read of the flush buffer: L2 holds its clean lines, and the restore's dirty ones are written back before the launch
        if (flush !== undefined && !this.scanner.evict?.(flush, flushBytes)) cu.memset(flush, i & 0xff, flushBytes);
        const us = cu.timedLaunch(ps[k]!.launch);
        if (i >= 0) {
          times[k]!.push(us);
          this.roundTimes[k]!.push(us);
        }
      }
    }
    cu.sync();
    return times;
  }

  /**
   * Steps 3-5 for one loaded module: the kernel, its attributes, the module globals restored, the
   * checked runs compared with the app's after state; what remains is timing (the launch and the
   * restore between launches) and the result (finish, given the times).
   */
  private async prepare(given: RunOptions, { mod, modFile, moduleWaitSeconds, t2, rebuiltLaunch }: Loaded): Promise<Prepared> {
    const { dir, cu, restorer, scanner, C } = this;
    // the capture's judging settings under this run's options (src/replay/judge-settings.ts)
    const judged = mergeJudging(this.judging, given);
    const o: RunOptions = { ...given, ...judged.options };
    const { restore, reserve, verifySeconds } = this.opened;
    const m = this.manifest;
    // another launch configuration of the kernel (another capture's, a tuned config's): its grid, block, shared memory, attributes and parameter bytes
    const lm = o.launch ? { ...m, launch: o.launch.launch, functionAttributes: o.launch.functionAttributes } : rebuiltLaunch ? withRebuiltLaunch(m, rebuiltLaunch) : m;
    const name = o.kernelName ?? m.kernel.name;
    const f = mod.kernel(name);
    if (f === undefined) {
      throw new KerncapError("E_KERNEL_NOT_IN_MODULE", `kernel ${name} is not in ${modFile}`, {
        hint: "The module does not export the captured kernel symbol; check the kernel name (extern \"C\" or templates change the mangled name).",
      });
    }
    f.applyAttributes(lm.functionAttributes);
    // Module globals (__device__/__constant__ variables): the loaded module has its own copies,
    // at addresses of the driver's choosing; write the captured before state into them by name.
    const rebuilt = o.modulePath !== undefined;
    const absent: string[] = [];
    const globals = m.globals.flatMap((g) => {
      // $str, $str$1…: nvcc's names for string literals (printf formats), constants of the image
      // itself and numbered per TU: a rebuilt slice numbers them anew, so they are not restored
      if (rebuilt && g.name.startsWith("$str")) return [];
      const d = mod.global(g.name);
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
    restorer.finish();
    if (this.verify) for (const g of globals) checkRestored(scanner, g.dva, g, C, m.memory.before, `global ${g.name}`);
    const loadSeconds = (performance.now() - t2) / 1000;
    log.debug(`module loaded, function ${name} found, attributes applied, ${globals.length} module globals restored`);

    const params = o.launch?.params ?? new Uint8Array(readCaptureBytes(dir, m.params.file, m.params.size));
    const launchKernel = f.launcher(lm, params);
    const launch = () => {
      this.dirty = true;
      launchKernel();
    };

    // A launch that faulted in the app: reproduce the fault here (the expected outcome), nothing to compare.
    if (m.fault) {
      const fault = replayFault(dir, m, cu, launch, { file: modFile, loadSeconds, waitSeconds: moduleWaitSeconds }, restore, reserve, verifySeconds);
      return { fault, launch, restoreChanged: () => {}, finish: () => fault };
    }

    // 4. Keep a device copy of the chunks the kernel writes, to restore them between timed runs
    // (made once per session, from the before state).
    if (!this.backupMade) {
      this.backupMade = true;
      const changedBytes = this.changedRuns.reduce((a, x) => a + x.bytes, 0);
      try {
        this.backup = changedBytes ? cu.memAlloc(changedBytes) : undefined;
      } catch {
        log.warn("not enough device memory for a device-side backup; restoring from the host between runs");
      }
      let off = 0n;
      for (const x of this.changedRuns) {
        if (this.backup !== undefined) cu.dtod(this.backup + off, x.va, x.bytes);
        off += BigInt(x.bytes);
      }
    }
    const restoreChanged = () => {
      for (const g of globals) if (g.changed) restoreGlobal(g);
      restorer.finish();
      this.restoreChangedRegions();
    };

    // 5. Checked launches: `runs` launches from the same before state, each scanned on the GPU.
    // Chunks whose kc64 differs from the app's are copied back (only those); chunks that differ
    // between runs make the kernel nondeterministic, and are judged against the run-to-run envelope.
    // 3 runs by default; when they differ (a nondeterministic kernel) 5 more, so the envelope has 8 samples
    let nRuns = Math.max(1, o.runs ?? (o.nondeterministic ? 8 : 3));
    log.debug(`launching grid ${m.launch.grid} block ${m.launch.block} with ${params.byteLength} parameter bytes, ${nRuns} checked runs`);
    const tc = performance.now();
    const { before, after } = this;
    const ranges: { r: Range; base: bigint; kind: string; dtype: ElementType; source: RegionNumerics["dtypeSource"] }[] = [];
    // written: the 64 bytes at `off` differ between the app's before and after state (byte-precise,
    // not chunk-granular: a caching allocator's segment holds inputs and outputs in one chunk)
    const planExp = new Map<number, ReturnType<typeof chunkExpectation>>();
    const plan = regionNumericsPlan(m, params, o, (ri, off) => {
      const r = m.regions[ri]!;
      const c = Math.floor(off / C);
      if (!r.after.extents.some(([first, count]) => c >= first && c < first + count)) return false;
      if (!planExp.has(ri)) planExp.set(ri, chunkExpectation(r, C));
      const e = planExp.get(ri)!;
      const len = chunkLen(r.size, c, C);
      const at = off - c * C;
      const n = Math.min(64, len - at);
      const a = chunkBytesOf(e, c, len, "after", before, after).subarray(at, at + n);
      const b = chunkBytesOf(e, c, len, "before", before, after).subarray(at, at + n);
      return !Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
    });
    for (const [ri, r] of m.regions.entries()) ranges.push({ r, base: BigInt(r.va), kind: r.kind, dtype: plan[ri]!.dtype, source: plan[ri]!.source });
    const asMultiset = new Set(o.multiset?.length ? multisetRegions(m, params, o.multiset) : []);
    const multiset: MultisetRegion[] = [];
    for (const g of globals) ranges.push({ r: g, base: g.dva, kind: `global ${g.name}`, dtype: "u8", source: "default" });
    const expect = ranges.map((x) => chunkExpectation(x.r, C));
    const scans: ChunkScan[][] = [];
    const copies = new Map<string, Uint8Array[]>(); // "range:chunk" → bytes per run (undefined: matched the app)
    let bytesCopiedBack = 0;
    const COPY_LIMIT = 2 ** 31;
    // the envelope's shape so far: per range, its varying chunks and their largest spread (src/replay/envelope.ts maxSpread)
    let lastSignature = "";
    const envelopeSignature = () =>
      ranges
        .map((x, i) => {
          let n = 0;
          let spread = 0;
          for (let c = 0; c < scans[0]![i]!.hash.length; c++) {
            if (!scans.some((sr) => sr[i]!.hash[c] !== scans[0]![i]!.hash[c])) continue;
            n++;
            const got = copies.get(`${i}:${c}`);
            if (got) {
              const app = chunkBytesOf(expect[i]!, c, chunkLen(x.r.size, c, C), "after", before, after);
              spread = Math.max(spread, maxSpread(x.dtype, scans.map((_, run) => got[run] ?? app)));
            }
          }
          return `${n}:${spread}`;
        })
        .join(",");
    const anyVaried = () => scans.slice(1).some((sr) => sr.some((sc, i) => sc.hash.some((h, c) => h !== scans[0]![i]!.hash[c])));
    for (let run = 0; run < nRuns; run++) {
      if (run > 0) restoreChanged();
      launch();
      cu.sync();
      scans.push(
        ranges.map((x, i) => {
          const s = scanner.scan(x.base, x.r.size, C);
          const e = expect[i]!;
          for (let c = 0; c < s.hash.length; c++) {
            const want = e.state[c] === "zero" ? undefined : e.hash[c];
            if (want === undefined ? s.nonzero[c] === 0 : s.hash[c] === want) continue;
            if (bytesCopiedBack > COPY_LIMIT) continue;
            const len = chunkLen(x.r.size, c, C);
            const got = new Uint8Array(len);
            cu.dtoh(got, x.base + BigInt(c * C));
            bytesCopiedBack += len;
            const k = `${i}:${c}`;
            if (!copies.has(k)) copies.set(k, []);
            copies.get(k)![run] = got;
          }
          return s;
        }),
      );
      if (run === nRuns - 1 && o.runs === undefined && nRuns === 3 && anyVaried()) nRuns = 8;
      else if (run === nRuns - 1 && o.runs === undefined && nRuns >= 8 && nRuns < MAX_CHECKED_RUNS && anyVaried() && (performance.now() - tc) / 1000 < CHECKED_RUNS_SECONDS) {
        // 8 more runs while the last ones still changed the envelope (which chunks vary, and by how much)
        const sig = envelopeSignature();
        if (sig !== lastSignature) nRuns += 8;
        lastSignature = sig;
      }
    }
    const runsDiffering = new Set<number>();
    const mismatches: RegionMismatch[] = [];
    const numerics: RegionNumerics[] = [];
    let bytesChecked = 0;
    // the kernel's runs varied somewhere: a written float region whose runs all agree but differ
    // from the app's is judged against the kernel's own noise (src/replay/envelope.ts kernelNoise)
    const kernelVaried = anyVaried();
    type Held = { c: number; appBytes: Uint8Array; got: Uint8Array; before: Uint8Array | undefined };
    const regionWork: ({ multiset: RegionNumerics } | { acc: RegionAccumulator; env?: Envelope; held: Held[]; whole: Parameters<RegionAccumulator["setWholeRegion"]>[0] })[] = [];
    const varyingRegions: { index: number; dtype: ElementType; env: Envelope }[] = [];
    for (const [i, x] of ranges.entries()) {
      const e = expect[i]!;
      const s0 = scans[0]![i]!;
      if (asMultiset.has(i)) {
        // order-independent: the whole region's elements, the app's against each run's (no envelope, no tolerance)
        const j = multisetRange(x, e, i, scans, copies, C, before, after);
        j.runsDiffering.forEach((run) => runsDiffering.add(run));
        multiset.push(j.report);
        regionWork.push({ multiset: j.numerics });
        continue;
      }
      const acc = new RegionAccumulator({ va: x.r.va, kind: x.kind, size: x.r.size, changedInApp: x.r.changed }, x.dtype, x.source, plan.tol);
      const varying: { c: number; appBytes: Uint8Array; perRun: Uint8Array[] }[] = [];
      const held: Held[] = [];
      let gotAllZero = true;
      let expAllZero = true;
      let gotEqualsBefore = true;
      for (let c = 0; c < s0.hash.length; c++) {
        const len = chunkLen(x.r.size, c, C);
        if (s0.nonzero[c]) gotAllZero = false;
        const want = e.state[c] === "zero" ? undefined : e.hash[c];
        if (want !== undefined && want !== zeroHash(len)) expAllZero = false;
        const bh = e.beforeHash[c];
        if (bh === undefined ? s0.nonzero[c] !== 0 : s0.hash[c] !== bh) gotEqualsBefore = false;
        let varies = false;
        for (let run = 1; run < nRuns; run++) {
          if (scans[run]![i]!.hash[c] !== s0.hash[c]) {
            varies = true;
            runsDiffering.add(run);
          }
        }
        const got = copies.get(`${i}:${c}`);
        if (!got) continue; // every run equals the app's bytes
        const appBytes = chunkBytesOf(e, c, len, "after", before, after);
        const perRun = Array.from({ length: nRuns }, (_, run) => got[run] ?? appBytes);
        const beforeBytes = x.r.changed ? chunkBytesOf(e, c, len, "before", before, after) : undefined;
        if (varies) varying.push({ c, appBytes, perRun });
        else if (kernelVaried && x.r.changed && isFloatType(x.dtype)) held.push({ c, appBytes, got: perRun[0]!, before: beforeBytes });
        else acc.add(c * C, perRun[0]!, appBytes, beforeBytes);
      }
      const whole = { bytes: x.r.size, gotAllZero, expAllZero: expAllZero && x.r.changed, gotEqualsBefore };
      // the region's noise floor first, then each varying chunk against it (src/replay/envelope.ts)
      const floor = varying.reduce((a, v) => Math.max(a, maxSpread(x.dtype, v.perRun)), 0);
      const env = varying.length ? mergeEnvelopes(varying.map((v) => ({ offset: v.c * C, env: judgeEnvelope(x.dtype, v.appBytes, v.perRun, floor) }))) : undefined;
      if (env) varyingRegions.push({ index: i, dtype: x.dtype, env });
      regionWork.push({ acc, env, held, whole });
    }
    // each region's verdict, the held chunks judged by the kernel's noise of their element type
    // (bit for bit, or by the tolerance, where no region of that type varied)
    const noise = kernelNoise(varyingRegions);
    for (const [i, x] of ranges.entries()) {
      const j = regionWork[i]!;
      let res: RegionNumerics;
      if ("multiset" in j) res = j.multiset;
      else {
        const k = noise.get(x.dtype);
        const held = { differing: 0, appUlp: 0, outside: 0, first: -1 };
        for (const h of j.held) {
          if (!k) {
            j.acc.add(h.c * C, h.got, h.appBytes, h.before);
            continue;
          }
          const r = judgeHeld(x.dtype, h.appBytes, h.got, k.ulp);
          held.differing += r.differing;
          held.appUlp = Math.max(held.appUlp, r.maxUlp);
          held.outside += r.outside;
          if (held.first < 0 && r.firstOutsideOffset >= 0) held.first = h.c * C + r.firstOutsideOffset;
          j.acc.add(h.c * C, h.got, h.appBytes, h.before, { judgedElsewhere: true });
        }
        j.acc.setWholeRegion(j.whole);
        res = j.acc.result();
        for (const [bad, first, add] of [
          [j.env?.outside ?? 0, j.env?.firstOutsideOffset ?? -1, j.env !== undefined],
          [held.outside, held.first, k !== undefined && j.held.length > 0],
        ] as const) {
          if (!add) continue;
          if (bad) {
            res.verdict = "mismatch";
            res.overTolerance += bad;
            if (res.firstOverOffset < 0) res.firstOverOffset = first;
          } else if (res.verdict === "bit-exact") res.verdict = "within-spread";
        }
        if (j.env) res.spread = j.env;
        if (k && j.held.length) res.kernelNoise = { region: i, ulp: k.ulp, regions: k.regions, appUlp: held.appUlp, elementsDiffering: held.differing, outside: held.outside, runs: nRuns };
      }
      bytesChecked += x.r.size;
      numerics.push(res);
      if (res.verdict === "mismatch") {
        const firstDiff = res.firstDiffOffset >= 0 ? res.firstDiffOffset : res.firstOverOffset;
        mismatches.push({ va: x.r.va, kind: x.kind, size: x.r.size, changedInApp: x.r.changed, firstDiffOffset: firstDiff, bytesDiffering: res.bytesDiffering });
      }
    }
    const compareSeconds = (performance.now() - tc) / 1000;
    const determinism = { runs: nRuns, runsDiffering: runsDiffering.size, nondeterministic: runsDiffering.size > 0, ...(o.nondeterministic !== undefined ? { expected: o.nondeterministic ? ("nondeterministic" as const) : ("deterministic" as const) } : {}) };
    // a kernel said to be deterministic whose runs differ: a race or an atomic the edit brought in
    const unexpectedlyVaried = o.nondeterministic === false && runsDiffering.size > 0;

    const finish = (times: number[], interleaved: boolean, clocks: ClockState | null): ReplayResult => {
      const sorted = [...times].sort((a, b) => a - b);
      const pct = (q: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! : NaN);
      const appUs = typeof m.timing.app_launch_us === "number" && m.timing.app_launch_us >= 0 ? m.timing.app_launch_us : null;
      return {
        dir,
        kernel: m.kernel.demangled || m.kernel.name,
        verdict: overallVerdict(numerics) === "mismatch" || unexpectedlyVaried ? "mismatch" : "match",
        regionsChecked: m.regions.length + globals.length,
        bytesChecked,
        mismatches,
        timing: {
          iters: times.length,
          medianUs: times.length ? median(times) : NaN,
          minUs: times.length ? sorted[0]! : NaN,
          p10Us: pct(0.1),
          p90Us: pct(0.9),
          appUs,
          method: cu.timingMethod(this.flushed) + (interleaved ? ", interleaved with the other kernel's launches" : ""),
          appMethod: m.appLaunchMethod ?? "events around the launch in the app (launch path included)",
          l2: this.flushed ? "flushed" : "warm",
          clocks,
          ...(o.keepSamples ? { samplesUs: times } : {}),
        },
        restore,
        reserve,
        check: { verifySeconds, compareSeconds, bytesCopiedBack, ...(cu.scansOn === "host" ? { scannedOn: "host" as const } : {}) },
        determinism,
        module: { file: modFile, loadSeconds, waitSeconds: moduleWaitSeconds },
        device: { name: cu.deviceName(), arch: cu.arch() },
        numerics: { verdict: overallVerdict(numerics), atol: plan.tol.atol, rtol: plan.tol.rtol, regions: numerics.filter((x) => x.verdict !== "bit-exact"), ...(judged.fromCapture.length ? { settings: { file: JUDGE_FILE, used: judged.fromCapture } } : {}) },
        ...(o.multiset?.length ? { multiset } : {}),
        };
    };
    return { launch, restoreChanged, finish };
  }
}

/**
 * --multiset for one region (ranges[i] of the checked runs): the app's whole after state and each
 * run's whole bytes (the chunks copied back where a run's kc64 differed from the app's, the app's
 * bytes elsewhere: equal hashes, equal bytes), judged by judgeMultiset. Holds 1 + runs copies of
 * the region on the host, only when some run differs from the app.
 */
function multisetRange(
  x: { r: Range; kind: string; dtype: ElementType; source: RegionNumerics["dtypeSource"] },
  e: ReturnType<typeof chunkExpectation>,
  i: number,
  scans: ChunkScan[][],
  copies: Map<string, Uint8Array[]>,
  C: number,
  before: FileImage,
  after: FileImage,
): { report: MultisetRegion; numerics: RegionNumerics; runsDiffering: number[] } {
  const nRuns = scans.length;
  const nChunks = scans[0]![i]!.hash.length;
  const runsDiffering = scans.flatMap((sr, run) => (run > 0 && sr[i]!.hash.some((h, c) => h !== scans[0]![i]!.hash[c]) ? [run] : []));
  const copied = Array.from({ length: nChunks }, (_, c) => copies.get(`${i}:${c}`)).map((g, c) => ({ c, g })).filter((x) => x.g);
  let j: MultisetJudgement = { elements: Math.floor(x.r.size / ELEMENT_BYTES[x.dtype]), runs: nRuns, runsReordered: 0, unmatched: 0, firstBadRun: -1 };
  let diff = { first: -1, count: 0 };
  if (copied.length) {
    const app = new Uint8Array(x.r.size);
    for (let c = 0; c < nChunks; c++) app.set(chunkBytesOf(e, c, chunkLen(x.r.size, c, C), "after", before, after), c * C);
    const perRun = Array.from({ length: nRuns }, (_, run) => {
      const b = app.slice();
      for (const { c, g } of copied) if (g![run]) b.set(g![run]!, c * C);
      return b;
    });
    j = judgeMultiset(x.dtype, app, perRun);
    diff = diffBytes(perRun[j.firstBadRun >= 0 ? j.firstBadRun : 0]!, app);
  }
  const verdict: MultisetRegion["verdict"] = j.unmatched ? "mismatch" : j.runsReordered ? "multiset-equal" : "bit-exact";
  return {
    runsDiffering,
    report: { index: i, va: x.r.va, dtype: x.dtype, verdict, ...j },
    numerics: {
      va: x.r.va,
      kind: x.kind,
      size: x.r.size,
      changedInApp: x.r.changed,
      dtype: x.dtype,
      dtypeSource: x.source,
      verdict,
      elements: j.elements,
      bytesDiffering: diff.count,
      overTolerance: j.unmatched,
      maxAbsError: 0,
      maxRelError: 0,
      firstOverOffset: -1,
      firstDiffOffset: diff.first,
      multiset: j,
    },
  };
}

/**
 * Run `f` on a session and close it; the device context goes with it when the run left it
 * unusable (a kernel fault: a replayed fault, an error isContextLost holds), so that the process
 * can replay another capture (`kerncap check`'s worker keeps one context for all of them).
 */
async function runClosing<T>(s: ReplaySession, f: () => Promise<T>, faulted: (r: T) => boolean): Promise<T> {
  let lost = false;
  try {
    const r = await f();
    lost = faulted(r);
    return r;
  } catch (e) {
    lost = s.isContextLost(e);
    throw e;
  } finally {
    s.close({ resetDevice: lost });
  }
}

/**
 * Replay an opened capture on its device (CUDA or HSA, by the manifest's vendor): openReplay, one
 * run, close.
 * @throws KerncapError for damaged captures (E_CHECKSUM),
 *   no GPU (E_NO_GPU), a taken VA (E_VA_TAKEN), a module the GPU can't run (E_ARCH).
 */
export async function replay(c: OpenedCapture, o: ReplayOptions): Promise<ReplayResult> {
  const s = await openReplay(c, o);
  return runClosing(s, () => s.run(o), (r) => r.fault?.observed != null);
}

/** One comparison of replayCompared's `repeat`: its compare and its wall time (s: module loads, checked runs, the timed rounds). */
export interface RepeatedCompare {
  compare: TimingComparison | null;
  seconds: number;
}

/**
 * Replay a capture with two kernels on its memory (ReplaySession.runCompared): the baseline
 * (by default the captured module and launch) and the candidate, judged each, timed interleaved.
 * `repeat` > 1: the whole comparison (module loads included) made that many times on the one
 * restored memory, each one's compare in `repeats` (is a claimed difference stable? the verdict
 * benchmark, scripts/bench-verdicts.sh); the results are the first comparison's.
 * @throws as replay
 */
export async function replayCompared(c: OpenedCapture, baseline: ReplayOptions, candidate: RunOptions, repeat = 1): Promise<ComparedRuns & { repeats?: RepeatedCompare[] }> {
  const s = await openReplay(c, baseline);
  return runClosing(
    s,
    async () => {
      let first: ComparedRuns | undefined;
      const repeats: RepeatedCompare[] = [];
      for (let i = 0; i < repeat; i++) {
        const t0 = performance.now();
        const r = await s.runCompared(baseline, candidate);
        repeats.push({ compare: r.compare, seconds: (performance.now() - t0) / 1000 });
        first ??= r;
      }
      return repeat > 1 ? { ...first!, repeats } : first!;
    },
    (r) => [r.baseline, r.candidate].some((x) => x?.fault?.observed != null),
  );
}
