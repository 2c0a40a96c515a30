/**
 * The timing and judging options that the verbs which replay or judge share (--flush-l2, --runs,
 * --no-verify, --dtype/--multiset, --allow-version-mismatch), each followed from the verb's
 * command line to the place where it acts, without a GPU: validate's and check's replay options
 * (src/ops/validate.ts validateRuns, src/ops/check.ts checkReplayOptions), the worker protocols'
 * settings as a worker reads them back (src/check/worker.ts, src/eval/worker.ts EVAL_PROTOCOL),
 * eval's judge and the session's compared runs, tune's worker settings (src/tune/evaluate.ts
 * tuneSettings), its frontends' sweep and the builds' environment (KERNCAP_FORCE); the MCP tools
 * that mirror the verbs pass them on.
 */
import { describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs, type ArgsDef } from "citty";
import * as v from "valibot";
import checkCmd, { checkSettings } from "../../src/cli/commands/check.ts";
import evalCmd, { evalSettings } from "../../src/cli/commands/eval.ts";
import tuneCmd, { tuneOptions } from "../../src/cli/commands/tune.ts";
import { VALIDATE_ARGS, validateOptions } from "../../src/cli/commands/validate.ts";
import { serveTasks } from "../../src/check/worker.ts";
import type { CheckSettings } from "../../src/check/runner.ts";
import { EVAL_PROTOCOL, EvalJudge, type EvalSettings } from "../../src/eval/worker.ts";
import { openCapture } from "../../src/format/capture-dir.ts";
import { cudaTune } from "../../src/frontends/cuda/tune.ts";
import { tritonConfigCompiler } from "../../src/frontends/triton/tune.ts";
import type { TuneEvaluate } from "../../src/frontends/tune.ts";
import { TOOLS } from "../../src/mcp/tools.ts";
import { checkReplayOptions } from "../../src/ops/check.ts";
import { tuneCapture } from "../../src/ops/tune.ts";
import { validateRuns } from "../../src/ops/validate.ts";
import { runCli } from "../../src/cli/main.ts";
import type { RunOptions } from "../../src/replay/engine.ts";
import { tuneSettings } from "../../src/tune/evaluate.ts";
import { captureWithSource, makeCapture, noGpuResult, noGpuSession, output, tempDir } from "./fixtures.ts";

/** A verb's command line parsed as citty parses it for the verb (the arguments its run gets). */
async function parsed(cmd: { args?: unknown }, raw: string[]): Promise<any> {
  const defs = (typeof cmd.args === "function" ? await cmd.args() : await cmd.args) as ArgsDef;
  return parseArgs(raw, defs);
}

/** A line source for a worker protocol: the settings, then one task. */
async function* protocol(settings: object, task: object): AsyncGenerator<string> {
  yield JSON.stringify({ settings });
  yield JSON.stringify({ task });
}

describe("validate: --flush-l2, --runs, --no-verify", () => {
  test("reach the replay: the session opened without the chunks' checksums, the rebuilt kernel's checked runs, both kernels timed flushed", async () => {
    const dir = await captureWithSource();
    const m = openCapture(dir).manifest;
    const raw = [dir, "--flush-l2", "--runs", "5", "--no-verify", "--multiset", "0"];
    const o = validateOptions(parseArgs(raw, VALIDATE_ARGS), raw);
    expect(o).toMatchObject({ verify: false, run: { iters: 10, runs: 5, flushL2: true, multiset: ["0"] } });
    const r = validateRuns(m, { ...o, quiet: true }, "/x/kernel.cubin");
    // the baseline's options open the session (src/replay/engine.ts replayCompared: openReplay(c, baseline))
    expect(r.baseline).toMatchObject({ verify: false, runs: 1, flushL2: true });
    // the candidate's options are the timing's (src/replay/session.ts runCompared) and its checked runs
    expect(r.candidate).toMatchObject({ runs: 5, flushL2: true, multiset: ["0"], modulePath: "/x/kernel.cubin" });
    // without them: verified, warm, the engine's checked runs
    const plain = validateOptions(parseArgs([dir], VALIDATE_ARGS), [dir]);
    const p = validateRuns(m, { ...plain, quiet: true }, "/x/kernel.cubin");
    expect(p.baseline.verify).toBe(true);
    expect(p.baseline.flushL2).toBeUndefined();
    expect(p.candidate.flushL2).toBeUndefined();
    expect(p.candidate.runs).toBeUndefined();
    expect(() => validateOptions(parseArgs([dir, "--runs", "0"], VALIDATE_ARGS), [dir, "--runs", "0"])).toThrow(/--runs must be a whole number from 1/);
  });

  test("MCP's validate passes runs, noVerify and flushL2 to the verb", () => {
    const argv = TOOLS.validate.argv({ dir: "cap", runs: 4, noVerify: true, flushL2: true });
    const o = validateOptions(parseArgs(argv.slice(1), VALIDATE_ARGS), argv.slice(1));
    expect(o).toMatchObject({ verify: false, run: { runs: 4, flushL2: true } });
  });
});

