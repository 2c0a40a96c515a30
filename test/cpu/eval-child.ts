/**
 * Helpers of test/cpu/eval.test.ts, and, run as a program, an eval the test kills with SIGKILL
 * (`bun eval-child.ts CAPTURE JSONL BUILD_MS CANDIDATE…`): fake builds (the candidate's text is its
 * module: src/../eval-fake-worker.ts reads it) one at a time, BUILD_MS each, judged by fake worker
 * processes through the real pool; records to JSONL.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { workerCommand } from "../../src/check/pool.ts";
import type { Candidate } from "../../src/eval/candidates.ts";
import type { BuildOutcome } from "../../src/eval/build.ts";
import type { EvalOptions } from "../../src/eval/eval.ts";
import { runEval } from "../../src/ops/eval.ts";
import type { EvalSettings } from "../../src/eval/worker.ts";
import type { Manifest } from "../../src/format/manifest.ts";

export const FAKE_WORKER = join(import.meta.dir, "eval-fake-worker.ts");

/** runEval's options for `dirs` and `candidates` with fake builds and fake worker processes; `o` overrides any. */
export function fakeEvalOptions(dirs: string[], candidates: EvalOptions["candidates"], o: Partial<EvalOptions> = {}): EvalOptions {
  return {
    dirs,
    candidates,
    settings: SETTINGS,
    build: { force: false },
    resume: false,
    slots: [null],
    trust: false,
    live: false,
    open: fakeWorkers(),
    buildWith: fakeBuild(),
    ...o,
  };
}
export const SETTINGS: EvalSettings = { iters: 20, verify: true, tolerance: {} };

/**
 * A build that writes the candidate's own text as its module after `ms` (a text starting with
 * "compile-error" or "layout-change" fails so); `built` lists the candidates built, in order.
 */
export function fakeBuild(ms = 0, built: string[] = []): NonNullable<EvalOptions["buildWith"]> {
  return async (_dir: string, _m: Manifest, c: Candidate, dest: string): Promise<BuildOutcome> => {
    built.push(c.label);
    await Bun.sleep(ms);
    const text = readFileSync(c.path!, "utf8");
    if (text.startsWith("compile-error"))
      return { failed: { verdict: "compile-error", code: "E_BUILD", reason: 'src/kernel.cu:3: error: expected a ";"', seconds: ms / 1000 } };
    if (text.startsWith("layout-change"))
      return {
        failed: {
          verdict: "layout-change",
          code: "E_PARAM_LAYOUT",
          reason: "parameter 1 is 8 bytes at offset 8; the capture's is 4 bytes",
          seconds: ms / 1000,
        },
      };
    mkdirSync(dest, { recursive: true });
    writeFileSync(join(dest, "module"), text);
    return { built: { module: join(dest, "module"), seconds: ms / 1000, registers: 32, stackFrameBytes: 0 } };
  };
}

/** Fake worker processes (eval-fake-worker.ts) through check's pool, with the eval's watchdog. */
export function fakeWorkers(settings: EvalSettings = SETTINGS): EvalOptions["open"] {
  return (say, w, warm) =>
    workerCommand([process.execPath, FAKE_WORKER], warm === undefined ? settings : { ...settings, warm }, say, {
      watchdog: w.ms,
      firstLaunch: w.firstLaunchMs,
      timedOut: w.timedOut,
    });
}

if (import.meta.main) {
  const [dir, jsonl, ms, ...candidates] = process.argv.slice(2);
  await runEval({
    dirs: [dir!],
    candidates,
    settings: SETTINGS,
    build: { force: false },
    jsonl,
    resume: false,
    slots: [null],
    jobs: 1,
    trust: false,
    live: false,
    open: fakeWorkers(),
    buildWith: fakeBuild(Number(ms)),
  });
}
