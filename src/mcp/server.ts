/**
 * `kerncap mcp`: a Model Context Protocol server (official TypeScript SDK, low-level `Server`)
 * whose tools are the verbs. Each tool runs this same kerncap in a child process with --json
 * (src/util/self-exec.ts selfCommand): every capture, replay and validate gets a fresh process (its own
 * CUDA context and VA space, as on the command line) and the tool returns the verb's JSON
 * document (`schema: "kerncap.<verb>/N"`) as structured content and as text. A verb that exits
 * 2 returns its error document with isError; a mismatch (exit 1) is a result, not an error.
 *
 * Tool inputs are valibot schemas; their JSON Schemas (from @valibot/to-json-schema) are what
 * tools/list announces, and each call's arguments are checked against the same schema.
 * edit_file and read_file touch only files under a capture folder, both taking paths relative to
 * it (edit_file: only the frontend's source files under src/, which must itself resolve inside the
 * folder; never kerncap.json, build.sh, pinned.json, repro.py or a script, at any depth). Every
 * folder a tool is given must be a capture of its own, never one nested inside another capture.
 *
 * Each tool child runs in its own process group (it forwards to its own children's groups: the
 * application, build.sh). It is ended (its group gets SIGTERM, SIGKILL TOOL_GRACE_MS later) when
 * its call is cancelled (notifications/cancelled), when the transport closes (stdin EOF: nobody is
 * left to answer) and at kerncap mcp's own SIGINT/SIGTERM (its group gets that signal), after
 * which `serve` returns (EOF) or throws E_INTERRUPTED (exit 130/143) once every child has exited.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult, type ToolAnnotations } from "@modelcontextprotocol/sdk/types.js";
import { toJsonSchema } from "@valibot/to-json-schema";
import type { Subprocess } from "bun";
import { existsSync, lstatSync, rmSync, statSync, type Stats } from "node:fs";
import { isAbsolute, join, resolve } from "node:path";
import * as v from "valibot";
import { DOCUMENTS, documentId, jsonDocument, type DocumentName } from "../format/documents.ts";
import { selfCommand, selfEnv } from "../util/self-exec.ts";
import { isKerncapError, KerncapError, systemError } from "../errors.ts";
import { assertNotNested, readManifest } from "../format/capture-dir.ts";
import type { Manifest } from "../format/manifest.ts";
import { notAnEditableSource } from "../frontends/index.ts";
import { readInCapture, resolveInCapture, shownPath, writeInCapture } from "../format/paths.ts";
import { unportableName } from "../format/archive.ts";
import { escapeForTerminal } from "../escape.ts";
import { log } from "../log.ts";
import { killGroup, signalExitCode, StopSignals, type StopSignal } from "../process-group.ts";
import { TOOL_VERSION } from "../version.ts";
import { McpCandidate, writeCandidates } from "./evaluate.ts";
import { progressSender, ToolProgress } from "./progress.ts";
import { lines } from "../check/worker.ts";

/** ms between the signal to a tool child's group and SIGKILL (longer than the child's own grace for its children: 5 s). */
const TOOL_GRACE_MS = 10_000;

// string values go to the verb as --name=VALUE and a folder starting with "-" as ./-x, so that no value is read as an option (--help, --json)
const Dir = v.pipe(v.string(), v.minLength(1), v.description("Capture folder (written by kerncap run)"), v.transform((d: string) => (d.startsWith("-") ? `./${d}` : d)));
const Tol = {
  iters: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0), v.description("Timed launches after the checked one"))),
  atol: v.optional(v.pipe(v.number(), v.description("Absolute tolerance per element (default: the capture's judging settings, kerncap judge, else 0)"))),
  rtol: v.optional(v.pipe(v.number(), v.description("Relative tolerance per element (default: the capture's judging settings, else 0)"))),
  dtype: v.optional(v.pipe(v.string(), v.description("Element type where the signature gives none (fp32, fp16, bf16, …), or REGION=T for one region (default: the capture's judging settings, else fp32)"))),
  multiset: v.optional(
    v.pipe(v.array(v.pipe(v.string(), v.minLength(1))), v.description("Regions to compare as multisets of elements (atomic append, compaction): each N (inspect's order), a VA 0x… inside it, param:N, changed or all (--multiset)")),
  ),
};
const Nat = (what: string, min = 0) => v.optional(v.pipe(v.number(), v.integer(), v.minValue(min), v.description(what)));
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
 * outputSchema, with the error document: src/cli/documents.ts), and the kerncap arguments it runs
 * (or a local action).
 */
