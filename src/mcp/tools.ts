/**
 * The MCP server's tools (src/mcp/server.ts serves them): for each, its title, annotations, input
 * schema (valibot; its JSON Schema from @valibot/to-json-schema is what tools/list announces, and
 * each call's arguments are checked against the same schema), the document it returns, and the
 * kerncap command line it runs in a child (./children.ts), or none for a local action (./files.ts).
 * A tool that builds the capture's reproducer says so (`builds`): its verb gets --confine, and
 * --trust only under `kerncap mcp --trust-builds`; the verb's workflow (src/ops/) applies the
 * gates those options ask for.
 */
import { oneLine } from "../escape.ts";
import type { ToolAnnotations } from "@modelcontextprotocol/sdk/types.js";
import { toJsonSchema } from "@valibot/to-json-schema";
import { availableParallelism } from "node:os";
import * as v from "valibot";
import type { DocumentName } from "../format/documents.ts";
import { McpCandidate } from "./evaluate.ts";
import type { EvaluateIn, ProfileIn, RunIn, ToleranceIn, TuneIn } from "./tool-inputs.ts";
export type { EvaluateIn } from "./tool-inputs.ts";

// string values go to the verb as --name=VALUE and a folder starting with "-" as ./-x, so that no value is read as an option (--help, --json)
const Dir = v.pipe(
  v.string(),
  v.minLength(1),
  v.description("Capture folder (written by kerncap run)"),
  v.transform((d: string) => (d.startsWith("-") ? `./${d}` : d)),
);
const Tol = {
  iters: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0), v.description("Timed launches after the checked one"))),
  atol: v.optional(v.pipe(v.number(), v.description("Absolute tolerance per element (default: the capture's judging settings, kerncap judge, else 0)"))),
  rtol: v.optional(v.pipe(v.number(), v.description("Relative tolerance per element (default: the capture's judging settings, else 0)"))),
  dtype: v.optional(
    v.pipe(
      v.string(),
      v.description(
        "Element type where the signature gives none (fp32, fp16, bf16, …), or REGION=T for one region (default: the capture's judging settings, else fp32)",
      ),
    ),
  ),
  multiset: v.optional(
    v.pipe(
      v.array(v.pipe(v.string(), v.minLength(1))),
      v.description(
        "Regions to compare as multisets of elements (atomic append, compaction): each N (inspect's order), a VA 0x… inside it, param:N, changed or all (--multiset)",
      ),
    ),
  ),
};
/** flushL2 as the verbs' --flush-l2 (replay, validate, tune, eval: src/replay/session.ts): a read that evicts L2 with clean lines, no memset. */
const FlushL2 = v.optional(
  v.pipe(
    v.boolean(),
    v.description(
      "Flush L2 before each timed launch: a read of a 256 MiB buffer (or of twice the L2 where that is more) that leaves L2 holding clean lines of other data, as ncu's --cache-control all",
    ),
  ),
);
/**
 * runs as replay's and validate's --runs: the checked launches; at least 2 for an agent (as eval
 * takes them): one run cannot show that an edit brought in nondeterminism (a trial's agent asked
 * for 1, with iters 0 and noVerify).
 */
const Runs = v.optional(
  v.pipe(v.number(), v.integer(), v.minValue(2), v.description("Checked launches from the before state (default 3, 8 once they differ; at least 2)")),
);
/** noVerify as replay's and validate's --no-verify. */
const NoVerify = v.optional(
  v.pipe(
    v.boolean(),
    v.description(
      "Skip the capture's checksums (faster for large captures; a damaged file goes unnoticed). Not honoured for a received capture, whose checksums are always checked",
    ),
  ),
);
/** validate's and profile's allowVersionMismatch (--allow-version-mismatch), and force, its former name. */
const VersionMismatch = (prefix = "") => ({
  allowVersionMismatch: v.optional(
    v.pipe(v.boolean(), v.description(`${prefix}Rebuild even when the toolchain differs from the capture's (--allow-version-mismatch)`)),
  ),
  force: v.optional(v.pipe(v.boolean(), v.description("Deprecated: the former name of allowVersionMismatch (same meaning); still accepted"))),
});
/** Whether a call asks for --allow-version-mismatch, by its name or by force, the name it had. */
const versionMismatch = (a: { allowVersionMismatch?: boolean; force?: boolean }) => (a.allowVersionMismatch || a.force ? ["--allow-version-mismatch"] : []);
const Cwd = v.optional(v.pipe(v.string(), v.description("The folder the application runs in (default: the server's working folder)")));
const Nat = (what: string, min = 0) => v.optional(v.pipe(v.number(), v.integer(), v.minValue(min), v.description(what)));
/**
 * The most an agent may ask of one call's parallel work: builds at once (each confined build may
 * take 8 GiB, src/frontends/build.ts CONFINED_DATA_KIB) up to this machine's CPU count, and worker
 * processes (a CUDA context each) up to 8 per GPU. The server's own --jobs bounds the calls.
 */
