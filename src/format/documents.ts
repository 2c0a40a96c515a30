/**
 * The JSON documents the verbs print with --json: every one carries `schema: "kerncap.<verb>/N"`
 * (added by printJson in src/cli/args.ts, the one place that writes them), and each has a valibot
 * schema here, from which `kerncap schema VERB` prints a JSON Schema (@valibot/to-json-schema,
 * draft-07). The capture manifest's schema is the reader's own (src/format/manifest.ts).
 *
 * Documents whose shape belongs to another module (replay/validate: ReplayResult in
 * src/replay/engine.ts) are described by their stable top-level fields and left open
 * (looseObject): added fields do not bump the version; a removed or retyped field does.
 */
import { CheckRecord } from "./check-record.ts";
import { EVAL_SHARD_MARKER, EVAL_VERDICTS, EvalRecord, EvalShardMarker } from "./eval-record.ts";
import { CaptureSet } from "./capture-set.ts";
import { toJsonSchema } from "@valibot/to-json-schema";
import { describeFields, TITLES } from "./schema-text.ts";
import * as v from "valibot";
import { Manifest, ProcessIdentity } from "./manifest.ts";
import { JUDGE_SCHEMA, JudgeFile } from "./judge-file.ts";
import { CandidateList } from "./candidate-list.ts";
import { ERROR_CODES, type ErrorCode } from "../error-codes.ts";

/** Version of every verb's JSON document; bump a verb's entry on an incompatible change. */
export const DOCUMENT_VERSIONS = {
  list: 1,
  run: 1,
  inspect: 1,
  /** `kerncap inspect DIR --region R --json`: one region's values (src/replay/region-dump.ts RegionDump). */
  region: 1,
  replay: 1,
  validate: 1,
  /** `validate --build-only --json`: the rebuild alone, no replay (src/ops/validate.ts BuildOnlyResult). */
  "validate-build": 1,
  /** `validate --watch --json`: one document per line (JSON Lines), one per build (src/rebuild/watch.ts WatchEvent). */
  "validate-watch": 1,
  /** `kerncap profile` (src/profile/profile.ts ProfileResult). */
  profile: 1,
  /** `kerncap tune` (src/frontends/tune.ts TuneResult). */
  tune: 1,
  pack: 1,
  unpack: 1,
  /** `kerncap export` (src/export/export.ts ExportResult). */
  export: 1,
  doctor: 1,
  /** `kerncap demo`: the sample capture written (src/capture/demo.ts). */
  demo: 1,
  error: 1,
  /** `kerncap check --json` (src/check/check.ts CheckReport), and each line of its results file (src/check/results.ts). */
  check: 1,
  "check-record": 1,
  /** `kerncap judge --json`: a capture's judging settings (src/replay/judge-settings.ts). */
  judge: 1,
  /** `kerncap clean --json`: what was removed of each capture (src/ops/clean.ts). */
  clean: 1,
  /** `kerncap eval --json`'s last line (src/eval/eval.ts EvalReport), and each record line before it and in its --jsonl file. */
  eval: 1,
  "eval-record": 1,
  /** MCP tools read_file, list_files and edit_file (src/mcp/files.ts). */
  file: 1,
  files: 1,
  edit: 1,
  /** `kerncap --version --json`: this kerncap's version (src/version.ts). */
  version: 1,
} as const;
export type DocumentName = keyof typeof DOCUMENT_VERSIONS;

/** "kerncap.<name>/<version>", the value of a document's `schema` field. */
export function documentId(name: DocumentName): string {
  return `kerncap.${name}/${DOCUMENT_VERSIONS[name]}`;
}

/** The document with its schema id first: what the verbs print (src/cli/args.ts printJson) and the MCP server returns. */
export function jsonDocument(name: DocumentName, doc: object): Record<string, unknown> {
  return { schema: documentId(name), ...doc };
}
import { CensusKernel, CleanedCaptures, Compare, N, ProfileFigures, ReplayFields, TuneRow, U, Verdict } from "./document-parts.ts";
import { Rebuild, WatchLineFields } from "./document-rebuild.ts";
const id = (name: DocumentName) => ({ schema: v.literal(documentId(name)) });