const TOOLS = {
  list: {
    title: "List the kernels an application launches",
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    output: "list",
    description: "Run an application with the capture library in count-only mode; returns every kernel it launched (name, count, grid, block, module). Document kerncap.list/1.",
    input: v.strictObject({ app: App, cwd: v.optional(v.string()) }),
    argv: (a: { app: string[] }) => ["list", "--json", "--", ...a.app],
  },
  run: {
    title: "Capture a kernel launch from an application",
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
    output: "run",
    description: "Run an application and capture the Nth launch of a kernel (POSIX ERE on the mangled or demangled name) into a capture folder with a reproducer project. Document kerncap.run/1.",
    input: v.strictObject({
      app: App,
      kernel: v.optional(v.pipe(v.string(), v.description("POSIX extended regex for the kernel name"))),
      dispatch: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0), v.description("0-based index among the matching launches"))),
      out: v.optional(v.pipe(v.string(), v.description("Capture folder to write (default kerncap-capture)"))),
      force: v.optional(v.pipe(v.boolean(), v.description("Replace a previous capture at out"))),
      exitAfterCapture: v.optional(v.boolean()),
      sourceRoot: v.optional(v.pipe(v.string(), v.description("CUDA: the app's source tree"))),
      compileCommands: v.optional(v.pipe(v.string(), v.description("CUDA: compile_commands.json or its folder"))),
      captureAll: v.optional(v.pipe(v.boolean(), v.description("Capture the dispatch'th launch of every distinct kernel that kernel matches (all without it), one folder each inside out"))),
      maxCaptures: Nat("With captureAll: at most this many captures (default 64)", 1),
      launchCount: Nat("Capture this many consecutive matching launches from dispatch on, one folder each inside out (ncu's --launch-count; default 1)", 1),
      countBenchmarks: v.optional(v.pipe(v.boolean(), v.description("Triton: let dispatch count (and take) the autotuner's benchmark launches too"))),
      rank: Nat("Multi-process jobs: capture only in the process of this rank (RANK, LOCAL_RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID)"),
      process: Nat("Multi-process jobs: capture only in the Nth process (0-based) that initializes CUDA"),
      cwd: v.optional(v.string()),
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
    description: "Read a capture: the manifest (kernel, launch, parameters, regions, device) and the integrity verdict (verify: every stored memory chunk's kc64 too). Document kerncap.inspect/1.",
    input: v.strictObject({ dir: Dir, verify: v.optional(v.boolean()) }),
    argv: (a: { dir: string; verify?: boolean }) => ["inspect", a.dir, "--json", ...(a.verify ? ["--verify"] : [])],
  },
  replay: {
    title: "Replay a capture on the GPU and compare",
    annotations: READS,
    output: "replay",
    description: "Replay the captured kernel at its captured VAs in a fresh process; compares every region with the app's after state (verdict match/mismatch) and times it. Document kerncap.replay/1.",
    input: v.strictObject({
      dir: Dir,
      ...Tol,
      runs: Nat("Checked launches from the before state (default 3, 8 once they differ)", 1),
      noVerify: v.optional(v.pipe(v.boolean(), v.description("Skip the capture's checksums (faster for large captures; a damaged file goes unnoticed)"))),
      flushL2: v.optional(v.pipe(v.boolean(), v.description("Flush L2 (256 MiB memset) before each timed launch"))),
    }),
    argv: (a: { dir: string; runs?: number; noVerify?: boolean; flushL2?: boolean } & ToleranceIn) => [
      "replay",
      a.dir,
      "--json",
      ...tolArgv(a),
      ...(a.runs !== undefined ? ["--runs", String(a.runs)] : []),
      ...(a.noVerify ? ["--no-verify"] : []),
      ...(a.flushL2 ? ["--flush-l2"] : []),
    ],
  },
  validate: {
    title: "Rebuild the edited reproducer, replay and compare",
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    output: "validate",
    description: "Rebuild the (edited) reproducer with the capture's build.sh, replay the rebuilt kernel on the captured memory, compare with the app's after state. A compile error comes back as the error document with the compiler's message. Document kerncap.validate/1.",
    input: v.strictObject({ dir: Dir, ...Tol, force: v.optional(v.pipe(v.boolean(), v.description("Rebuild even when the toolchain differs from the capture's"))) }),
    argv: (a: { dir: string; force?: boolean } & ToleranceIn) => ["validate", a.dir, "--json", ...tolArgv(a), ...(a.force ? ["--allow-version-mismatch"] : [])],
  },
  profile: {
    title: "Profile the replayed launch with Nsight Compute",
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    output: "profile",
    description:
      "Nsight Compute on the replay of the captured launch only (no application): writes DIR/profile/NAME.ncu-rep and returns the key figures (duration µs, SM and memory throughput % of peak, achieved occupancy %, registers per thread, DRAM bytes, the limiter: compute, memory or latency). build: profile the reproducer's rebuilt kernel instead (built as validate builds it). ncu locks the clocks to base and flushes the caches by default: clockControl/cacheControl none to compare with the app's time. Document kerncap.profile/1.",
    input: v.strictObject({
      dir: Dir,
      name: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z0-9_][A-Za-z0-9._-]{0,99}$/), v.description("Report name: DIR/profile/NAME.ncu-rep (default replay, or build with build)"))),
      build: v.optional(v.pipe(v.boolean(), v.description("Profile the reproducer's rebuilt kernel (validate's build of the edited source)"))),
      force: v.optional(v.pipe(v.boolean(), v.description("With build: rebuild even when the toolchain differs from the capture's"))),
      metrics: v.optional(v.pipe(v.array(v.pipe(v.string(), v.regex(/^[A-Za-z0-9_.:]+$/))), v.description("ncu metrics to collect beside kerncap's own (e.g. sm__warps_active.avg.pct_of_peak_sustained_active)"))),
      set: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z0-9_-]+$/), v.description("ncu section set (basic, detailed, full, …: ncu --set)"))),
      clockControl: v.optional(v.pipe(v.picklist(["base", "none"]), v.description("ncu --clock-control (default base: clocks locked to base)"))),
      cacheControl: v.optional(v.pipe(v.picklist(["all", "none"]), v.description("ncu --cache-control (default all: caches flushed before the launch)"))),
    }),
    argv: (a: ProfileIn) => {
      const ncu = [...(a.set !== undefined ? ["--set", a.set] : []), ...(a.metrics?.length ? ["--metrics", a.metrics.join(",")] : []), ...(a.clockControl ? ["--clock-control", a.clockControl] : []), ...(a.cacheControl ? ["--cache-control", a.cacheControl] : [])];
      return ["profile", a.dir, "--json", ...(a.name !== undefined ? [`--name=${a.name}`] : []), ...(a.build ? ["--build"] : []), ...(a.force ? ["--allow-version-mismatch"] : []), ...(ncu.length ? ["--", ...ncu] : [])];
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
      config: v.optional(v.pipe(v.array(v.pipe(v.string(), v.minLength(1))), v.description("Config spaces, each 'NAME=V1,V2 NAME2=V3,…' expanded as a product; several: their union (--config)"))),
      define: v.optional(v.pipe(v.array(v.pipe(v.string(), v.minLength(1))), v.description("CUDA: macros, each 'NAME=V1,V2' (-DNAME=V for each value; several: their product)"))),
      maxrregcount: v.optional(v.pipe(v.array(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(255))), v.minLength(1), v.description("CUDA: nvcc -maxrregcount values"))),
      nvccFlags: v.optional(v.pipe(v.array(v.string()), v.description("CUDA: alternatives of extra nvcc flags, one per config ('' for none), device code generation flags only, e.g. ['-Xptxas=-O1', '-Xptxas=-O3']"))),
      grid: v.optional(v.pipe(v.string(), v.minLength(1), v.description("Triton: launch grid of a config, e.g. 'cdiv(M, BLOCK_M), cdiv(N, BLOCK_N)'"))),
      iters: v.optional(v.pipe(v.number(), v.integer(), v.minValue(5), v.description("Timed rounds, one launch of every config each (default 20)"))),
      jobs: Nat("Parallel builds (default: the CPU count)", 1),
      atol: Tol.atol,
      rtol: Tol.rtol,
      flushL2: v.optional(v.pipe(v.boolean(), v.description("Flush L2 before each timed launch"))),
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
      ...(a.flushL2 ? ["--flush-l2"] : []),
    ],
  },
  evaluate: {
    title: "Evaluate many candidate kernels on the captured memory",
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    output: "eval",
    description:
      "Many candidate versions of the captured kernel in one call (kerncap eval): each candidate (files that replace files of src/, a unified diff against src/, or a Triton config) is built in its own private copy of the reproducer (confined, as validate's: a received or Triton capture's only with --trust-builds; the capture's own files are not changed), then judged on every input (dir and inputs: captures of the same kernel; a candidate is right only when right on all) against the app's after state and timed against the captured module. Each ends as match (speedup with its interval, registers, stack frame), mismatch (first differing region), fault, timeout (a hung kernel killed), compile-error (the compiler's message), or layout-change. Returns them ranked. Send a progressToken: the call reports each finished candidate. Document kerncap.eval/1.",
    input: v.strictObject({
      dir: Dir,
      inputs: v.optional(v.pipe(v.array(v.pipe(v.string(), v.minLength(1))), v.description("More capture folders (or capture sets) of the same kernel to judge every candidate on"))),
      candidates: v.pipe(v.array(McpCandidate), v.minLength(1), v.maxLength(1024), v.description("The candidates")),
      iters: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.description("Timed launches of each candidate and of the captured module, interleaved (default 20)"))),
      gpus: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z0-9-]+(,[A-Za-z0-9-]+)*$/), v.description("GPUs for the workers, as CUDA_VISIBLE_DEVICES takes them: 0,1"))),
      workersPerGpu: Nat("Worker processes per GPU (default 1)", 1),
      grid: v.optional(v.pipe(v.string(), v.minLength(1), v.description("Triton configs: the launch grid, e.g. 'cdiv(M, BLOCK_M), 1, 1'"))),
      atol: Tol.atol,
      rtol: Tol.rtol,
    }),
    argv: (a: EvaluateIn) => [
      "eval",
      a.dir,
      ...(a.inputs ?? []).map((d) => (d.startsWith("-") ? `./${d}` : d)),
      "--json",
      "--confine",
      ...(a.iters !== undefined ? ["--iters", String(a.iters)] : []),
      ...(a.gpus !== undefined ? [`--gpus=${a.gpus}`] : []),
      ...(a.workersPerGpu !== undefined ? ["--workers-per-gpu", String(a.workersPerGpu)] : []),
      ...(a.grid !== undefined ? [`--grid=${a.grid}`] : []),
      ...(a.atol !== undefined ? ["--atol", String(a.atol)] : []),
      ...(a.rtol !== undefined ? ["--rtol", String(a.rtol)] : []),
    ],
  },
  read_file: {
    title: "Read a text file of a capture folder",
    annotations: READS,
    output: "file",
    description: "Read a text file of a capture folder; path is relative to the capture folder (e.g. src/<kernel source>, build.sh, README.md), the same rule as edit_file's. Document kerncap.file/1 with the content.",
    input: v.strictObject({ dir: Dir, path: v.pipe(v.string(), v.minLength(1), v.description("Path relative to the capture folder")) }),
  },
  edit_file: {
    title: "Edit a reproducer source under src/",
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    output: "edit",
    description: "Edit a file of the reproducer under the capture's src/ folder: either replace the one occurrence of oldText with newText, or write content as the whole file. path is relative to the capture folder, as for read_file, and must start with src/ (e.g. src/kernel.cu) and name a source file of the capture's frontend (CUDA: .cu .cuh .h .hpp .cpp .cc .c .inc …; Triton: .py): nothing outside src/ can be written, and no kerncap.json, build.sh, pinned.json, repro.py or script at any depth (build.sh and README.md are read-only here). Each part of path is a portable name (letters, digits and ._+-, not starting with -), as kerncap pack requires. Then call validate. Document kerncap.edit/1.",
    input: v.strictObject({
      dir: Dir,
      path: v.pipe(v.string(), v.minLength(1), v.description("Path relative to the capture folder, under src/ (e.g. src/kernel.cu)")),
      oldText: v.optional(v.pipe(v.string(), v.minLength(1), v.description("Exact text to replace; must occur exactly once"))),
      newText: v.optional(v.string()),
      content: v.optional(v.pipe(v.string(), v.description("The whole new file (instead of oldText/newText)"))),
    }),
  },
} as const satisfies Record<string, { title: string; annotations: ToolAnnotations; output: DocumentName; description: string; input: v.GenericSchema; argv?: (a: never) => string[] }>;

