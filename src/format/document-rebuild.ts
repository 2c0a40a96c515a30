/**
 * Parts of the verbs' JSON documents (src/format/documents.ts) that describe a rebuild: a pruned
 * build's steps, a module's figures for the kernel, and a rebuild as validate reports it (the
 * validate, validate-build and validate-watch documents; the watch line's fields, WatchLineFields).
 */
import * as v from "valibot";
import { Compare } from "./document-parts.ts";
import { BuildDiagnostic } from "./eval-record.ts";

/**
 * A pruned build's steps (ms): build.sh --dryrun (0 when its plan was reused), the preprocessing
 * until the compiled TU was there (incremental: only what follows the edit, src/frontends/cuda/incremental-pp.ts),
 * the pruning, cicc and ptxas; the whole TU's gcc -E (always run: beside an incremental one, it verifies it).
 */
export const BuildSteps = v.object({
  /** build.sh --dryrun: nvcc's plan of the build (ms; 0 when the plan was reused). */
  planMs: v.number(),
  /** gcc -E until the compiled TU was there (ms; incremental: only what follows the edit). */
  preprocessMs: v.number(),
  /** The pruning of the TU to the kernel's declarations (ms). */
  pruneMs: v.number(),
  /** cicc and ptxas on the pruned TU (ms). */
  compileMs: v.number(),
  /** The wait before the compile for the burst of file events to be quiet (the watch's; src/rebuild/watch.ts). */
  quietWaitMs: v.optional(v.number()),
  /** Whether the incremental preprocessing made the compiled TU. */
  incremental: v.optional(v.boolean()),
  /** The whole TU's gcc -E, always run (beside an incremental one, it verifies it) (ms). */
  fullPreprocessMs: v.optional(v.number()),
  // the incremental preprocessing's own steps (ms; src/frontends/cuda/fast-build.ts speculate), present when it ran
  /** The incremental preprocessing: the sources read (ms). */
  readSourcesMs: v.optional(v.number()),
  /** The incremental preprocessing: the previous gcc -E output parsed (ms). */
  parseBaseMs: v.optional(v.number()),
  /** The incremental preprocessing: the changed lines found (ms). */
  changedMs: v.optional(v.number()),
  /** The incremental preprocessing: the synthetic TU planned (ms). */
  planIncrementalMs: v.optional(v.number()),
  /** The incremental preprocessing: the synthetic TU's gcc -E started (ms). */
  startGccEMs: v.optional(v.number()),
  /** The incremental preprocessing: the pruner's state restored (ms). */
  restorePrunerMs: v.optional(v.number()),
  /** The incremental preprocessing: the synthetic TU's gcc -E awaited (ms). */
  awaitGccEMs: v.optional(v.number()),
  /** The incremental preprocessing: the TU assembled from the previous output and the new lines (ms). */
  assembleMs: v.optional(v.number()),
  /** The incremental preprocessing: the assembled TU pruned (ms). */
  pruneTextMs: v.optional(v.number()),
  /** The incremental preprocessing: the pruned TU written (ms). */
  writePrunedMs: v.optional(v.number()),
});

/** A module's figures for the kernel (src/rebuild/resources.ts ModuleFigures; null: the module does not say); spills and toolkit added to validate-build/1 and validate-watch/1 compatibly (optional). */
export const Figures = {
  registers: v.optional(v.nullable(v.number())),
  stackFrameBytes: v.optional(v.nullable(v.number())),
  spillStoreBytes: v.optional(v.nullable(v.number())),
  spillLoadBytes: v.optional(v.nullable(v.number())),
  toolkit: v.optional(v.nullable(v.string())),
};
export const CapturedFigures = v.object({ ...Figures, registers: v.nullable(v.number()), stackFrameBytes: v.nullable(v.number()) });