describe("eval: --flush-l2 (and --dtype REGION=T) reach the GPU worker's compared runs", () => {
  test("the settings, read back through the worker protocol, and the judge's runs of the candidate and the captured module", async () => {
    const raw = ["cap", "k.cu", "--flush-l2", "--dtype", "0=bf16", "--multiset", "1"];
    const s = evalSettings(await parsed(evalCmd, raw), raw);
    expect(s).toMatchObject({ flushL2: true, tolerance: { dtypes: { "0": "bf16" }, multiset: ["1"] } });
    // what the worker process reads from its stdin (valibot's object drops keys it does not name: dtypes once was)
    const back = v.parse(EVAL_PROTOCOL.settings, JSON.parse(JSON.stringify({ settings: s }))).settings;
    expect(back).toEqual(s);
    const dir = await captureWithSource();
    const seen: RunOptions[][] = [];
    const judge = new EvalJudge(
      () => {},
      async (d) => {
        const m = JSON.parse(readFileSync(join(d, "kerncap.json"), "utf8"));
        const session = noGpuSession(d, m, async () => noGpuResult(m.kernel.name, false));
        return {
          ...session,
          runCompared: async (a, b) => {
            seen.push([a, b]);
            return session.runCompared(a, b);
          },
        };
      },
    );
    const module = join(tempDir(), "m");
    writeFileSync(module, "x");
    expect(await judge.judge({ candidate: "k.cu", input: dir, dir, module }, back as EvalSettings)).toMatchObject({ verdict: "match" });
    const [[baseline, candidate]] = seen as [[RunOptions, RunOptions]];
    expect(baseline.flushL2).toBe(true);
    expect(candidate).toMatchObject({ flushL2: true, dtypes: { "0": "bf16" }, multiset: ["1"] });
    expect(evalSettings(await parsed(evalCmd, ["cap", "k.cu"]), ["cap", "k.cu"]).flushL2).toBeUndefined();
  });

  test("MCP's evaluate passes flushL2, dtype and multiset to the verb", async () => {
    const argv = TOOLS.evaluate.argv({ dir: "cap", candidates: [], flushL2: true, dtype: "fp16", multiset: ["0"] });
    const s = evalSettings(await parsed(evalCmd, argv.slice(1)), argv.slice(1));
    expect(s).toMatchObject({ flushL2: true, tolerance: { dtype: "fp16", multiset: ["0"] } });
  });

  test("MCP's evaluate takes runs, noVerify, allowVersionMismatch and timeout, as verbs.md's table says eval does (nu7 #7: refused as unknown arguments)", async () => {
    const a = { dir: "cap", candidates: [{ name: "c", patch: "x" }], runs: 4, noVerify: true, allowVersionMismatch: true, timeout: 30 };
    expect(v.safeParse(TOOLS.evaluate.input, a).success).toBe(true);
    const argv = TOOLS.evaluate.argv(a);
    expect(argv).toEqual(expect.arrayContaining(["--runs", "4", "--no-verify", "--allow-version-mismatch", "--timeout", "30"]));
    const parsedArgs = await parsed(evalCmd, argv.slice(1));
    expect(evalSettings(parsedArgs, argv.slice(1))).toMatchObject({ runs: 4, verify: false });
    expect(parsedArgs["allow-version-mismatch"]).toBe(true);
  });

  test("MCP's evaluate takes buildTimeout as --build-timeout, at most a confined build's own 600 s (an agent may only lower it)", async () => {
    const a = { dir: "cap", candidates: [{ name: "c", patch: "x" }], buildTimeout: 30 };
    expect(v.safeParse(TOOLS.evaluate.input, a).success).toBe(true);
    const argv = TOOLS.evaluate.argv(a);
    expect(argv).toEqual(expect.arrayContaining(["--build-timeout", "30"]));
    expect((await parsed(evalCmd, argv.slice(1)))["build-timeout"]).toBe("30");
    expect(v.safeParse(TOOLS.evaluate.input, { ...a, buildTimeout: 601 }).success).toBe(false);
  });
});