/** The tools the server lists (tools/list), in its order: for the verb's help and its start line. */
export const TOOL_NAMES = Object.keys(TOOLS);
type ToolName = keyof typeof TOOLS;

/** A JSON Schema (draft-07) for MCP: the valibot schema's, without the keys that only a top-level document carries. */
function toolSchema(s: v.GenericSchema): Record<string, unknown> {
  const { $schema: _, ...js } = toJsonSchema(s, { errorMode: "ignore" }) as Record<string, unknown>;
  return js;
}

/** A tool's outputSchema: its document, or the error document (what every tool returns with isError). */
function outputSchema(doc: DocumentName): { type: "object"; [k: string]: unknown } {
  return { type: "object", anyOf: [toolSchema(DOCUMENTS[doc]), toolSchema(DOCUMENTS.error)] };
}

/**
 * The arguments' problems in plain words: an unknown argument with the ones the tool takes, a
 * missing one, a value of the wrong type or range (valibot's issue for it).
 */
function argumentProblems(tool: ToolName, issues: v.BaseIssue<unknown>[]): string {
  const takes = Object.keys((TOOLS[tool].input as unknown as { entries: Record<string, unknown> }).entries);
  return issues
    .slice(0, 5)
    .map((i) => {
      const at = v.getDotPath(i) ?? "(arguments)";
      if (i.expected === "never") return `unknown argument ${at}; the tool takes: ${takes.join(", ")}`;
      if (i.received === "undefined") return `missing argument ${at}`;
      return `${at}: ${i.message}`;
    })
    .join("; ");
}
type ProfileIn = { dir: string; name?: string; build?: boolean; force?: boolean; metrics?: string[]; set?: string; clockControl?: "base" | "none"; cacheControl?: "all" | "none" };
type TuneIn = { dir: string; config?: string[]; define?: string[]; maxrregcount?: number[]; nvccFlags?: string[]; grid?: string; iters?: number; jobs?: number; atol?: number; rtol?: number; flushL2?: boolean };
type EvaluateIn = { dir: string; inputs?: string[]; candidates: McpCandidate[]; iters?: number; gpus?: string; workersPerGpu?: number; grid?: string; atol?: number; rtol?: number };
type ToleranceIn = { iters?: number; atol?: number; rtol?: number; dtype?: string; multiset?: string[] };
type RunIn = { app: string[]; kernel?: string; dispatch?: number; out?: string; force?: boolean; exitAfterCapture?: boolean; sourceRoot?: string; compileCommands?: string; captureAll?: boolean; maxCaptures?: number; launchCount?: number; countBenchmarks?: boolean; rank?: number; process?: number };

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

