/**
 * Parts of the verbs' JSON documents (src/format/documents.ts) that several documents share: a
 * replay's result fields (replay, validate, the watch's lines), a timing comparison, a tune row.
 */
import * as v from "valibot";
import { EvalTiming } from "./eval-record.ts";
import { NumericsReport, RegionMismatches } from "./numerics-parts.ts";

/** A count or size: a whole number, 0 or more. */
export const U = v.pipe(v.number(), v.integer(), v.minValue(0));
export const N = v.number();
export const Verdict = v.picklist(["match", "mismatch"]);
/** The fields of a replay's result (src/replay/engine.ts ReplayResult), in the replay and validate documents; nested objects stay open. */
export const ReplayFields = {
  dir: v.string(),
  kernel: v.string(),
  /** The kernel's symbol: its mangled name, as the module and the manifest's kernel.name have it, the same in every document (`kernel` is a name to read: demangled here). Added compatibly (optional). */
  symbol: v.optional(v.string()),
  /** match: every region as the app left it (bit-exact, within tolerance, within the run-to-run spread, or equal as multisets); exit 0 vs 1. */
  verdict: Verdict,
  regionsChecked: U,
  /** Bytes compared (regions and module globals). */
  bytesChecked: U,
  /** Regions that differ from the app's after state (or, unchanged in the app, from the before state). */
  mismatches: RegionMismatches,
  /** Kernel time per launch in µs; method and appMethod name how each was measured. */
  timing: v.looseObject({
    iters: U,
    medianUs: N,
    minUs: N,
    p10Us: N,
    p90Us: N,
    appUs: v.nullable(N),
    method: v.string(),
    appMethod: v.string(),
    /** L2 flushed before each timed launch (--flush-l2) or warm. */
    l2: v.optional(v.picklist(["flushed", "warm"])),
    /** What timed each launch: timers around it ("events") or the GPU's own kernel timestamps from CUPTI ("cupti", KERNCAP_TIMING clock=cupti). */
    clock: v.optional(v.picklist(["events", "cupti"])),
    /** Why clock=cupti was asked and not used (another CUPTI client such as ncu, no libcupti). */
    clockNote: v.optional(v.string()),
    /** The GPU's clocks (MHz) while the timed launches ran, from nvidia-smi; null when unknown. */
    clocks: v.optional(
      v.nullable(v.object({ smMHz: v.nullable(N), memMHz: v.nullable(N), applicationsSmMHz: v.nullable(N), maxSmMHz: v.nullable(N), source: v.string() })),
    ),
  }),
  /** bytes: live bytes restored; storedBytes: copied from memory/before.bin; gbPerS over storedBytes. */
  restore: v.looseObject({ bytes: U, storedBytes: U, seconds: N, gbPerS: N, hostRegistered: v.boolean() }),
  /** A capture that faulted in the app: whether the replay reproduced the fault, and the compute-sanitizer command line. */
  fault: v.optional(
    v.looseObject({
      expected: v.looseObject({ code: U, name: v.string(), message: v.string() }),
      observed: v.nullable(v.looseObject({ code: U, name: v.string() })),
      reproduced: v.boolean(),
      sanitizer: v.string(),
    }),
  ),
  /** Checked runs from the same before state; nondeterministic when later runs differ from the first. */
  determinism: v.looseObject({
    runs: U,
    runsDiffering: U,
    nondeterministic: v.boolean(),
    /** A rebuilt module whose runs differed: the captured kernel's checked runs, and why the edit's differ beyond them (a mismatch). */
    reference: v.optional(
      v.looseObject({ runs: U, nondeterministic: v.boolean(), beyond: v.optional(v.string()), eachRunWithinTolerance: v.optional(v.boolean()) }),
    ),
    /** A rebuilt module's own __device__ variables, put back as loaded before every launch. */
    moduleState: v.optional(v.looseObject({ variables: U, bytes: U, names: v.array(v.string()) })),
  }),
  check: v.looseObject({
    verifySeconds: N,
    compareSeconds: N,
    bytesCopiedBack: U,
    scannedOn: v.optional(v.literal("host")),
    /** One timed launch scanned again and compared with the checked runs: its round, and where it differed (a mismatch). */
    timedLaunch: v.optional(v.looseObject({ round: U, differs: v.optional(v.string()) })),
    /** A rebuilt module wrote the memory mapped around the regions (no allocation of the app's): where (a mismatch). */
    outsideRegions: v.optional(v.string()),
  }),
  reserve: v.looseObject({ spans: U, bytes: U, seconds: N }),
  module: v.looseObject({ file: v.string(), loadSeconds: N }),
  device: v.looseObject({ name: v.string(), arch: v.string() }),
  /** Element-wise report: bit-exact, within-tolerance, within-spread (nondeterministic runs), multiset-equal, or mismatch; regions that are not bit-exact. */
  numerics: NumericsReport,
  /** --multiset: each region asked for and how the app's elements compare with each run's. */
  multiset: v.optional(
    v.array(
      v.looseObject({
        index: U,
        va: v.string(),
        dtype: v.string(),
        verdict: v.picklist(["bit-exact", "multiset-equal", "mismatch"]),
        elements: U,
        runs: U,
        runsReordered: U,
        unmatched: U,
      }),
    ),
  ),
};