/** One process of the job that initialized CUDA/HSA (src/capture/census.ts processSummary). */
const ProcessRow = v.object({
  pid: U,
  rank: v.nullable(U),
  rankVariable: v.nullable(v.string()),
  /** 0-based order of CUDA/HSA initialization; -1 unknown. */
  number: v.pipe(v.number(), v.integer(), v.minValue(-1)),
  hostname: v.string(),
  command: v.array(v.string()),
  visibleDevices: v.record(v.string(), v.string()),
  launches: U,
  /** Its census was written at exit and it counted every launch. */
  complete: v.boolean(),
  /** Why it stopped counting (absent when it counted every launch). */
  stoppedCounting: v.optional(v.string()),
  kernels: v.array(v.object({ name: v.string(), count: U })),
  /** With --nvtx-include/--nvtx-exclude or --print-summary per-nvtx: whether NVTX loaded the library, launches left out, launches per (open ranges, kernel). */
  nvtx: v.optional(
    v.object({
      injected: v.boolean(),
      filteredOut: U,
      ranges: v.optional(v.array(v.object({ range: v.string(), kernel: v.string(), count: U }))),
      rangesDropped: v.optional(U),
    }),
  ),
  errors: v.array(v.string()),
});

const Integrity = v.object({
  /** ok: every checked file and region matches; damaged: the first mismatch is named. */
  verdict: v.picklist(["ok", "damaged"]),
  /** files: sizes and SHA-256 of the small files, memory image sizes; files+regions: every stored chunk's kc64 too (--verify). */
  checked: v.picklist(["files", "files+regions"]),
  code: v.optional(v.string()),
  message: v.optional(v.string()),
  hint: v.optional(v.nullable(v.string())),
});

const Bytes3 = v.object({ files: U, data: U, archive: U });

const DoctorCheck = v.object({
  /** Stable id, e.g. "libcuda", "cupti", "nvcc", "cache", "tmpdir", "aslr", "va-reservation", "capture-replay". */
  id: v.string(),
  status: v.picklist(["ok", "warn", "fail", "skip"]),
  /** What was found (a version, a path). */
  detail: v.string(),
  /** What to do about a warn or fail. */
  fix: v.optional(v.string()),
});

/** A capture's judging settings as a document shows them (kerncap judge, export's judging). */
const JudgingSettings = v.object({
  atol: v.optional(N),
  rtol: v.optional(N),
  dtype: v.optional(v.string()),
  /** Element type per region (its name as --multiset takes it → the type). */
  dtypes: v.optional(v.record(v.string(), v.string())),
  multiset: v.optional(v.array(v.string())),
  /** Expected nondeterministic (true) or deterministic (false); absent: found out. */
  nondeterministic: v.optional(v.boolean()),
});

/** Judging settings that await acceptance (kerncap judge DIR --accept=DIGEST): the SHA-256 (hex) of the settings file's bytes, and that command. */
const JudgingAccept = v.object({ digest: v.string(), command: v.string() });