const MAX_BUILDS = availableParallelism();
const MAX_WORKERS_PER_GPU = 8;
const Bounded = (what: string, max: number) =>
  v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(max), v.description(`${what} (at most ${max})`)));
const App = v.pipe(v.array(v.string()), v.minLength(1), v.description("The application command line: program and its arguments"));

/**
 * What a client may assume of a tool when it asks the user for permission (MCP ToolAnnotations):
 * list and run execute the application (open world: whatever it does); validate and tune run the
 * capture's build.sh (tune: once per config), which writes build/ inside the capture folder;
 * profile writes its report under profile/ (and with build, build/); edit_file rewrites a file
 * under src/; inspect, replay and read_file change nothing on disk.
 */
const READS = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false } as const;

/**
 * Tool name → title, description, annotations, input schema, the document it returns (its
 * outputSchema, with the error document: src/format/documents.ts), and the kerncap arguments it runs
 * (or a local action).
 */
export const TOOLS = {
  list: {
    title: "List the kernels an application launches",
    // it runs the application given, whatever it is: as destructive as run (adversary 58: a client that approves non-destructive tools by itself ran `sh -c`)
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
    output: "list",
    description:
      "Run an application with the capture library in count-only mode; returns every kernel it launched (name, count, grid, block, module). Document kerncap.list/1.",
    input: v.strictObject({ app: App, cwd: Cwd }),
    argv: (a: { app: string[] }) => ["list", "--json", "--", ...a.app],
  },
  run: {
    title: "Capture a kernel launch from an application",
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
    output: "run",
    description:
      "Run an application and capture the Nth launch of a kernel (POSIX ERE on the mangled or demangled name) into a capture folder with a reproducer project. Document kerncap.run/1.",
    input: v.strictObject({
      app: App,
      kernel: v.optional(v.pipe(v.string(), v.description("POSIX extended regex for the kernel name"))),
      dispatch: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0), v.description("0-based index among the matching launches"))),
      out: v.optional(v.pipe(v.string(), v.description("Capture folder to write (default kerncap-capture)"))),
      force: v.optional(v.pipe(v.boolean(), v.description("Replace a previous capture at out"))),
      exitAfterCapture: v.optional(v.pipe(v.boolean(), v.description("End the application right after the capture (its remaining work is not run)"))),
      sourceRoot: v.optional(v.pipe(v.string(), v.description("CUDA: the app's source tree"))),
      compileCommands: v.optional(v.pipe(v.string(), v.description("CUDA: compile_commands.json or its folder"))),
      captureAll: v.optional(
        v.pipe(
          v.boolean(),
          v.description("Capture the dispatch'th launch of every distinct kernel that kernel matches (all without it), one folder each inside out"),
        ),
      ),
      maxCaptures: Nat("With captureAll: at most this many captures (default 64)", 1),
      launchCount: Nat("Capture this many consecutive matching launches from dispatch on, one folder each inside out (ncu's --launch-count; default 1)", 1),
      countBenchmarks: v.optional(v.pipe(v.boolean(), v.description("Triton: let dispatch count (and take) the autotuner's benchmark launches too"))),
      rank: Nat("Multi-process jobs: capture only in the process of this rank (RANK, LOCAL_RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID)"),
      process: Nat("Multi-process jobs: capture only in the Nth process (0-based) that initializes CUDA"),
      cwd: Cwd,
    }),
    argv: (a: RunIn) => [
      "run",
      "--json",
      ...(a.captureAll ? ["--capture-all"] : []),
      ...(a.maxCaptures !== undefined ? ["--max-captures", String(a.maxCaptures)] : []),
      ...(a.launchCount !== undefined ? ["--launch-count", String(a.launchCount)] : []),
      ...(a.countBenchmarks ? ["--count-benchmarks"] : []),
      ...(a.rank !== undefined ? ["--rank", String(a.rank)] : []),
      ...(a.process !== undefined ? ["--process", String(a.process)] : []),
      ...(a.kernel !== undefined ? [`--kernel=${a.kernel}`] : []),
      ...(a.dispatch !== undefined ? ["--dispatch", String(a.dispatch)] : []),
      ...(a.out !== undefined ? [`--out=${a.out}`] : []),
      ...(a.force ? ["--force"] : []),
      ...(a.exitAfterCapture ? ["--exit-after-capture"] : []),
      ...(a.sourceRoot !== undefined ? [`--source-root=${a.sourceRoot}`] : []),
      ...(a.compileCommands !== undefined ? [`--compile-commands=${a.compileCommands}`] : []),
      "--",
      ...a.app,
    ],
  },
  inspect: {
    title: "Read a capture's manifest and integrity",
    annotations: READS,
    output: "inspect",
    description:
      "Read a capture: the manifest (kernel, launch, parameters, regions, device) and the integrity verdict (verify: every stored memory chunk's kc64 too). Document kerncap.inspect/1.",
    input: v.strictObject({
      dir: Dir,
      verify: v.optional(
        v.pipe(
          v.boolean(),
          v.description("Check every stored memory chunk's kc64 too, not only the files' sizes and SHA-256 (reads every memory image: slower)"),
        ),
      ),
    }),
    argv: (a: { dir: string; verify?: boolean }) => ["inspect", a.dir, "--json", ...(a.verify ? ["--verify"] : [])],
  },
  replay: {
    title: "Replay a capture on the GPU and compare",
    annotations: READS,
    output: "replay",
    description:
      "Replay the captured kernel at its captured VAs in a fresh process; compares every region with the app's after state (verdict match/mismatch) and times it. Document kerncap.replay/1.",
    input: v.strictObject({
      dir: Dir,
      ...Tol,
      runs: Runs,
      noVerify: NoVerify,
      flushL2: FlushL2,
    }),
    argv: (a: { dir: string; runs?: number; noVerify?: boolean; flushL2?: boolean } & ToleranceIn) => ["replay", a.dir, "--json", ...tolArgv(a), ...runArgv(a)],
  },
  validate: {
    title: "Rebuild the edited reproducer, replay and compare",
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    output: "validate",
    description:
      "Rebuild the (edited) reproducer with the capture's build.sh, replay the rebuilt kernel on the captured memory, compare with the app's after state. A compile error comes back as the error document with the compiler's message. Document kerncap.validate/1.",
    input: v.strictObject({
      dir: Dir,
      ...Tol,
      runs: Runs,
      noVerify: NoVerify,
      flushL2: FlushL2,
      ...VersionMismatch(),
    }),
    argv: (a: { dir: string; runs?: number; noVerify?: boolean; flushL2?: boolean; allowVersionMismatch?: boolean; force?: boolean } & ToleranceIn) => [
      "validate",
      a.dir,
      "--json",
      ...tolArgv(a),
      ...runArgv(a),
      ...versionMismatch(a),
    ],
  },
  build: {
    title: "Rebuild the edited reproducer only (no GPU)",
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    output: "validate-build",
    description:
      "Rebuild the (edited) reproducer as validate does, without replaying it (no GPU needed; kerncap validate --build-only): whether the kernel compiles, with the rebuilt kernel's registers, stack frame and spills beside the captured module's and the nvcc that built it. A compile error comes back as the error document with the compiler's message. Call validate to judge and time it. Document kerncap.validate-build/1.",
    input: v.strictObject({
      dir: Dir,
      ...VersionMismatch(),
    }),
    argv: (a: { dir: string; allowVersionMismatch?: boolean; force?: boolean }) => ["validate", a.dir, "--json", "--build-only", ...versionMismatch(a)],
  },
  profile: {
    title: "Profile the replayed launch with Nsight Compute",
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    output: "profile",
    description:
      "Nsight Compute on the replay of the captured launch only (no application): writes DIR/profile/NAME.ncu-rep and returns the key figures (duration µs, SM and memory throughput % of peak, achieved occupancy %, registers per thread, DRAM bytes, the limiter: compute, memory or latency). build: profile the reproducer's rebuilt kernel instead (built as validate builds it). ncu locks the clocks to base and flushes the caches by default: clockControl/cacheControl none to compare with the app's time. Document kerncap.profile/1.",
    input: v.strictObject({
      dir: Dir,
      name: v.optional(
        v.pipe(
          v.string(),
          v.regex(/^[A-Za-z0-9_][A-Za-z0-9._-]{0,99}$/),
          v.description("Report name: DIR/profile/NAME.ncu-rep (default replay, or build with build)"),
        ),
      ),
      build: v.optional(v.pipe(v.boolean(), v.description("Profile the reproducer's rebuilt kernel (validate's build of the edited source)"))),
      ...VersionMismatch("With build: "),
      metrics: v.optional(
        v.pipe(
          v.array(v.pipe(v.string(), v.regex(/^[A-Za-z0-9_.:]+$/))),
          v.description("ncu metrics to collect beside kerncap's own (e.g. sm__warps_active.avg.pct_of_peak_sustained_active)"),
        ),
      ),
      // a name, never an option of ncu's (a trial: --section-folder-restore, --log-file reached ncu as the set)
      set: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z0-9][A-Za-z0-9_-]*$/), v.description("ncu section set (basic, detailed, full, …: ncu --set)"))),
      clockControl: v.optional(v.pipe(v.picklist(["base", "none"]), v.description("ncu --clock-control (default base: clocks locked to base)"))),
      cacheControl: v.optional(v.pipe(v.picklist(["all", "none"]), v.description("ncu --cache-control (default all: caches flushed before the launch)"))),
    }),
    argv: (a: ProfileIn) => {
      const ncu = [
        ...(a.set !== undefined ? ["--set", a.set] : []),
        ...(a.metrics?.length ? ["--metrics", a.metrics.join(",")] : []),
        ...(a.clockControl ? ["--clock-control", a.clockControl] : []),
        ...(a.cacheControl ? ["--cache-control", a.cacheControl] : []),
      ];
      return [
        "profile",
        a.dir,
        "--json",
        ...(a.name !== undefined ? [`--name=${a.name}`] : []),
        ...(a.build ? ["--build"] : []),
        ...versionMismatch(a),
        ...(ncu.length ? ["--", ...ncu] : []),
      ];
    },
  },
  tune: {
    title: "Sweep a kernel's configs on the captured memory",
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    output: "tune",
    description:
      "Build every config of a space, judge each on the captured memory against the app's after state and time them interleaved with the app's own module; returns a row per config (verdict, median µs, speedup vs the app, registers) and the winner as a line to paste. Triton: config specs of constexprs and num_warps, num_stages, maxnreg (default: the autotuner's configs recorded at capture), grid when tile sizes change. CUDA: macros (define, or any config name but maxrregcount), maxrregcount, nvccFlags alternatives; each built by the capture's build.sh (confined, as validate's) into build/tune/. Document kerncap.tune/1.",
    input: v.strictObject({
      dir: Dir,
      config: v.optional(
        v.pipe(
          v.array(v.pipe(v.string(), v.minLength(1))),
          v.description("Config spaces, each 'NAME=V1,V2 NAME2=V3,…' expanded as a product; several: their union (--config)"),
        ),
      ),
      define: v.optional(
        v.pipe(v.array(v.pipe(v.string(), v.minLength(1))), v.description("CUDA: macros, each 'NAME=V1,V2' (-DNAME=V for each value; several: their product)")),
      ),
      maxrregcount: v.optional(
        v.pipe(v.array(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(255))), v.minLength(1), v.description("CUDA: nvcc -maxrregcount values")),
      ),
      nvccFlags: v.optional(
        v.pipe(
          v.array(v.string()),
          v.description(
            "CUDA: alternatives of extra nvcc flags, one per config ('' for none), device code generation flags only, e.g. ['-Xptxas=-O1', '-Xptxas=-O3']",
          ),
        ),
      ),
      grid: v.optional(v.pipe(v.string(), v.minLength(1), v.description("Triton: launch grid of a config, e.g. 'cdiv(M, BLOCK_M), cdiv(N, BLOCK_N)'"))),
      iters: v.optional(v.pipe(v.number(), v.integer(), v.minValue(5), v.description("Timed rounds, one launch of every config each (default 20)"))),
      jobs: Bounded("Parallel builds (default: the CPU count)", MAX_BUILDS),
      atol: Tol.atol,
      rtol: Tol.rtol,
      dtype: Tol.dtype,
      multiset: Tol.multiset,
      flushL2: FlushL2,
      buildOnly: v.optional(
        v.pipe(
          v.boolean(),
          v.description("Build every config and judge none (no GPU needed): each row built (CUDA: with its registers/thread) or compile-error; no winner"),
        ),
      ),
      allowVersionMismatch: VersionMismatch().allowVersionMismatch,
    }),
    argv: (a: TuneIn) => [
      "tune",
      a.dir,
      "--json",
      ...(a.config ?? []).map((c) => `--config=${c}`),
      ...(a.define ?? []).map((d) => `--define=${d}`),
      ...(a.maxrregcount?.length ? [`--maxrregcount=${a.maxrregcount.join(",")}`] : []),
      ...(a.nvccFlags ?? []).map((f) => `--nvcc-flag=${f}`),
      ...(a.grid !== undefined ? [`--grid=${a.grid}`] : []),
      ...(a.iters !== undefined ? ["--iters", String(a.iters)] : []),
      ...(a.jobs !== undefined ? ["--jobs", String(a.jobs)] : []),
      ...(a.atol !== undefined ? ["--atol", String(a.atol)] : []),
      ...(a.rtol !== undefined ? ["--rtol", String(a.rtol)] : []),
      ...(a.dtype !== undefined ? [`--dtype=${a.dtype}`] : []),
      ...(a.multiset ?? []).map((r) => `--multiset=${r}`),
      ...(a.flushL2 ? ["--flush-l2"] : []),
      ...(a.buildOnly ? ["--build-only"] : []),
      ...versionMismatch(a),
    ],
  },
  evaluate: {
    title: "Evaluate many candidate kernels on the captured memory",
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    output: "eval",
    description:
      "Many candidate versions of the captured kernel in one call (kerncap eval): each candidate (files that replace files of src/, a unified diff against src/, or a Triton config) is built in its own private copy of the reproducer (confined, as validate's: a received or Triton capture's only with --trust-builds; the capture's own files are not changed), then judged on every input (dir and inputs: captures of the same kernel; a candidate is right only when right on all) against the app's after state and timed against the captured module (a candidate's runs may differ only as the captured kernel's do, its own __device__ variables are put back before every launch and one timed launch is checked: no cached or skipped work counts). Each ends as match (speedup with its interval, registers, stack frame), mismatch (first differing region; its record's judgement: validate's mismatches and numerics, how wrong), fault, timeout (a hung kernel killed), compile-error (the compiler's message), layout-change, or error (not judged; its code says why: E_PATCH, a diff that does not apply to src/; E_NOT_SOURCE, a file no candidate may write; E_CANDIDATE, a path outside src/ or a config for a CUDA capture; E_NO_GPU; E_WORKER). An unfit candidate (also one giving none or several of files/patch/config) is never written nor built; the others are still evaluated (only two candidates of one name end the call: E_USAGE). Each is labelled by its name. Returns them ranked. Send a progressToken: the call reports each finished candidate, its record whole in the notification's _meta[\"kerncap/record\"]. Document kerncap.eval/1 (summary.unjudged: the error candidates by why: noGpu, candidate, other).",
    input: v.strictObject({
      dir: Dir,
      inputs: v.optional(
        v.pipe(
          v.array(v.pipe(v.string(), v.minLength(1))),
          v.maxLength(64),
          v.description("More capture folders (or capture sets) of the same kernel to judge every candidate on (at most 64, each once)"),
        ),
      ),
      candidates: v.pipe(
        v.array(McpCandidate),
        v.minLength(1),
        v.maxLength(1024),
        v.description("The versions to judge, each {name, and one of files, patch, config}; each ends as its own record, labelled by its name"),
      ),
      iters: v.optional(
        v.pipe(v.number(), v.integer(), v.minValue(1), v.description("Timed launches of each candidate and of the captured module, interleaved (default 20)")),
      ),
      gpus: v.optional(
        v.pipe(
          v.string(),
          v.regex(/^[A-Za-z0-9-]+(,[A-Za-z0-9-]+)*$/),
          // each GPU once (workersPerGpu gives several workers on one), at most 16: an agent's call starts at most 16 × 8 workers (adversary 75)
          v.check((g) => {
            const ids = g.split(",").map((x) => (/^\d+$/.test(x) ? String(Number(x)) : x));
            return new Set(ids).size === ids.length && ids.length <= 16;
          }, "each GPU once, at most 16 (workersPerGpu runs several workers on one GPU)"),
          v.description("GPUs for the workers, each once, as CUDA_VISIBLE_DEVICES takes them: 0,1 (at most 16; workersPerGpu runs several on each)"),
        ),
      ),
      workersPerGpu: Bounded("Worker processes per GPU (default 1)", MAX_WORKERS_PER_GPU),
      grid: v.optional(v.pipe(v.string(), v.minLength(1), v.description("Triton configs: the launch grid, e.g. 'cdiv(M, BLOCK_M), 1, 1'"))),
      atol: Tol.atol,
      rtol: Tol.rtol,
      dtype: Tol.dtype,
      multiset: Tol.multiset,
      flushL2: FlushL2,
      // eval's run options, as verbs.md's table gives them (nu7 #7: refused as unknown arguments)
      runs: Runs,
      noVerify: NoVerify,
      allowVersionMismatch: VersionMismatch().allowVersionMismatch,
      requireGpu: v.optional(
        v.pipe(
          v.boolean(),
          v.description(
            "Stop at once (E_NO_GPU, before any build) when the server's machine has no usable GPU; without it every candidate is built and each built one is an E_NO_GPU record",
          ),
        ),
      ),
      buildOnly: v.optional(
        v.pipe(
          v.boolean(),
          v.description(
            "Build every candidate and judge none (no GPU needed): each that builds is a record of verdict built, with its registers and module digest",
          ),
        ),
      ),
      timeout: Bounded(
        "The watchdog's floor (s): a candidate's launches are killed past 100× the captured kernel time per launch, never sooner (default 10); its first launch alone past 100× that time, never sooner than 1 s",
        86_400,
      ),
      buildTimeout: Bounded(
        "Each candidate's build is killed past this many seconds: a compile-error with build.timedOut (default and most: 600, a confined build's own limit, which an agent may only lower)",
        600,
      ),
    }),
    argv: (a: EvaluateIn) => [
      "eval",
      a.dir,
      ...(a.inputs ?? []).map((d) => (d.startsWith("-") ? `./${d}` : d)),
      "--json",
      "--confine",
      ...(a.requireGpu ? ["--require-gpu"] : []),
      ...(a.buildOnly ? ["--build-only"] : []),
      ...(a.iters !== undefined ? ["--iters", String(a.iters)] : []),
      ...(a.gpus !== undefined ? [`--gpus=${a.gpus}`] : []),
      ...(a.workersPerGpu !== undefined ? ["--workers-per-gpu", String(a.workersPerGpu)] : []),
      ...(a.grid !== undefined ? [`--grid=${a.grid}`] : []),
      ...(a.atol !== undefined ? ["--atol", String(a.atol)] : []),
      ...(a.rtol !== undefined ? ["--rtol", String(a.rtol)] : []),
      ...(a.dtype !== undefined ? [`--dtype=${a.dtype}`] : []),
      ...(a.multiset ?? []).map((r) => `--multiset=${r}`),
      ...runArgv(a),
      ...(a.allowVersionMismatch ? ["--allow-version-mismatch"] : []),
      ...(a.timeout !== undefined ? ["--timeout", String(a.timeout)] : []),
      ...(a.buildTimeout !== undefined ? ["--build-timeout", String(a.buildTimeout)] : []),
    ],
  },
  read_file: {
    title: "Read a text file of a capture folder",
    annotations: READS,
    output: "file",
    description:
      "Read a text file of a capture folder; path is relative to the capture folder (e.g. src/<kernel source>, build.sh, README.md), the same rule as edit_file's. Document kerncap.file/1 with the content.",
    input: v.strictObject({ dir: Dir, path: v.pipe(v.string(), v.minLength(1), v.description("Path relative to the capture folder")) }),
  },
  list_files: {
    title: "List the files of a capture folder",
    annotations: READS,
    output: "files",
    description:
      "List the files and folders under a folder of a capture (path relative to the capture folder, e.g. src; default the whole capture folder), depth first, at most 2000: each with its path (as read_file and edit_file take it), kind (file, folder, link, other), bytes, and editable (edit_file may write it: a source file of the frontend under src/, and kerncap does not generate it); a generated file (a CUDA slice, src/*.kerncap-slice.cu, made from its TU: edit the TU instead) has generated: true and editable: false. No link is followed and build/'s content is not listed. Document kerncap.files/1.",
    input: v.strictObject({
      dir: Dir,
      path: v.optional(v.pipe(v.string(), v.minLength(1), v.description("Folder relative to the capture folder (e.g. src); default the capture folder"))),
    }),
  },
  edit_file: {
    title: "Edit a reproducer source under src/",
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    output: "edit",
    description:
      "Edit a file of the reproducer under the capture's src/ folder: either replace the one occurrence of oldText with newText, or write content as the whole file. path is relative to the capture folder, as for read_file, and must start with src/ (e.g. src/kernel.cu) and name a source file of the capture's frontend (CUDA: .cu .cuh .h .hpp .cpp .cc .c .inc …; Triton: .py): nothing outside src/ can be written, and no kerncap.json, build.sh, pinned.json, repro.py or script at any depth (build.sh and README.md are read-only here). Each part of path is a portable name (letters, digits and ._+-, not starting with -), as kerncap pack requires. Then call validate. Document kerncap.edit/1.",
    input: v.strictObject({
      dir: Dir,
      path: v.pipe(v.string(), v.minLength(1), v.description("Path relative to the capture folder, under src/ (e.g. src/kernel.cu)")),
      oldText: v.optional(v.pipe(v.string(), v.minLength(1), v.description("Exact text to replace; must occur exactly once"))),
      newText: v.optional(v.pipe(v.string(), v.description("The text that replaces oldText (may be empty)"))),
      content: v.optional(v.pipe(v.string(), v.description("The whole new file (instead of oldText/newText)"))),
    }),
  },
} as const satisfies Record<
  string,
  { title: string; annotations: ToolAnnotations; output: DocumentName; description: string; input: v.GenericSchema; argv?: (a: never) => string[] }
