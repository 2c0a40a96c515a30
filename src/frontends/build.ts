/**
 * The reproducer's build: DIR/build.sh run inside DIR, in its own process group so that Ctrl-C
 * (or SIGTERM) of kerncap stops the compiler under bash too (bash alone would wait for its
 * foreground child before acting on the signal). Its last stdout line names the module it built;
 * its stderr lines starting "kerncap: " are notes for the user (which source it compiled and why).
 * Every frontend's reproducer has one; a frontend's own faster rebuild (Frontend.fastBuild) runs
 * its steps through runBuildCommand too.
 */
import { shellPath } from "../util/shell-quote.ts";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { unwritableFolder } from "../format/received.ts";
import { availableParallelism, totalmem } from "node:os";
import { dirname, isAbsolute, join, relative, resolve } from "node:path";
import { buildChildEnv, buildTimeoutSetting, reproducerBuildEnv, sandboxOff, type Env } from "../env.ts";
import { privateTempFolder } from "../cache.ts";
import { type Capped, readCapped } from "../util/stream-text.ts";
import { KerncapError } from "../errors.ts";
import type { Manifest } from "../format/manifest.ts";
import { readManifest } from "../format/capture-dir.ts";
import { assertRegularTree, mkdirInCapture, readInCapture, resolveInCapture } from "../format/paths.ts";
import { requireRenderedBuild } from "../format/rendered.ts";
import { EXPORT_FILE } from "../format/file-names.ts";
import { runsTrustedCopy, stageTrustedBuild, type StagedBuild } from "../format/staged-build.ts";
import { log } from "../log.ts";
import { buildFailureHint, FIX_AND_VALIDATE, lastLines } from "./build-hints.ts";
import { knownNote, notesSaidBefore } from "./build-notes.ts";
export { buildFailureHint, FIX_AND_VALIDATE };
import { escapeForTerminal } from "../escape.ts";
import { forwardToGroup, killGroup, signalExitCode, StopSignals } from "../process-group.ts";
import { captureDiagnostics, CONFINE_FLAGS, confinedError, DEPS_FILE, outsideReads, parseDiagnostics, recordedSources, type Diagnostic } from "./confine.ts";
import { confinementFor, machineConfinement, SANDBOX_EXIT_CODES, sandboxedArgv, sandboxPaths, type Confinement } from "./sandbox.ts";
import { assertNoProbes, includesNaming } from "./confine-sources.ts";

export interface BuildOptions {
  /** Keep build.sh's stderr out of the debug log. */
  quiet: boolean;
  /** Build even when the toolchain differs from the capture's (KERNCAP_FORCE=1 for build.sh). */
  force: boolean;
  /** An abort kills the build (validate runs build.sh and the pruned build side by side and keeps the first). */
  signal?: AbortSignal;
  /** Build for this GPU architecture instead of the captured one (CUDA build.sh only: reproducerBuildEnv). */
  targetArch?: string;
  /** The frontend's reading of a failed build's stderr (Frontend.explainBuildFailure). */
  explain?: (stderr: string) => KerncapError | undefined;
  /**
   * validate --confine (kerncap mcp): the capture's manifest; the build must read nothing outside
   * the capture, the project's headers it recorded as read and the toolchain, and a failure says only the capture's
   * own diagnostics (src/frontends/confine.ts).
   */
  confine?: Manifest;
  /** What confines the build, in the caller's words, for a refusal's message (confinedError): "kerncap eval", "validate --confine"…; default "a confined build". */
  confinedBy?: string;
  /**
   * A confined build of the user's own command line (kerncap eval without --confine), whose
   * messages the user reads, not an agent: one that stopped in the preprocessor (no dependency
   * list: an #include not found, #error) is E_BUILD with the capture's own diagnostics. Without it
   * (kerncap mcp) such a build is E_BUILD saying only that the preprocessor stopped, none of its
   * messages: had it read a file outside through a name the source scan let by, no list would say so.
   */
  userReadsMessages?: boolean;
  /** Whose build this is, said before build.sh's own notes (kerncap eval: "candidate v1/src"; nu7 #11: the notes of many builds named none). */
  noteFor?: string;
  /**
   * The module to build (build.sh's OUTPUT argument: an absolute path, or relative to the capture
   * folder; default build/kernel.cubin). A confined build's dependency list goes beside it
   * (`kerncap-deps.d`), so that builds into separate folders can run side by side.
   */
  out?: string;
  /** Compiler flags appended to EXTRA_FLAGS (kerncap tune's -D, -maxrregcount): whole words, no whitespace or shell characters (bash splits EXTRA_FLAGS unquoted). */
  extraFlags?: string[];
}