/** valibot schema of each verb's document (and of the error document). */
export const DOCUMENTS = {
  list: v.object({
    ...id("list"),
    app: v.array(v.string()),
    exitCode: v.nullable(v.number()),
    launches: U,
    kernels: v.array(CensusKernel),
    processes: v.array(ProcessRow),
  }),
  run: v.object({
    ...id("run"),
    dir: v.string(),
    kernel: v.string(),
    /** The kernel's symbol: its mangled name, as the module and the manifest's kernel.name have it, the same in every document (`kernel` is a name to read: demangled here). Added compatibly (optional). */
    symbol: v.optional(v.string()),
    launchIndex: U,
    regions: U,
    globals: U,
    beforeBytes: U,
    afterBytes: U,
    appSeconds: v.number(),
    /** The application's exit code (null when a signal ended it); kerncap run exits with it when non-zero. */
    appExitCode: v.nullable(v.number()),
    /** The signal that ended the application ("SIGTERM"…), or null. */
    appSignal: v.nullable(v.string()),
    timing: v.record(v.string(), v.number()),
    /** The capturing process (manifest `process`; null from a library that does not record it). */
    process: v.nullable(ProcessIdentity),
    /** How many processes of the job initialized CUDA/HSA. */
    processes: U,
    /** Several captures in one run (several --kernel, --capture-all, --launch-count): each one's folder; dir then holds kerncap-captures.json. */
    captures: v.optional(v.array(v.object({ dir: v.string(), kernel: v.string(), launchIndex: U, beforeBytes: U }))),
  }),
  region: v.object({
    ...id("region"),
    dir: v.string(),
    /** The region's index in the manifest, its VA (hex), size (bytes), and whether the launch wrote it. */
    region: U,
    va: v.string(),
    size: U,
    changed: v.boolean(),
    dtype: v.picklist(["fp64", "fp32", "fp16", "bf16", "i64", "i32", "i16", "i8", "u64", "u32", "u16", "u8"]),
    dtypeFrom: v.picklist(["option", "frontend", "default"]),
    /** Byte offset of the first element shown; whole elements from there to the region's end; how many are shown. */
    offset: U,
    /** The byte offset asked for (--offset, or the address in --region): offset is it rounded down to a whole element. */
    offsetAsked: U,
    elements: U,
    count: U,
    /** The values (numbers; NaN, ±Infinity and 64-bit integers as strings) as the launch found them and as the app left them. */
    before: v.array(v.union([v.number(), v.string()])),
    after: v.array(v.union([v.number(), v.string()])),
    /** Indices into before/after whose bytes differ. */
    differing: v.array(U),
  }),
  inspect: v.object({
    ...id("inspect"),
    dir: v.string(),
    manifest: Manifest,
    /** Whether the capture counts as received (its build.sh runs only after --trust) and every reason why (src/format/received.ts receivedReasons; empty when made here by this user). */
    received: v.object({
      received: v.boolean(),
      reasons: v.array(v.string()),
      /** Whether a rebuild runs the build as it is now without --trust: always for a capture made here by this user (received false); for a received one once its build's bytes are trusted (recorded by --trust, or by kerncap for the demo it wrote: src/format/trust.ts trustRecorded). */ trusted:
        v.boolean(),
    }),
    integrity: Integrity,
    /** The capture's judging settings (kerncap judge; null: none), or why they cannot be read. */
    judging: v.optional(v.nullable(v.union([v.looseObject({ error: v.string() }), v.record(v.string(), v.unknown())]))),
    /** Whether replays use those settings: false with none (judging null) and for a received capture's (the sender's) until accepted (kerncap judge DIR --accept). */
    judgingUsed: v.optional(v.boolean()),
    /** Settings that await acceptance (judgingUsed false though there are settings): the SHA-256 of the file's bytes and the command that accepts them; null otherwise. */
    judgingAccept: v.optional(v.nullable(JudgingAccept)),
    /** The reproducer project: the files to edit and those kerncap generates from them (relative to dir), CUDA's compile flags (assumed or recovered; null for others), and src/ against what the capture wrote (null: the manifest records no digests of it). */
    reproducer: v.optional(
      v.object({
        present: v.boolean(),
        edit: v.array(v.string()),
        generated: v.array(v.string()),
        flags: v.nullable(
          v.object({
            words: v.array(v.string()),
            assumed: v.boolean(),
            from: v.string(),
            /** The words build.sh passes (include folders rewritten into ./src), where build.sh is kerncap's own; absent otherwise. */
            buildSh: v.optional(v.array(v.string())),
          }),
        ),
        sources: v.nullable(v.object({ edited: v.array(v.string()), added: v.array(v.string()), gone: v.array(v.string()) })),
        /** Why the generated files are not made (CUDA: the slice after an agent's build, so build.sh compiles the whole TU until validate makes it again); absent when they are. */
        generatedNotMade: v.optional(v.string()),
      }),
    ),
  }),
  replay: v.looseObject({
    ...id("replay"),
    ...ReplayFields,
    /** --against: the other kernel (a capture folder's or a module's), judged on this capture's memory (its own replay result), and its time against this one's. */
    against: v.optional(v.looseObject({ kind: v.picklist(["capture", "module"]), path: v.string(), verdict: Verdict, timing: v.looseObject({ medianUs: N }) })),
    compare: v.optional(Compare),
    /** --repeat: every comparison made (the first is `compare`) and its wall time (s). */
    repeats: v.optional(v.array(v.object({ compare: Compare, seconds: N }))),
  }),
  validate: v.looseObject({
    ...id("validate"),
    ...ReplayFields,
    /** The module rebuilt, its build time (s), by build.sh or by the pruned TU's device-only build (CUDA, once checked against build.sh's: src/rebuild/rebuilder.ts), and that build's steps (ms). */
    rebuild: Rebuild,
    /** The rebuilt kernel's time against the captured module's, interleaved (null with --iters below 5). */
    compare: v.optional(Compare),
    replaySeconds: v.number(),
    wallSeconds: v.number(),
  }),
  "validate-build": v.looseObject({
    ...id("validate-build"),
    /** The capture folder (absolute), as validate's and replay's documents give it (added compatibly: optional). */
    dir: v.optional(v.string()),
    /** "built": the module was rebuilt, nothing judged (eval's word for a candidate built and not judged; added compatibly: optional). */
    verdict: v.optional(v.literal("built")),
    kernel: v.string(),
    /** The kernel's symbol: its mangled name, as the module and the manifest's kernel.name have it, the same in every document (`kernel` is a name to read: here the symbol itself, as this document has always given it). Added compatibly (optional). */
    symbol: v.optional(v.string()),
    /** The module rebuilt, its build time (s), by build.sh or by the pruned TU's device-only build, the rebuilt kernel's registers and stack frame beside the captured module's. */
    rebuild: Rebuild,
    wallSeconds: v.number(),
  }),
  "validate-watch": v.looseObject({ ...id("validate-watch"), ...WatchLineFields }),
  profile: v.object({
    ...id("profile"),
    dir: v.string(),
    kernel: v.string(),
    /** The kernel's symbol: its mangled name, as the module and the manifest's kernel.name have it, the same in every document (`kernel` is a name to read: here the symbol itself, as this document has always given it). Added compatibly (optional). */
    symbol: v.optional(v.string()),
    tool: v.picklist(["ncu", "nsys"]),
    /** The report written (absolute path; DIR/profile/NAME.ncu-rep or .nsys-rep). */
    report: v.string(),
    module: v.string(),
    command: v.array(v.string()),
    verdict: v.nullable(Verdict),
    /** Wall time (s). */
    seconds: v.object({ build: N, profile: N, import: N }),
    /** ncu's key figures of the profiled launch (null for nsys): time in µs, sizes in bytes, throughputs in % of peak; null where the report lacks the metric. */
    figures: v.nullable(ProfileFigures),
  }),
  tune: v.object({
    ...id("tune"),
    dir: v.string(),
    /** The capture's frontend (manifest kernel.frontend), whose tune made the rows (src/frontends/<name>/tune.ts); its JSON Schema enum is the registry's names. */
    frontend: v.string(),
    kernel: v.string(),
    /** The kernel's symbol: its mangled name, as the module and the manifest's kernel.name have it, the same in every document (`kernel` is a name to read: here the symbol itself, as this document has always given it). Added compatibly (optional). */
    symbol: v.optional(v.string()),
    grid: v.nullable(v.string()),
    /** Triton: the grid is the formula inferred from the capture (the captured grid, integer arguments and tile constexprs), not a --grid given. */
    gridInferred: v.optional(v.boolean()),
    /** One row per config: the app's own first (captured: true, its module the baseline; CUDA: then build.sh without extra flags); times in µs; speedup = the app's median / this one's. */
    rows: v.array(TuneRow),
    winner: v.nullable(TuneRow),
    /** The winner to paste: Triton's triton.Config(…) line; CUDA's nvcc flags ("" for build.sh's own; null when the app's build won); null when none matched. */
    paste: v.nullable(v.string()),
    seconds: v.object({ compile: N, replay: N }),
    /** What tune warned of on stderr before the configs ran (a swept macro no source names, a Triton option swept as a macro); absent when nothing. On an error: error.details.warnings. */
    warnings: v.optional(v.array(v.string())),
    /** --build-only: every config built, none judged or timed (no GPU needed): rows built or compile-error, winner and paste null, seconds.replay 0; absent otherwise. */
    buildOnly: v.optional(v.literal(true)),
  }),
  judge: v.object({
    ...id("judge"),
    dir: v.string(),
    /** The settings file in the capture folder (kerncap-judge.json), null when the capture has none. */
    file: v.nullable(v.string()),
    /** Whether this command changed them. */
    changed: v.boolean(),
    /** Every replay of the capture is judged with these unless its own options say otherwise. */
    settings: JudgingSettings,
    /** Whether replays use them: false with none (file null) and for a received capture's (the sender's) until accepted (kerncap judge DIR --accept). */
    used: v.optional(v.boolean()),
    /** Settings that await acceptance (used false, file not null): the SHA-256 of the bytes shown and the command that accepts them; null otherwise. */
    accept: v.optional(v.nullable(JudgingAccept)),
    /** Every warning judge printed on stderr (WARN), one entry each: settings not used, a --dtype REGION=T that does not fit its region. */
    warnings: v.optional(v.array(v.string())),
  }),
  clean: v.object({
    ...id("clean"),
    /** --dry-run: nothing removed (the parts are what would be). captures: one entry per capture folder (absolute), in the order given. */
    dryRun: v.boolean(),
    captures: CleanedCaptures,
    /** Bytes freed (or, with dryRun, to free) in all. */
    bytes: U,
  }),
  pack: v.object({
    ...id("pack"),
    /** The archive written, or that --dry-run would write. */
    archive: v.string(),
    dir: v.string(),
    /** --dry-run: nothing written (bytes.archive 0). dryRun, list, leftOut: added to pack/1 compatibly. */
    dryRun: v.optional(v.boolean()),
    files: U,
    sparseFiles: U,
    bytes: Bytes3,
    /** Every file archived: its path in the capture folder and its bytes (apparent size). */
    list: v.optional(v.array(v.object({ path: v.string(), bytes: U }))),
    /** What the folder holds that the archive leaves out (build/, unpack's mark, an index left by hand, editor temporaries and backups, hidden names under src/), and why. */
    leftOut: v.optional(v.array(v.object({ path: v.string(), why: v.string() }))),
    /** Every warning pack printed on stderr (WARN), one entry each: files left out, the private facts the archive holds, why the reproducer may not rebuild elsewhere. */
    warnings: v.array(v.string()),
    /** The private facts the manifest in the archive holds (host name, command line, job environment …); [] when redacted. */
    privateFields: v.array(v.string()),
    /** Whether --redact removed them. */
    redacted: v.boolean(),
    seconds: v.number(),
  }),
  unpack: v.object({
    ...id("unpack"),
    archive: v.string(),
    dir: v.string(),
    files: U,
    sparseFiles: U,
    bytes: v.object({ files: U, data: U }),
    /** Every warning unpack printed on stderr (WARN), one entry each: what pack noted, and what --force lost (files, edits, a capture made here). */
    warnings: v.array(v.string()),
    seconds: v.number(),
  }),
  export: v.object({
    ...id("export"),
    dir: v.string(),
    out: v.string(),
    kernel: v.string(),
    /** The kernel's symbol: its mangled name, as the module and the manifest's kernel.name have it, the same in every document (`kernel` is a name to read: demangled here). Added compatibly (optional). */
    symbol: v.optional(v.string()),
    frontend: v.string(),
    /** Commands run in `out`: build (make), run (./repro), runSource (rebuild src/ and run it; null without a CUDA reproducer project), triton (null for other kernels). */
    commands: v.object({ build: v.string(), run: v.string(), runSource: v.nullable(v.string()), triton: v.nullable(v.string()) }),
    /** The kernel source to edit, relative to out; null without a reproducer project. */
    editable: v.nullable(v.string()),
    /** The module image: machine-code architectures (sm_XX), its newest PTX (compute_XX) and where it was written, null when it holds none. */
    module: v.object({ file: v.string(), kind: v.string(), sass: v.array(v.string()), ptx: v.nullable(v.string()), ptxFile: v.nullable(v.string()) }),
    /** The Triton script; storedPointer: a captured VA found in the before state (a kernel that follows it needs the driver-API program). */
    triton: v.nullable(v.object({ script: v.string(), storedPointer: v.nullable(v.object({ region: v.string(), offset: U, va: v.string() })) })),
    /** Each data file, and whether it shares the capture's blocks (reflink) or was copied. */
    data: v.array(v.object({ path: v.string(), bytes: U, shared: v.picklist(["reflink", "copy"]) })),
    /** Bytes: every file of the export; the data files; of those, copied and reflinked. */
    bytes: v.object({ export: U, data: U, copied: U, reflinked: U }),
    tolerance: v.object({ atol: N, rtol: N }),
    /** The judging the programs apply: the capture's settings in force (kerncap judge) under the export's options; which came from the capture; a received capture's settings not used until accepted (null: none); what the programs cannot apply (sentences). */
    judging: v.object({
      settings: JudgingSettings,
      fromCapture: v.array(v.string()),
      ignored: v.nullable(v.string()),
      notApplied: v.array(v.string()),
    }),
    /** Files of the capture's project left out: editor temporaries and backups, hidden names under src/. */
    leftOut: v.array(v.string()),
    /** Exported src/ files that differ from what the capture wrote (path relative to the capture, and how: inspect's reproducer.sources): the captured module was not built from them. */
    changedSources: v.array(v.object({ path: v.string(), change: v.picklist(["edited", "added", "gone"]) })),
    /** Every warning the export printed on stderr (WARN), one entry each: changed sources, files left out, why the reproducer may not rebuild elsewhere, judging the programs cannot apply. */
    warnings: v.array(v.string()),
    seconds: N,
  }),
  doctor: v.object({
    ...id("doctor"),
    verdict: v.picklist(["ok", "warn", "fail"]),
    checks: v.array(DoctorCheck),
    /** Each CUDA device the driver sees (CUDA_VISIBLE_DEVICES applies): ordinal, name, architecture (sm_XY), memory in bytes; [] without a driver or a device. */
    gpus: v.optional(v.array(v.object({ index: U, name: v.string(), arch: v.string(), memoryBytes: U }))),
    /** A GPU initialises and a fixed-VA reservation works (replay, validate, check, tune and eval's GPU workers can run here). */
    canReplay: v.optional(v.boolean()),
    /** canReplay, CUPTI found, and the built-in capture + replay did not fail (kerncap run can capture here). */
    canCapture: v.optional(v.boolean()),
    /** nvcc found, the cache folder and TMPDIR usable: the builds run here (validate --build-only, tune --build-only, eval --build-only, check --rebuild --build-only), GPU or not. */
    canBuild: v.optional(v.boolean()),
  }),
  check: v.object({
    ...id("check"),
    /** The results file (JSON Lines, one record per capture; null for --merge, and for a shard that holds no capture: nothing written) and the baseline timed against. */
    results: v.nullable(v.string()),
    baseline: v.nullable(v.string()),
    shard: v.nullable(v.object({ index: U, count: U })),
    workers: U,
    rebuild: v.boolean(),
    /** --build-only: every capture's reproducer built, none replayed or timed (baseline null: none read or written); absent otherwise. */
    buildOnly: v.optional(v.literal(true)),
    /** A capture is slower when its time ratio's interval lies wholly above 1 + slowerPct/100 (src/check/timing.ts). */
    slowerPct: v.number(),
    /** Regressions first: mismatch, slower, error, skipped, ok. */
    captures: v.array(CheckRecord),
    summary: v.object({ captures: U, mismatch: U, slower: U, error: U, skipped: U, ok: U, faster: U }),
    /** 1: a mismatch or a slower capture; 2: none, but a capture could not be checked; 0: every capture ok or skipped. */
    exitCode: U,
    seconds: v.number(),
    /** --merge --partial: the shards ("K/N") whose results files were not given (each an error in the JUnit); absent otherwise. */
    missingShards: v.optional(v.array(v.string())),
    /** A sharded run's: the authenticator of its claim to be that shard of exactly these captures, which --merge checks before it takes the document's shard. */
    shardAuth: v.optional(v.string()),
    /** The run's subject (src/format/subject.ts checkRunSubject), covered by shardAuth; --merge refuses shards K/N of two. */
    runSubject: v.optional(v.pipe(v.string(), v.regex(/^[0-9a-f]{64}$/))),
  }),
  "check-record": v.object({ ...id("check-record"), ...CheckRecord.entries }),
  eval: v.object({
    ...id("eval"),
    /** What eval warned of on stderr about its command line (a capture folder given as a candidate, taken as an input); absent when nothing. */
    warnings: v.optional(v.array(v.string())),
    /** The capture folder whose reproducer was built (the first input; null for --merge), and every input's identity. */
    dir: v.nullable(v.string()),
    /** Every input's identity (the capture folders judged against, in order; SET/member for a capture set's member). */ inputs: v.array(v.string()),
    /** The --jsonl results file (absolute path); null when none was given, and for --merge (its files are the command line's). */
    results: v.nullable(v.string()),
    /** --shard K/N: index K of count N; null unsharded. */ shard: v.nullable(v.object({ index: U, count: U })),
    /** GPU workers the candidates were judged on (--gpus, --workers; 0: none opened, as with --build-only). */ workers: U,
    /** Ranked: the matching candidates fastest first (rank 1, 2 …), then the rest, worst verdict first. */
    candidates: v.array(
      v.object({
        candidate: v.string(),
        label: v.string(),
        kind: v.picklist(["tree", "overlay", "patch", "file", "config", "flags"]),
        /** match only when it matched on every input; else the worst of its inputs' verdicts. */
        verdict: v.picklist(EVAL_VERDICTS),
        /** Each input's verdict; one entry, input "(build)", when it never reached a GPU (see eval-record's input). */
        inputs: v.array(v.object({ input: v.string(), verdict: v.picklist(EVAL_VERDICTS) })),
        /** Geometric mean over the inputs of the captured median / this one's (above 1: faster); low/high: the inputs' intervals' extremes. */
        speedup: v.nullable(N),
        low: v.nullable(N),
        high: v.nullable(N),
        registers: v.nullable(N),
        stackFrameBytes: v.nullable(N),
        /** Spill stores and loads (bytes) of its build, as its record's build; null where unknown. */
        spillStoreBytes: v.optional(v.nullable(N)),
        spillLoadBytes: v.optional(v.nullable(N)),
        reason: v.nullable(v.string()),
        /** The error code of the record `reason` is of (E_PATCH, E_BUILD, E_NO_GPU …: why it is not a match); null for a match and a verdict without one. */
        code: v.nullable(v.string()),
        rank: v.nullable(U),
      }),
    ),
    records: v.array(EvalRecord),
    /**
     * Candidates by verdict; byCode: the candidates that are not matches by their code (E_NO_GPU,
     * E_BUILD, E_PATCH …); unjudged: those of verdict error by why: noGpu (E_NO_GPU: built, no GPU
     * here), candidate (its own fault: E_PATCH, E_CANDIDATE, E_NOT_SOURCE, E_PACK_NAME, E_CONFINED;
     * no rerun changes it), other (a worker that died …: --resume tries it again).
     */
    summary: v.object({
      candidates: U,
      ...(Object.fromEntries(EVAL_VERDICTS.map((k) => [k, U])) as Record<string, typeof U>),
      byCode: v.record(v.string(), U),
      unjudged: v.object({ noGpu: U, candidate: U, other: U }),
    }),
    seconds: v.object({ wall: N, build: N, run: N }),
    /** 2 when a candidate could not be judged (error), else 0: the process's exit status, with this document (no kerncap.error/1) on stdout. */
    exitCode: U,
    /** --merge --partial: the shards ("K/N") whose files were not given; absent otherwise. */
    missingShards: v.optional(v.array(v.string())),
  }),
  "eval-record": v.object({ ...id("eval-record"), ...EvalRecord.entries }),
  demo: v.object({
    ...id("demo"),
    dir: v.string(),
    kernel: v.string(),
    /** The kernel's symbol: its mangled name, as the module and the manifest's kernel.name have it, the same in every document (`kernel` is a name to read: demangled here). Added compatibly (optional). */
    symbol: v.optional(v.string()),
    arch: v.string(),
    regions: U,
    beforeBytes: U,
    /** Commands to try next, on this folder. */ next: v.array(v.string()),
  }),
  error: v.object({
    ...id("error"),
    error: v.object({
      /** One of the stable codes of docs/errors.md (src/error-codes.ts: its exit status and hint there). */
      code: v.picklist(Object.keys(ERROR_CODES) as [ErrorCode, ...ErrorCode[]]),
      /** What failed, said for a person (a sentence or more; the facts a program reads are in `code` and `details`). */ message: v.string(),
      /** What to do about it (a command to run, a flag to give), or null where there is nothing to do but read the message. */ hint: v.nullable(v.string()),
      /**
       * Structured facts behind the message where the error has them: E_BUILD's `diagnostics` (the
       * compiler's: file, line, column, severity, text), E_NO_GPU's `rebuild` (validate's rebuild,
       * done before the replay refused), E_UNTRUSTED's `trust` (digest, files, command), tune's
       * `configs` (each config's build: built | compile-error | layout-change | error | not built,
       * registers, error) and its warnings (what it said on stderr before the configs ran).
       */
      details: v.optional(v.record(v.string(), v.unknown())),
    }),
  }),
  file: v.object({ ...id("file"), dir: v.string(), path: v.string(), bytes: U, content: v.string() }),
  files: v.object({
    ...id("files"),
    dir: v.string(),
    /** The folder listed, relative to the capture folder (. for the capture folder itself). */
    path: v.string(),
    /**
     * Depth first in sorted order; no link followed (kind link), build/'s content not listed;
     * editable: edit_file may write it by its name and kerncap does not generate it; generated
     * (only where true): a file kerncap makes from another, not to be edited (a CUDA slice,
     * src/*.kerncap-slice.cu, made from its TU: edit the TU; an edited slice is compiled as it is,
     * and a later change of its TU is E_SLICE_EDITED).
     */
    entries: v.array(
      v.object({
        path: v.string(),
        kind: v.picklist(["file", "folder", "link", "other"]),
        bytes: v.nullable(U),
        editable: v.boolean(),
        generated: v.optional(v.literal(true)),
      }),
    ),
    /** More entries than the listing's bound (2000) were there. */
    truncated: v.boolean(),
  }),
  edit: v.object({ ...id("edit"), dir: v.string(), path: v.string(), bytes: U }),
  version: v.object({ ...id("version"), version: v.string() }),
} satisfies Record<DocumentName, v.GenericSchema>;

