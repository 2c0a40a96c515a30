/**
 * kerncap tune's configs through kerncap eval's machinery without a GPU (src/tune/evaluate.ts):
 * the configs as flags candidates, built in eval's build pool (a fake build: the config's module
 * says what its kernel does), judged by fake GPU worker processes through eval's pool and
 * watchdog (test/cpu/eval-fake-worker.ts), and the tune's rows made from eval's records: a faster
 * config wins, a mismatch, a hung kernel (the watchdog's timeout), a compile error, and the
 * captured module's row from its medians in the same judgements.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { BuildOutcome } from "../../../src/eval/build.ts";
import { flagsCandidate, type Candidate } from "../../../src/eval/candidates.ts";
import type { EvalOptions } from "../../../src/eval/eval.ts";
import { fakeWorkers } from "../eval-child.ts";
import { makeCapture, tempDir } from "../fixtures.ts";
import { buildsSaid, capturedRow, configBuilds, evaluateTune, rowOf, shortError, tuneEvaluator } from "../../../src/tune/evaluate.ts";
import { KerncapError } from "../../../src/errors.ts";
import { pickWinner } from "../../../src/frontends/tune.ts";

/** A build whose module is the text `texts` gives the candidate's label (test/cpu/eval-fake-worker.ts reads it); "compile-error" fails as nvcc would. */
function fakeBuild(texts: Record<string, string>, built: string[], ms = 0): NonNullable<EvalOptions["buildWith"]> {
  return async (_dir, _m, c: Candidate, dest): Promise<BuildOutcome> => {
    built.push(c.label);
    if (ms) await Bun.sleep(ms);
    const text = texts[c.label]!;
    if (text === "compile-error")
      return {
        failed: {
          verdict: "compile-error",
          code: "E_BUILD",
          reason: `build.sh failed\nsrc/kernel.cu(3): error: BROKEN is defined\n1 error detected`,
          seconds: 0.01,
        },
      };
    mkdirSync(dest, { recursive: true });
    writeFileSync(join(dest, "module"), text);
    return { built: { module: join(dest, "module"), seconds: 0.01, registers: 40, stackFrameBytes: 0 } };
  };
}

/** tuneEvaluator's items for `texts` (label → what the fake build makes of it): build.sh's row, then one -DLABEL config each, into DIR/build/tune/cuda-N. */
function flagItems(dir: string, texts: Record<string, string>) {
  return Object.keys(texts).map((label, i) => ({
    config: { i },
    label,
    spec: { kind: "flags" as const, flags: label === "build.sh" ? [] : [`-D${label}`], buildDir: join(dir, "build", "tune", `cuda-${i}`) },
  }));
}