/** Frontend.remakeGenerated of a manifest's frontend, set by the registry (./index.ts setGeneratedRemaker): this module is below it. */
let remakeGenerated: ((dir: string, m: Manifest) => string[] | undefined) | undefined;

/** Set how a confined build remakes the files its frontend generates under src/ (./index.ts, as it loads). */
export function setGeneratedRemaker(f: (dir: string, m: Manifest) => string[] | undefined): void {
  remakeGenerated = f;
}

/**
 * Remake what the frontend generates under src/ in a confined build's folder `dir` (Frontend.remakeGenerated: CUDA's slice).
 * @returns the starts of build.sh's notes this made expected (logged at debug level only)
 */
export function remakeGeneratedSources(dir: string, m: Manifest): string[] {
  if (!remakeGenerated) throw new Error("a confined build before the frontend registry loaded"); // a kerncap bug
  return remakeGenerated(dir, m) ?? [];
}

/** A fast build's own failure (its plan or a step: Frontend.fastBuild): build.sh runs instead. */
export class FastBuildUnavailable extends Error {}

/**
 * A build stopped by its caller's abort because a later save superseded its text (the watch: a
 * file event while it ran; src/rebuild/watch.ts): no result, no line, no build.sh instead, and
 * the state a fast build keeps between builds stays as it was before it.
 */
export class BuildSuperseded extends Error {
  constructor() {
    super("the build was stopped: a later save superseded it");
  }
}

/** The build's group gets SIGKILL this long after the first signal (ms). */
const BUILD_GRACE_MS = 2000;

/**
 * Run one command of a reproducer's build in its own process group, so that Ctrl-C (or SIGTERM)
 * of kerncap stops the compiler under bash too; the group is killed BUILD_GRACE_MS after the first
 * signal. Used for build.sh and for the steps of the watch's pruned build (src/frontends/cuda/fast-build.ts).
 * `signal`: an abort kills the group (SIGKILL); the command then returns its exit as usual.
 * The command gets a TMPDIR of its own (a fresh 0700 folder, removed after): nvcc names its
 * intermediates `$TMPDIR/tmpxft_<pid>_…` and opens them without O_EXCL|O_NOFOLLOW, so in a shared
 * /tmp another user could plant links or files at the next pids' names (a trial read the build's
 * PTX and overwrote a file of the user's that way). `o.sharedTmp`: keep the caller's TMPDIR (ncu,
 * whose lock file other profilers must see); `o.tmp`: that folder, made (privateTempFolder) and
 * removed by the caller (a confined build judges its dependency list, which may name it, first).
 * @returns its stdout, stderr and exit code
 * @throws KerncapError E_INTERRUPTED (exit 130 at SIGINT, 143 at SIGTERM …): a stop signal came while it ran;
 *   E_TMPDIR (src/cache.ts privateTempFolder)
 */
export async function runBuildCommand(
  argv: string[],
  cwd: string,
  env: Record<string, string | undefined>,
  signal?: AbortSignal,
  o: { sharedTmp?: boolean; tmp?: string } = {},
): Promise<{ out: string; err: string; code: number }> {
  const tmp = o.sharedTmp ? undefined : (o.tmp ?? privateTempFolder("kerncap-tmp-"));
  try {
    return await runInGroup(argv, cwd, tmp ? { ...env, TMPDIR: tmp } : env, signal);
  } finally {
    if (tmp && tmp !== o.tmp) rmSync(tmp, { recursive: true, force: true });
  }
}

/** runBuildCommand's run of the command in its own process group. */
async function runInGroup(
  argv: string[],
  cwd: string,
  env: Record<string, string | undefined>,
  signal?: AbortSignal,
): Promise<{ out: string; err: string; code: number }> {
  const stops = new StopSignals().install();
  let out: string, err: string, code: number, signalCode: string | null;
  try {
    const p = Bun.spawn(argv, { cwd, env, stdout: "pipe", stderr: "pipe", detached: true });
    const unhook = forwardToGroup(stops, p.pid, BUILD_GRACE_MS);
    // the caller's abort (a speculative step no longer wanted): the whole group, at once
    const abort = () => killGroup(p.pid, "SIGKILL");
    if (signal?.aborted) abort();
    signal?.addEventListener("abort", abort);
    // a source of 200 KB can make the compiler print 20 GB of warnings, each quoting its line (adversary 63: validate of a
    // received capture held 13.7 GB and ended out of memory): past BUILD_OUTPUT_MAX the group is killed, a build failure
    const over = () => killGroup(p.pid, "SIGKILL");
    try {
      let o: Capped, e: Capped;
      [o, e, code] = await Promise.all([readCapped(p.stdout, BUILD_OUTPUT_MAX, over), readCapped(p.stderr, BUILD_OUTPUT_MAX, over), p.exited]);
      out = o.text;
      err = e.text;
      if (o.cut || e.cut) {
        err += `\nkerncap: the build wrote more than ${BUILD_OUTPUT_MAX >> 20} MiB to its ${o.cut ? "stdout" : "stderr"}: stopped (a source whose every line warns, or messages without end)\n`;
        code = code || 1;
      }
    } finally {
      unhook();
      signal?.removeEventListener("abort", abort);
    }
    signalCode = p.signalCode == null ? null : String(p.signalCode);
  } finally {
    stops.dispose();
  }
  // Ctrl-C: say so (exit 130), rather than report the build's death as a compile error
  const sig = stops.signal ?? (code === 130 || signalCode === "SIGINT" ? "SIGINT" : null);
  if (sig) throw new KerncapError("E_INTERRUPTED", "interrupted during the rebuild; nothing was replayed", { exitCode: signalExitCode(sig) });
  return { out, err, code };
}