function result(doc: Record<string, unknown>, isError = false, extra?: string): CallToolResult {
  return { content: [{ type: "text", text: JSON.stringify(doc, null, 2) }, ...(extra ? [{ type: "text" as const, text: extra }] : [])], structuredContent: doc, isError };
}

function errorResult(e: unknown): CallToolResult {
  const k = isKerncapError(e) ? e : (systemError(e) ?? new KerncapError("E_INTERNAL", `internal error: ${(e as Error).message}`));
  return result(jsonDocument("error", { error: { code: k.code, message: k.message, hint: k.hint ?? null } }), true);
}

/**
 * The tool children running now, each the leader of its own process group (spawned detached).
 * `stop` sends a group its first signal (later ones are ignored: a second signal would make the
 * child kill its own children at once) and SIGKILL after TOOL_GRACE_MS; `settled` waits for all.
 */
export class ToolChildren {
  private running = new Map<number, { exited: Promise<unknown>; stopped: boolean; timer?: ReturnType<typeof setTimeout> }>();

  /** Track p until it exits. */
  add(p: Subprocess): void {
    const c = { exited: p.exited, stopped: false } as { exited: Promise<unknown>; stopped: boolean; timer?: ReturnType<typeof setTimeout> };
    this.running.set(p.pid, c);
    void p.exited.finally(() => {
      if (c.timer) clearTimeout(c.timer);
      this.running.delete(p.pid);
    });
  }

  /** End one child's group (pid: the child's), or every group when pid is undefined. */
  stop(sig: StopSignal, pid?: number): void {
    for (const [id, c] of this.running) {
      if ((pid !== undefined && id !== pid) || c.stopped) continue;
      c.stopped = true;
      killGroup(id, sig);
      c.timer = setTimeout(() => killGroup(id, "SIGKILL"), TOOL_GRACE_MS);
      c.timer.unref?.();
    }
  }

  /** SIGKILL every group now (a second signal to kerncap mcp). */
  kill(): void {
    for (const id of this.running.keys()) killGroup(id, "SIGKILL");
  }

  get size(): number {
    return this.running.size;
  }

