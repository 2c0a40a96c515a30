/**
 * One candidate judged on one input in `kerncap eval` (src/eval/): the shape of each line of its
 * JSON Lines results (`--jsonl FILE`, and stdout with --json: written as each finishes, read back
 * by --resume and --merge), of what an eval worker sends back (src/eval/worker.ts; the parent adds
 * the build, worker and shard fields) and of the `records` of the kerncap.eval document. Here with
 * the other documents (./documents.ts), below the eval that writes it.
 */
import * as v from "valibot";
import { NumericsReport, RegionMismatches } from "./numerics-parts.ts";

const N = v.number();

/**
 * How a candidate ended on one input, exactly one of: match (the kernel's outputs are the app's,
 * timed against the captured module), mismatch (the first differing region), fault (the launch
 * faulted; the worker's context went with it and the worker was replaced), timeout (the launches
 * ran past the watchdog's bound, derived from the captured kernel time; the worker was killed and
 * replaced), compile-error (the build failed: the compiler's message, once), layout-change (the
 * rebuilt kernel's parameters are not the captured ones: nothing launched), error (it could not
 * be judged: a worker that died, a refused module, no GPU, which --resume tries again; or a
 * candidate that does not fit src/ and was never built, code E_PATCH or E_CANDIDATE, or one
 * kerncap mcp's evaluate refused, E_NOT_SOURCE or E_PACK_NAME, which only a fixed candidate changes),
 * built (eval --build-only: it compiled, its registers and module digest known, nothing judged; a
 * later eval of the same --jsonl FILE with --resume judges its kept module).
 */
export const EVAL_VERDICTS = ["match", "mismatch", "fault", "timeout", "compile-error", "layout-change", "error", "built"] as const;
export type EvalVerdict = (typeof EVAL_VERDICTS)[number];

/** The candidate's time against the captured module's, timed interleaved on the same memory (src/replay/stats.ts TimingComparison, cut to its figures). */
export const EvalTiming = v.object({
  /** The captured module's median kernel time (µs, CUDA events). */
  baselineMedianUs: N,
  /** The candidate's median kernel time (µs, CUDA events). */
  candidateMedianUs: N,
  /** Captured median / candidate median (Hodges–Lehmann over balanced blocks: src/replay/stats.ts): above 1, the candidate is faster; low–high its 99% interval. */
  speedup: N,
  /** The speedup's 99% interval, low end. */
  low: N,
  /** The speedup's 99% interval, high end. */
  high: N,
  /** faster: the interval lies wholly above 1 + the margin; slower: wholly below 1 − it; same: no difference claimed (`decided` says whether one was ruled out). */
  verdict: v.picklist(["faster", "slower", "same"]),
  /**
   * The interval lies wholly beyond the margin (a claim) or wholly within it. false with verdict
   * "same": no difference claimed, and none ruled out either (too few launch pairs, or an
   * interval that straddles the margin): `text` says which. Absent in records written before it.
   */
  decided: v.optional(v.boolean()),
  /** Launch pairs (rounds) timed: the first batch, then more while the comparison was undecided and its budget lasted. Absent in records written before it. */
  pairs: v.optional(N),
  /** The smallest difference (a fraction: 0.01 = 1%) this measurement would have claimed (src/replay/stats.ts TimingComparison.detectable); null with too few launches for an interval. Absent in records written before it. */
  detectable: v.optional(v.nullable(N)),
  /** Wall time (s) of the timed rounds in the worker, a part of the record's runSeconds. Absent in records written before it. */
  seconds: v.optional(N),
  /** Seconds the timed rounds waited for the GPU's timing window while another worker timed on it (src/util/timing-window.ts), a part of runSeconds; absent with one worker. */
  waitSeconds: v.optional(N),
  /** The comparison in words: "1.07× faster (1.05–1.09)", "same within 1% (0.996–1.004)", "no difference claimed: …". */
  text: v.string(),
});
export type EvalTiming = v.InferOutput<typeof EvalTiming>;

/**
 * One compiler diagnostic of a failed build (src/frontends/confine.ts parseDiagnostics): file
 * relative to the capture (src/k.cu; absolute for a file outside it, an unconfined build's only),
 * 1-based line, column (null in nvcc's own form), severity, the message's one line.
 */
export const BuildDiagnostic = v.object({
  file: v.string(),
  line: N,
  column: v.nullable(N),
  severity: v.picklist(["error", "warning", "fatal"]),
  text: v.string(),
});