describe("tune's configs as eval candidates", () => {
  test("built in eval's pool, judged by its workers and watchdog; rows, the captured module's row and the winner from eval's records", async () => {
    const dir = join(tempDir(), "cap");
    await makeCapture(dir);
    const texts: Record<string, string> = { "build.sh": "match 1", "FAST=1": "match 1.25", "BAD=1": "mismatch", "HANG=1": "hang", "BROKEN=1": "compile-error" };
    const list = Object.keys(texts).map((label) => ({ config: label, candidate: flagsCandidate(label, label === "build.sh" ? [] : [`-D${label}`]) }));
    const built: string[] = [];
    const seen: [number, number][] = [];
    const e = await evaluateTune(dir, list, {
      iters: 20,
      flushL2: false,
      jobs: 2,
      onBuilt: (d, t) => void seen.push([d, t]),
      fakes: { open: fakeWorkers(), buildWith: fakeBuild(texts, built), timeoutS: 1 },
    });
    expect(built.sort()).toEqual(Object.keys(texts).sort());
    expect(seen).toEqual([0, 1, 2, 3, 4, 5].map((d) => [d, 5]));
    const rows = list.map(({ config, candidate }) => rowOf(config, config, candidate, e));
    const by = Object.fromEntries(rows.map((r) => [r.label, r]));
    expect(by["FAST=1"]).toMatchObject({ verdict: "match", medianUs: 8, speedup: 1.25, vsApp: { verdict: "faster" } });
    expect(by["build.sh"]).toMatchObject({ verdict: "match", medianUs: 10, speedup: 1, vsApp: { verdict: "same" } });
    expect(by["BAD=1"]).toMatchObject({ verdict: "mismatch", medianUs: null });
    expect(by["BAD=1"]!.error).toContain("differ from the app's after state");
    expect(by["HANG=1"]!.verdict).toBe("launch-error");
    expect(by["HANG=1"]!.error).toMatch(/^timeout: its launches ran past/);
    expect(by["BROKEN=1"]).toMatchObject({ verdict: "compile-error", error: "src/kernel.cu(3): error: BROKEN is defined / 1 error detected" });
    // the captured module: its median over the judgements' baselines, its own checks' verdict
    const own = capturedRow("app", "captured module", e);
    expect(own).toMatchObject({ captured: true, verdict: "match", medianUs: 10, speedup: 1 });
    expect(pickWinner([own, ...rows])!.label).toBe("FAST=1");
    expect(e.seconds.compile).toBeGreaterThanOrEqual(0);
    expect(e.seconds.replay).toBeGreaterThan(0.5); // the hung candidate held its worker until the watchdog's 1 s
  }, 60_000);

  test("build.sh's own row is built beside the configs (one pool, `jobs` at once), not before them: nothing waits for its module", async () => {
    const dir = join(tempDir(), "cap");
    await makeCapture(dir);
    const texts: Record<string, string> = { "build.sh": "match 1", "A=1": "match 1", "A=2": "match 1" };
    const list = Object.keys(texts).map((label) => ({ config: label, candidate: flagsCandidate(label, label === "build.sh" ? [] : [`-D${label}`]) }));
    const started: Record<string, number> = {};
    const build = fakeBuild(texts, [], 400);
    const t0 = performance.now();
    await evaluateTune(dir, list, {
      iters: 20,
      flushL2: false,
      jobs: 3,
      fakes: {
        open: fakeWorkers(),
        buildWith: (d, m, c, dest) => {
          started[c.label] = performance.now() - t0;
          return build(d, m, c, dest);
        },
      },
    });
    // all three started at once (a build.sh built first would hold the configs back by its 400 ms)
    for (const label of Object.keys(texts)) expect(started[label]!, label).toBeLessThan(300);
  }, 60_000);

  test("no config judged on a GPU, only the workers' errors: the tune ends with their error (E_NO_GPU on a machine without one)", async () => {
    const dir = join(tempDir(), "cap");
    await makeCapture(dir);
    const open: EvalOptions["open"] = () => () => ({
      run: async (t) => ({
        candidate: t.candidate,
        input: t.input,
        verdict: "error",
        reason: "no NVIDIA GPU: libcuda.so.1 is not loadable",
        code: "E_NO_GPU",
        numerics: null,
        timing: null,
        runSeconds: 0,
        device: null,
      }),
      kill() {},
      close: async () => {},
    });
    const list = ["A=1", "A=2"].map((label) => ({ config: label, candidate: flagsCandidate(label, [`-D${label}`]) }));
    const err = await evaluateTune(dir, list, {
      iters: 20,
      flushL2: false,
      jobs: 1,
      fakes: { open, buildWith: fakeBuild({ "A=1": "match 1", "A=2": "match 1" }, []) },
    }).catch((x) => x);
    expect(err.code).toBe("E_NO_GPU");
    expect(err.message).toContain("no NVIDIA GPU");
    // each config's build in the error itself (found by a new user: under --json and MCP it was "in the lines above", which they do not get)
    expect(err.message).toMatch(/the configs' builds: A=1: built.*; A=2: built/);
    expect(err.hint).not.toContain("lines above");
  }, 60_000);

  test("no config built: the tune ends with E_BUILD and each config's compiler error in the message (nothing to judge beside the captured module)", async () => {
    const dir = join(tempDir(), "cap");
    await makeCapture(dir);
    const list = ["A=1", "A=2"].map((label) => ({ config: label, candidate: flagsCandidate(label, [`-D${label}`]) }));
    const err = await evaluateTune(dir, list, {
      iters: 20,
      flushL2: false,
      jobs: 1,
      fakes: { open: fakeWorkers(), buildWith: fakeBuild({ "A=1": "compile-error", "A=2": "compile-error" }, []) },
    }).catch((x) => x);
    expect(err.code).toBe("E_BUILD");
    // each config's outcome in the message, and a hint that says so (found by a new user: MCP's tune said "in the lines above", which no agent gets)
    expect(err.message).toBe(
      "none of the 2 configs built: A=1: compile-error (src/kernel.cu(3): error: BROKEN is defined / 1 error detected); A=2: compile-error (src/kernel.cu(3): error: BROKEN is defined / 1 error detected)",
    );
    expect(err.hint).toContain("The message lists each config's build outcome");
    expect(err.hint).not.toContain("lines above");
    // and structured, for --json and MCP readers (kerncap.error/1 error.details.configs)
    const why = "src/kernel.cu(3): error: BROKEN is defined / 1 error detected";
    expect(err.details).toEqual({
      configs: [
        { config: "A=1", build: "compile-error", error: why },
        { config: "A=2", build: "compile-error", error: why },
      ],
    });
  }, 60_000);

  test("each config's build in a message: built with its registers, its compiler error, not built; past 32 configs the rest counted", () => {
    const list = Array.from({ length: 40 }, (_, i) => ({ candidate: flagsCandidate(`A=${i}`, [`-DA=${i}`]) }));
    const builds = new Map<string, BuildOutcome>([
      [list[0]!.candidate.id, { built: { module: "m", seconds: 0, registers: 40, stackFrameBytes: 0 } }],
      [list[1]!.candidate.id, { failed: { verdict: "compile-error", code: "E_BUILD", reason: "build.sh failed\nsrc/k.cu:3: error: no", seconds: 0 } }],
    ]);
    const said = buildsSaid(list, builds);
    expect(said).toStartWith("A=0: built (40 registers/thread); A=1: compile-error (src/k.cu:3: error: no); A=2: not built; ");
    expect(said).toContain("A=31: not built; and 8 more configs");
    expect(said).not.toContain("A=32:");
    // the structured list keeps every config, the message only the first 32
    const d = configBuilds(list, builds).configs;
    expect(d.length).toBe(40);
    expect(d.slice(0, 3)).toEqual([
      { config: "A=0", build: "built", registers: 40 },
      { config: "A=1", build: "compile-error", error: "src/k.cu:3: error: no" },
      { config: "A=2", build: "not built" },
    ]);
  });

  test("a confined build that read a file outside (tune --confine, kerncap mcp): the tune ends with E_CONFINED, not a row", async () => {
    const dir = join(tempDir(), "cap");
    await makeCapture(dir);
    const confined: NonNullable<EvalOptions["buildWith"]> = async () => ({
      failed: { verdict: "error", code: "E_CONFINED", reason: "src/kernel.cu:1: names /etc/hostname", seconds: 0 },
    });
    const list = [{ config: "A=1", candidate: flagsCandidate("A=1", ["-DA=1"]) }];
    const err = await evaluateTune(dir, list, { iters: 20, flushL2: false, jobs: 1, confine: true, fakes: { open: fakeWorkers(), buildWith: confined } }).catch(
      (x) => x,
    );
    expect(err.code).toBe("E_CONFINED");
    expect(err.message).toContain("src/kernel.cu:1:");
  }, 60_000);

  test("the frontends' way in (tuneEvaluator, Frontend.tune's evaluate): items as flags candidates, a row and a build per item in order, each build's end by the item's index", async () => {
    const dir = join(tempDir(), "cap");
    await makeCapture(dir);
    const texts: Record<string, string> = { "build.sh": "match 1", "FAST=1": "match 1.25", "BROKEN=1": "compile-error" };
    const items = flagItems(dir, texts);
    const built: string[] = [];
    const ended: [number, boolean][] = [];
    const e = await tuneEvaluator({ open: fakeWorkers(), buildWith: fakeBuild(texts, built), timeoutS: 5 })(dir, items, {
      iters: 20,
      flushL2: false,
      jobs: 1,
      onBuild: (i, b) => void ended.push([i, "error" in b]),
    });
    expect(ended.sort()).toEqual([
      [0, false],
      [1, false],
      [2, true],
    ]);
    expect(e.rows.map((r) => [r.label, r.config.i, r.verdict])).toEqual([
      ["build.sh", 0, "match"],
      ["FAST=1", 1, "match"],
      ["BROKEN=1", 2, "compile-error"],
    ]);
    expect(e.rows[1]).toMatchObject({ medianUs: 8, speedup: 1.25 });
    expect(e.built[0]).toMatchObject({ module: join(dir, "build", "tune", "cuda-0", "module"), registers: 40 });
    expect(e.built[2]).toEqual({ error: "src/kernel.cu(3): error: BROKEN is defined / 1 error detected" });
    expect(e.captured({ i: -1 }, "captured module")).toMatchObject({ captured: true, verdict: "match", medianUs: 10, speedup: 1 });
  }, 60_000);

  test("confined (kerncap mcp's tune): each config's build folder under build/tune removed once judged, none kept (adversary 39: an agent's configs of a 128 MiB module filled the disk)", async () => {
    const dir = join(tempDir(), "cap");
    await makeCapture(dir);
    const texts: Record<string, string> = { "build.sh": "match 1", "A=1": "match 1.25", "A=2": "match 0.9" };
    const items = flagItems(dir, texts);
    const e = await tuneEvaluator({ open: fakeWorkers(), buildWith: fakeBuild(texts, []), timeoutS: 5 })(dir, items, {
      iters: 20,
      flushL2: false,
      jobs: 1,
      confine: true,
    });
    expect(e.rows.map((r) => r.verdict)).toEqual(["match", "match", "match"]);
    for (const i of [0, 1, 2]) expect(existsSync(join(dir, "build", "tune", `cuda-${i}`))).toBe(false);
    for (const b of e.built) expect(b && "module" in b && existsSync(b.module)).toBe(false);
  }, 60_000);

  test("a build error's row keeps the compiler's error lines", () => {
    expect(shortError("build.sh failed\nk.cu(1): warning: x\nk.cu(2): error: a\nk.cu(3): error: b")).toBe("k.cu(2): error: a / k.cu(3): error: b");
    expect(shortError("exit 1\nlast\nlines\nhere")).toBe("last / lines / here");
  });
  test("an interrupted tune says so in tune's words (configs; no --jsonl or --resume, which tune has not), the signal's exit status kept", async () => {
    const dir = join(tempDir(), "cap");
    await makeCapture(dir);
    const list = ["A=1", "A=2", "A=3"].map((label) => ({ config: label, candidate: flagsCandidate(label, [`-D${label}`]) }));
    setTimeout(() => process.kill(process.pid, "SIGINT"), 150); // eval's stop handler takes it (src/process-group.ts StopSignals)
    const e = await evaluateTune(dir, list, {
      iters: 20,
      flushL2: false,
      jobs: 1,
      fakes: { open: fakeWorkers(), buildWith: fakeBuild({ "A=1": "match 1", "A=2": "match 1", "A=3": "match 1" }, [], 400), timeoutS: 1 },
    }).catch((x) => x);
    expect(e).toBeInstanceOf(KerncapError);
    expect(e).toMatchObject({ code: "E_INTERRUPTED", exitCode: 130 });
    expect(e.message).toMatch(/^interrupted: \d of 3 configs judged$/);
    expect(e.hint).toBe("Nothing was kept: run the same kerncap tune again (or with fewer configs).");
  });
});