  /** Resolves when every child running now has exited. */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.running.values()].map((c) => c.exited));
  }
}

/** The working folder a tool child runs in. @throws KerncapError E_USAGE when it is not a folder */
function toolCwd(cwd: string | undefined): string {
  if (cwd === undefined) return process.cwd();
  const d = resolve(cwd);
  if (!existsSync(d) || !statSync(d).isDirectory()) throw new KerncapError("E_USAGE", `cwd ${d} ${existsSync(d) ? "is not a folder" : "does not exist"}`, { hint: "Give an existing folder as cwd (the application's working folder), or leave cwd out." });
  return d;
}

/**
 * Run `kerncap ARGV` (a child process, its own process group, tracked in `children` and ended
 * when `signal` aborts) and return its JSON document (a verb that streams JSON Lines, eval: its
 * last line); stderr's tail goes along on failure. `progress` gets every stderr line as it comes
 * and heartbeats while the child runs (./progress.ts).
 * @throws KerncapError E_USAGE (cwd), E_TOOL when kerncap cannot be started
 */
async function runVerb(argv: string[], cwd: string | undefined, children: ToolChildren, signal?: AbortSignal, progress?: ToolProgress): Promise<CallToolResult> {
  const env = selfEnv();
  const dir = toolCwd(cwd);
  const cmd = [...selfCommand(), ...argv];
  if (signal?.aborted) throw new KerncapError("E_INTERRUPTED", `kerncap ${argv[0]} was cancelled before it started`);
  let p: Subprocess<"ignore", "pipe", "pipe">;
  try {
    p = Bun.spawn(cmd, { cwd: dir, env, stdin: "ignore", stdout: "pipe", stderr: "pipe", detached: true });
  } catch (e) {
    // E2BIG: the caller's arguments are past the kernel's limit on a command line, not a broken installation
    if ((e as NodeJS.ErrnoException).code === "E2BIG" || /E2BIG|argument list too long/i.test(String((e as Error).message))) {
      const longest = Math.max(...argv.map((a) => Buffer.byteLength(a)));
      throw new KerncapError("E_USAGE", `the arguments of ${argv[0]} are too long for a command line (the longest has ${longest} bytes)`, { hint: "Give shorter arguments (a path, a kernel pattern); file contents go through edit_file." });
    }
    throw new KerncapError("E_TOOL", `cannot start kerncap ${argv[0]} (${cmd[0]}) in ${dir}: ${(e as Error).message}`, { hint: "Check the kerncap installation (kerncap doctor); the MCP server runs its verbs with the same executable." });
  }
  children.add(p);
  const cancel = () => children.stop("SIGTERM", p.pid);
  signal?.addEventListener("abort", cancel, { once: true });
  let out: string, err: string, code: number;
  progress?.start();
  try {
    [out, err, code] = await Promise.all([new Response(p.stdout).text(), progress ? streamLines(p.stderr, (l) => progress.line(l)) : new Response(p.stderr).text(), p.exited]);
  } finally {
    progress?.stop();
    signal?.removeEventListener("abort", cancel);
  }
  let doc: Record<string, unknown>;
  try {
    doc = lastDocument(out);
  } catch {
    return errorResult(new KerncapError("E_INTERNAL", `kerncap ${argv[0]} printed no JSON document (exit ${code}): ${err.trim().split("\n").slice(-5).join(" | ")}`));
  }
  const tail = err.trim() ? `stderr (last lines):\n${err.trim().split("\n").slice(-40).join("\n")}` : undefined;
  return result(doc, code === 2 || code > 2, code >= 2 ? tail : undefined);
}

/** A child's stderr, whole, with each line handed to `onLine` as it comes. */
async function streamLines(stream: ReadableStream<Uint8Array>, onLine: (l: string) => void): Promise<string> {
  let all = "";
  for await (const l of lines(stream)) {
    all += `${l}\n`;
    onLine(l);
  }
  return all;
}

/** The verb's JSON document: stdout whole, or its last line when it streams JSON Lines (eval --json). @throws SyntaxError when neither is JSON */
function lastDocument(out: string): Record<string, unknown> {
  try {
    return JSON.parse(out);
  } catch (e) {
    const last = out.trim().split("\n").pop();
    if (!last) throw e;
    return JSON.parse(last);
  }
}

/**
 * A capture folder and a path inside it, by the capture path rule (src/format/paths.ts: no link
 * followed, a regular file with one name when it exists); under `sub` when given (`sub/` must be a
 * real folder of the capture). `shown`: the path relative to the capture folder; `stats`: its
 * lstat, undefined when there is no such file yet.
 * @throws KerncapError E_NOT_CAPTURE / E_MANIFEST* (the folder), E_NO_REPRODUCER (no `sub`/),
 *   E_USAGE (outside, or not under `sub`/), E_UNSAFE_PATH (a link, a hard link, a FIFO, a NUL …)
 */