/** A rebuild as validate reports it (validate's and validate --build-only's `rebuild`). */
export const Rebuild = v.object({
  module: v.string(),
  seconds: v.number(),
  builder: v.optional(v.picklist(["build.sh", "pruned"])),
  steps: v.optional(BuildSteps),
  /** A confined build's sandbox (--confine only; src/frontends/sandbox.ts): the namespace tree (with Landlock where the kernel has it), Landlock alone, or the source scan and dependency list alone. */
  confinement: v.optional(v.picklist(["namespace", "landlock", "scan"])),
  /** The rebuilt kernel's Figures, and the captured module's. */
  ...Figures,
  captured: v.optional(CapturedFigures),
  /** validate --build-only of a CUDA capture: the nvcc build.sh runs (NVCC, else the first on PATH, else /usr/local/cuda/bin/nvcc). */
  nvcc: v.optional(v.nullable(v.string())),
  /** validate --build-only --arch: the GPU architecture the module was built for instead of the captured one (sm_80); its Figures are that architecture's. */
  targetArch: v.optional(v.string()),
});

/** The fields of a `validate --watch --json` line (kerncap.validate-watch/1, less its schema id; src/rebuild/watch-events.ts WatchEvent). */
export const WatchLineFields = {
  /** verdict: the rebuilt kernel ran; built: --build-only's save compiled (no replay); build-error: build.sh or the parameter-layout check failed; error: the run was refused or faulted. */
  event: v.picklist(["verdict", "built", "build-error", "error"]),
  trigger: v.picklist(["start", "save"]),
  files: v.array(v.string()),
  at: v.string(),
  buildSeconds: v.nullable(v.number()),
  /** build.sh, or the device-only build of the pruned TU that a CUDA watch uses after its first build. */
  builder: v.optional(v.picklist(["build.sh", "pruned"])),
  /** A pruned build's steps (ms): build.sh --dryrun (0 when its plan was reused), gcc -E, the pruning, cicc and ptxas. */
  buildSteps: v.optional(BuildSteps),
  /** Where a verdict's time went (s): save → build start, the build as the watch saw it, the run. */
  phases: v.optional(v.object({ waitSeconds: v.number(), buildWallSeconds: v.number(), runSeconds: v.number() })),
  saveToVerdictSeconds: v.number(),
  /** The kernel (mangled name) of the capture watched: on verdict and built lines. */
  kernel: v.optional(v.string()),
  /** The kernel's symbol: its mangled name, as the module and the manifest's kernel.name have it, the same in every document (`kernel` is a name to read: here the symbol itself, as the watch has always given it). Added compatibly (optional). */
  symbol: v.optional(v.string()),
  verdict: v.optional(v.picklist(["match", "mismatch"])),
  /** A verdict's numerics: bit-exact | within-tolerance | multiset-equal | within-spread | mismatch. */
  numerics: v.optional(v.picklist(["bit-exact", "within-tolerance", "multiset-equal", "within-spread", "mismatch"])),
  /** A verdict's first differing region (null on a match), as validate's `mismatches[]` entries, and how many regions differ. */
  firstMismatch: v.optional(
    v.nullable(
      v.looseObject({
        va: v.string(),
        kind: v.string(),
        size: v.number(),
        changedInApp: v.boolean(),
        firstDiffOffset: v.number(),
        bytesDiffering: v.number(),
      }),
    ),
  ),
  mismatches: v.optional(v.number()),
  /** A mismatch with no differing region: why (runs that differ beyond the captured kernel's). */
  reason: v.optional(v.string()),
  nondeterministic: v.optional(v.boolean()),
  /** What the previous runs wrote, put back before this run (null: nothing ran before): chunks, bytes, seconds. */
  reset: v.optional(v.nullable(v.object({ chunks: v.number(), bytes: v.number(), seconds: v.number() }))),
  /** error: a kernel fault made the CUDA context unusable and the memory was restored again in a new one. */
  reopened: v.optional(v.boolean()),
  kernelMedianUs: v.optional(v.nullable(v.number())),
  /** A verdict's rebuilt kernel against the captured module, interleaved (null with fewer than 5 timed launches). */
  compare: v.optional(Compare),
  overheadSeconds: v.optional(v.number()),
  /** A built line's rebuilt kernel: its Figures, and the captured module's. */
  ...Figures,
  captured: v.optional(CapturedFigures),
  code: v.optional(v.string()),
  message: v.optional(v.string()),
  hint: v.optional(v.nullable(v.string())),
  /** A build-error line's compiler diagnostics (as kerncap.error/1's E_BUILD `error.details.diagnostics`: file, line, column, severity, text); absent where the compiler gave none. */
  diagnostics: v.optional(v.array(BuildDiagnostic)),
};