>;

/** The tools the server lists (tools/list), in its order: for the verb's help and its start line. */
export const TOOL_NAMES = Object.keys(TOOLS);
export type ToolName = keyof typeof TOOLS;

/**
 * What a valibot schema cannot say in its JSON Schema, by the schema it is of: an evaluate
 * candidate gives exactly one of files, patch, config (nu10 #18d: a schema-driven client could
 * not know; the server's own check says it too, E_USAGE "give exactly one").
 */
const JSON_SCHEMA_EXTRA = new Map<unknown, Record<string, unknown>>([
  [McpCandidate, { oneOf: [{ required: ["files"] }, { required: ["patch"] }, { required: ["config"] }] }],
]);

/** A JSON Schema (draft-07) for MCP: the valibot schema's (with JSON_SCHEMA_EXTRA), without the keys that only a top-level document carries. */
export function toolSchema(s: v.GenericSchema): Record<string, unknown> {
  const { $schema: _, ...js } = toJsonSchema(s, {
    errorMode: "ignore",
    overrideSchema: (c) => {
      const extra = JSON_SCHEMA_EXTRA.get(c.valibotSchema);
      return extra ? { ...c.jsonSchema, ...extra } : undefined;
    },
  }) as Record<string, unknown>;
  return js;
}

/**
 * The arguments that set how a call's kernel is judged: its tolerances, element types and multiset
 * regions. The capture's judging settings are the user's (`kerncap judge DIR`:
 * src/replay/judge-settings.ts); an agent whose edits are judged does not choose them, so the server offers these only
 * when the user started it with `kerncap mcp --agent-judging` (McpTrust.agentJudging).
 */