function capturePath(dirArg: string, rel: string, sub?: string): { dir: string; shown: string; stats?: Stats; manifest: Manifest } {
  const dir = resolve(dirArg);
  const manifest = readManifest(dir); // a capture folder of its own (not nested in another), or the reader's own error
  if (sub) {
    const s = lstatSync(join(dir, sub), { throwIfNoEntry: false });
    if (!s) throw new KerncapError("E_NO_REPRODUCER", `${dir} has no ${sub}/ folder: this capture has no reproducer sources to edit`, { hint: "Capture again with the kernel's source available (CUDA: --source-root or --compile-commands); read_file reads the rest of the folder." });
    if (!s.isDirectory()) throw new KerncapError("E_USAGE", `${dir}/${sub} is ${s.isSymbolicLink() ? "a symbolic link" : "not a folder"}: edit_file edits only files inside the capture folder, reached through its own folders (no link followed)`, { hint: `Replace ${sub} with a folder holding the sources.` });
  }
  // one rule for both file tools: `rel` is relative to the capture folder; under `sub`, it must start with sub/
  const norm = rel.replace(/^(\.\/)+/, "");
  if (sub && (norm === sub || norm === `${sub}/`)) throw new KerncapError("E_USAGE", `${rel} names the ${sub}/ folder itself`, { hint: `Give a file under it, e.g. ${sub}/kernel.cu.` });
  if (sub && !norm.startsWith(`${sub}/`)) {
    throw new KerncapError("E_USAGE", `${shownPath(rel)} is not under ${sub}/: paths are relative to the capture folder, and only files under ${sub}/ can be edited`, {
      hint:
        isAbsolute(rel) || rel.split(/[\\/]/).includes("..")
          ? `Give a path such as ${sub}/kernel.cu.`
          : norm.split("/")[0]!.toLowerCase() === sub
            ? `Did you mean ${sub}/${norm.split("/").slice(1).join("/")}? (paths are case-sensitive)`
            : existsSync(join(dir, norm)) && !existsSync(join(dir, sub, norm))
              ? `${norm} is the capture's own file, not a reproducer source: read it with read_file; only the sources under ${sub}/ can be edited.`
              : `Did you mean ${sub}/${norm}? (build.sh, README.md and the rest of the folder can be read with read_file, not edited.)`,
    });
  }
  if (isAbsolute(rel) || rel.split(/[\\/]/).includes("..")) throw new KerncapError("E_USAGE", `${shownPath(rel)} is not a path inside ${sub ? `${dir}/${sub}` : dir}`, { hint: sub ? `Give a path relative to the capture folder without .. (e.g. ${sub}/kernel.cu); only files under ${sub}/ can be edited.` : "Give a path relative to the capture folder, without .. (e.g. src/kernel.cu, build.sh)." });
  const { stats } = resolveInCapture(dir, norm); // a folder is refused there too: not a regular file
  return { dir, shown: norm.split("/").filter((x) => x && x !== ".").join("/"), stats, manifest };
}

/** The largest text read_file returns and edit_file writes (bytes): what one can write, the other reads back. */
const TEXT_MAX = 4 << 20;

/** Refuse a file that is not text: a NUL byte, or bytes that are not UTF-8 (an edit would replace them with U+FFFD). */
function assertText(b: Buffer, shown: string, verb: "read_file returns" | "edit_file edits"): void {
  let utf8 = true;
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(b);
  } catch {
    utf8 = false;
  }
  if (b.includes(0) || !utf8) throw new KerncapError("E_USAGE", `${shown} is a binary file${utf8 ? "" : " (not UTF-8)"}`, { hint: `${verb} text files (sources, build.sh, README.md).` });
}

function readFileTool(a: { dir: string; path: string }): CallToolResult {
  const { dir, shown, stats } = capturePath(a.dir, a.path);
  if (!stats) throw new KerncapError("E_USAGE", `${shown} is not a file in ${dir}`, { hint: "List the reproducer's files with inspect (manifest source) or read README.md." });
  const size = stats.size;
  if (size > TEXT_MAX) throw new KerncapError("E_USAGE", `${shown} has ${size} bytes; read_file returns text files up to 4 MiB`, { hint: "Read a smaller file; memory images and modules are not text (use inspect and replay for those)." });
  const b = readInCapture(dir, shown, TEXT_MAX)!;
  assertText(b, shown, "read_file returns");
  return result(jsonDocument("file", { dir, path: shown, bytes: size, content: b.toString("utf8") }));
}

function editFileTool(a: { dir: string; path: string; oldText?: string; newText?: string; content?: string }): CallToolResult {
  const { dir, shown, stats, manifest } = capturePath(a.dir, a.path, "src");
  // names are data: a name pack and unpack refuse (a space, $(…), U+202E…) would make the whole capture unpackable, and can reach nvcc's shell
  const unportable = unportableName(shown);
  if (unportable) {
    throw new KerncapError("E_PACK_NAME", `edit_file writes only portable names, and ${escapeForTerminal(JSON.stringify(shown), { oneLine: true })} ${unportable}, which kerncap pack and unpack refuse`, {
      hint: "Name the file with letters, digits and ._+- only in each part (no part starting with -), e.g. src/kernel_v2.cu.",
    });
  }
  // only the frontend's sources: never a file kerncap reads as configuration or runs, at any depth (a planted src/x/kerncap.json + build.sh)
  const why = notAnEditableSource(manifest, shown);
  if (why) {
    throw new KerncapError("E_NOT_SOURCE", `edit_file writes only the reproducer's source files under src/, and ${shownPath(shown)} is not one: ${why}`, {
      hint: "Edit the kernel's sources (the files README.md names); build.sh, kerncap.json, pinned.json, repro.py and every script are the user's to change, not an agent's.",
    });
  }
  let text: string;
  if (a.content !== undefined) {
    if (a.oldText !== undefined) throw new KerncapError("E_USAGE", "give content, or oldText and newText, not both", { hint: "content replaces the whole file; oldText/newText one passage." });
    text = a.content;
  } else {
    if (a.oldText === undefined || a.newText === undefined) throw new KerncapError("E_USAGE", "give oldText and newText (or content)", { hint: "oldText must occur exactly once in the file." });
    if (!stats) throw new KerncapError("E_USAGE", `${shown} does not exist`, { hint: "Create it with content, or check the path with read_file." });
    if (stats.size > TEXT_MAX) throw new KerncapError("E_USAGE", `${shown} is larger than 4 MiB`, { hint: "edit_file edits text files up to 4 MiB." });
    const raw = readInCapture(dir, shown, TEXT_MAX)!;
    assertText(raw, shown, "edit_file edits");
    const old = raw.toString("utf8");
    const n = old.split(a.oldText).length - 1;
    if (n !== 1) throw new KerncapError("E_USAGE", `oldText occurs ${n} times in ${shown}; it must occur exactly once`, { hint: n ? "Include more surrounding lines to make it unique." : "Read the file again (read_file); the text differs." });
    text = old.replace(a.oldText, () => a.newText!);
  }
  if (Buffer.byteLength(text) > TEXT_MAX) throw new KerncapError("E_USAGE", `the new ${shown} would have ${Buffer.byteLength(text)} bytes; edit_file writes text files up to 4 MiB`, { hint: "read_file reads back at most 4 MiB: keep sources under that." });
  if (a.content !== undefined && stats) {
    if (stats.size > TEXT_MAX) throw new KerncapError("E_USAGE", `${shown} is larger than 4 MiB`, { hint: "edit_file edits text files up to 4 MiB." });
    assertText(readInCapture(dir, shown, TEXT_MAX)!, shown, "edit_file edits"); // never replace a binary file wholesale either
  }
  writeInCapture(dir, shown, text); // a temporary file renamed over the name: nothing written through a link
  return result(jsonDocument("edit", { dir, path: shown, bytes: Buffer.byteLength(text) }));
}

