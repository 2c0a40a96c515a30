/**
 * `kerncap validate --watch DIR`: one process keeps the capture's memory resident on the GPU
 * (src/replay/engine.ts openReplay) and, at each save of a file under DIR/src/, rebuilds the
 * reproducer (the one rebuild policy: src/rebuild/rebuilder.ts), checks the rebuilt module (CUDA: its parameter layout),
 * puts back only what earlier runs wrote (ReplaySession.reset) and replays: one line per save.
 *
 * Saves are seen through fs.watch (recursive, inotify on Linux). A cycle starts at the first event
 * of a burst (an editor's save is several events: a temporary file, a rename, a change), so that
 * its reading, preprocessing and pruning run while the burst settles; a compiler starts only once
 * the burst has been quiet for DEBOUNCE_MS, and an event while the build runs stops it and builds
 * again (SaveCycles); the save-to-verdict time is measured from the burst's last event. Editor
 * temporaries, dotfiles, Python caches and what kerncap writes under src/ itself (CUDA's slice:
 * Frontend.generatedSources) are ignored (isSourceSave). A save once the build is done (the run)
 * queues one more cycle after it.
 *
 * A build that fails is a line too (with the compiler's message) and the watch goes on; so is a
 * run refused for the rebuilt module (E_KERNEL_NOT_IN_MODULE, E_GLOBAL, E_PARAM_LAYOUT …). A
 * kernel fault leaves the device context unusable (ReplaySession.isContextLost): the session is opened again (restore included),
 * said in the line. Ctrl-C (SIGINT) or SIGTERM ends the watch: exit 130 / 143.
 *
 * --build-only (WatchOptions.buildOnly): no replay session and no GPU; each save is rebuilt the same
 * way and its line (`built`) says that the kernel compiles, with its registers and stack frame
 * beside the captured module's (src/rebuild/resources.ts), or the build error.
 */
import { existsSync, watch, type FSWatcher } from "node:fs";
import { join, resolve } from "node:path";
import { isKerncapError, KerncapError } from "../errors.ts";
import type { OpenedCapture } from "../format/capture-dir.ts";
import { isEditorTemporary } from "../format/file-names.ts";
import { isCaptureTemp } from "../format/paths.ts";
import type { Manifest } from "../format/manifest.ts";
import { log } from "../log.ts";
import { signalExitCode, StopSignals } from "../process-group.ts";
import { openReplay, type ReplaySession, type RunOptions } from "../replay/engine.ts";
import { MIN_PAIRS } from "../replay/stats.ts";
import { frontendOf, regionTypesOf } from "../frontends/index.ts";
import { FIX_AND_VALIDATE } from "../frontends/build.ts";
import { Rebuilder, rebuiltRun, type Builder, type Rebuilt } from "./rebuilder.ts";
import { watchGuard } from "./watch-guard.ts";
import { BuildSuperseded } from "../frontends/build.ts";
import { verdictEvent, type ResetLine, type Trigger, type WatchEvent } from "./watch-events.ts";
import type { Diagnostic } from "../frontends/confine.ts";

export { verdictEvent, watchLine, type ResetLine, type Trigger, type WatchEvent } from "./watch-events.ts";
export type { Builder } from "./rebuilder.ts";
import { moduleResources } from "./resources.ts";

/**
 * Quiet time after the last file event before a rebuild's compiler starts (ms): watchexec's
 * default. An editor's save (a temporary, a rename, a write) is a burst of a few ms; the
 * rebuild's own work before its compiler (a CUDA fast build's preprocessing and pruning) runs
 * meanwhile, and a later event of the same save stops the build and starts it again, so the
 * last text is always the one built.
 */
export const DEBOUNCE_MS = 50;
/** A save's comparison takes more timed rounds for at most this long (s) when undecided: the verdict of a save must come fast. */
export const WATCH_COMPARE_SECONDS = 0.3;

/**
 * Whether a file event under src/ (path relative to src/, as fs.watch names it) is a save of a
 * source: not an editor temporary or backup (vim's .swp/.swx and 4913 probe, emacs' #autosave#
 * and .#lock, foo~, *.tmp, JetBrains' ___jb_tmp___, sed -i's sedXXXXXX), not a dotfile or a file
 * in a dot folder, not Python's __pycache__/.pyc (a Triton build imports src/), not a path of
 * `ignore` (the slice validate writes itself) nor the temporary kerncap writes it under
 * (isCaptureTemp: seen on the H200, the remade slice's temporary started a cycle of its own).
 */
