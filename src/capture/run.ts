/**
 * Start the application with a capture library injected, wait for it, and report what the
 * library wrote. The library contract (environment, files) is docs/raw-capture.md.
 */
import { accessSync, constants, existsSync, mkdirSync, rmSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { KerncapError } from "../errors.ts";
import { log } from "../log.ts";
import { readCensus, type Census, type KernelSeen } from "./census.ts";

export type { KernelSeen } from "./census.ts";

export interface AppRun {
  exitCode: number | null;
  signal: string | null;
  /** Wall time of the application run (s). */
  seconds: number;
  /** Every process's kernels merged (src/capture/census.ts). */
  kernels: KernelSeen[];
  launches: number;
  /** Lines of every error.<pid>.txt: internal failures of the capture library (capture was disabled in that process). */
  libraryErrors: string[];
  interrupted: boolean;
  /** Per-process censuses, the claim, the process count. */
  census: Census;
}

export interface AppRunOptions {
  argv: string[];
  /** Folder the library writes into (created here). */
  outDir: string;
  mode: "list" | "capture";
  env: Record<string, string>;
  /** Send the app's stdout to our stderr (keeps our stdout for --json data). */
  stdoutToStderr: boolean;
}

/**
 * Resolve argv[0] like a shell would (PATH lookup unless it has a slash).
 * @throws KerncapError E_APP_NOT_FOUND / E_APP_NOT_EXECUTABLE
 */
export function resolveApp(argv: string[]): string {
  if (!argv.length || !argv[0]) {
    throw new KerncapError("E_USAGE", "no application given", { hint: "Put the application after `--`, e.g. `kerncap list -- python app.py` or `kerncap run --kernel softmax -- python app.py`." });
  }
  const a = argv[0];
  const path = a.includes("/") ? resolve(a) : Bun.which(a);
  if (!path || !existsSync(path)) {
    throw new KerncapError("E_APP_NOT_FOUND", `application not found: ${a}`, {
      hint: a.includes("/") ? "Check the path." : "It is not on PATH; give its path (./app) or fix PATH.",
    });
  }
  if (statSync(path).isDirectory()) {
    throw new KerncapError("E_APP_NOT_EXECUTABLE", `application is a directory, not a program: ${path}`, { hint: "Give the program to run after `--` (e.g. ./build/app, or python app.py)." });
  }
  try {
    accessSync(path, constants.X_OK);
  } catch {
    throw new KerncapError("E_APP_NOT_EXECUTABLE", `application is not an executable file: ${path}`, { hint: "chmod +x it, or run it through its interpreter (python app.py)." });
  }
  return path;
}

/** Run the app to completion under the library. Ctrl-C is forwarded and reported as interrupted. */
export async function runApp(o: AppRunOptions): Promise<AppRun> {
  const exe = resolveApp(o.argv);
  mkdirSync(`${o.outDir}/kernel`, { recursive: true });
  mkdirSync(`${o.outDir}/memory`, { recursive: true });
  const t0 = performance.now();
  let interrupted = false;
  const proc = Bun.spawn([exe, ...o.argv.slice(1)], {
    env: { ...process.env, ...o.env },
    stdin: "inherit",
    stdout: o.stdoutToStderr ? 2 : "inherit",
    stderr: "inherit",
  });
  const forward = (sig: NodeJS.Signals) => () => {
    interrupted = true;
    try {
      proc.kill(sig);
    } catch {
      /* already gone */
    }
  };
  const onInt = forward("SIGINT");
  const onTerm = forward("SIGTERM");
  process.on("SIGINT", onInt);
  process.on("SIGTERM", onTerm);
  const exitCode = await proc.exited;
  process.off("SIGINT", onInt);
  process.off("SIGTERM", onTerm);
  const seconds = (performance.now() - t0) / 1000;
  const census = readCensus(o.outDir);
  log.debug(`app exited with ${exitCode} after ${seconds.toFixed(2)} s; ${census.kernels.length} kernels seen in ${census.processes.length} processes`);
  return {
    exitCode,
    signal: proc.signalCode == null ? null : String(proc.signalCode),
    seconds,
    kernels: census.kernels,
    launches: census.launches,
    libraryErrors: census.errors,
    interrupted,
    census,
  };
}

/** Remove a temporary capture folder, never a final one. */
export function removeTemp(dir: string): void {
  if (/\.tmp-\d+$/.test(dir) || dir.includes("/kerncap-list-")) rmSync(dir, { recursive: true, force: true });
}

/**
 * Kernel names closest to a pattern, for "the kernel never ran" errors: substring hits on the
 * pattern's literal words first, then edit distance on the demangled base name.
 */
export function closestKernels(pattern: string, kernels: KernelSeen[], n = 5): string[] {
  const words = pattern.toLowerCase().split(/[^a-z0-9_]+/).filter((w) => w.length >= 2);
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

/** Edit distance of a to its best-matching window of b (a typo inside a long name still scores well). */
function partialDistance(a: string, b: string): number {
  if (b.length <= a.length) return editDistance(a, b);
  let best = Infinity;
  for (let i = 0; i + a.length <= b.length; i++) best = Math.min(best, editDistance(a, b.slice(i, i + a.length + 1)));
  return best;
}

function editDistance(a: string, b: string): number {
  const m = a.length;
  const n = b.length;
  let prev = Array.from({ length: n + 1 }, (_, j) => j);
  for (let i = 1; i <= m; i++) {
    const cur = [i];
    for (let j = 1; j <= n; j++) cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[n]!;
}