export const JUDGING_ARGUMENTS = ["atol", "rtol", "dtype", "multiset"] as const;

/** The judging arguments a call names (JUDGING_ARGUMENTS present in `args`). */
export function judgingArguments(args: Record<string, unknown>): string[] {
  return JUDGING_ARGUMENTS.filter((k) => Object.hasOwn(args, k));
}

/** A tool's input schema as the server offers it: without JUDGING_ARGUMENTS unless `agentJudging`. */
export function toolInput(name: ToolName, agentJudging: boolean): v.GenericSchema {
  const input = TOOLS[name].input as unknown as v.ObjectSchema<v.ObjectEntries, undefined> | v.StrictObjectSchema<v.ObjectEntries, undefined>;
  const drop = JUDGING_ARGUMENTS.filter((k) => Object.hasOwn(input.entries, k));
  return agentJudging || !drop.length ? TOOLS[name].input : (v.omit(input, drop as unknown as [string, ...string[]]) as unknown as v.GenericSchema);
}

/**
 * The arguments' problems in plain words: an unknown argument with the ones the tool takes, a
 * missing one, a value of the wrong type or range (valibot's issue for it).
 */
export function argumentProblems(tool: ToolName, issues: v.BaseIssue<unknown>[], input: v.GenericSchema = TOOLS[tool].input): string {
  return issues
    .slice(0, 5)
    .map((i) => {
      const at = v.getDotPath(i) ?? "(arguments)";
      if (i.expected === "never") {
        // the keys of the object the unknown one was given in: a candidate's own (name, patch, files, config) for candidates.0.label (nu13)
        const keys = (i.path ?? []).slice(0, -1).map((p) => p.key);
        const takes = keysAt(input, keys);
        return `unknown argument ${at}; ${keys.length ? `${keys.join(".")} takes` : "the tool takes"}: ${takes.join(", ")}`;
      }
      if (i.received === "undefined") return `missing argument ${at}`;
      return `${oneLine(at)}: ${oneLine(i.message)}`;
    })
    .join("; ");
}