/**
 * The most bytes a build command's stdout, and its stderr, may write (32 MiB each): kerncap holds
 * them to report the compiler's messages, and a real build's are a few MB at most (a template
 * error's backtrace). Past it the build is stopped and failed (runInGroup).
 */
export const BUILD_OUTPUT_MAX = 32 << 20;

/**
 * A confined build's limits (validate --confine, kerncap mcp), and a received capture's: data size
 * (KiB: 8 GiB, or the machine's memory over its CPU count where that is less, so that a build per
 * CPU fits in memory) and wall clock (s); the largest file (CONFINED_FILE_KIB).
 */
export const CONFINED_DATA_KIB = Math.min(8 << 20, Math.max(1 << 20, Math.floor(totalmem() / 1024 / availableParallelism())));
export const CONFINED_SECONDS = 600;
/**
 * The largest file a confined build (or a received capture's) may write (KiB: 512 MiB, ulimit -f):
 * a source of a few KB can make the preprocessor write gigabytes (a macro that expands to itself
 * twice, 3 GiB in 20 s in a trial: past the disk within the time limit). A preprocessed TU is a
 * few MB (ggml's mul_mat_q: 4.8 MB), a module rarely past a few hundred MB.
 */
export const CONFINED_FILE_KIB = 512 << 10;

/** A limited build that wrote a file past CONFINED_FILE_KIB: E_CONFINED. */
function pastFileLimit(confined: boolean): KerncapError {
  return new KerncapError(
    "E_CONFINED",
    `build.sh wrote a file past ${CONFINED_FILE_KIB >> 10} MiB, the limit of a ${confined ? "confined build" : "received capture's build"}: stopped`,
    {
      hint: confined
        ? "An edit whose macros or initializers expand without end (the preprocessor's output, or a module, grows past 512 MiB); validate on the command line to build without the limit."
        : "The sender's source expands to more than 512 MiB (its macros or a huge initializer); read src/ before building it, or copy the sources into a capture of your own.",
    },
  );
}

/**
 * The wall-clock limit of build.sh (s): KERNCAP_BUILD_TIMEOUT where set (nu10 #24: a harness's
 * limit per candidate), else CONFINED_SECONDS for a limited build (a confined one, a received
 * capture's), else none.
 * @throws KerncapError E_USAGE for a KERNCAP_BUILD_TIMEOUT that is not a whole number of seconds from 1 on
 */
export function buildTimeout(limited: boolean, env?: Env): { seconds: number; set: boolean } | undefined {
  const v = buildTimeoutSetting(env)?.trim();
  if (v === undefined) return limited ? { seconds: CONFINED_SECONDS, set: false } : undefined;
  if (!/^[1-9]\d{0,6}$/.test(v))
    throw new KerncapError("E_USAGE", `KERNCAP_BUILD_TIMEOUT=${JSON.stringify(v)} is not a number of seconds`, {
      hint: "Set it to a whole number of seconds, 1 or more (KERNCAP_BUILD_TIMEOUT=120), or unset it.",
    });
  return { seconds: Number(v), set: true };
}

/**
 * A build.sh that ran past its limit (buildTimeout), its process group killed: E_BUILD (the
 * source's fault: a compile that loops or reads a device), "timed out after N s".
 */
export function pastTimeLimit(limit: { seconds: number; set: boolean }, confined: boolean, received: boolean): KerncapError {
  // eval --build-timeout sets the variable for its builds, which may run in other processes: both named (a new user's finding: only the variable, which they had not set)
  const whose = limit.set
    ? "the limit --build-timeout or KERNCAP_BUILD_TIMEOUT sets"
    : `the limit of a ${confined ? "confined build" : "received capture's build"}`;
  return new KerncapError("E_BUILD", `the reproducer does not build: build.sh timed out after ${limit.seconds} s (${whose}), its processes killed`, {
    details: { diagnostics: [], timedOut: true, timeoutSeconds: limit.seconds },
    hint: received
      ? "The sender's source makes the compiler read a device or loop (an #include of /dev/zero, say); read src/ before building it, or copy the sources into a capture of your own."
      : `Undo what makes the compile loop or run long (a deep template recursion, a huge unrolled loop, an #include of a device); the limit is ${limit.set ? "--build-timeout's or KERNCAP_BUILD_TIMEOUT's" : `${CONFINED_SECONDS} s, KERNCAP_BUILD_TIMEOUT in kerncap's environment sets another`}.`,
  });
}