/** A candidate kernel's time against a baseline's, interleaved on the same memory (src/replay/stats.ts TimingComparison); null when not compared. */
export const Compare = v.nullable(
  v.object({
    // the medians, speedup, interval, verdict, seconds and text, as eval records them (./eval-record.ts EvalTiming)
    ...EvalTiming.entries,
    pairs: U,
    /** The interval lies wholly beyond the margin (a claim) or wholly within it: more launches would not change the verdict. */
    decided: v.boolean(),
    /** The smallest difference claimed (fraction): 0.01, or the kernel's own A/A floor where larger. */
    margin: N,
    /** The baseline against a second load of its module in the same rounds (speedup and its interval); null when not timed. */
    aa: v.nullable(v.object({ speedup: N, low: N, high: N })),
    /** The candidate against a second load of its module, likewise. */
    bb: v.optional(v.nullable(v.object({ speedup: N, low: N, high: N }))),
    /** The smallest difference (fraction) this measurement would have claimed; null with too few launches for an interval. */
    detectable: v.nullable(N),
    method: v.string(),
  }),
);

/** A config of kerncap tune and its outcome (src/frontends/tune.ts TuneRow). */
export const TuneRow = v.object({
  /**
   * The config in its frontend's own shape (its tune, src/frontends/<name>/tune.ts, owns it;
   * TuneDriver.params reads it by parameter name): Triton's {kwargs, options} (constexpr values
   * and compile options), CUDA's {defines, maxrregcount?, flags} (macros -DNAME=V, -maxrregcount,
   * extra nvcc flags: src/frontends/cuda/tune-space.ts CudaConfig).
   */
  config: v.record(v.string(), v.unknown()),
  /** The table's config column. */
  label: v.optional(v.string()),
  captured: v.boolean(),
  /** built: --build-only's row of a module that built (the captured module's too), nothing judged or timed. */
  verdict: v.picklist(["match", "mismatch", "compile-error", "launch-error", "built"]),
  medianUs: v.nullable(N),
  speedup: v.nullable(N),
  /** This config against the app's from the interleaved rounds (src/replay/stats.ts): faster/slower only beyond the noise. */
  vsApp: v.optional(
    v.object({
      verdict: v.picklist(["faster", "slower", "same"]),
      /** false with "same": no difference claimed and none ruled out (too few rounds, or an interval over the margin); the table then shows no "(same)". */
      decided: v.optional(v.boolean()),
      text: v.string(),
    }),
  ),
  /** CUDA: registers per thread of the kernel in the row's module (null where the cubin says none). */
  registers: v.optional(v.nullable(U)),
  error: v.optional(v.string()),
  note: v.optional(v.string()),
});

/** `kerncap clean --json`'s captures (src/ops/clean.ts): one entry per capture folder (absolute), in the order given. */
export const CleanedCaptures = v.array(
  v.object({
    dir: v.string(),
    /** Each folder removed: build, build/eval (--eval) or profile (--profile); its bytes and files (regular files under it, no link followed). Empty: nothing there. */
    removed: v.array(v.object({ path: v.picklist(["build", "build/eval", "profile"]), bytes: U, files: U })),
    /** The sum of removed's bytes. */
    bytes: U,
  }),
);

const PerProcess = v.object({ pid: U, rank: v.nullable(U), count: U });
/** A kernel of the census (src/capture/census.ts KernelSeen); perProcess: the count of each process that launched it. */
export const CensusKernel = v.object({
  name: v.string(),
  demangled: v.string(),
  count: U,
  benchmark: v.optional(U),
  grid: v.array(U),
  block: v.array(U),
  module: v.string(),
  perProcess: v.optional(v.array(PerProcess)),
});

/** ncu's key figures of a profiled launch (kerncap profile's `figures`: src/profile/ncu.ts): time in µs, sizes in bytes, throughputs in % of peak; null where the report lacks the metric. */
export const ProfileFigures = v.object({
  id: v.string(),
  kernel: v.string(),
  grid: v.string(),
  block: v.string(),
  device: v.string(),
  durationUs: v.nullable(N),
  smThroughputPct: v.nullable(N),
  memoryThroughputPct: v.nullable(N),
  achievedOccupancyPct: v.nullable(N),
  registersPerThread: v.nullable(N),
  dramBytes: v.nullable(N),
  limiter: v.nullable(
    v.object({
      bound: v.picklist(["compute", "memory", "latency"]),
      sections: v.array(v.string()),
      source: v.picklist(["ncu rule", "throughputs"]),
      text: v.string(),
    }),
  ),
});
