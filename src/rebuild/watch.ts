/**
 * `kerncap validate --watch DIR`: one process keeps the capture's memory resident on the GPU
 * (src/replay/engine.ts openReplay) and, at each save of a file under DIR/src/, rebuilds the
 * reproducer (the one rebuild policy: src/rebuild/rebuilder.ts), checks the rebuilt module (CUDA: its parameter layout),
 * puts back only what earlier runs wrote (ReplaySession.reset) and replays: one line per save.
 *
 * Saves are seen through fs.watch (recursive, inotify on Linux) and debounced: a cycle starts
 * DEBOUNCE_MS after the last event of a burst (an editor's save is several events: a temporary
 * file, a rename, a change); the save-to-verdict time is measured from that last event. Editor
 * temporaries, dotfiles, Python caches and what kerncap writes under src/ itself (CUDA's slice:
 * Frontend.generatedSources) are ignored (isSourceSave). A save during a cycle queues one more cycle after it.
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
import { isCaptureTemp } from "../format/paths.ts";
import type { Manifest } from "../format/manifest.ts";
import { log } from "../log.ts";
import { signalExitCode, StopSignals } from "../process-group.ts";
import { openReplay, type ReplaySession, type RunOptions } from "../replay/engine.ts";
import { MIN_PAIRS } from "../replay/stats.ts";
import { frontendOf, regionTypesOf } from "../frontends/index.ts";
import { FIX_AND_VALIDATE } from "../frontends/build.ts";
import { Rebuilder, rebuiltRun, type Builder, type Rebuilt } from "./rebuilder.ts";
import { verdictEvent, type ResetLine, type Trigger, type WatchEvent } from "./watch-events.ts";

export { verdictEvent, watchLine, type ResetLine, type Trigger, type WatchEvent } from "./watch-events.ts";
export type { Builder } from "./rebuilder.ts";
import { moduleResources } from "./resources.ts";

/**
 * Quiet time after the last file event before a rebuild starts (ms): watchexec's default. An
 * editor's save (a temporary, a rename, a write) is a burst of a few ms; a later event of the
 * same save still queues one more cycle, so the last text is always the one built.
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
  if (/~$|\.sw[a-px]$|\.tmp$|\.temp$|\.bak$|\.orig$|\.part$|\.pyc$|\.kate-swp$|___jb_(tmp|old)___$/i.test(name)) return false;
  if (/^#.*#$/.test(name) || name === "4913" || /^sed[A-Za-z0-9]{6}$/.test(name) || isCaptureTemp(name)) return false;
  return true;
}

/** Timer functions of the debouncer (the real ones by default; tests pass their own clock). */
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

/**
 * Trailing-edge debounce of file saves: `fire(files, lastAt)` runs `ms` after the last poke of a
 * burst, with the distinct files of the burst (in order of first event) and the time of its last
 * event (Timers.now(), ms).
 */
export class SaveDebouncer {
  private files: string[] = [];
  private lastAt = 0;
  private handle: unknown;

  constructor(
    private readonly ms: number,
    private readonly fire: (files: string[], lastAt: number) => void,
    private readonly timers: Timers = REAL_TIMERS,
  ) {}

  poke(file: string): void {
    if (!this.files.includes(file)) this.files.push(file);
    this.lastAt = this.timers.now();
    if (this.handle !== undefined) this.timers.clear(this.handle);
    this.handle = this.timers.set(() => {
      const files = this.files;
      this.files = [];
      this.handle = undefined;
      this.fire(files, this.lastAt);
    }, this.ms);
  }

