/**
 * Child processes that kerncap starts in their own process group (the application under `run` and
 * `list`, a reproducer's build.sh under `validate`), and what Ctrl-C (SIGINT) or SIGTERM of kerncap
 * does to them: the signal goes to the child's whole group (a shell waits for its foreground child
 * before acting on a signal; a launcher's workers are in the group too), then SIGKILL to the group
 * after a grace period or at a second signal. kerncap itself does not die of the signal: the caller
 * sees `interrupted` and cleans up (its temp folder) before exiting 130 (SIGINT) or 143 (SIGTERM).
 */
import { existsSync, readFileSync } from "node:fs";
import { constants } from "node:os";

export type StopSignal = "SIGINT" | "SIGTERM" | "SIGHUP" | "SIGQUIT";

/**
 * The signals of `names` that the mask `sigIgn` (the hexadecimal SigIgn field of
 * /proc/PID/status: bit n-1 set when signal n is ignored) marks ignored.
 */
export function ignoredIn(sigIgn: string, names: readonly NodeJS.Signals[]): Set<NodeJS.Signals> {
  const mask = /^[0-9a-f]{1,16}$/i.test(sigIgn) ? BigInt(`0x${sigIgn}`) : 0n;
  return new Set(names.filter((n) => (mask >> BigInt((constants.signals[n] ?? 0) - 1)) & 1n));
}

/**
 * The stop signals this process was started with ignored (SigIgn of /proc/self/status, read when
 * this module is first loaded, before kerncap installs any handler): SIGHUP under `nohup`; SIGINT
 * and SIGQUIT for a command a non-interactive shell started with `&`. kerncap leaves SIGHUP ignored
 * (StopSignals), so `nohup kerncap run …` outlives its terminal as `nohup` promises and its
 * children inherit the ignore; an ignored SIGINT is still a stop (a script's `kill -INT` of its
 * background kerncap ends it, as the CPU tests' own interruptions do). Empty where /proc is not readable.
 */
export const INHERITED_IGNORED: ReadonlySet<NodeJS.Signals> = (() => {
  try {
    const m = /^SigIgn:\s*([0-9a-f]+)$/im.exec(readFileSync("/proc/self/status", "utf8"));
    return ignoredIn(m?.[1] ?? "", ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"]);
  } catch {
    return new Set<NodeJS.Signals>();
  }
})();

/** Exit code for a command ended by a signal (128 + signal number, the shell's convention). */
export function signalExitCode(sig: StopSignal | NodeJS.Signals | string): number {
  const n = constants.signals[sig as NodeJS.Signals];
  return 128 + (n ?? 15);
}

/** Send sig to every process of group pgid; false when the group is gone. */
export function killGroup(pgid: number, sig: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, sig);
    return true;
  } catch {
    return false;
  }
}

/**
 * kerncap's own SIGINT/SIGTERM while `install`ed: the first one is recorded (`signal`) and
 * passed to `onStop` (set while a child runs), a later one escalates (`onKill`). Without an
 * onStop the signal is only recorded, for the caller to act on at its next step. A SIGHUP the
 * process was started with ignored (INHERITED_IGNORED: nohup's) gets no handler.
 */
export class StopSignals {
  signal: StopSignal | null = null;
  /** Called at the first signal (the child's group gets it). */
  onStop?: (sig: StopSignal) => void;
  /** Called at every later signal (the child's group is killed). */
  onKill?: () => void;
  private handlers: [StopSignal, () => void][] = [];

  install(): this {
    // SIGHUP (the terminal or ssh session went away) and SIGQUIT end a run as SIGTERM does: the group gets it, the temp goes
    for (const sig of ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"] as const) {
      if (sig === "SIGHUP" && INHERITED_IGNORED.has(sig)) continue;
      const h = () => {
        if (this.signal) return this.onKill?.();
        this.signal = sig;
        this.onStop?.(sig);
      };
      process.on(sig, h);
      this.handlers.push([sig, h]);
    }
    return this;
  }

  dispose(): void {
    for (const [sig, h] of this.handlers) process.off(sig, h);
    this.handlers = [];
  }
}

/**
 * Tie a child's process group (pgid = the child's pid: spawned with `detached: true`, i.e. setsid)
 * to `stops`: the first signal goes to the group, SIGKILL follows after graceMs or at a second
 * signal. Call the returned function once the child has exited: it kills what is left of the group
 * when kerncap was interrupted (stragglers that ignored the signal) and unhooks.
 */
