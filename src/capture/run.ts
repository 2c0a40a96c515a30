/**
 * The application process under `run` and `list`: find it, start it in its own process group,
 * wait for it (kerncap's Ctrl-C/SIGTERM ends the group), and the name helpers for "no such kernel"
 * messages. What the capture library is told and what it wrote are src/capture/session.ts's.
 */
import { accessSync, constants, existsSync, readFileSync, rmSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { KerncapError } from "../errors.ts";
import { isTempName } from "../leftovers.ts";
import { log } from "../log.ts";
import { forwardToGroup, type StopSignal, type StopSignals } from "../process-group.ts";

import type { KernelSeen } from "./census.ts";
import { partialDistance } from "../util/text.ts";

export type { KernelSeen };

export interface AppRun {
  exitCode: number | null;
  /** The signal that ended the application, if one did ("SIGTERM"…). */
  signal: string | null;
  /** Wall time of the application run (s). */
  seconds: number;
  /** kerncap's own SIGINT/SIGTERM that stopped the application's process group, if one came. */
  interrupted: StopSignal | null;
}

export interface AppRunOptions {
  argv: string[];
  /** The application's whole environment. */
  env: Record<string, string | undefined>;
  /** Send the app's stdout to our stderr (keeps our stdout for --json data). */
  stdoutToStderr: boolean;
  /** kerncap's SIGINT/SIGTERM, installed by the caller for as long as its temp folder lives. */
  stops: StopSignals;
}

/**
 * A stopped application gets this long (ms) after the first signal before its group gets SIGKILL;
 * a second Ctrl-C kills at once.
 */
export const APP_GRACE_MS = 5000;

/**
 * Resolve argv[0] like a shell would (PATH lookup unless it has a slash).
 * @throws KerncapError E_USAGE (no application), E_APP_NOT_FOUND, E_APP_NOT_EXECUTABLE
 */
export function resolveApp(argv: string[]): string {
  if (!argv.length || !argv[0]) {
    throw new KerncapError("E_USAGE", "no application given", {
      hint: "Put the application after `--`, e.g. `kerncap list -- python app.py` or `kerncap run --kernel softmax -- python app.py`.",
    });
  }
  const a = argv[0];
  if (a === "--")
    throw new KerncapError("E_USAGE", "`--` is given twice before the application", {
      hint: "One `--` ends kerncap's options: `kerncap run --kernel K -- ./app args`.",
    });
  const path = a.includes("/") ? resolve(a) : Bun.which(a);
  if (!path || !existsSync(path)) {
    throw new KerncapError("E_APP_NOT_FOUND", `application not found: ${a}`, {
      hint: a.includes("/") ? "Check the path." : "It is not on PATH; give its path (./app) or fix PATH.",
    });
  }
  if (statSync(path).isDirectory()) {
    throw new KerncapError("E_APP_NOT_EXECUTABLE", `application is a directory, not a program: ${path}`, {
      hint: "Give the program to run after `--` (e.g. ./build/app, or python app.py).",
    });
  }
  try {
    accessSync(path, constants.X_OK);
  } catch {
    throw new KerncapError("E_APP_NOT_EXECUTABLE", `application is not an executable file: ${path}`, {
      hint: "chmod +x it, or run it through its interpreter (python app.py).",
    });
  }
  return path;
}

/**
 * What the kernel's refusal to start the application means (found by a trial: these were reported
 * as kerncap bugs): ENOEXEC (no `#!` line, not a program), ENOENT for a file that exists (its
 * `#!` interpreter is missing), EACCES.
 */
export function spawnRefusal(e: unknown, exe: string): KerncapError | unknown {
  const code = (e as NodeJS.ErrnoException)?.code ?? (/\b(ENOEXEC|ENOENT|EACCES)\b/.exec(String((e as Error)?.message)) ?? [])[1];
  if (code === "ENOEXEC") {
    return new KerncapError("E_APP_NOT_EXECUTABLE", `${exe} is not a program the kernel can start (no #! line, or not an executable format)`, {
      hint: `Run it through its interpreter (kerncap run -- bash ${exe}), or add a #! line.`,
    });
  }
  if (code === "ENOENT" && existsSync(exe)) {
    let interp = "";
    try {
      const head = readFileSync(exe, { encoding: "latin1" }).slice(0, 256);
      interp = head.startsWith("#!") ? head.slice(2).split("\n")[0]!.trim() : "";
    } catch {
      /* unreadable: said below without the interpreter */
    }
    return new KerncapError(
      "E_APP_NOT_EXECUTABLE",
      `${exe} cannot be started: ${interp ? `its interpreter (#!${interp}) does not exist` : "a file it needs to start (its interpreter or loader) does not exist"}`,
      { hint: "Fix its #! line, or run it through an interpreter that exists." },
    );
  }
  if (code === "EACCES")
    return new KerncapError("E_APP_NOT_EXECUTABLE", `${exe} cannot be started: permission denied`, {
      hint: "chmod +x it (and make its folders searchable), or run it through its interpreter.",
    });
  return e;
}

/**
 * Run the application to completion, in a process group of its own (pgid = its pid; setsid, so
 * it has no controlling terminal: it reads an inherited terminal stdin, not /dev/tty). kerncap's
 * SIGINT/SIGTERM goes to that whole group (launchers' workers too), then SIGKILL after
 * APP_GRACE_MS or at a second signal, and whatever is left of the group is killed once the
 * application has exited; `interrupted` says which signal it was.
 */
export async function runApp(o: AppRunOptions): Promise<AppRun> {
  const exe = resolveApp(o.argv);
  const t0 = performance.now();
  let proc: ReturnType<typeof Bun.spawn>;
  try {
    proc = Bun.spawn([exe, ...o.argv.slice(1)], {
      argv0: o.argv[0], // the name as typed (a PATH lookup does not change what the program sees as argv[0])
      env: o.env,
      stdin: "inherit",
      stdout: o.stdoutToStderr ? 2 : "inherit",
      stderr: "inherit",
      detached: true,
    });
  } catch (e) {
    throw spawnRefusal(e, exe);
  }
  const unhook = forwardToGroup(o.stops, proc.pid, APP_GRACE_MS);
  let exitCode: number | null;
  try {
    exitCode = await proc.exited;
  } finally {
    unhook();
  }
  const seconds = (performance.now() - t0) / 1000;
  log.debug(`app exited with ${exitCode} after ${seconds.toFixed(2)} s`);
  return {
    exitCode,
    signal: proc.signalCode == null ? null : String(proc.signalCode),
    seconds,
    interrupted: o.stops.signal,
  };
}

/** Remove a temporary capture folder, never a final one. */
export function removeTemp(dir: string): void {
  if (isTempName(dir) || dir.includes("/kerncap-list-")) rmSync(dir, { recursive: true, force: true });
}

/**
 * Kernel names closest to a pattern, for "the kernel never ran" errors: substring hits on the
 * pattern's literal words first, then edit distance on the demangled base name.
 */
export function closestKernels(pattern: string, kernels: KernelSeen[], n = 5): string[] {
  const words = pattern
    .toLowerCase()
    .split(/[^a-z0-9_]+/)
    .filter((w) => w.length >= 2);
  const base = (k: KernelSeen) => (k.demangled || k.name).replace(/\(.*$/, "").replace(/^.*\s/, "").toLowerCase();
  const scored = kernels.map((k) => {
    const b = base(k);
    const hits = words.filter((w) => b.includes(w) || k.name.toLowerCase().includes(w)).length;
    const dist = Math.min(...(words.length ? words : [pattern.toLowerCase()]).map((w) => partialDistance(w, b)));
    return { k, score: -hits * 1000 + dist };
  });
  scored.sort((a, b) => a.score - b.score);
  return scored.slice(0, n).map((s) => s.k.demangled || s.k.name);
}
