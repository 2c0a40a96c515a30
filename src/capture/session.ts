/**
 * A capture session: everything between "the user named an application" and "a capture folder
 * (or a launch census) exists" — the runtime's Injector (src/capture/injector.ts: CUDA or HSA),
 * the capture library's environment (docs/raw-capture.md), the
 * temp folder `DIR.tmp-<pid>-<token>` and its removal on every path out (an error, Ctrl-C, SIGTERM), the
 * stale temp folders of killed runs, the application run, reading what the library reported
 * (every process's kernels.<pid>.json and error.<pid>.txt, src/capture/census.ts; its progress
 * file, src/capture/progress.ts), the process selection (--rank/--process), CUPTI sharing notes
 * (src/capture/coexist.ts), counting the launches toward --dispatch, and the finalize step.
 * The verbs `run` and `list` only parse their options, call captureKernel/listKernels and report.
 *
 * Nothing is written into the application's working directory: `run` writes only DIR.tmp-<pid>-<token>
 * (renamed to DIR), `list` a folder under $TMPDIR, both removed when the session fails.
 */
import { jsonText } from "../escape.ts";
import { assertOutputPath } from "../format/archive.ts";
import { CAPTURE_SET_FILE, CAPTURE_SET_FORMAT, type CaptureSet } from "../format/capture-set.ts";
import { cpSync, existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { captureLibraryEnv, withoutCaptureSettings } from "../env.ts";
import { privateTempFolder, sharedParentRisk } from "../cache.ts";
import { KerncapError } from "../errors.ts";
import type { Manifest } from "../format/manifest.ts";
import { liveTempWriter, markTemp, removeStaleTemps, tempFor, TEMP_MARKER } from "../leftovers.ts";
import { log } from "../log.ts";
import { signalExitCode, StopSignals } from "../process-group.ts";
import { finalizeCapture, moveIntoPlace, readRaw } from "./finalize.ts";
import { assertNotNested, assertReplaceable } from "../format/capture-dir.ts";
import { compileEre, type PosixRegex } from "../util/posix-regex.ts";
import { removeTemp, resolveApp, runApp, type AppRun, type KernelSeen } from "./run.ts";
import { readCensus, type Census } from "./census.ts";
import { cuptiNotes, SANITIZER_WAY_OUT, toolAsApp } from "./coexist.ts";
import { injectorFor, type PrepareInjection } from "./injector.ts";
import { shellQuote } from "../util/shell-quote.ts";
import { plural } from "../util/format.ts";
import { watchProgress } from "./progress.ts";
import type { ProgressMode } from "../util/progress.ts";
import { nvtxEnv, type NvtxSelection } from "./nvtx.ts";
import { captureEnrichment, captureFiles, captureOptions } from "../frontends/index.ts";
import { explainNoCapture, howAppEnded, warnMissedLaunches, warnPartialMatch } from "./outcome.ts";
export { collectiveRefusal, countedLaunches, graphOnlyMisses, selectionProblem } from "./outcome.ts";
/**
 * Refuse an application command line that starts compute-sanitizer (`kerncap run -- compute-sanitizer APP`):
 * the sanitizer re-launches APP with its own tool injection, which displaces kerncap's library.
 * @throws KerncapError E_TOOL
 */
export function refuseToolAsApp(argv: string[]): void {
  const t = toolAsApp(argv);
  if (!t) return;
  throw new KerncapError(
    "E_TOOL",
    `the application command starts ${t}: it runs the application under its own CUDA tool injection, which kerncap's capture library needs too, so the two cannot share the application`,
    {
      hint: SANITIZER_WAY_OUT,
    },
  );
}
export function applicationExitCode(app: Pick<AppRun, "exitCode" | "signal">): number {
  if (app.signal) return signalExitCode(app.signal);
  return app.exitCode ?? 0;
}
/** Log the CUPTI sharing notes of the censuses (warnings; infos too when `infos`). */
function sayCuptiNotes(c: Census, infos: boolean): void {
  const notes = cuptiNotes(c);
  for (const w of notes.warnings) log.warn(w);
  if (infos) for (const i of notes.infos) log.info(i);
}
/** Say (once per folder) which stale temp folders were removed. */
function removeStale(out: string): void {
  for (const p of removeStaleTemps(out, existsSync(out))) {
    const pid = /\.(?:tmp|old)-(\d+)(?:-[0-9a-z]+)?$/.exec(p)?.[1];
    log.info(`removed ${p}: left by kerncap process ${pid}, which is gone (killed before it could clean up)`);
  }
}
export interface CaptureRequest {
  /** The application command line. */
  argv: string[];
  /** `--runtime cuda|hsa`; undefined: the one this machine has (src/capture/injector.ts). */
  runtime?: string;
  /** Capture folder (relative to the working directory or absolute). */
  out: string;
  /** Replace a previous capture at `out` (never another folder). */
  force: boolean;
  /** POSIX ERE on the mangled and the demangled name; "" matches every kernel. */
  kernel: string;
  /** More targets (`--kernel A --kernel B`): each one's Nth launch becomes a capture of its own. */
  moreKernels?: string[];
  /** The Nth launch of every distinct matching kernel, one capture each (at most maxCaptures). */
  captureAll?: boolean;
  maxCaptures?: number;
  /** This many consecutive matching launches from `dispatch` on (ncu's --launch-count), one capture each; default 1. */
  launchCount?: number;
  /** 0-based index among the application's matching launches. */
  dispatch: number;
  /** Multi-process jobs: only the process of this rank captures (KERNCAP_RANK). */
  rank?: number;
  /** Multi-process jobs: only the Nth process (0-based) that initializes CUDA captures (KERNCAP_PROCESS). */
  process?: number;
  countBenchmarks: boolean;
  exitAfterCapture: boolean;
  /** The library and the shim log to stderr. */
  verbose: boolean;
  /** The application's stdout goes to our stderr (--json keeps stdout for data). */
  stdoutToStderr: boolean;
  /** The library's snapshot progress on stderr (src/util/progress.ts's modes): "live" redrawn about once a second (a terminal), "lines" a line per phase and every few seconds (src/capture/progress.ts), "off" none (--json). */
  progress: ProgressMode;
  /** The values of every frontend's `kerncap run` options (src/frontends/index.ts captureArgs), by option name. */
  frontendArgs: Readonly<Record<string, unknown>>;
  /** --nvtx, --nvtx-include, --nvtx-exclude (src/capture/nvtx.ts): only launches inside those NVTX ranges count. */
  nvtx?: NvtxSelection;
}
export interface CaptureResult {
  /** The capture folder (absolute). */
  dir: string;
  manifest: Manifest;
  /** Several captures (--kernel A --kernel B, --capture-all): each one's folder (inside dir) and manifest; dir then holds CAPTURE_SET_FILE. */
  captures?: { dir: string; manifest: Manifest }[];
  app: AppRun;
  /** Every process's census (the capturing one is manifest.process). */
  census: Census;
}
/**
 * Check the request, run the application with the capture library, and finalize the capture of
 * the matching launch into `out` (written as `out.tmp-<pid>-<token>`, renamed when complete; removed on
 * any failure or signal). Stale `out.tmp-<pid>-<token>` folders of dead kerncap processes are removed
 * first, with a log line each.
 * @returns the manifest and how the application ended (its exit code is not an error here).
 * @throws KerncapError E_USAGE (also --rank with --process), E_APP_NOT_FOUND, E_EXISTS (checked
 *   before the GPU is touched; also an unknown --runtime); what `prepare` (default: the
 *   runtime's Injector, src/capture/injector.ts) throws; E_INTERRUPTED (exit 130 SIGINT, 143 SIGTERM:
 *   the app's process group was ended, nothing was written); E_CAPTURE_FAILED; E_NO_MATCH (no
 *   process admitted by --rank/--process; too few matching launches in any one process; no
 *   matching kernel, with the closest names).
 */
export async function captureKernel(req: CaptureRequest, prepare?: PrepareInjection): Promise<CaptureResult> {
  refuseToolAsApp(req.argv); // by name, before the PATH lookup
  resolveApp(req.argv);
  const injector = injectorFor(req.runtime);
  refuseNvtxOff(req.nvtx, injector.runtime);
  const { pattern, ere, launchCount, out } = checkCaptureRequest(req);
  const frontendOptions = captureOptions(req.frontendArgs); // each frontend's paths, checked before the app runs
  removeStale(out);
  const inj = await (prepare ?? injector.prepare)();
  for (const w of inj.warnings ?? []) log.warn(w);
  const tmp = tempFor(out);
  const stops = new StopSignals().install();
  let ok = false;
  try {
    makeTempFolder(tmp);
    sayRunning(req, pattern, launchCount);
    const progress =
      req.progress === "off"
        ? { stop() {} }
        : watchProgress(tmp, { live: req.progress === "live", draw: (t) => process.stderr.write(t), say: (l) => log.info(l) });
    let app: AppRun;
    try {
      app = await runApp({
        argv: req.argv,
        env: {
          ...withoutCaptureSettings(), // a stale KERNCAP_RANK or an outer run's settings never reach the library
          ...inj.env,
          ...nvtxAppEnv(req.nvtx, inj.env),
          ...captureLibraryEnv({
            out: tmp,
            mode: "capture",
            kernel: [pattern, ...(req.moreKernels ?? [])].filter((x, i) => i === 0 || x).join("\n"),
            captureAll: req.captureAll,
            maxCaptures: req.maxCaptures,
            launchCount,
            dispatch: req.dispatch,
            rank: req.rank,
            process: req.process,
            countBenchmarks: req.countBenchmarks,
            exitAfterCapture: req.exitAfterCapture,
            cuptiPath: inj.cuptiPath,
            log: req.verbose,
          }),
        },
        stdoutToStderr: req.stdoutToStderr,
        stops,
      });
    } finally {
      progress.stop();
    }
    if (app.interrupted) {
      throw new KerncapError("E_INTERRUPTED", `capture interrupted (${app.interrupted}); the application's process group was ended and nothing was written`, {
        exitCode: signalExitCode(app.interrupted),
      });
    }
    const census = readCensus(tmp);
    sayNvtx(census, req.nvtx);
    log.debug(`${census.kernels.length} kernels seen in ${census.processes.length} processes`);
    sayCuptiNotes(census, true);
    const many = Boolean(req.captureAll || (req.moreKernels?.length ?? 0) > 0 || launchCount > 1);
    if (many && existsSync(join(tmp, "captures")) && readdirSync(join(tmp, "captures")).length) {
      const set = await finalizeCaptureSet(tmp, out, req, frontendOptions, stops);
      warnMissedLaunches(set, census, req, launchCount);
      ok = true;
      return { dir: out, manifest: set[0]!.manifest, captures: set, app, census };
    }
    const raw = readRaw(tmp);
    if (!raw) explainNoCapture(census, req, app, ere, pattern);
    warnPartialMatch(census, raw, ere);
    // each frontend's enrichment (src/frontends): Triton claims its cubins (manifest.source,
    // Python reproducer), CUDA locates the source and renders the C++ reproducer
    const enrich = captureEnrichment({ tmpDir: tmp, raw, pattern, command: req.argv }, frontendOptions);
    const interruptedNow = () => {
      if (stops.signal)
        throw new KerncapError("E_INTERRUPTED", `capture interrupted (${stops.signal}) while it was being finalized; nothing was written`, {
          exitCode: signalExitCode(stops.signal),
        });
    };
    const manifest = await finalizeCapture(raw, {
      tmpDir: tmp,
      finalDir: out,
      force: req.force,
      command: req.argv,
      match: pattern,
      ...enrich,
      beforeRename: async (d, mm, final) => {
        interruptedNow();
        await enrich.beforeRename(d, mm, final);
        interruptedNow(); // the last point before the rename: a signal until here leaves nothing
      },
    });
    ok = true;
    return { dir: out, manifest, app, census };
  } finally {
    if (!ok) removeTemp(tmp);
    stops.dispose();
  }
}
/** The capture's temp folder with its kernel/ and memory/ folders, marked as a kerncap temp (src/leftovers.ts). */
function makeTempFolder(tmp: string): void {
  // never through a link planted at the name (tempFor's token makes it unguessable too); no group write whatever the umask (a group-writable capture counts as received: src/format/received.ts)
  mkdirSync(tmp, 0o755);
  mkdirSync(join(tmp, "kernel"), 0o755);
  mkdirSync(join(tmp, "memory"), 0o755);
  markTemp(tmp);
}
/** The line that says what runs and what is captured. */
function sayRunning(req: CaptureRequest, pattern: string, launchCount: number): void {
  const sel = req.rank !== undefined ? ` in rank ${req.rank}` : req.process !== undefined ? ` in process ${req.process}` : "";
  const targets = [pattern, ...(req.moreKernels ?? [])].filter(Boolean).map((p) => JSON.stringify(p));
  const which = launchCount > 1 ? `launches #${req.dispatch} to #${req.dispatch + launchCount - 1}` : `#${req.dispatch}`;
  log.start(
    `running ${req.argv.map(shellQuote).join(" ")} (capture ${targets.length ? targets.join(", ") : "any kernel"}${req.captureAll ? " (every distinct kernel)" : ""} ${which}${sel})`,
  );
}
/**
 * The request's checks that need no application run: the --kernel patterns (POSIX ERE, one per
 * line, at most 64), --rank with --process, --launch-count with several targets, the output
 * folder (replaceable, writable, not inside a capture, not being written by another run).
 * @returns the first pattern, its compiled ERE, the launch count and the output folder (absolute)
 * @throws KerncapError E_USAGE, E_EXISTS
 */
function checkCaptureRequest(req: CaptureRequest): { pattern: string; ere: PosixRegex | undefined; launchCount: number; out: string } {
  const pattern = req.kernel;
  const ere = pattern ? compileEre(pattern) : undefined; // the library's own matching (POSIX ERE)
  for (const k of req.moreKernels ?? []) compileEre(k);
  for (const k of [pattern, ...(req.moreKernels ?? [])]) {
    // the library reads one pattern per line (several --kernel): a newline would split this one
    if (k.includes("\n"))
      throw new KerncapError("E_USAGE", `--kernel ${JSON.stringify(k)} holds a newline`, { hint: "Give each pattern as its own --kernel." });
    if (/\\[dDwWsS]/.test(k))
      log.warn(`--kernel ${k}: POSIX extended regexes have no \\d, \\w or \\s (they match the letter d, w, s); write [0-9], [A-Za-z0-9_], [[:space:]]`);
  }
  if ((req.moreKernels?.length ?? 0) + 1 > 64)
    throw new KerncapError("E_USAGE", "at most 64 --kernel targets", { hint: "Use --capture-all with one --kernel regex instead." });
  if (req.rank !== undefined && req.process !== undefined)
    throw new KerncapError("E_USAGE", "--rank and --process both given", { hint: "Select the capturing process one way: --rank N or --process N." });
  const launchCount = req.launchCount ?? 1;
  if (launchCount > 1 && (req.captureAll || req.moreKernels?.length)) {
    throw new KerncapError(
      "E_USAGE",
      `--launch-count ${launchCount} takes consecutive launches of one --kernel; it does not combine with ${req.captureAll ? "--capture-all" : "several --kernel"}`,
      { hint: "Capture N launches of one kernel (-k NAME -c N), or the Nth launch of several kernels (--kernel A --kernel B), in separate runs." },
    );
  }
  if (!req.out.trim()) throw new KerncapError("E_USAGE", "--out is empty", { hint: "Give the capture folder to write, e.g. --out cap." });
  const out = resolve(req.out);
  if (existsSync(out)) assertReplaceable(out, req.force);
  assertOutputPath(out, "capture folder");
  assertNotNested(out, { output: true }); // a capture written inside another one would be its content, never a capture of its own
  // the capture library (another process) writes the temp folder by its name: in a folder that others can
  // write and that is not sticky, another user could swap it for a folder of links (src/cache.ts sharedParentRisk)
  const shared = sharedParentRisk(out);
  if (shared)
    throw new KerncapError("E_UNSAFE_PATH", `--out ${out}: ${shared}, so another user could swap the folder the capture is written into`, {
      hint: "Capture into a folder only you can write (or a sticky one like /tmp), then move it. A team folder others write should be sticky (chmod +t DIR; mode 3770 with the group's setgid): then no one renames another's entries, and captures there count as their makers'.",
    });
  const writer = liveTempWriter(out);
  if (writer !== undefined) {
    throw new KerncapError("E_EXISTS", `another kerncap run (pid ${writer.pid}) is writing ${out} (${writer.path})`, {
      hint: "Wait for it to finish, or choose another --out.",
    });
  } // a missing, non-folder or read-only parent, before the app runs
  return { pattern, ere, launchCount, out };
}
/** A folder name for capture n of kernel `name`: "<n>-<identifier part of the demangled name>". */
export function captureSubfolder(n: number, name: string): string {
  const base = name.replace(/\(.*$/, "").replace(/<.*$/, "").split(/::|\s/).filter(Boolean).pop() ?? "kernel";
  return `${n}-${base.replace(/[^A-Za-z0-9_]+/g, "_").slice(0, 48) || "kernel"}`;
}
/**
 * Several captures of one run: the library wrote each into tmp/captures/<n>/ (raw.json and its
 * files). Finalize each into tmp/<n>-<name> (its reproducer too), write the set's index, rename tmp
 * to out (an existing out only with force, and only a previous capture or capture set).
 */
async function finalizeCaptureSet(
  tmp: string,
  out: string,
  req: CaptureRequest,
  frontendOptions: Record<string, unknown>,
  stops: StopSignals,
): Promise<{ dir: string; manifest: Manifest }[]> {
  const root = join(tmp, "captures");
  const subs = readdirSync(root)
    .filter((n) => /^\d+$/.test(n))
    .sort((a, b) => Number(a) - Number(b));
  const done: { dir: string; manifest: Manifest }[] = [];
  const patterns = [req.kernel, ...(req.moreKernels ?? [])];
  for (const n of subs) {
    const d = join(root, n);
    const raw = readRaw(d);
    if (!raw) {
      log.warn(`capture ${n} in ${out} did not complete (the application ended or failed during it): left out`);
      continue;
    }
    if (stops.signal)
      throw new KerncapError("E_INTERRUPTED", `capture interrupted (${stops.signal}) while it was being finalized; nothing was written`, {
        exitCode: signalExitCode(stops.signal),
      });
    const name = captureSubfolder(Number(n), raw.kernel.demangled || raw.kernel.name);
    const target = typeof raw.target === "number" && raw.target >= 0 ? raw.target : 0;
    const pattern = patterns[target] ?? req.kernel;
    // what each frontend's enrichment reads (Frontend.captureFiles: files and folders its capture-time code wrote)
    for (const f of captureFiles()) if (existsSync(join(tmp, f))) cpSync(join(tmp, f), join(d, f), { recursive: true, verbatimSymlinks: true });
    const enrich = captureEnrichment({ tmpDir: d, raw, pattern, command: req.argv }, frontendOptions);
    const manifest = await finalizeCapture(raw, {
      tmpDir: d,
      finalDir: join(tmp, name),
      force: false,
      command: req.argv,
      match: pattern,
      ...enrich,
      beforeRename: (dd, mm) => enrich.beforeRename(dd, mm, join(out, name)),
    });
    done.push({ dir: join(out, name), manifest });
  }
  if (!done.length)
    throw new KerncapError("E_CAPTURE_FAILED", "none of the captures of this run completed", { hint: "Run with --verbose for the library's log." });
  rmSync(root, { recursive: true, force: true });
  for (const f of captureFiles()) rmSync(join(tmp, f), { recursive: true, force: true }); // each capture has its copy
  rmSync(join(tmp, TEMP_MARKER), { force: true });
  writeFileSync(
    join(tmp, CAPTURE_SET_FILE),
    jsonText(
      {
        format: CAPTURE_SET_FORMAT,
        version: 1,
        command: req.argv,
        captures: done.map((c) => ({
          dir: basename(c.dir),
          kernel: c.manifest.kernel.demangled || c.manifest.kernel.name,
          launchIndex: c.manifest.kernel.launchIndex,
        })),
      } satisfies CaptureSet,
      2,
    ) + "\n",
  );
  moveIntoPlace(tmp, out, req.force);
  return done;
}
/** NVTX ranges are NVIDIA's: the HSA library has no NVTX injection. */
function refuseNvtxOff(sel: NvtxSelection | undefined, runtime: string): void {
  if (sel && runtime !== "cuda")
    throw new KerncapError("E_USAGE", `--nvtx selects launches by NVIDIA's NVTX ranges; the ${runtime} capture library does not follow them`, {
      hint: "Drop --nvtx/--nvtx-include/--nvtx-exclude, or capture on CUDA (--runtime cuda).",
    });
}
/** The application's NVTX settings for a selection: NVTX_INJECTION64_PATH names the library CUDA_INJECTION64_PATH names. */
function nvtxAppEnv(sel: NvtxSelection | undefined, injEnv: Record<string, string>): Record<string, string> {
  if (!sel) return {};
  const lib = injEnv.CUDA_INJECTION64_PATH;
  if (!lib) return {}; // a test's stand-in injection: no library to name
  const r = nvtxEnv(sel, lib);
  for (const w of r.warnings) log.warn(w);
  return r.env;
}
/** What the NVTX selection left out, or that no NVTX call reached the library (the application makes none, or its NVTX loads no tool). */
function sayNvtx(census: Census, sel: NvtxSelection | undefined): void {
  if (!sel || (!sel.include.length && !sel.exclude.length && !sel.summary)) return;
  const seen = census.processes.filter((p) => p.nvtx);
  const out = seen.reduce((n, p) => n + (p.nvtx?.filteredOut ?? 0), 0);
  if ((sel.include.length || sel.summary) && seen.length && !seen.some((p) => p.nvtx?.injected)) {
    log.warn(
      `no NVTX call reached kerncap: the application opened no NVTX range (or its NVTX was built with NVTX_DISABLE), so ${sel.include.length ? "no launch was inside --nvtx-include's ranges" : "every launch is outside any range"}`,
    );
  }
  const dropped = seen.reduce((n, p) => n + (p.nvtx?.rangesDropped ?? 0), 0);
  if (dropped)
    log.warn(
      `${plural(dropped, "launch", "launches")} under more than 4096 distinct (ranges, kernel) pairs of a process are left out of the per-nvtx summary (ranges named per call, such as emit_nvtx's "seq = N": select with --nvtx-include "regex:…")`,
    );
  if (out) log.info(`${plural(out, "launch", "launches")} outside the NVTX selection ${out === 1 ? "was" : "were"} not counted`);
}
export interface ListRequest {
  argv: string[];
  /** `--runtime cuda|hsa`; undefined: the one this machine has (src/capture/injector.ts). */
  runtime?: string;
  verbose: boolean;
  stdoutToStderr: boolean;
  /** --nvtx, --nvtx-include, --nvtx-exclude (src/capture/nvtx.ts): only launches inside those NVTX ranges are listed. */
  nvtx?: NvtxSelection;
}
export interface ListResult {
  app: AppRun;
  /** Every kernel launched, most launches first. */
  kernels: KernelSeen[];
  launches: number;
  /** error.<pid>.txt lines (the library's internal failures; already logged as a warning). */
  libraryErrors: string[];
  /** Every process's census (more than one: a multi-process job). */
  census: Census;
}
const LIST_PREFIX = "kerncap-list-";
/**
 * Run the application with the capture library in count-only mode (folder under $TMPDIR,
 * removed at the end whatever happens).
 * @throws KerncapError E_USAGE/E_APP_NOT_FOUND, what `prepare` throws, E_INTERRUPTED (130/143),
 *   E_NO_KERNELS (the application launched none).
 */
export async function listKernels(req: ListRequest, prepare?: PrepareInjection): Promise<ListResult> {
  refuseToolAsApp(req.argv); // by name, before the PATH lookup
  resolveApp(req.argv);
  const injector = injectorFor(req.runtime);
  refuseNvtxOff(req.nvtx, injector.runtime);
  const inj = await (prepare ?? injector.prepare)();
  for (const w of inj.warnings ?? []) log.warn(w);
  const stops = new StopSignals().install();
  let dir: string;
  try {
    dir = privateTempFolder(LIST_PREFIX, resolve(tmpdir()));
  } catch (e) {
    if (e instanceof KerncapError) throw e;
    throw new KerncapError("E_TMPDIR", `cannot make kerncap list's folder in ${tmpdir()}: ${(e as Error).message}`, {
      hint: "Set TMPDIR to a writable folder (list writes the launch census there and removes it).",
    });
  }
  try {
    mkdirSync(join(dir, "kernel"));
    mkdirSync(join(dir, "memory"));
    const app = await runApp({
      argv: req.argv,
      env: {
        ...withoutCaptureSettings(),
        ...inj.env,
        ...nvtxAppEnv(req.nvtx, inj.env),
        ...captureLibraryEnv({ out: dir, mode: "list", cuptiPath: inj.cuptiPath, log: req.verbose }),
      },
      stdoutToStderr: req.stdoutToStderr,
      stops,
    });
    const census = readCensus(dir);
    sayNvtx(census, req.nvtx);
    if (census.errors.length) log.warn(`capture library: ${census.errors.join("; ")}`);
    if (app.interrupted)
      throw new KerncapError("E_INTERRUPTED", `interrupted (${app.interrupted}); the application's process group was ended`, {
        exitCode: signalExitCode(app.interrupted),
      });
    sayCuptiNotes(census, false);
    const kernels = [...census.kernels].sort((a, b) => b.count - a.count);
    if (!kernels.length) {
      throw new KerncapError("E_NO_KERNELS", `the application launched no ${injector.label} kernel (${howAppEnded(app)})`, {
        hint: census.errors.length
          ? "The capture library failed; see the message above."
          : app.signal
            ? `It died of ${app.signal} before any kernel; check that it runs on its own.`
            : `Does it use the GPU? Check that it runs on its own, and that ${injector.runtime === "hsa" ? "HIP_VISIBLE_DEVICES/ROCR_VISIBLE_DEVICES are" : "CUDA_VISIBLE_DEVICES is"} not empty.`,
      });
    }
    return { app, kernels, launches: census.launches, libraryErrors: census.errors, census };
  } finally {
    removeTemp(dir);
    stops.dispose();
  }
}