/** What a worker measures of one candidate on one input. */
export const EvalOutcomeFields = {
  /** The candidate's identity: its label and the SHA-256 of what it is (src/eval/candidates.ts candidateId). */
  candidate: v.string(),
  /**
   * The input's identity (src/eval/eval.ts resolveInputs: the capture folder's name, or SET/member
   * for a capture set's member); in a record, "(build)" (src/eval/report.ts BUILD_INPUT, a name no
   * input may have) for a candidate's one record when it never reached a GPU: compile-error,
   * layout-change, or an error of its build (a candidate that does not fit src/, kerncap's own).
   */
  input: v.string(),
  /**
   * What became of the candidate on this input: match (its results equal the captured kernel's
   * within the judging settings), mismatch (they differ: `reason` names the first region), fault
   * (the kernel faulted where the app's did not), timeout (killed past its bound from the captured
   * time), compile-error (its build failed: `diagnostics`), layout-change (its parameter list
   * differs from the captured launch's: never launched), error (it could not be judged: `code` and
   * `reason` say why, a refusal of the candidate or kerncap's own), built (--build-only: built,
   * not judged).
   */
  verdict: v.picklist(EVAL_VERDICTS),
  /** One line: why it mismatched (the first differing region), faulted, timed out, failed. */
  reason: v.nullable(v.string()),
  /** The error's code (E_BUILD, E_PARAM_LAYOUT, E_WORKER …) where there is one. */
  code: v.nullable(v.string()),
  /** A compile-error's compiler diagnostics, structured as kerncap.error/1's E_BUILD `error.details.diagnostics` (BuildDiagnostic); absent elsewhere. */
  diagnostics: v.optional(v.array(BuildDiagnostic)),
  /** bit-exact, within-tolerance, within-spread, multiset-equal or mismatch (match and mismatch only). */
  numerics: v.nullable(v.string()),
  /** Its kernel time against the captured module's on this input (a match only; null where not timed). */
  timing: v.nullable(EvalTiming),
  /** Wall time of the run in the worker (s; 0 when nothing ran). */
  runSeconds: N,
  /** The GPU it ran on (null when nothing ran). */
  device: v.nullable(v.object({ name: v.string(), arch: v.string() })),
  /**
   * The captured module's own check on this input in the same judgement (against the app's after
   * state); absent where it was not run. "match": the capture replays as the app ran it, and the
   * candidate's verdict is against that; "mismatch": the captured kernel itself does not reproduce
   * the app's after state here (a nondeterministic kernel, a capture that misses a buffer), so no
   * candidate's mismatch on this input says the candidate is wrong.
   */
  baseline: v.optional(v.picklist(["match", "mismatch"])),
  /**
   * How the candidate's outputs differ, in validate's words (the `mismatches` and `numerics` of
   * `kerncap validate --json`: src/format/numerics-parts.ts): each differing region (first
   * differing byte, bytes differing) and each region that is not bit-exact (element type, elements
   * over tolerance, maxAbsError, maxRelError), with the tolerances and the capture's judging
   * settings used. Present for a mismatch and a match that is not bit-exact; absent otherwise and
   * in records of kerncap before it (nu10 #3).
   */
  judgement: v.optional(v.object({ mismatches: RegionMismatches, numerics: NumericsReport })),
};
export const EvalOutcome = v.object(EvalOutcomeFields);
export type EvalOutcome = v.InferOutput<typeof EvalOutcome>;