/**
 * A rebuild writes into the capture folder (build/): a folder this process may not write (a
 * read-only copy, another user's) is said before anything runs, not as a file deep inside it.
 * @throws KerncapError E_IO naming the folder and what to do
 */
export function assertRebuildWritable(dir: string): void {
  const u = unwritableFolder(dir);
  if (!u) return;
  throw new KerncapError(
    "E_IO",
    `${escapeForTerminal(u.path, { oneLine: true })} is not writable: a rebuild writes its outputs into the capture folder (build/)`,
    {
      // a copy through pack and unpack, never cp -r: unpack marks it received, so its build.sh (another user's) runs only once trusted (trial 11)
      hint: `Make a copy of your own and rebuild there: kerncap pack ${shellPath(dir)} -o ~/caps/copy.zip && kerncap unpack ~/caps/copy.zip -o ~/caps/copy (a received capture: its build runs once you trust what it shows). Replay and inspect work on a read-only capture.`,
    },
  );
}

/**
 * Run DIR/build.sh; it prints the path of the module it built on its last stdout line.
 * @returns { module: absolute path, seconds: wall time of the build }
 * @throws KerncapError E_NO_REPRODUCER (no build.sh), the frontend's (o.explain: CUDA's E_RDC),
 *   E_BUILD (exit 2, the compiler's last 30 lines, details.diagnostics parsed from them; confined: the capture's own diagnostics only,
 *   none when it stopped in the preprocessor; past buildTimeout: "timed out after N s"), E_USAGE (a KERNCAP_BUILD_TIMEOUT that is no number),
 *   E_CONFINED (confined: the build read a file outside, or built without a dependency list), E_INTERRUPTED (exit 130 at SIGINT, 143 at
 *   SIGTERM: the build's group was stopped).
 */
export async function buildReproducer(dirArg: string, o: BuildOptions): Promise<{ module: string; seconds: number }> {
  const dir = resolve(dirArg); // build.sh runs inside the folder: a relative path would not find it
  const script = join(dir, "build.sh");
  if (!existsSync(script)) {
    // an export's data/ is the capture without its project, which the export keeps one level up (make run-src)
    if (existsSync(join(dirname(dir), EXPORT_FILE)))
      throw new KerncapError(
        "E_NO_REPRODUCER",
        `${dir} is the data of an export (${join(dirname(dir), EXPORT_FILE)}): the reproducer's project lies in ${dirname(dir)}, not here`,
        {
          hint: `Rebuild and run it there, as its README.md says (a CUDA kernel: cd ${dirname(dir)} && make run-src), or validate the capture the export was made from.`,
        },
      );
    throw new KerncapError("E_NO_REPRODUCER", `${dir} has no build.sh: no reproducer project was generated for this capture`, {
      hint: "Capture with the kernel's source available (CUDA: --source-root/--compile-commands; Triton: automatic), or replay the captured module with `kerncap replay`.",
    });
  }
  assertRebuildWritable(dir);
  assertRegularTree(dir, "src"); // no FIFO, device or link for the compiler to read: refused before anything runs
  // every build runs from a private folder (src/format/staged-build.ts stageTrustedBuild): a copy of the
  // bytes the trust gate approved (a received capture) or read now (the user's own), src/ copied once,
  // a private build/ whose files are moved into the capture's afterwards; nothing else of the capture
  const staged = stageTrustedBuild(dir, o.confine?.kernel.frontend ?? "");
  if (!staged) throw new KerncapError("E_NO_REPRODUCER", `${dir}/build.sh could not be read`, { hint: "Check the file's permissions." });
  try {
    return await runBuildSh(dir, staged, o);
  } finally {
    staged.dispose();
  }
}