export function forwardToGroup(stops: StopSignals, pgid: number, graceMs: number): () => void {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const kill = () => killGroup(pgid, "SIGKILL");
  const stop = (sig: StopSignal) => {
    killGroup(pgid, sig);
    timer = setTimeout(kill, graceMs);
    timer.unref?.();
  };
  stops.onStop = stop;
  stops.onKill = kill;
  if (stops.signal) stop(stops.signal); // a signal that came before the child started
  return () => {
    if (timer) clearTimeout(timer);
    if (stops.signal) kill();
    stops.onStop = undefined;
    stops.onKill = undefined;
  };
}

/** The variable that names the process a kerncap child must not outlive (src/mcp/children.ts sets it; endWithParent reads it). */
export const PARENT_PID_VAR = "KERNCAP_PARENT_PID";

/**
 * End this process as a SIGTERM would (its own children's groups stopped, temporaries removed) once
 * the process `parentPid` that started it is gone: its parent pid changes when the parent exits
 * (the kernel gives the orphan to init or a subreaper). The MCP server's tool children run in
 * process groups of their own, so a `kill -9` of the server reaches none of them; without this a
 * tune of many configs went on building after its server was killed. Polls getppid every
 * `everyMs` ms (an unref'd timer: it keeps nothing alive). A pid that is not a whole number above
 * 1 is ignored.
 */
export function endWithParent(parentPid: number, everyMs = 500): void {
  if (!Number.isInteger(parentPid) || parentPid <= 1) return;
  const check = () => {
    if (process.ppid === parentPid) return;
    clearInterval(timer);
    process.kill(process.pid, "SIGTERM");
  };
  const timer = setInterval(check, everyMs);
  timer.unref();
  check();
  watchParentOutsideLoop(parentPid);
}

/**
 * The timer of endWithParent runs on the event loop, which a long synchronous step blocks (adversary
 * 65 02: a backtracking regex over a build's messages held a tool child for minutes after its server's
 * kill -9, orphaned): a small shell beside it reads this process's parent from /proc every second and,
 * once it is no longer `parentPid`, sends SIGTERM, then SIGKILL 5 s later if the process is still
 * there (its handler could not run), each only while the pid is still this process (its start
 * time unchanged: a pid taken again is left alone). It ends with this process. Linux only (/proc);
 * elsewhere, and where sh cannot start, the timer alone.
 */
function watchParentOutsideLoop(parentPid: number): void {
  if (!existsSync(`/proc/${process.pid}/status`)) return;
  try {
    // its sed, cut and sleep from the system's folders only, in /: never a relative PATH entry's (adversary round 71: a
    // planted node_modules/.bin/sed ran at every kerncap mcp tool call)
    const w = Bun.spawn(["/bin/sh", "-c", PARENT_WATCH_SCRIPT, "sh", String(parentPid), String(process.pid)], {
      env: { PATH: WATCHER_PATH },
      cwd: "/",
      stdin: "ignore",
      stdout: "ignore",
      stderr: "ignore",
    });
    w.unref();
  } catch {
    // no sh: the timer alone
  }
}

/** The parent watcher's PATH: the system's folders, where sed, cut and sleep are. */
export const WATCHER_PATH = "/usr/bin:/bin";

/**
 * The watcher's shell script: `sh -c SCRIPT sh PARENT CHILD [PROC]`. While CHILD's parent (PPid in
 * PROC/CHILD/status, PROC = /proc unless a test gives a stand-in) is PARENT it sleeps a second;
 * then it signals CHILD (SIGTERM, 5 s later SIGKILL), each only while CHILD is still the process it
 * first read: its start time (stat's field 22, read after the command name's closing parenthesis)
 * unchanged, so a pid taken again by another process is left alone (adversary 66's lead).
 */
export const PARENT_WATCH_SCRIPT =
  'p=$1; c=$2; r=${3:-/proc}; ppid() { sed -n "s/^PPid:[[:space:]]*//p" "$r/$c/status" 2>/dev/null; }; ' +
  'st() { sed "s/.*) //" "$r/$c/stat" 2>/dev/null | cut -d" " -f20; }; s0=$(st); [ -n "$s0" ] || exit 0; ' +
  'while [ "$(ppid)" = "$p" ]; do sleep 1; done; [ "$(st)" = "$s0" ] || exit 0; ' +
  'kill -TERM "$c" 2>/dev/null; sleep 5; [ "$(st)" = "$s0" ] || exit 0; kill -KILL "$c" 2>/dev/null; exit 0';