/** The keys of the object schema that `path` (object keys and array indexes) leads to inside `schema` (optional, nullable and array schemas looked through); [] where it leads to none. */
function keysAt(schema: v.GenericSchema, path: unknown[]): string[] {
  let s = schema as unknown as { type?: string; entries?: Record<string, unknown>; wrapped?: unknown; item?: unknown };
  const through = () => {
    while (s && (s.wrapped !== undefined || s.type === "array")) s = (s.wrapped ?? s.item) as typeof s;
  };
  through();
  for (const k of path) {
    if (typeof k === "number") continue; // an array's index: through() took its item
    s = s?.entries?.[String(k)] as typeof s;
    through();
  }
  return Object.keys(s?.entries ?? {});
}

/** replay's and validate's run options as the verbs take them: --runs, --no-verify, --flush-l2. */
function runArgv(a: { runs?: number; noVerify?: boolean; flushL2?: boolean }): string[] {
  return [...(a.runs !== undefined ? ["--runs", String(a.runs)] : []), ...(a.noVerify ? ["--no-verify"] : []), ...(a.flushL2 ? ["--flush-l2"] : [])];
}

/** The tolerance options as the verbs take them (--multiset once per region name: the option repeats). */
function tolArgv(a: ToleranceIn): string[] {
  return [
    ...(a.iters !== undefined ? ["--iters", String(a.iters)] : []),
    ...(a.atol !== undefined ? ["--atol", String(a.atol)] : []),
    ...(a.rtol !== undefined ? ["--rtol", String(a.rtol)] : []),
    ...(a.dtype !== undefined ? [`--dtype=${a.dtype}`] : []),
    ...(a.multiset ?? []).map((r) => `--multiset=${r}`),
  ];
}

/**
 * A tool call's command line with the build gates the MCP server asks of every build an agent
 * starts: validate, build, tune, and profile with build get --confine (a build that reads files outside
 * the capture, its source root and the toolchain is refused; compiler messages keep only the
 * capture's own diagnostics), and --trust only with `trustBuilds` (a received capture's build.sh,
 * or a Triton capture's compile, which imports src/). evaluate's command line says --confine
 * itself (TOOLS.evaluate.argv).
 */
export function gatedArgv(name: ToolName, a: Record<string, unknown>, argv: string[], trustBuilds: boolean): string[] {
  const confined = name === "validate" || name === "build" || name === "tune" || (name === "profile" && a.build === true);
  if (!confined) return argv;
  const at = argv.includes("--") ? argv.indexOf("--") : argv.length;
  return [...argv.slice(0, at), "--confine", ...(trustBuilds ? ["--trust"] : []), ...argv.slice(at)];
}