/** buildReproducer's run of the private copy of build.sh with cwd the private folder; its output read with the private folder's path as DIR's, its build/ collected into DIR's. */
async function runBuildSh(dir: string, staged: StagedBuild, o: BuildOptions): Promise<{ module: string; seconds: number }> {
  const script = join(staged.folder, "build.sh");
  const t0 = performance.now();
  // no loader or Python path entry that is empty, relative or inside the capture (src/env.ts buildChildEnv)
  const env = buildChildEnv(reproducerBuildEnv({ force: o.force, targetArch: o.targetArch }), [dir, staged.dir]);
  if (o.extraFlags?.length) env.EXTRA_FLAGS = [env.EXTRA_FLAGS, ...o.extraFlags].filter(Boolean).join(" ");
  // NVCC naming no file, for a build.sh that runs $NVCC: the catalogue's E_NO_NVCC before anything runs (a new user's finding: E_BUILD, exit 127)
  if (env.NVCC?.includes("/") && !existsSync(env.NVCC) && readFileSync(script, "latin1").includes("NVCC"))
    throw new KerncapError("E_NO_NVCC", `NVCC=${escapeForTerminal(env.NVCC, { oneLine: true })} names no file: the nvcc build.sh runs`, {
      hint: "Set NVCC to a CUDA toolkit's nvcc (such as /usr/local/cuda/bin/nvcc), or unset it: build.sh then runs the nvcc on its PATH.",
    });
  const out0 = o.out === undefined ? undefined : resolve(dir, o.out);
  const depsFile = out0 ? relative(dir, join(dirname(out0), "kerncap-deps.d")) : DEPS_FILE;
  // a received capture's generated sources (CUDA's slice) are the sender's: made anew from its sources, as a confined
  // build's are (adversary 43: a slice stamped as the TU's, holding another kernel, compiled under --trust of build.sh)
  // build.sh's notes that the remade sources make expected (CUDA: "no usable slice" where the whole TU is compiled on purpose)
  let expectedNotes: string[] = [];
  if (staged.received && !o.confine) expectedNotes = remakeGeneratedSources(staged.folder, readManifest(dir));
  if (o.confine) {
    requireRenderedBuild(dir, o.confine, "validate", staged); // every confined build, whoever calls it: only the build kerncap wrote (or the user trusted)
    // what kerncap generates under src/ (CUDA's slice) made anew in the private copy from its sources: a generated file
    // found there, its unkeyed stamps recomputed, passed for the TU's text (a trial: a broken TU validated as the original kernel)
    expectedNotes = remakeGeneratedSources(staged.folder, o.confine);
    // and no source that makes the preprocessor look up a file outside (its existence would show in the result): the
    // private copy's sources, the bytes the compiler reads (an edit of the capture meanwhile is not built)
    assertNoProbes(dir, o.confine, staged.folder);
    if (depsFile.startsWith("..") || isAbsolute(depsFile) || /\s/.test(depsFile))
      throw new Error(`a confined build's module must lie inside the capture folder, at a path without spaces: ${out0}`); // a kerncap bug
    mkdirInCapture(dir, dirname(depsFile));
    rmSync(resolveInCapture(dir, depsFile).path, { force: true }); // a list from an earlier build says nothing of this one
    env.EXTRA_FLAGS = `${env.EXTRA_FLAGS ?? ""} ${depsFile === DEPS_FILE ? CONFINE_FLAGS : `-MD -MF ${depsFile}`}`.trim();
  }
  // relative to DIR where it lies inside (cwd): nvcc runs its steps through a shell, so the capture folder's own name stays off its command line
  const outRel = out0 === undefined ? undefined : relative(dir, out0);
  const outArg = out0 === undefined ? [] : [outRel && !outRel.startsWith("..") && !isAbsolute(outRel) ? outRel : out0];
  // confined, or a received capture's (the sender's source, the trusted build.sh): the source may make
  // the compiler read a device (`#include "/dev/zero"` took 21 GB of RAM before the dependency list
  // could refuse it), so the build gets a data-size limit (RLIMIT_DATA counts anonymous mmaps since
  // Linux 4.7) and a wall-clock limit
  const limited = Boolean(o.confine) || runsTrustedCopy(dir);
  // and read by bash byte by byte: in a multi-byte locale (GBK, Shift JIS) a byte and the backslash after it are one
  // character, an escaped quote no longer one (adversary 61; the trust gate refuses such a build.sh as kerncap's own too)
  if (limited) env.LC_ALL = "C";
  // and any build a wall-clock limit where KERNCAP_BUILD_TIMEOUT sets one (timeout kills build.sh's whole group)
  const limit = buildTimeout(limited);
  const timeout = limit ? `timeout -k 5 ${limit.seconds} ` : "";
  const argv = limited
    ? ["bash", "-c", `ulimit -d ${CONFINED_DATA_KIB} -f ${CONFINED_FILE_KIB} && exec ${timeout}bash "$0" "$@"`, script, ...outArg]
    : limit
      ? ["bash", "-c", `exec ${timeout}bash "$0" "$@"`, script, ...outArg]
      : ["bash", script, ...outArg];
  // the build's own TMPDIR, kept until its dependency list is judged: build.sh compiles through a folder of links
  // in it when the private copy's path holds a space (TMPDIR's), and the list names the files through them
  const tmp = privateTempFolder("kerncap-tmp-");
  try {
    // confined: in the sandbox where the kernel has one (./sandbox.ts: a tree of only what the build needs, Landlock),
    // so that the preprocessor cannot even learn whether a path outside exists; the scan and the list judge it too.
    // A received capture's build (the sender's source under the build.sh the user trusted) runs in it as well: its
    // source is compiled with the user's rights, and an #include of a file of the user's would read it (adversary 28)
    const sandboxed = o.confine ?? (limited ? manifestOrNone(dir) : undefined);
    const confinement = sandboxed ? confinementFor(sandboxed.kernel.frontend) : undefined;
    if (sandboxed && !o.confine && machineConfinement() === "scan") warnUnsandboxedReceived(dir);
    const run =
      sandboxed && confinement && confinement !== "scan"
        ? sandboxedArgv(argv, confinement, sandboxPaths({ folder: staged.folder, tmp, recorded: recordedSources(dir, sandboxed), env }))
        : argv;
    // the private folder as the working folder: nvcc's LD_LIBRARY_PATH ends in an empty entry (the
    // working folder), so it must hold nothing of the capture's but the copies and src/
    const ran = await runBuildCommand(run, staged.folder, env, o.signal, { tmp });
    if (run !== argv) refuseSandboxFailure(ran, confinement!);
    return judgeBuildSh(dir, staged, o, ran, { t0, depsFile, limited, limit, tmp, sandboxed: run !== argv, expectedNotes });
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** Received captures whose unsandboxed build was said (once each per process). */
const saidUnsandboxed = new Set<string>();

/**
 * Say that a received capture's trusted build runs without the sandbox (KERNCAP_SANDBOX=0, or a
 * machine where kerncap-confine cannot make one: kerncap doctor's confined-build): its sources
 * compile with the user's rights, so an `#include` of any file the user can read is read, and a
 * failed build's messages may quote it (adversary 34 reached this by planting the cache folder,
 * which no longer works; where the machine itself has no sandbox, the user is told).
 */
function warnUnsandboxedReceived(dir: string): void {
  if (saidUnsandboxed.has(dir)) return;
  saidUnsandboxed.add(dir);
  log.warn(
    `${escapeForTerminal(dir)} is a received capture and its build runs without the sandbox (${sandboxOff() ? "KERNCAP_SANDBOX=0" : "this machine cannot make one: kerncap doctor, confined-build"}): its sources compile with your rights, and an #include of any file you can read would read it; read src/ before you trust it`,
  );
}

/** The capture's manifest, or undefined where it does not read: a received capture's for its sandbox (runsTrustedCopy), any build's for its notes' forms (knownNote). */
function manifestOrNone(dir: string): Manifest | undefined {
  try {
    return readManifest(dir);
  } catch {
    return undefined;
  }
}

/**
 * E_BUILD "the reproducer does not build `said`", with the compiler's diagnostics structured
 * (kerncap.error/1 `error.details.diagnostics`: ./confine.ts parseDiagnostics of `output`, read
 * against the capture folder `dir`; `captureOnly`, a confined build's: those of src/ only, as its message).
 */
function compileError(said: string, hint: string, d: { dir: string; output: string; captureOnly: boolean }): KerncapError {
  const diagnostics: Diagnostic[] = parseDiagnostics(d.dir, d.output, { captureOnly: d.captureOnly });
  return new KerncapError("E_BUILD", `the reproducer does not build ${said}`, { hint, details: { diagnostics } });
}

/**
 * E_BUILD of a confined build that stopped in the preprocessor (no dependency list; the source's
 * fault: an #include not found, an #error): in the sandbox (`sandboxed`), the lines of the capture's
 * own files where it stopped, as diagnostics, none of the compiler's words; under the scan alone,
 * not even those. `output`: the build's stderr and stdout; `unseen`: the sandbox's note for the hint.
 */
function preprocessorStop(dir: string, output: string, code: number, sandboxed: boolean, unseen: string): KerncapError {
  // where it stopped, in the capture's own files, without the preprocessor's words (they could tell of a file outside: found,
  // unreadable): a line to fix for a generator (nu89 #10: "check the files the edit includes" gave it none). Only in the
  // sandbox, where no file outside can be read: under the scan alone an #include of one, then #error lines under #if of
  // its values, would tell a bit of it per line (the stop itself tells one bit a build, as before)
  const at = [
    ...new Set(
      (sandboxed ? captureDiagnostics(dir, output) : [])
        .filter((l) => /: (?:fatal |catastrophic )?error: /.test(l))
        .map((l) => /^(.+?:\d+): /.exec(l)?.[1])
        .filter((w): w is string => w !== undefined),
    ),
  ].map((w) => `${w}: error: the preprocessor stopped here (an #include not found or unreadable, or #error)`);
  return compileError(
    `(build.sh exit ${code}): the preprocessor stopped before the dependency list (a missing or unreadable #include, or #error)${at.length ? `:\n${lastLines(at)}` : ": check the files the edit includes"}`,
    `Check the #include and #if lines ${at.length ? "it names" : "of the files the edit changed"}: a confined build shows none of the preprocessor's messages (they could tell of files outside the capture), only where it stopped.${unseen}`,
    { dir, output: at.join("\n"), captureOnly: true },
  );
}

/** What a sandboxed build's hint adds to a preprocessor's failure: a file outside is not found there. */
const SANDBOX_SEES =
  "A confined build runs in a sandbox that holds only src/, the project's headers its capture recorded and the toolchain: a file elsewhere is not found there (kerncap doctor: confined-build).";

/**
 * A sandboxed build whose sandbox could not be made (kerncap-confine's own exit codes and its
 * message): nothing of the build ran.
 * @throws KerncapError E_CONFINED naming kerncap-confine's reason (its own words, kerncap's paths)
 */
function refuseSandboxFailure(ran: { err: string; code: number }, confinement: Confinement): void {
  const said = ran.err.split("\n").find((l) => l.startsWith("kerncap-confine: "));
  if (!SANDBOX_EXIT_CODES.includes(ran.code) || !said) return;
  throw new KerncapError("E_CONFINED", `the confined build's sandbox (${confinement}) could not be made, so nothing was built: ${said.slice(17)}`, {
    hint: "kerncap doctor says which sandbox this machine allows. KERNCAP_SANDBOX=0 in kerncap mcp's environment confines its builds by the source scan alone (an agent can then learn whether a path exists); validate on the command line builds unconfined.",
  });
}

/**
 * build.sh's stderr `err` without its notes that start with one of `starts`: those the remade
 * sources made expected ("no usable slice" where a confined build compiles the whole TU on
 * purpose) and those a frontend said before the build (./build-notes.ts: CUDA's slice edited by
 * hand; their src/ paths named as the lines' are). They are logged at debug level, and no part of
 * an error's text, whose first line an agent or a table reads (a new user's finding).
 */
function withoutExpectedNotes(err: string, starts: string[], noteFor: string | undefined): string {
  if (!starts.length) return err;
  const expected = (l: string) => starts.some((e) => l.startsWith(e));
  const lines = err.split("\n");
  for (const n of lines.filter(expected)) log.debug(`${noteFor ? `${noteFor}: ` : ""}build.sh: ${n.slice(9)}`);
  return lines.filter((l) => !expected(l)).join("\n");
}

/**
 * runBuildSh's reading of the build's outcome (`ran`: its output and exit, read with the private
 * folder's path as DIR's): its outputs collected, a confined build's dependency list judged, the module it printed;
 * build.sh's notes shown (b.expectedNotes: those the remade sources made expected, at debug level only).
 * @throws KerncapError buildReproducer's (E_BUILD, E_CONFINED …)
 */
function judgeBuildSh(
  dir: string,
  staged: StagedBuild,
  o: BuildOptions,
  ran: { out: string; err: string; code: number },
  b: { t0: number; depsFile: string; limited: boolean; limit?: { seconds: number; set: boolean }; tmp: string; sandboxed: boolean; expectedNotes: string[] },
): { module: string; seconds: number } {
  const { unstage } = staged;
  const { t0, depsFile, limited } = b;
  // what it wrote into the private build/, into the capture's through no link (E_UNSAFE_PATH names one)
  staged.collect();
  // build.sh names the sources src/… from its folder: on the user's own command line its messages name them by the
  // capture's path, as the user's terminal and editor find them (a confined build's stay src/…, the agent's view)
  const named = (t: string) => (o.confine ? t : t.replace(/(^|[\s"'(])(?:\.\/)?src\//gm, (_m, pre: string) => `${pre}${dir}/src/`));
  const [out, allErr, code] = [unstage(ran.out), named(unstage(ran.err)), ran.code];
  const err = withoutExpectedNotes(allErr, [...b.expectedNotes, ...notesSaidBefore().map(named)], o.noteFor);
  const seconds = (performance.now() - t0) / 1000;
  // timeout's 124, or 137 where its SIGKILL (-k 5) ended a build that ignored the SIGTERM
  if (b.limit && (code === 124 || (code === 137 && seconds >= b.limit.seconds))) throw pastTimeLimit(b.limit, Boolean(o.confine), limited && !o.confine);
  // a compiler step killed by SIGXFSZ at the file-size limit (the shell that ran it says so)
  if (limited && code !== 0 && /File size limit exceeded/.test(err)) throw pastFileLimit(Boolean(o.confine));
  if (o.signal?.aborted) throw new KerncapError("E_BUILD", "build.sh was stopped: the pruned build finished first"); // validate's race: nothing to say
  if (o.confine) {
    const deps = readInCapture(dir, depsFile, 16 << 20);
    // read as the compiler wrote it, from the folder it ran in (the private copy: allowed, its paths shown as the capture's)
    const outside = deps ? outsideReads(dir, o.confine, deps.toString("utf8"), { cwd: staged.folder, tmp: b.tmp }) : [];
    if (outside.length) throw confinedError(outside.map(unstage), { by: o.confinedBy, includedAt: includesNaming(staged.folder, outside) });
    // no list: a build that stopped in the preprocessor (an #error, an #include not found). On the user's own command
    // line (userReadsMessages) its errors in the capture's own files are its compile error (nu7 #17: a misspelt
    // #include was called a confinement breach, with no message); for an agent, or with none such, it is refused
    const preprocessorErrors =
      o.userReadsMessages && !deps && code !== 0 ? captureDiagnostics(dir, `${err}\n${out}`).filter((l) => /: (?:fatal |catastrophic )?error: /.test(l)) : [];
    // in the sandbox a file outside is not there at all: an #include of one is "not found", said so
    const unseen = b.sandboxed ? ` ${SANDBOX_SEES}` : "";
    if (preprocessorErrors.length)
      throw compileError(`(build.sh exit ${code}):\n${lastLines(preprocessorErrors)}`, buildFailureHint(code, `${err}\n${out}`) + unseen, {
        dir,
        output: `${err}\n${out}`,
        captureOnly: true,
      });
    // a failed build with no list stopped in the preprocessor (an #include not found or unreadable, #error): the
    // source's fault, a compile error (nu10 #29: it was E_CONFINED, an eval's unjudged error), said without a word of
    // the compiler's, which could tell whether a file outside exists (a list that names one is E_CONFINED above)
    const toolchain = buildFailureHint(code, `${err}\n${out}`);
    if (!deps && code !== 0 && toolchain !== FIX_AND_VALIDATE)
      throw compileError(`(build.sh exit ${code}): build.sh could not run a program it calls, so nothing was compiled`, toolchain, {
        dir,
        output: "",
        captureOnly: true,
      });
    if (!deps && code !== 0) throw preprocessorStop(dir, `${err}\n${out}`, code, b.sandboxed, unseen);
    if (!deps)
      throw new KerncapError(
        "E_CONFINED",
        `build.sh wrote no dependency list (${depsFile}, exit ${code}): a confined build cannot tell which files it read, so its module is not used`,
        { hint: "A CUDA reproducer's build.sh passes EXTRA_FLAGS to nvcc; keep that, or validate on the command line." },
      );
    if (code !== 0) {
      const shown = captureDiagnostics(dir, `${err}\n${out}`);
      throw compileError(
        `(build.sh exit ${code})${shown.length ? `:\n${lastLines(shown)}` : "; its messages name no file of the capture (a confined build shows only those)"}`,
        buildFailureHint(code, `${err}\n${out}`),
        { dir, output: `${err}\n${out}`, captureOnly: true },
      );
    }
  }
  // build.sh's own notes (which source it compiled and why: CUDA's slice, src/frontends/cuda/slice.ts) are shown
  // when it built; after a failure they stay in the error's text (after the compiler's error, as context) and the debug log
  // only the forms its template writes (knownNote): a line a compiler printed never speaks as kerncap (adversary 65 07)
  const m = o.confine ?? manifestOrNone(dir);
  for (const n of err.split("\n").filter((l) => l.startsWith("kerncap: ")))
    (code === 0 && knownNote(m, n) ? log.info : log.debug)(`${o.noteFor ? `${o.noteFor}: ` : ""}build.sh: ${escapeForTerminal(n.slice(9), { oneLine: true })}`);
  if (code !== 0) {
    const explained = o.explain?.(err);
    if (explained) throw explained;
    throw compileError(`(build.sh exit ${code}):\n${lastLines((err || out).trim().split("\n"))}`, buildFailureHint(code, `${err}\n${out}`), {
      dir,
      output: `${err}\n${out}`,
      captureOnly: false,
    });
  }
  if (!o.quiet && err.trim()) log.debug(err.trim());
  const last = out.trim().split("\n").pop() ?? "";
  const module = resolve(dir, last);
  if (!last)
    throw new KerncapError("E_BUILD", "build.sh printed nothing on stdout: it must print the path of the module it built, last", {
      hint: 'End build.sh with `echo "$out"` (the cubin it wrote).',
    });
  if (!existsSync(module)) {
    throw new KerncapError("E_BUILD", `build.sh named ${module} as the module it built, but there is no such file`, {
      hint: "Check the output path in build.sh (the -o of the compiler and the path it prints last).",
    });
  }
  return { module, seconds };
}