/** How far `kerncap mcp` trusts what its agent asks for (docs/security.md). */
export interface McpTrust {
  /** `--trust-builds`: validate, tune and profile's build may run the build.sh of a received capture (--trust). */
  trustBuilds?: boolean;
}

/** The first string anywhere in a tool's arguments that holds a NUL byte (no path, pattern or argv word can), as its dot path. */
function nulArgument(x: unknown, at = ""): string | undefined {
  if (typeof x === "string") return x.includes("\0") ? at || "(arguments)" : undefined;
  if (Array.isArray(x)) {
    for (let i = 0; i < x.length; i++) {
      const r = nulArgument(x[i], `${at}[${i}]`);
      if (r) return r;
    }
  } else if (x && typeof x === "object") {
    for (const [k, y] of Object.entries(x)) {
      const r = nulArgument(y, at ? `${at}.${k}` : k);
      if (r) return r;
    }
  }
  return undefined;
}

/**
 * The evaluate tool: the candidates written into a private temporary folder (./evaluate.ts),
 * `kerncap eval --confine` run on them (its builds confined; a received capture's, or a Triton
 * capture's, only with --trust-builds), the folder removed after.
 */
async function evaluateTool(a: EvaluateIn, children: ToolChildren, trust: McpTrust, signal?: AbortSignal, progress?: ToolProgress): Promise<CallToolResult> {
  const dir = resolve(a.dir);
  readManifest(dir); // a capture folder, or the reader's own error: nothing is copied from elsewhere
  const { folder, args } = writeCandidates(dir, a.candidates);
  try {
    const r = await runVerb([...TOOLS.evaluate.argv(a), ...(trust.trustBuilds ? ["--trust"] : []), ...args], undefined, children, signal, progress);
    // eval exits 2 when a candidate could not be judged; the evaluation itself is the result (its candidates say which)
    return (r.structuredContent as { schema?: unknown } | undefined)?.schema === documentId("eval") ? { ...r, isError: false } : r;
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}

/**
 * The MCP server with kerncap's tools; connect it to a transport (stdio, or in-memory in tests).
 * `children`: where the tool children are tracked (a call's child is ended when the call is
 * cancelled or the transport closes). Every build runs confined (validate, tune and profile with
 * build get --confine: a build that reads files outside the capture, its source root and the
 * toolchain is refused, and compiler messages keep only diagnostics of the capture's own files), and
 * a received capture's build.sh (or a Triton capture's compile, which imports src/) runs only with
 * `trust.trustBuilds` (--trust).
 */
export function createMcpServer(children = new ToolChildren(), trust: McpTrust = {}, o: { progressMs?: number } = {}): Server {
  const server = new Server({ name: "kerncap", version: TOOL_VERSION }, { capabilities: { tools: {} }, instructions: "Capture a GPU kernel from an application (run), inspect and replay it, edit its reproducer under src/ (edit_file) and check the edit with validate; profile it with Nsight Compute (profile) and sweep its configs, macros or nvcc flags (tune); judge many candidate versions of the kernel in one call (evaluate). Every tool returns a JSON document with a schema id." });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: Object.entries(TOOLS).map(([name, t]) => ({
      name,
      title: t.title,
      description: t.description,
      inputSchema: toolSchema(t.input) as { type: "object" },
      outputSchema: outputSchema(t.output),
      annotations: { title: t.title, ...t.annotations },
    })),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (req, extra): Promise<CallToolResult> => {
    const name = req.params.name;
    if (!Object.hasOwn(TOOLS, name)) return errorResult(new KerncapError("E_USAGE", `no tool named ${JSON.stringify(name)}`, { hint: `Tools: ${Object.keys(TOOLS).join(", ")}.` }));
    const t = TOOLS[name as ToolName];
    const parsed = v.safeParse(t.input, req.params.arguments ?? {});
    if (!parsed.success) {
      return errorResult(new KerncapError("E_USAGE", `bad arguments for ${name}: ${argumentProblems(name as ToolName, parsed.issues)}`, { hint: "See the tool's inputSchema (tools/list)." }));
    }
    const a = parsed.output as Record<string, unknown>;
    const nul = nulArgument(req.params.arguments);
    if (nul) return errorResult(new KerncapError("E_USAGE", `bad arguments for ${name}: ${nul} holds a NUL byte, which no path, pattern or command-line word can hold`, { hint: "Give the argument without the NUL byte." }));
    try {
      if (name === "edit_file") return editFileTool(a as Parameters<typeof editFileTool>[0]);
      if (name === "read_file") return readFileTool(a as Parameters<typeof readFileTool>[0]);
      // a capture folder given to a verb is a capture of its own, never a folder inside one (said here, before any child starts; the verb says it again)
      if (typeof a.dir === "string") assertNotNested(resolve(a.dir));
      const send = progressSender(req.params._meta, extra.sendNotification);
      const progress = send ? new ToolProgress(send, `kerncap ${name}`, o.progressMs) : undefined;
      if (name === "evaluate") return await evaluateTool(a as EvaluateIn, children, trust, extra.signal, progress);
      const argv = (t as { argv: (x: unknown) => string[] }).argv(a);
      // every build an agent asks for is confined, and a received capture's (or a Triton capture's, whose build imports src/) runs only with --trust-builds
      const confined = name === "validate" || name === "tune" || (name === "profile" && a.build === true);
      if (confined) argv.splice(argv.includes("--") ? argv.indexOf("--") : argv.length, 0, "--confine", ...(trust.trustBuilds ? ["--trust"] : []));
      return await runVerb(argv, a.cwd as string | undefined, children, extra.signal, progress);
    } catch (e) {
      return errorResult(e);
    }
  });
  return server;
}