export const EvalRecord = v.object({
  ...EvalOutcomeFields,
  /** The candidate as given: its label (a file name, a config; kerncap tune's: a config's words) and kind (overlay: kerncap mcp's files, written over src/; flags: tune's CUDA nvcc words). */
  label: v.string(),
  /** How it was given: tree (an edited src/ folder), overlay (files written over src/: kerncap mcp's evaluate, a list's overlay), patch (a diff of src/), file (one replacement file), config (Triton constexprs and num_warps/num_stages), flags (tune's nvcc words). */
  kind: v.picklist(["tree", "overlay", "patch", "file", "config", "flags"]),
  /**
   * The build: wall time (s); the kernel's registers per thread and its thread's stack frame
   * (bytes of local memory, where spilled registers and local arrays go: ptxas's "bytes stack
   * frame"), both from the cubin's .nv.info (src/codeobj/cubin.ts); null where unknown (a failed
   * build, a module that is not a cubin). moduleSha256: the SHA-256 (hex) of the module the build
   * made, what the GPU loads: two candidates with one digest are one kernel (an edit of comments
   * or white space builds the module of the source it edited); absent where nothing was built, for
   * a build that fails (a compile-error, and a layout-change or a kernel not found: their module was
   * built and refused, and is not kept) and in records of kerncap before it. module: the module's path inside the candidate's
   * kept copy (`copy`), where `eval --resume` finds it again to judge a candidate whose runs
   * were not made (no GPU where it was built: its module reused when its SHA-256 is still
   * moduleSha256, not built again); absent where no copy is kept.
   */
  build: v.object({
    seconds: N,
    registers: v.nullable(N),
    stackFrameBytes: v.nullable(N),
    /** Bytes of the kernel's spill stores and loads (ptxas -v's, from the cubin's spill annotations: src/rebuild/resources.ts); null where unknown; absent in records of kerncap before them. */
    spillStoreBytes: v.optional(v.nullable(N)),
    spillLoadBytes: v.optional(v.nullable(N)),
    /** true: the build ran past its limit (--build-timeout, KERNCAP_BUILD_TIMEOUT, a confined build's 600 s) and was killed (a compile-error); absent otherwise. */
    timedOut: v.optional(v.literal(true)),
    moduleSha256: v.optional(v.pipe(v.string(), v.regex(/^[0-9a-f]{64}$/))),
    /**
     * The SHA-256 (hex) of the kernel's machine code in that module (src/codeobj/kernel-code.ts
     * kernelCodeSha256: its .text section, register count, attribute, shared and parameter sizes):
     * candidates with one kernel digest run one kernel even where their modules' bytes differ (nvcc
     * names a TU's internal symbols after a hash of its path, and each candidate is built in its
     * own copy: a comment-only edit of a TU with such symbols makes another moduleSha256, the same
     * kernelSha256); null where the module has no cubin section for the kernel (PTX, AMD); absent
     * where nothing was built and in records of kerncap before it.
     */
    kernelSha256: v.optional(v.nullable(v.pipe(v.string(), v.regex(/^[0-9a-f]{64}$/)))),
    module: v.optional(v.string()),
    /** Which build made the module: the capture's build.sh, or the pruned TU's device-only build (src/eval/pruned.ts: once a check found it gives the kernel build.sh's machine code); absent where nothing was built and in records of kerncap before it. */
    builder: v.optional(v.picklist(["build.sh", "pruned"])),
  }),
  /**
   * The candidate's private copy (an absolute path, DIR/build/eval/<16 hex>), kept after the eval
   * with what its build left (build/slice-build.log, the module); null where none is kept (built in
   * a private folder removed after the eval, or never copied: a refused candidate). Absent in
   * records of kerncap before it (nu7 #16: a record named no way to its copy).
   */
  copy: v.optional(v.nullable(v.string())),
  /** The worker slot that judged it (0-based; null: nothing ran). */
  worker: v.nullable(v.pipe(v.number(), v.integer(), v.minValue(0))),
  /** That worker's CUDA_VISIBLE_DEVICES (--gpus; null: inherited from kerncap's environment, or nothing ran). */
  gpu: v.nullable(v.string()),
  /** The run's --shard ("K/N"), null for the whole set. */
  shard: v.nullable(v.string()),
  /** When it finished (ISO 8601). */
  at: v.string(),
  /**
   * The SHA-256 (hex) of what it was judged on (src/format/subject.ts evalSubject): the input's
   * manifest and judging settings file, the build.sh and src/ the candidate was built from (a
   * patch's or overlay's meaning is its base's), and the run's verdict-changing options (a "(build)"
   * record: the first input's). --resume takes a record only when its input's subject is this one
   * now; absent in records of kerncap before it (--resume judges those again).
   */
  subject: v.optional(v.pipe(v.string(), v.regex(/^[0-9a-f]{64}$/))),
  /**
   * The SHA-256 (hex) of the whole eval it belongs to (src/format/subject.ts evalRunSubject: every
   * input's id and subject): one value in every shard of one eval; `--merge` refuses records of
   * two. Absent in records of kerncap before it.
   */
  runSubject: v.optional(v.pipe(v.string(), v.regex(/^[0-9a-f]{64}$/))),
  /**
   * Its authenticator, "hmac-sha256:KEYID:MAC": HMAC-SHA256 under the results key
   * (KERNCAP_RESULTS_KEY, else the user's key in kerncap's state folder) of the record without it,
   * as canonical JSON with its document id as `schema` (src/format/record-auth.ts). --merge and
   * --resume take a record only with a valid one; absent where no key could be had.
   */
  auth: v.optional(v.string()),
});
export type EvalRecord = v.InferOutput<typeof EvalRecord>;

/** The schema id of the line a sharded eval given no candidate writes in its --jsonl file. */
export const EVAL_SHARD_MARKER = "kerncap.eval-shard/1";

/** That line: this shard of this run ran and held no candidate, so that `--merge` counts the shard (src/eval/report.ts EVAL_RECORDS.marker). */
export const EvalShardMarker = v.object({
  schema: v.literal(EVAL_SHARD_MARKER),
  /** The shard, "K/N" (--shard K/N). */
  shard: v.pipe(v.string(), v.regex(/^\d+\/\d+$/)),
  /** When it ran (ISO 8601, UTC). */
  at: v.string(),
  /** The run it belongs to: the digest every record of the run names (inputs, judging settings, options); absent in lines of kerncap before it. */
  runSubject: v.optional(v.string()),
  /** HMAC-SHA256 of the line under the results key, as every record's (docs/security.md "Files kerncap reads back"); absent where no key was at hand. */
  auth: v.optional(v.string()),
});