/** What `kerncap schema` can print: the manifest, the files kerncap writes in a capture folder with a schema id of their own, and every document. */
export const SCHEMA_NAMES = ["manifest", "capture-set", "judge-settings", "candidate-list", "eval-shard", ...Object.keys(DOCUMENTS)] as const;

/** Files with a schema of their own (not a verb's document): their valibot schema and `schema` id. */
const FILE_SCHEMAS: Record<string, { schema: v.GenericSchema; id: string }> = {
  "judge-settings": { schema: JudgeFile, id: JUDGE_SCHEMA },
  /** eval's --candidate-list FILE (no schema field of its own: the $id names the form). */
  "candidate-list": { schema: CandidateList, id: "kerncap.candidate-list" },
  "eval-shard": { schema: EvalShardMarker, id: EVAL_SHARD_MARKER }, // a line of eval's --jsonl file
};

/**
 * JSON Schema (draft-07) of the manifest or of one verb's document, generated from the valibot
 * schema. Pipes without a JSON Schema form are left out (errorMode "ignore"), never guessed.
 * @param frontends the registry's frontend names (src/frontends/index.ts), the manifest's kernel.frontend enum and the tune document's frontend enum
 * @returns undefined for an unknown name
 */
export function jsonSchemaOf(name: string, frontends: readonly string[] = []): Record<string, unknown> | undefined {
  const file = Object.hasOwn(FILE_SCHEMAS, name) ? FILE_SCHEMAS[name] : undefined;
  const s =
    name === "manifest"
      ? Manifest
      : name === "capture-set"
        ? CaptureSet
        : file
          ? file.schema
          : Object.hasOwn(DOCUMENTS, name)
            ? DOCUMENTS[name as DocumentName]
            : undefined;
  if (!s) return undefined;
  const js = toJsonSchema(s, { errorMode: "ignore" }) as Record<string, unknown>;
  describeFields(js, name);
  const frontend = (js.properties as { kernel?: { properties?: { frontend?: Record<string, unknown> } } } | undefined)?.kernel?.properties?.frontend;
  if (name === "manifest" && frontend && frontends.length) frontend.enum = [...frontends];
  const tuned = (js.properties as { frontend?: Record<string, unknown> } | undefined)?.frontend;
  if (name === "tune" && tuned && frontends.length) tuned.enum = [...frontends];
  return {
    $schema: "http://json-schema.org/draft-07/schema#",
    ...js,
    $id: name === "manifest" ? "kerncap.manifest" : name === "capture-set" ? "kerncap.capture-set" : (file?.id ?? documentId(name as DocumentName)),
    title: TITLES[name] ?? `kerncap ${name} --json`,
  };
}