/**
 * JSON-RPC 2.0 §5.1: a line that is not JSON gets a -32700 Parse error reply (id null), a JSON
 * value that is not a JSON-RPC message a -32600 Invalid Request. The SDK's stdio transport
 * (shared/stdio.js ReadBuffer) only passes either to transport.onerror (SyntaxError from
 * JSON.parse, ZodError from the message schema) and drops the line; this wraps that hook (set by
 * Server.connect) so the client hears about it too. Call after connect.
 */
/** Transports whose session the SDK ended because a message passed its stdio bound (answerUnreadable). */
const overflowed = new WeakSet<Transport>();

/** The largest JSON-RPC message `kerncap mcp` reads (bytes): edit_file's 4 MiB of content, JSON-escaped at worst 6 bytes a byte, and room. */
export const MCP_MESSAGE_MAX = 64 << 20;

/** Whether the SDK ended this transport's session because a message passed MCP_MESSAGE_MAX. */
export function endedByOversizedMessage(transport: Transport): boolean {
  return overflowed.has(transport);
}

export function answerUnreadable(transport: Transport): void {
  const inner = transport.onerror;
  transport.onerror = (e: Error) => {
    inner?.(e);
    const parse = e instanceof SyntaxError;
    const invalid = !parse && e?.name === "ZodError";
    // the SDK's stdio ReadBuffer drops a message past its bound (maxBufferSize) and says so only to onerror, then closes the transport
    const tooLarge = !parse && !invalid && /ReadBuffer exceeded maximum size/.test(String(e?.message));
    if (tooLarge) {
      overflowed.add(transport);
      log.error(`an MCP message was larger than the stdio transport's bound (${e.message}): dropped, and the SDK's transport ends the session`);
    }
    if (!parse && !invalid && !tooLarge) return;
    const error = tooLarge
      ? { code: -32600, message: `Invalid Request: a message past ${MCP_MESSAGE_MAX >> 20} MiB was dropped (${e.message}) and the session ends; send smaller messages (file contents go through read_file/edit_file, at most 4 MiB)` }
      : parse
        ? { code: -32700, message: `Parse error: ${e.message}` }
        : { code: -32600, message: "Invalid Request: not a JSON-RPC 2.0 message" };
    void transport.send({ jsonrpc: "2.0", id: null, error } as unknown as Parameters<Transport["send"]>[0]).catch(() => {});
  };
}

/**
 * Serve until the transport closes (the client closed stdin) or SIGINT/SIGTERM: either ends the
 * running tool children's groups (the signal, or SIGTERM at a close; SIGKILL after
 * TOOL_GRACE_MS or at a second signal) and returns once they have exited.
 * @throws KerncapError E_INTERRUPTED (exit 130 SIGINT, 143 SIGTERM) after a signal
 */
export async function serve(transport: Transport, trust: McpTrust = {}): Promise<void> {
  const children = new ToolChildren();
  const server = createMcpServer(children, trust);
  const stops = new StopSignals().install();
  const closed = new Promise<void>((res) => (server.onclose = () => res()));
  stops.onStop = (sig) => {
    children.stop(sig);
    void server.close();
  };
  stops.onKill = () => children.kill();
  let running = 0;
  try {
    await server.connect(transport);
    answerUnreadable(transport);
    await closed;
    running = children.size;
    children.stop("SIGTERM"); // nobody is left to answer: a call's child must not outlive the session
    await children.settled();
  } finally {
    stops.dispose();
  }
  if (stops.signal) throw new KerncapError("E_INTERRUPTED", `kerncap mcp ended by ${stops.signal}${running ? `; the processes of ${running} running tool call${running > 1 ? "s" : ""} were ended` : ""}`, { exitCode: signalExitCode(stops.signal) });
}