  /** Drop a pending burst. */
  cancel(): void {
    if (this.handle !== undefined) this.timers.clear(this.handle);
    this.handle = undefined;
    this.files = [];
  }
}

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
  private queued: { files: string[]; savedAt: number } | undefined;
  private watcher: FSWatcher | undefined;
  private debouncer: SaveDebouncer | undefined;

  constructor(
    private readonly dir: string,
    private readonly m: Manifest,
    private readonly o: WatchOptions,
    private readonly rebuilder: Rebuilder,
    private readonly stops: StopSignals,
    private readonly open: () => Promise<ReplaySession | undefined>,
    private readonly stopped: () => void,
  ) {}

  /** One cycle: the run of what `built` gives, its line; then the memory put back for the next save (the session opened again after a kernel fault). */
  async cycle(trigger: Trigger, files: string[], savedAt: number, built: Promise<Built>, buildAt = savedAt): Promise<void> {
    if (!this.session) return builtCycle(this.dir, this.m, built, this.o, { trigger, files, savedAt });
    const r = await runCycle(this.m, this.session, built, this.o, { trigger, files, savedAt, buildAt, reset: this.idleReset });
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

  /** A save (debounced): a cycle now, or one more after the cycle in flight. */
  private save(files: string[], savedAt: number): void {
    if (this.busy) {
      this.queued = { files: [...new Set([...(this.queued?.files ?? []), ...files])], savedAt };
      return;
    }
    this.check?.abort.abort();
    const buildAt = performance.now();
    const built = build(this.rebuilder);
    void this.track(this.cycle("save", files, savedAt, built, buildAt).then(async () => this.startCheck(await built))).then(() => {
      if (this.queued && !this.stops.signal && this.failure === undefined) {
        const q = this.queued;
        this.queued = undefined;
        this.save(q.files, q.savedAt);
      }
    });
  }

  /** Watch the sources under `src` (fs.watch, recursive): each save of a source (isSourceSave, `ignore` left out) debounced into a cycle. */
  watchSources(src: string, ignore: ReadonlySet<string>): void {
    this.debouncer = new SaveDebouncer(DEBOUNCE_MS, (files, savedAt) => this.save(files, savedAt));
    this.watcher = watch(src, { recursive: true }, (_ev, name) => {
      const rel = name === null ? null : String(name);
      if (isSourceSave(rel, ignore)) this.debouncer!.poke(rel!);
    });
  }

  /** No more saves: the watcher closed, a pending debounce dropped. */
  stopWatching(): void {
    this.watcher?.close();
    this.debouncer?.cancel();
  }
}

function exitCode(stops: StopSignals): number {
  return signalExitCode(stops.signal ?? "SIGINT");
}

type Built = ({ ok: true } & Rebuilt) | { ok: false; error: KerncapError; seconds: number | null; builder: Builder };

/** One rebuild (src/rebuild/rebuilder.ts) and the check of its module; a KerncapError is a result (E_INTERRUPTED is thrown). */
async function build(rebuilder: Rebuilder): Promise<Built> {
  let seconds: number | null = null;
  let builder: Builder = "build.sh";
  try {
    const b = await rebuilder.rebuildSave();
    ({ seconds, builder } = b);
    return { ok: true, ...rebuilder.checkRebuilt(b) };
  } catch (e) {
    if (!isKerncapError(e) || e.code === "E_INTERRUPTED") throw e;
    return { ok: false, error: e, seconds, builder };
  }
}

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
  const b = await built;
  const base = { trigger: x.trigger, files: x.files };
  const since = (performance.now() - x.savedAt) / 1000;
  if (!b.ok) return o.emit(buildErrorEvent(b, base, since));
  o.emit({
    event: "built",
    ...base,
    at: new Date().toISOString(),
    kernel: m.kernel.name,
    buildSeconds: b.seconds,
    builder: b.builder,
    ...(b.steps ? { buildSteps: b.steps } : {}),
    ...moduleResources(dir, m, b.module),
    saveToVerdictSeconds: since,
  });
}

/**
 * One cycle once the build is done: run the rebuilt module, emit its line.
 * @returns ran: the module was launched; reopen: a kernel fault left the CUDA context unusable.
 */
async function runCycle(
  m: Manifest,
  session: ReplaySession,
  built: Promise<Built>,
  o: WatchOptions,
  x: { trigger: Trigger; files: string[]; savedAt: number; buildAt: number; reset: ResetLine | null },
): Promise<{ ran: boolean; reopen: boolean }> {
  const b = await built;
  const since = () => (performance.now() - x.savedAt) / 1000;
  const base = { trigger: x.trigger, files: x.files };
  if (!b.ok) {
    o.emit(buildErrorEvent(b, base, since()));
    return { ran: false, reopen: false };
  }
  try {
    const runAt = performance.now();
    // the rebuilt kernel judged, and timed interleaved against the captured module (as validate does)
    const regionTypes = regionTypesOf(m);
    const candidate = { ...o.run, regionTypes, ...rebuiltRun(frontendOf(m), m, b.module) };
    const { candidate: r, compare } =
      o.run.iters >= MIN_PAIRS
        ? await session.runCompared({ ...o.run, regionTypes }, { compareBudgetSeconds: WATCH_COMPARE_SECONDS, ...candidate })
        : { candidate: await session.run(candidate), compare: null };
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