describe("check: --flush-l2 reaches each capture's replay in the worker", () => {
  test("the settings, read back through the worker protocol, and the replay's options", async () => {
    const raw = ["corpus", "--flush-l2", "--runs", "4"];
    const s = checkSettings(await parsed(checkCmd, raw), raw);
    expect(s).toMatchObject({ flushL2: true, runs: 4 });
    let back: CheckSettings | undefined;
    await serveTasks(
      protocol(s, { id: "a", path: "/nowhere", kind: "folder" }),
      () => {},
      async (_t, got) => {
        back = got;
        return {} as never;
      },
    );
    expect(back).toEqual(s);
    const dir = await captureWithSource();
    const o = checkReplayOptions(openCapture(dir).manifest, back!, {});
    expect(o).toMatchObject({ flushL2: true, runs: 4, verify: true, keepSamples: true });
    expect(checkReplayOptions(openCapture(dir).manifest, checkSettings(await parsed(checkCmd, ["corpus"]), ["corpus"]), {}).flushL2).toBeUndefined();
  });
});

describe("tune: --dtype, --multiset, --allow-version-mismatch", () => {
  test("parsed into the sweep's options; a CUDA sweep hands them to eval's machinery, which judges each config with them", async () => {
    const dir = await captureWithSource();
    writeFileSync(join(dir, "build.sh"), "#!/usr/bin/env bash\nexit 1\n", { mode: 0o755 });
    const raw = [dir, "--define", "X=1,2", "--dtype", "fp16", "--dtype", "1=i32", "--multiset", "0", "--allow-version-mismatch", "--flush-l2"];
    const o = tuneOptions(await parsed(tuneCmd, raw), raw);
    expect(o).toMatchObject({ dtype: "fp16", dtypes: { "1": "i32" }, multiset: ["0"], force: true, flushL2: true });
    let given: Parameters<TuneEvaluate>[2] | undefined;
    const evaluate: TuneEvaluate = async (_d, _items, x) => {
      given = x;
      throw new Error("enough");
    };
    await expect(output(() => cudaTune.run(dir, { ...o, gate: () => {}, evaluate }))).resolves.toMatchObject({ error: new Error("enough") });
    expect(given).toMatchObject({ dtype: "fp16", dtypes: { "1": "i32" }, multiset: ["0"], force: true, flushL2: true });
    // each config's judgement on the GPU worker (as validate judges a rebuild)
    expect(tuneSettings(given!)).toMatchObject({ flushL2: true, tolerance: { dtype: "fp16", dtypes: { "1": "i32" }, multiset: ["0"] } });
    expect(tuneSettings({ iters: 20, flushL2: false }).tolerance).toEqual({});
  });

  test("--allow-version-mismatch: each CUDA config's build.sh runs with KERNCAP_FORCE=1 (eval's build pool), and without it not", async () => {
    for (const force of [true, false]) {
      const dir = await captureWithSource();
      const seen = join(tempDir(), "force");
      writeFileSync(join(dir, "build.sh"), `#!/usr/bin/env bash\necho "[\${KERNCAP_FORCE:-}]" >> ${seen}\nexit 1\n`, { mode: 0o755 });
      const r = await output(() => tuneCapture(dir, { configs: [], defines: ["X=1"], nvccFlags: [], iters: 20, flushL2: false, jobs: 1, force }));
      expect((r.error as { code: string }).code).toBe("E_BUILD"); // every config failed to build: nothing reached a GPU
      const lines = readFileSync(seen, "utf8").trim().split("\n");
      expect(lines.length).toBeGreaterThan(0);
      expect(new Set(lines)).toEqual(new Set([force ? "[1]" : "[]"]));
    }
  }, 60_000);

  test("--allow-version-mismatch: a Triton config's compile (repro.py) runs with KERNCAP_FORCE=1", async () => {
    const d = tempDir();
    const seen = join(d, "force");
    // a stand-in for pinned.json's Python: records KERNCAP_FORCE, writes the cubin and its metadata where --out says
    const py = join(d, "python");
    writeFileSync(
      py,
      `#!/usr/bin/env bash\necho "[\${KERNCAP_FORCE:-}]" >> ${seen}\nwhile [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done\necho cubin > "$out"\necho '{"shared":0,"num_warps":4}' > "$out.json"\n`,
    );
    chmodSync(py, 0o755);
    mkdirSync(join(d, "cap"));
    const saved = process.env.KERNCAP_PYTHON;
    delete process.env.KERNCAP_PYTHON;
    try {
      for (const force of [true, false]) {
        const b = await tritonConfigCompiler(join(d, "cap"), { python: py }, { force })({ kwargs: {}, options: {} }, join(d, "cap", "build", "k.cubin"));
        expect("cubin" in b).toBe(true);
      }
    } finally {
      if (saved !== undefined) process.env.KERNCAP_PYTHON = saved;
    }
    expect(readFileSync(seen, "utf8").trim().split("\n")).toEqual(["[1]", "[]"]);
  });

  test("a --multiset region the capture lacks is a usage error before any build", async () => {
    const dir = join(tempDir(), "cap");
    await makeCapture(dir);
    const r = await output(() => tuneCapture(dir, { configs: [], defines: ["X=1"], nvccFlags: [], iters: 20, flushL2: false, multiset: ["9"] }));
    expect(r.error).toMatchObject({ code: "E_USAGE" });
    expect(existsSync(join(dir, "build", "tune"))).toBe(false);
  });

  test("MCP's tune passes dtype, multiset and allowVersionMismatch to the verb", async () => {
    const argv = TOOLS.tune.argv({ dir: "cap", dtype: "bf16", multiset: ["changed"], allowVersionMismatch: true });
    const o = tuneOptions(await parsed(tuneCmd, argv.slice(1)), argv.slice(1));
    expect(o).toMatchObject({ dtype: "bf16", multiset: ["changed"], force: true });
  });
});

test("each verb accepts the options of the table in docs/verbs.md (a new user's trial: `unknown option --flush-l2 for kerncap eval`)", async () => {
  const d = tempDir();
  const table: Record<string, string[]> = {
    replay: ["--flush-l2", "--runs", "2", "--no-verify", "--dtype", "fp16", "--multiset", "0"],
    validate: ["--flush-l2", "--runs", "2", "--no-verify", "--dtype", "fp16", "--multiset", "0", "--allow-version-mismatch"],
    tune: ["--flush-l2", "--dtype", "fp16", "--multiset", "0", "--allow-version-mismatch"],
    check: ["--flush-l2", "--runs", "2", "--no-verify", "--dtype", "fp16", "--multiset", "0", "--rebuild", "--allow-version-mismatch"],
    eval: ["k.cu", "--flush-l2", "--runs", "2", "--no-verify", "--dtype", "fp16", "--multiset", "0", "--allow-version-mismatch"],
  };
  for (const [verb, opts] of Object.entries(table)) {
    const r = await output(() => runCli([verb, join(d, "nothing"), ...opts]));
    expect(r.value, verb).toBe(2); // no such capture: the options were taken
    expect(r.err, verb).not.toContain("unknown option");
  }
});
