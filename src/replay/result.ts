/**
 * What one replay is asked (ReplayOptions, RunOptions) and what it answers (ReplayResult and the
 * documents built on it: ComparedRuns, SetRun, ResetStats). Types only: the engine's modules
 * (./session.ts, ./checked-runs.ts, ./judging.ts, ./restore.ts) fill them in.
 */
import type { KerncapError } from "../errors.ts";
import type { Manifest } from "../format/manifest.ts";
import type { ClockState } from "./backends/interface.ts";
import type { MultisetJudgement } from "./envelope.ts";
import type { TimingWindow } from "../util/timing-window.ts";
import type { TimingComparison } from "./stats.ts";
import type { ElementType, RegionNumerics } from "./tolerance.ts";
import type { RegionTypes } from "./tolerance-plan.ts";

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
  /** The kernel's symbol (its mangled name, the manifest's kernel.name): the same in every document. */
  symbol: string;
  verdict: "match" | "mismatch";
  regionsChecked: number;
  bytesChecked: number;
  mismatches: RegionMismatch[];
  /** Kernel time per launch (µs; how it was measured: method, the backend's timingMethod). */
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
    /** What timed each launch: the backend's timers around it ("events") or the GPU's own kernel timestamps ("cupti": KERNCAP_TIMING clock=cupti). */
    clock?: "events" | "cupti";
    /** Why clock=cupti was asked and the launches were timed by events (another CUPTI client, no libcupti). */
    clockNote?: string;
    /** The GPU's clocks while the timed launches ran (null: unknown, or no timed launch). */
    clocks?: ClockState | null;
    /** Every timed launch's time (µs, in launch order): only with keepSamples. */
    samplesUs?: number[];
  };
  /** bytes: live bytes restored (zeros included); storedBytes: bytes copied from memory/before.bin; gbPerS over storedBytes. */
  restore: { bytes: number; storedBytes: number; seconds: number; gbPerS: number; hostRegistered: boolean };
  /** The capture faulted in the app: whether the replay reproduced the same fault, and the compute-sanitizer command for it. */
  fault?: {
    expected: { code: number; name: string; message: string };
    observed: { code: number; name: string } | null;
    reproduced: boolean;
    sanitizer: string;
  };
  /** Checked runs from the same before state; runsDiffering: runs whose result differed from the first (a nondeterministic kernel). */
  determinism: {
    runs: number;
    runsDiffering: number;
    nondeterministic: boolean /** What the capture's judging settings say: runs that differ where "deterministic" is expected make the verdict a mismatch. */;
    expected?: "deterministic" | "nondeterministic";
    /**
     * A rebuilt module whose runs differed: the captured kernel's own checked runs in this
     * session (src/replay/reference-noise.ts), and why the edit's runs differ beyond them (the
     * verdict is then a mismatch).
     */
    reference?: { runs: number; nondeterministic: boolean; beyond?: string; eachRunWithinTolerance?: boolean };
    /** The rebuilt module's own `__device__` variables (beyond the captured module's), put back as loaded before every launch (src/replay/module-state.ts). */
    moduleState?: { variables: number; bytes: number; names: string[] };
  };
  /** GPU checks: the restored state against the manifest's kc64 (verifySeconds), the replayed state (compareSeconds); bytes copied back to the host for element-wise comparison. */
  check: {
    verifySeconds: number;
    compareSeconds: number;
    bytesCopiedBack: number /** Only when the scans read memory back to the host (HSA). */;
    scannedOn?: "host";
    /**
     * One timed launch, of a round drawn at random, scanned again right after it and compared with
     * the first checked run (a kernel whose checked runs were bit-identical): `differs` names the
     * first range and chunk where it wrote other bytes (the verdict is then a mismatch).
     */
    timedLaunch?: { round: number; differs?: string };
    /** A rebuilt module wrote the memory the replay maps around the regions (no allocation of the app's): where (the verdict is then a mismatch). */
    outsideRegions?: string;
  };
  reserve: { spans: number; bytes: number; seconds: number };
  /** loadSeconds: the backend's module load + attributes; waitSeconds: time spent waiting for a module still being built. */
  module: { file: string; loadSeconds: number; waitSeconds?: number; image?: string };
  device: { name: string; arch: string };
  /** Element-wise report (src/replay/tolerance.ts): verdict bit-exact | within-tolerance | mismatch. */
  numerics: {
    verdict: RegionNumerics["verdict"];
    atol: number;
    rtol: number;
    regions: RegionNumerics[] /** The capture's judging settings used (kerncap judge: those this run's options did not override). */;
    settings?: { file: string; used: string[] };
  };
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
  /**
   * Two kernels compared (runCompared): the GPU's timing window (src/util/timing-window.ts), held
   * shared for the resets, loads and checked runs and alone for the timed rounds, so that other
   * processes on the same GPU (eval's workers) wait instead of time-slicing the GPU with these rounds.
   */
  timingWindow?: TimingWindow;
  /** Called before and after this kernel's first checked launch (its launch and the sync): eval's worker tells its parent, whose watchdog bounds that launch alone. */
  firstLaunch?: { begin(): void; end(): void };
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
