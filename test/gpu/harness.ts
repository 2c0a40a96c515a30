/**
 * Shared by the GPU suites: where the compiled kerncap is, whether a GPU is present, and a runner
 * that logs every command to $KERNCAP_GPU_OUT/commands.log. GPU suites import only bun:test,
 * node:* and this file: on the device machine they run through kerncap's own Bun (BUN_BE_BUN=1),
 * without node_modules.
 */
import { appendFileSync, existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

export const ROOT = resolve(import.meta.dir, "../..");
export const APPS = join(ROOT, "test/apps");
export const BIN = process.env.KERNCAP_BIN ?? join(ROOT, "dist/kerncap");
export const HAS_GPU = existsSync("/dev/nvidiactl") || existsSync("/dev/nvidia0");

/** Why a GPU suite skips, or undefined when it runs (also printed, so the count says why). */
export function skipReason(suite: string, extra: [boolean, string][] = []): string | undefined {
  const why = !HAS_GPU ? "no NVIDIA GPU on this machine" : !existsSync(BIN) ? `no kerncap binary at ${BIN}` : extra.find(([bad]) => bad)?.[1];
  if (why) console.warn(`[${suite}] skipped: ${why}`);
  return why;
}

export function workDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export interface Res {
  code: number;
  stdout: string;
  stderr: string;
  seconds: number;
}

/** Run a command (120 s at most unless timeoutMs says); BUN_BE_BUN never reaches it. */
export function run(argv: string[], opts: { cwd: string; env?: Record<string, string>; timeoutMs?: number }): Res {
  const t0 = performance.now();
  const { BUN_BE_BUN: _, ...base } = process.env;
  const p = Bun.spawnSync(argv, { cwd: opts.cwd, env: { ...base, ...opts.env }, stdout: "pipe", stderr: "pipe", timeout: opts.timeoutMs ?? 120_000 });
  const r = { code: p.exitCode ?? -1, stdout: p.stdout.toString(), stderr: p.stderr.toString(), seconds: (performance.now() - t0) / 1000 };
  const log = process.env.KERNCAP_GPU_OUT ? join(process.env.KERNCAP_GPU_OUT, "commands.log") : undefined;
  if (log) appendFileSync(log, `$ ${argv.join(" ")}\n[exit ${r.code}, ${r.seconds.toFixed(2)} s]\n${r.stdout.slice(-4000)}\n${r.stderr.slice(-4000)}\n`);
  return r;
}

/** `kerncap ARGS` in cwd. */
export function kerncap(cwd: string, args: string[], env: Record<string, string> = {}): Res {
  return run([BIN, ...args], { cwd, env });
}

export function json<T = any>(r: Res): T {
  try {
    return JSON.parse(r.stdout) as T;
  } catch {
    throw new Error(`not JSON (exit ${r.code}):\n${r.stdout}\n${r.stderr}`);
  }
}

export function manifest(dir: string): any {
  return JSON.parse(readFileSync(join(dir, "kerncap.json"), "utf8"));
}