export function isSourceSave(rel: string | null | undefined, ignore: ReadonlySet<string> = new Set()): boolean {
  if (!rel) return false;
  const path = rel.replace(/\\/g, "/");
  if (ignore.has(path)) return false;
  const parts = path.split("/");
  if (parts.some((p) => p.startsWith(".") || p === "__pycache__")) return false;
  const name = parts[parts.length - 1]!;
  // an editor's temporaries and backups: the list pack and export leave out too (src/format/file-names.ts)
  if (isEditorTemporary(name) || /\.part$|\.pyc$/i.test(name) || isCaptureTemp(name)) return false;
  return true;
}

/** Timer functions of SaveCycles (the real ones by default; tests pass their own clock). */
export interface Timers {
  now(): number;
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}
const REAL_TIMERS: Timers = {
  now: () => performance.now(),
  set: (fn, ms) => setTimeout(fn, ms),
  clear: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

/** A save cycle as SaveCycles starts it. */
export interface SaveCycle {
  /** The distinct files of the burst (relative to src/, in order of first event), with those of the cycles it superseded. */
  files: string[];
  /** The time of the burst's last event so far (Timers.now(), ms). */
  savedAt: number;
  /** Aborted by a file event while the cycle builds (built() not yet called): the build is stopped, the cycle ends without a line. */
  signal: AbortSignal;
  /** Resolves once the burst has been quiet for the debounce time (or at the abort): what a compiler's start waits for. */
  quiet(): Promise<void>;
  /** The build is done: from now on a file event queues one more cycle after this one instead of stopping it. */
  built(): void;
}

/**
 * When the watch's save cycles start, one at a time. A cycle starts at the first file event of
 * a burst, so that its reading, preprocessing and pruning run while the burst settles; its
 * compiler waits for `ms` of quiet (SaveCycle.quiet). A file event while the cycle builds stops
 * that build (SaveCycle.signal: its result is discarded, it prints no line) and one more cycle
 * follows with the files of both; an event once the build is done (the run, its line) queues one
 * more cycle after it. So the last text is always the one built, and the one a line reports.
 */
export class SaveCycles {
  private current: { files: string[]; abort: AbortController; building: boolean } | undefined;
  private queued: { files: string[]; savedAt: number } | undefined;
  private lastAt = 0;
  private stopped = false;

  /** `run(cycle)` runs one cycle to its end (a rejection is the caller's: it should also cancel()). */
  constructor(
    private readonly ms: number,
    private readonly run: (c: SaveCycle) => Promise<void>,
    private readonly timers: Timers = REAL_TIMERS,
  ) {}

  /** A file event of `file` (a save of a source). */
  poke(file: string): void {
    if (this.stopped) return;
    this.lastAt = this.timers.now();
    const c = this.current;
    if (!c) return this.start([file], this.lastAt);
    // a build still running is of an older text: stopped, and its files go with the next cycle (it prints no line)
    const carried = c.building ? c.files : [];
    if (c.building) c.abort.abort();
    this.queued = { files: merge(carried, this.queued?.files ?? [], [file]), savedAt: this.lastAt };
  }

  /** No more cycles: the queued one dropped, a build still running stopped (it prints no line). */
  cancel(): void {
    this.stopped = true;
    this.queued = undefined;
    if (this.current?.building) this.current.abort.abort();
  }

  private start(files: string[], savedAt: number): void {
    const abort = new AbortController();
    const c = { files, abort, building: true };
    this.current = c;
    const quiet = () =>
      new Promise<void>((res) => {
        abort.signal.addEventListener("abort", () => res(), { once: true });
        const check = () => {
          const left = this.lastAt + this.ms - this.timers.now();
          if (abort.signal.aborted || left <= 0) return res();
          this.timers.set(check, left);
        };
        check();
      });
    const ended = () => {
      if (this.current === c) this.current = undefined;
      const q = this.queued;
      if (!q || this.stopped) return;
      this.queued = undefined;
      this.start(q.files, q.savedAt);
    };
    this.run({ files, savedAt, signal: abort.signal, quiet, built: () => void (c.building = false) }).then(ended, ended);
  }
}

const merge = (...lists: string[][]) => [...new Set(lists.flat())];

/**
 * Refusals before any GPU work or build: an AMD capture (the CUDA engine keeps the memory
 * resident; HIP reproducers are rebuilt by hand), a capture of a faulting launch (the fault ends
 * the CUDA context at every run), no reproducer (build.sh) or no src/ to watch.
 * @throws KerncapError E_FRONTEND, E_USAGE, E_NO_REPRODUCER
 */
export function checkWatchable(dirArg: string, m: Manifest): void {
  const dir = resolve(dirArg);
  if (m.device.vendor !== "nvidia") {
    throw new KerncapError("E_FRONTEND", `${dir} is an ${m.device.vendor.toUpperCase()} capture; validate --watch runs CUDA and Triton captures only`, {
      hint: "Rebuild a HIP reproducer with its build.sh and replay it with `kerncap replay`.",
    });
  }
  if (m.fault) {
    throw new KerncapError(
      "E_USAGE",
      `${dir} is a capture of a launch that faulted (${m.fault.name}): every run would end the CUDA context, there is nothing to keep resident`,
      {
        hint: "Use `kerncap validate` once per edit (or `kerncap replay`) for a faulting launch.",
      },
    );
  }
  if (!existsSync(join(dir, "build.sh"))) {
    throw new KerncapError("E_NO_REPRODUCER", `${dir} has no build.sh: no reproducer project was generated for this capture, nothing to watch`, {
      hint: "Capture with the kernel's source available (CUDA: --source-root/--compile-commands; Triton: automatic), or replay the captured module with `kerncap replay`.",
    });
  }
  if (!existsSync(join(dir, "src"))) {
    throw new KerncapError("E_NO_REPRODUCER", `${dir} has no src/ folder: the reproducer's sources are what --watch watches`, {
      hint: "Capture again with the kernel's source available.",
    });
  }
}

export interface WatchOptions {
  run: Omit<RunOptions, "modulePath" | "kernelName" | "regionTypes">;
  /** Check every restored memory chunk's kc64 when the capture is opened (default true; validate --no-verify: false). */
  verify?: boolean;
  /** KERNCAP_FORCE=1 for build.sh (Triton version). */
  force: boolean;
  /** Keep build.sh's stderr out of the debug log. */
  quiet: boolean;
  /** Called with every event (the verb prints it). */
  emit: (e: WatchEvent) => void;
  /** After the first build, rebuild saves with the frontend's fast build (CUDA: the pruned TU's device-only build) when it gives the kernel build.sh's machine code (src/rebuild/rebuilder.ts; default true; --full-build: false). */
  fastBuild?: boolean;
  /** How the capture is opened (default: openReplay with `verify`; the CPU tests pass a session without a GPU). */
  open?: (c: OpenedCapture) => Promise<ReplaySession>;
  /** --build-only: no replay session (no GPU): each save is rebuilt and its line says whether the kernel compiles, with its registers and stack frame. */
  buildOnly?: boolean;
}

/**
 * Run the watch until SIGINT/SIGTERM.
 * @returns the exit code: 130 (SIGINT) or 143 (SIGTERM).
 * @throws KerncapError from openReplay (the capture cannot be replayed here: E_VA_TAKEN, E_NO_GPU,
 *   E_CHECKSUM …), and anything that is not a KerncapError (a kerncap bug).
 */
export async function watchReproducer(c: OpenedCapture, o: WatchOptions): Promise<number> {
  const dir = resolve(c.dir);
  const m = c.manifest;
  const t0 = performance.now();
  const open = () =>
    o.buildOnly ? Promise.resolve(undefined) : (o.open ?? ((x: OpenedCapture) => openReplay(x, { verify: o.verify ?? true })))({ dir, manifest: m });
  const stops = new StopSignals().install();
  let stopped!: () => void;
  const stoppedP = new Promise<void>((res) => (stopped = res));
  stops.onStop = () => stopped();
  const fe = frontendOf(m);
  const rebuilder = new Rebuilder(dir, m, fe, { quiet: o.quiet, force: o.force, fullBuild: o.fastBuild === false, watch: true });
  const ignore = new Set(fe.generatedSources?.(m) ?? []);
  const w = new WatchLoop(dir, m, o, rebuilder, stops, open, stopped);
  try {
    // the first build runs while the memory is reserved, restored and checked
    const firstBuild = build(rebuilder);
    firstBuild.catch(() => {});
    const opening = open();
    opening.catch(() => {});
    await Promise.race([opening.catch(() => {}), stoppedP]);
    if (stops.signal) return exitCode(stops);
    try {
      w.session = await opening;
    } catch (e) {
      await firstBuild.catch(() => {}); // its process and signal handlers end before the error is reported
      throw e;
    }
    await Promise.race([w.track(w.cycle("start", [], t0, firstBuild)), stoppedP]);
    if (w.failure === undefined && !stops.signal) {
      w.watchSources(join(dir, "src"), ignore);
      // said once the watcher is up: a save from here on is seen (the tests wait for this line)
      log.info(`watching ${join(dir, "src")} (a save rebuilds${o.buildOnly ? ", no replay" : " and replays"}; Ctrl-C ends)`);
      w.startCheck(await firstBuild);
      await stoppedP;
    }
    w.stopWatching();
    await w.busy;
    await w.check?.done;
    if (w.failure !== undefined && !(isKerncapError(w.failure) && w.failure.code === "E_INTERRUPTED")) throw w.failure;
    return exitCode(stops);
  } finally {
    w.stopWatching();
    w.session?.close();
    stops.dispose();
    rebuilder.close();
  }
}

/**
 * One watch's cycles: the replay session, the cycle in flight (one at a time; saves during a
 * cycle make one more cycle after it), the pruned build's check beside them, and the first
 * failure, which ends the watch (`stopped`).
 */
class WatchLoop {
  /** The replay session (none with --build-only). */
  session: ReplaySession | undefined;
  /** The cycle in flight (awaited before cleanup: a build stops at the signal, a run is short). */
  busy: Promise<void> | undefined;
  /** The pruned build's check in flight (CUDA), and its stop. */
  check: { done: Promise<void>; abort: AbortController } | undefined;
  failure: unknown;
  /** What the idle reset after the previous run put back, reported in the next verdict line. */
  private idleReset: ResetLine | null = null;
  private watcher: FSWatcher | undefined;
  private cycles: SaveCycles | undefined;
  private readonly guard: () => void;

  constructor(
    private readonly dir: string,
    private readonly m: Manifest,
    private readonly o: WatchOptions,
    private readonly rebuilder: Rebuilder,
    private readonly stops: StopSignals,
    private readonly open: () => Promise<ReplaySession | undefined>,
    private readonly stopped: () => void,
  ) {
    this.guard = watchGuard(dir, m);
  }

  /**
   * One cycle: the run of what `built` gives, its line; then the memory put back for the next
   * save (the session opened again after a kernel fault). The run begins once `compiling`
   * resolves (a compiler started; default: at once) or the build ended. `built` rejecting with
   * BuildSuperseded (a later save stopped the build): no line.
   */
  async cycle(trigger: Trigger, files: string[], savedAt: number, built: Promise<Built>, buildAt = savedAt, compiling?: Promise<void>): Promise<void> {
    if (!this.session) return builtCycle(this.dir, this.m, built, this.o, { trigger, files, savedAt });
    const r = await runCycle(this.m, this.session, built, this.o, { trigger, files, savedAt, buildAt, reset: this.idleReset, compiling }).catch((e) => {
      if (e instanceof BuildSuperseded) return { ran: false, reopen: false }; // no line; what the captured module's run wrote is put back below
      throw e;
    });
    if (r.ran) this.idleReset = null;
    if (r.reopen) {
      this.session!.close({ resetDevice: true });
      this.session = await this.open();
    }
    // between saves: put back what this run wrote, so that the next save's run starts at once
    const z = this.session!.reset();
    if (z) this.idleReset = { chunks: z.chunks, bytes: z.bytes, seconds: z.seconds };
  }

  /** `p` as the cycle in flight: its failure ends the watch. */
  track(p: Promise<void>): Promise<void> {
    this.busy = p
      .catch((e) => {
        this.failure ??= e;
        this.stopped();
      })
      .finally(() => {
        this.busy = undefined;
      });
    return this.busy;
  }

  /**
   * The pruned build's check runs beside the cycles, never in their way: a save while it runs
   * stops it (it would compare a build of the old text), and the next build.sh build is checked.
   */
  startCheck(built: Built): void {
    if (!built.ok || !this.rebuilder.wantsCheck(built) || this.stops.signal || this.failure !== undefined) return;
    const prev = this.check?.done ?? Promise.resolve();
    const abort = new AbortController();
    const done = prev
      .then(() => (abort.signal.aborted ? undefined : this.rebuilder.checkBeside(built, abort.signal)))
      .catch((e) => {
        this.failure ??= e;
        this.stopped();
      });
    this.check = { done, abort };
  }

  /**
   * A save's cycle (SaveCycles starts it at the burst's first event): the build, its compiler
   * held until the burst is quiet; a build stopped by a later event ends the cycle without a line.
   */
  private async save(c: SaveCycle): Promise<void> {
    this.guard(); // the folder the watch started on, and as trusted: else the watch ends, nothing built (adversary 59)
    this.check?.abort.abort();
    const buildAt = performance.now();
    let compiled!: () => void;
    const compiling = new Promise<void>((res) => (compiled = res));
    const built = build(this.rebuilder, { signal: c.signal, quiet: c.quiet, onCompile: () => compiled() }).then((b) => {
      if (b === "superseded") throw new BuildSuperseded();
      c.built(); // in the same turn as the build's end: a file event from now on queues one more cycle
      return b;
    });
    await this.cycle("save", c.files, c.savedAt, built, buildAt, compiling);
    const b = await built.catch(() => undefined);
    if (b) this.startCheck(b);
    else if (c.signal.aborted) log.debug(`a save came while ${c.files.join(", ")} was rebuilt: that build stopped, the last text is built next`);
  }

  /** Watch the sources under `src` (fs.watch, recursive): each save of a source (isSourceSave, `ignore` left out) a cycle (SaveCycles). */
  watchSources(src: string, ignore: ReadonlySet<string>): void {
    const cycles = new SaveCycles(DEBOUNCE_MS, (c) =>
      this.track(this.save(c)).then(() => {
        if (this.stops.signal || this.failure !== undefined) cycles.cancel();
      }),
    );
    this.cycles = cycles;
    this.watcher = watch(src, { recursive: true }, (_ev, name) => {
      const rel = name === null ? null : String(name);
      if (isSourceSave(rel, ignore)) setImmediate(() => cycles.poke(rel!));
    });
  }

  /** No more saves: the watcher closed, a queued cycle dropped, a save's build still running stopped. */
  stopWatching(): void {
    this.watcher?.close();
    this.cycles?.cancel();
  }
}

function exitCode(stops: StopSignals): number {
  return signalExitCode(stops.signal ?? "SIGINT");
}

type Built = ({ ok: true } & Rebuilt) | { ok: false; error: KerncapError; seconds: number | null; builder: Builder };

/**
 * One rebuild (src/rebuild/rebuilder.ts rebuildSave, with a save's stop and quiet time) and the
 * check of its module; a KerncapError is a result (E_INTERRUPTED is thrown); "superseded": stopped by a later save.
 */
async function build(rebuilder: Rebuilder, o: SaveBuild): Promise<Built | "superseded">;
async function build(rebuilder: Rebuilder): Promise<Built>;
async function build(rebuilder: Rebuilder, o?: SaveBuild): Promise<Built | "superseded"> {
  let seconds: number | null = null;
  let builder: Builder = "build.sh";
  try {
    const b = await rebuilder.rebuildSave(o);
    if (o?.signal.aborted) return "superseded"; // built, but of a text a later save replaced
    ({ seconds, builder } = b);
    return { ok: true, ...rebuilder.checkRebuilt(b) };
  } catch (e) {
    if (e instanceof BuildSuperseded) return "superseded";
    if (!isKerncapError(e) || e.code === "E_INTERRUPTED") throw e;
    return { ok: false, error: e, seconds, builder };
  }
}

/** A save's build options (Rebuilder.rebuildSave). */
type SaveBuild = { signal: AbortSignal; quiet: () => Promise<void>; onCompile: () => void };

/** The build-error line of a failed build. */
function buildErrorEvent(b: Extract<Built, { ok: false }>, base: { trigger: Trigger; files: string[] }, saveToVerdictSeconds: number): WatchEvent {
  return {
    event: "build-error",
    ...base,
    at: new Date().toISOString(),
    code: b.error.code,
    message: b.error.message,
    // the watch rebuilds at each save: no "run validate again" (nu9 #12)
    hint:
      b.error.hint === FIX_AND_VALIDATE ? "Fix the compile error in the edited source and save it: the watch rebuilds at each save." : (b.error.hint ?? null),
    buildSeconds: b.seconds,
    builder: b.builder,
    saveToVerdictSeconds,
    // the compiler's messages, structured, as validate's E_BUILD carries them (nu12 #6: an editor had to parse message)
    ...(Array.isArray(b.error.details?.diagnostics) && b.error.details.diagnostics.length ? { diagnostics: b.error.details.diagnostics as Diagnostic[] } : {}),
  };
}

/** One --build-only cycle once the build is done: its line (built, with the kernel's resources, or build-error); nothing runs. */
async function builtCycle(
  dir: string,
  m: Manifest,
  built: Promise<Built>,
  o: WatchOptions,
  x: { trigger: Trigger; files: string[]; savedAt: number },
): Promise<void> {
  let b: Built;
  try {
    b = await built;
  } catch (e) {
    if (e instanceof BuildSuperseded) return; // stopped for a later save: no line
    throw e;
  }
  const base = { trigger: x.trigger, files: x.files };
  const since = (performance.now() - x.savedAt) / 1000;
  if (!b.ok) return o.emit(buildErrorEvent(b, base, since));
  o.emit({
    event: "built",
    ...base,
    at: new Date().toISOString(),
    kernel: m.kernel.name,
    symbol: m.kernel.name,
    buildSeconds: b.seconds,
    builder: b.builder,
    ...(b.steps ? { buildSteps: b.steps } : {}),
    ...moduleResources(dir, m, b.module),
    saveToVerdictSeconds: since,
  });
}

/**
 * One cycle: run the rebuilt module, emit its line. The run begins when `x.compiling` resolves
 * (the compiler started) or the build ended, with the module awaited inside it: the captured
 * module is loaded and judged while the compiler runs (ReplaySession.runCompared); not sooner, so
 * that its calls on this thread do not hold up the build's own work before the compiler (the
 * pruning). A build that fails (or its module's check) ends the run before the rebuilt module
 * loads; its line is the build error.
 * @returns ran: the module was launched; reopen: a kernel fault left the CUDA context unusable.
 * @throws what `built` throws (E_INTERRUPTED, BuildSuperseded: then no line), once the run ended
 */
async function runCycle(
  m: Manifest,
  session: ReplaySession,
  built: Promise<Built>,
  o: WatchOptions,
  x: { trigger: Trigger; files: string[]; savedAt: number; buildAt: number; reset: ResetLine | null; compiling?: Promise<void> },
): Promise<{ ran: boolean; reopen: boolean }> {
  const settled = built.then(
    () => {},
    () => {},
  );
  await Promise.race([x.compiling ?? Promise.resolve(), settled]);
  const regionTypes = regionTypesOf(m);
  const module = built.then((b) => (b.ok ? b.module : Promise.reject(new Error("the build failed: nothing to load"))));
  module.catch(() => {});
  // the rebuilt kernel judged, and timed interleaved against the captured module (as validate does)
  const candidate = { ...o.run, regionTypes, ...rebuiltRun(frontendOf(m), m, module) };
  const running =
    o.run.iters >= MIN_PAIRS
      ? session.runCompared({ ...o.run, regionTypes }, { compareBudgetSeconds: WATCH_COMPARE_SECONDS, ...candidate })
      : session.run(candidate).then((r) => ({ candidate: r, compare: null }));
  running.catch(() => {});
  let b: Built;
  try {
    b = await built;
  } catch (e) {
    await running.catch(() => {}); // the session is free again before the next cycle (or the end)
    throw e;
  }
  const since = () => (performance.now() - x.savedAt) / 1000;
  const base = { trigger: x.trigger, files: x.files };
  if (!b.ok) {
    const runError = await running.then(
      () => undefined,
      (e: unknown) => e,
    );
    o.emit(buildErrorEvent(b, base, since()));
    return { ran: false, reopen: isKerncapError(runError) && session.isContextLost(runError) };
  }
  const runAt = performance.now();
  try {
    const { candidate: r, compare } = await running;
    const phases = {
      waitSeconds: (x.buildAt - x.savedAt) / 1000,
      buildWallSeconds: (runAt - x.buildAt) / 1000,
      runSeconds: (performance.now() - runAt) / 1000,
    };
    o.emit({
      ...verdictEvent(r, { ...base, at: new Date(), buildSeconds: b.seconds, builder: b.builder, saveToVerdictSeconds: since(), reset: x.reset, compare }),
      phases,
      ...(b.steps ? { buildSteps: b.steps } : {}),
    } as WatchEvent);
    return { ran: true, reopen: false };
  } catch (e) {
    if (!isKerncapError(e)) throw e;
    const reopen = session.isContextLost(e);
    o.emit({
      event: "error",
      ...base,
      at: new Date().toISOString(),
      code: e.code,
      message: e.message,
      hint: e.hint ?? null,
      buildSeconds: b.seconds,
      saveToVerdictSeconds: since(),
      ...(reopen ? { reopened: true } : {}),
    });
    if (reopen) log.warn(`the kernel faulted (${e.message}); restoring the capture in a new CUDA context`);
    return { ran: true, reopen };
  }
}
