/**
 * `kerncap eval` (src/eval/) without a GPU: candidates and their private copies, the scheduling
 * (N candidates on M workers, records in the order they finish, the ranked table), several inputs
 * (right only when right on all), the isolation of real worker processes (a hung kernel killed by
 * the watchdog, a worker killed mid-candidate, a fault: each that candidate's verdict, the rest go
 * on), --resume after SIGKILL, --shard and --merge, the judge's resident input, and real builds
 * with nvcc (a compile error once, a changed parameter layout). GPU workers are fakes
 * (./eval-fake-worker.ts, or runners in this process) where a replay would need the GPU.
 */
import { RECORD_DIAGNOSTICS_MAX } from "../../src/eval/build.ts";
import { describe, expect, test } from "bun:test";
import { appendFileSync, chmodSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import type { OpenRunner } from "../../src/check/pool.ts";
import { candidateOrRefusal, listedCandidates, materialise, parseCandidate, parseCandidates } from "../../src/eval/candidates.ts";
import { copyName, firstLaunchMs, WATCHDOG_MAX_MS, watchdogMs, type EvalOptions } from "../../src/eval/eval.ts";
import { BUILD_INPUT, mergeEval, rankedTable, shortReason, summarize, unjudgedLine } from "../../src/eval/report.ts";
import { runEval } from "../../src/ops/eval.ts";
import { EvalJudge, type EvalTask } from "../../src/eval/worker.ts";
import { EvalRecord, EvalShardMarker, type EvalOutcome, type EvalRecord as Rec } from "../../src/format/eval-record.ts";
import { documentId } from "../../src/format/documents.ts";
import { KerncapError } from "../../src/errors.ts";
import { evalSettings, splitPositionals } from "../../src/cli/commands/eval.ts";
import { tuneNotes, type TuneRow } from "../../src/frontends/tune.ts";
import * as v from "valibot";
import {
  makeCapture,
  noGpuResult,
  noGpuSession,
  recordLine,
  recordRendered,
  stockBuildSh,
  tempDir,
  thrownBy,
  trustDigest,
  withResultsKey,
  stderrOf,
} from "./fixtures.ts";
import { markReceived } from "../../src/format/received.ts";
import { runCommand } from "citty";
import { commands } from "../../src/cli/main.ts";
import { keyId } from "../../src/format/record-auth.ts";
import { fakeBuild, fakeEvalOptions, fakeWorkers, SETTINGS } from "./eval-child.ts";
import { NVCC } from "../nvcc-fixtures.ts";
import { TOOLS } from "../../src/mcp/tools.ts";
import { jsonSchemaOf } from "../../src/format/documents.ts";
/** The progress lines an eval writes, kept off the test's output (stderrOf). */
const quiet = stderrOf;

/** A capture with a reproducer source (src/kernel.cu, src/util.h) and the given build.sh. */
async function captureWithSource(buildSh = "#!/usr/bin/env bash\nexit 1\n"): Promise<string> {
  const dir = join(tempDir(), "cap");
  await makeCapture(dir);
  mkdirSync(join(dir, "src"));
  writeFileSync(join(dir, "src/kernel.cu"), '#include "util.h"\n__global__ void scale(float* x, int n) { x[threadIdx.x] *= TWO; }\n');
  writeFileSync(join(dir, "src/util.h"), "#define TWO 2.0f\n");
  writeFileSync(join(dir, "build.sh"), buildSh, { mode: 0o755 });
  return dir;
}

/** Candidate files in a folder: name → text (what the fake build makes the module say). */
function candidateFiles(texts: Record<string, string>): string[] {
  const d = tempDir("kerncap-cands-");
  return Object.entries(texts).map(([name, text]) => {
    writeFileSync(join(d, name), text);
    return join(d, name);
  });
}

/** The files of a folder with their bytes (to see that a capture folder is untouched). */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out[p.slice(dir.length)] = readFileSync(p).toString("base64");
    }
  };
  walk(dir);
  return out;
}

/** Runners in this process that answer from the module's text as the fake worker does, after `delay(task)` ms; `running` tracks the tasks in flight. */
function inProcess(delay: (t: EvalTask) => number = () => 5) {
  let running = 0;
  let most = 0;
  const opened: number[] = [];
  const open: OpenRunner<EvalTask, EvalOutcome> = (slot) => {
    opened.push(slot);
    return {
      run: async (t) => {
        running++;
        most = Math.max(most, running);
        await Bun.sleep(delay(t));
        running--;
        const [what, sp] = readFileSync(t.module, "utf8").trim().split(/\s+/);
        const s = Number(sp ?? 1);
        const base = { candidate: t.candidate, input: t.input, code: null, runSeconds: delay(t) / 1000, device: { name: "fake GPU", arch: "sm_90" } };
        return what === "mismatch"
          ? { ...base, verdict: "mismatch", reason: "0x7f0000000000 differs", numerics: "mismatch", timing: null }
          : {
              ...base,
              verdict: "match",
              reason: null,
              numerics: "bit-exact",
              timing: { baselineMedianUs: 10, candidateMedianUs: 10 / s, speedup: s, low: s * 0.98, high: s * 1.02, verdict: "same", text: "" },
            };
      },
      kill() {},
      close: async () => {},
    };
  };
  return { open: () => open, most: () => most, opened };
}

/** fakeEvalOptions with two build jobs and the in-process workers above. */
function options(dirs: string[], candidates: EvalOptions["candidates"], o: Partial<EvalOptions> = {}): EvalOptions {
  return fakeEvalOptions(dirs, candidates, { jobs: 2, open: inProcess().open, ...o });
}

function running(pid: number): boolean {
  try {
    const st = readFileSync(`/proc/${pid}/stat`, "utf8");
    return st.slice(st.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

describe("candidates", () => {
  test("a folder is a tree, .patch/.diff a patch, another file a replacement, NAME=V a Triton config; identity follows content", () => {
    const d = tempDir();
    mkdirSync(join(d, "tree"));
    writeFileSync(join(d, "tree/kernel.cu"), "a");
    writeFileSync(join(d, "fix.patch"), "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n");
    writeFileSync(join(d, "kernel.cu"), "b");
    const [t, p, f] = ["tree", "fix.patch", "kernel.cu"].map((n) => parseCandidate(join(d, n)));
    expect([t!.kind, p!.kind, f!.kind]).toEqual(["tree", "patch", "file"]);
    const c = parseCandidate("BLOCK_M=64  num_warps=4");
    expect(c).toMatchObject({ kind: "config", label: "BLOCK_M=64 num_warps=4", config: { kwargs: { BLOCK_M: 64 }, options: { num_warps: 4 } } });
    const before = f!.id;
    writeFileSync(join(d, "kernel.cu"), "c");
    expect(parseCandidate(join(d, "kernel.cu")).id).not.toBe(before); // an edited candidate is a new one
    expect(parseCandidate(join(d, "kernel.cu")).id).toBe(parseCandidate(join(d, "kernel.cu")).id);
    expect(parseCandidates([join(d, "kernel.cu"), join(d, "kernel.cu")]).length).toBe(1);
    // one content under two names: two candidates, two private copies
    cpSync(join(d, "tree"), join(d, "tree2"), { recursive: true });
    const [t1, t2] = parseCandidates([join(d, "tree"), join(d, "tree2")]);
    expect(t1!.id).not.toBe(t2!.id);
    expect(copyName(t1!.id)).not.toBe(copyName(t2!.id));
    expect(() => parseCandidate(join(d, "nope.cu"))).toThrow(/no such file or folder, and not a Triton config/);
    expect(() => parseCandidate("BLOCK_M=64,128")).toThrow(/is 2 configs/);
    expect(() => parseCandidates([])).toThrow(KerncapError);
  });

  test.skipIf(!Bun.which("git"))(
    "a patch is applied outside any repository: a .git/ and .gitattributes in the capture (their filters) run nothing",
    async () => {
      const cap = await captureWithSource();
      const d = tempDir();
      const pwned = join(d, "PWNED");
      // a capture made here by another user and copied with cp -r (unpack refuses .git names): its .git is the copy's own
      Bun.spawnSync(["git", "init", "-q", cap]);
      Bun.spawnSync(["git", "-C", cap, "config", "filter.x.clean", `touch ${pwned}`]);
      Bun.spawnSync(["git", "-C", cap, "config", "filter.x.smudge", `touch ${pwned}`]);
      writeFileSync(join(cap, ".gitattributes"), "* filter=x\n");
      writeFileSync(join(cap, "src/.gitattributes"), "* filter=x\n");
      writeFileSync(join(d, "p1.patch"), "--- src/util.h\n+++ edited/util.h\n@@ -1 +1 @@\n-#define TWO 2.0f\n+#define TWO 4.0f\n");
      const dest = join(d, "copy");
      await materialise(cap, parseCandidate(join(d, "p1.patch")), dest).catch(() => {});
      expect(existsSync(pwned)).toBe(false);
    },
  );

  test("materialise: a private copy (no memory/, no build/), the candidate applied; the capture folder untouched", async () => {
    const cap = await captureWithSource();
    mkdirSync(join(cap, "build"));
    writeFileSync(join(cap, "build/kernel.cubin"), "old");
    const before = snapshot(cap);
    const d = tempDir();
    const dest = join(d, "copy");
    // a replacement file: the one file of src/ with its name
    writeFileSync(join(d, "util.h"), "#define TWO 3.0f\n");
    await materialise(cap, parseCandidate(join(d, "util.h")), dest);
    expect(readFileSync(join(dest, "src/util.h"), "utf8")).toContain("3.0f");
    expect(existsSync(join(dest, "memory")) || existsSync(join(dest, "build"))).toBe(false);
    expect(existsSync(join(dest, "kerncap.json")) && existsSync(join(dest, "build.sh"))).toBe(true);
    // a tree replaces src/ whole
    mkdirSync(join(d, "tree"));
    writeFileSync(join(d, "tree/kernel.cu"), "__global__ void scale(float* x, int n) {}\n");
    await materialise(cap, parseCandidate(join(d, "tree")), dest);
    expect(readdirSync(join(dest, "src"))).toEqual(["kernel.cu"]);
    // patches: paths as diff -ru src edited writes them (-p1), and as git diff from the capture folder (a/src/…: -p2)
    writeFileSync(join(d, "p1.patch"), "--- src/util.h\n+++ edited/util.h\n@@ -1 +1 @@\n-#define TWO 2.0f\n+#define TWO 4.0f\n");
    await materialise(cap, parseCandidate(join(d, "p1.patch")), dest);
    expect(readFileSync(join(dest, "src/util.h"), "utf8")).toBe("#define TWO 4.0f\n");
    writeFileSync(
      join(d, "p2.diff"),
      "diff --git a/src/util.h b/src/util.h\n--- a/src/util.h\n+++ b/src/util.h\n@@ -1 +1 @@\n-#define TWO 2.0f\n+#define TWO 5.0f\n",
    );
    await materialise(cap, parseCandidate(join(d, "p2.diff")), dest);
    expect(readFileSync(join(dest, "src/util.h"), "utf8")).toBe("#define TWO 5.0f\n");
    writeFileSync(join(d, "bad.patch"), "--- a/util.h\n+++ b/util.h\n@@ -1 +1 @@\n-#define NOT THERE\n+#define X\n");
    expect(materialise(cap, parseCandidate(join(d, "bad.patch")), dest)).rejects.toMatchObject({ code: "E_PATCH" });
    // `diff -ru src ../elsewhere/x`: git apply reads the +++ name, which src/ does not hold; as patch(1), the --- file is patched (nu12 #1)
    writeFileSync(join(d, "far.patch"), "--- src/util.h\n+++ side/x_src/util.h\n@@ -1 +1 @@\n-#define TWO 2.0f\n+#define TWO 4.0f\n");
    await materialise(cap, parseCandidate(join(d, "far.patch")), join(d, "far"));
    expect(readFileSync(join(d, "far/src/util.h"), "utf8")).toBe("#define TWO 4.0f\n");
    // neither name a file of src/: the error says how the names were read (a new user was left guessing)
    writeFileSync(join(d, "far2.patch"), "--- other/utl.h\n+++ side/x_src/util.h\n@@ -1 +1 @@\n-#define TWO 2.0f\n+#define TWO 4.0f\n");
    const far = await materialise(cap, parseCandidate(join(d, "far2.patch")), dest).catch((e) => e);
    expect(far.code).toBe("E_PATCH");
    expect(far.message).toContain("first folder taken off (as git apply -p1), so it names utl.h, x_src/util.h, which src/ does not hold");
    expect(far.hint).toContain("both folders sit side by side");
    writeFileSync(join(d, "evil.patch"), "--- a/../../escape.txt\n+++ b/../../escape.txt\n@@ -0,0 +1 @@\n+owned\n");
    expect(materialise(cap, parseCandidate(join(d, "evil.patch")), dest)).rejects.toMatchObject({ code: "E_PATCH" });
    expect(existsSync(join(d, "escape.txt"))).toBe(false);
    writeFileSync(join(d, "other.cu"), "x");
    expect(materialise(cap, parseCandidate(join(d, "other.cu")), dest)).rejects.toThrow(/src\/ has no file named other.cu/);
    expect(snapshot(cap)).toEqual(before);
  });
});

describe("scheduling", () => {
  test("a link under the capture's src/ is refused before any build, E_UNSAFE_PATH naming it, as validate refuses it (adversary 38: the copies left it out and built)", async () => {
    const cap = await captureWithSource();
    const outside = tempDir();
    writeFileSync(join(outside, "h.h"), "#define FROM_LINK 1\n");
    symlinkSync(outside, join(cap, "src/inc"));
    const built: string[] = [];
    const e = await quiet(() => runEval(options([cap], candidateFiles({ "k.cu": "match" }), { buildWith: fakeBuild(0, built) }))).then(
      () => undefined,
      (x) => x as KerncapError,
    );
    expect(e).toMatchObject({ code: "E_UNSAFE_PATH" });
    expect(e!.message).toContain("src/inc");
    expect(built).toEqual([]);
  });

  test("a TMPDIR kerncap refuses (others may write it, not sticky): one E_TMPDIR before any build, with its hint, not an error per candidate and a --resume", async () => {
    const cap = await captureWithSource();
    const files = candidateFiles({ "a.cu": "match 1.0", "b.cu": "match 1.0" });
    const shared = join(tempDir(), "shared");
    mkdirSync(shared);
    chmodSync(shared, 0o777);
    const built: string[] = [];
    const saved = process.env.TMPDIR;
    process.env.TMPDIR = shared;
    let e: KerncapError;
    try {
      e = await quiet(() => runEval(options([cap], files, { buildWith: fakeBuild(0, built) }))).catch((x) => x);
    } finally {
      if (saved === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = saved;
    }
    expect(e).toBeInstanceOf(KerncapError);
    expect(e.code).toBe("E_TMPDIR");
    expect(e.message).toContain(`TMPDIR ${shared} is not safe`);
    expect(e.hint).toContain("Set TMPDIR to a folder of your own");
    expect(built).toEqual([]);
    expect(readdirSync(shared)).toEqual([]);
  });

  test("12 candidates on 3 workers: each judged once, never more than 3 at once, records in the order they finish, a ranked table", async () => {
    const cap = await captureWithSource();
    const texts: Record<string, string> = {};
    for (let i = 0; i < 10; i++) texts[`c${i}.cu`] = `match ${(0.8 + 0.05 * i).toFixed(2)}`;
    texts["broken.cu"] = "compile-error";
    texts["wider.cu"] = "layout-change";
    const files = candidateFiles(texts);
    // c0 is slow: it finishes after candidates that started later
    const w = inProcess((t) => (t.candidate.startsWith("c0.cu") ? 300 : 10));
    const streamed: Rec[] = [];
    const jsonl = join(tempDir(), "out.jsonl");
    const { err, value: r } = await quiet(() =>
      runEval(options([cap], files, { slots: [null, null, null], open: w.open, jsonl, onRecord: (x) => streamed.push(x) })),
    );
    expect(w.most()).toBe(3);
    expect(streamed.length).toBe(12);
    expect(new Set(streamed.map((x) => x.candidate)).size).toBe(12);
    const c0 = streamed.findIndex((x) => x.label === "c0.cu");
    expect(c0).toBeGreaterThan(streamed.findIndex((x) => x.label === "c3.cu")); // finish order, not the order given
    // the file holds the same records, in the same order, each a valid eval-record line
    const lines = readFileSync(jsonl, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => l.candidate)).toEqual(streamed.map((x) => x.candidate));
    // a results file others can write is never resumed from (a trial's forged match was ranked without a run)
    chmodSync(jsonl, 0o666);
    const shared = await quiet(() => runEval(options([cap], files, { open: w.open, jsonl, resume: true })).catch((e) => e));
    expect(shared.value).toMatchObject({ code: "E_UNSAFE_PATH" });
    expect(shared.value.message).toContain("can be written by others (mode 666): eval --resume would take its records as judged");
    // nor appended to (adversary 29: a world-writable file another user planted at the name got the records)
    const before = readFileSync(jsonl, "utf8");
    const appended = await quiet(() => runEval(options([cap], files, { open: w.open, jsonl })).catch((e) => e));
    expect(appended.value).toMatchObject({ code: "E_UNSAFE_PATH" });
    expect(appended.value.message).toContain("can be written by others (mode 666): its owner could read and change the records this eval appends");
    expect(readFileSync(jsonl, "utf8")).toBe(before);
    chmodSync(jsonl, 0o644);
    for (const l of lines) {
      expect(l.schema).toBe(documentId("eval-record"));
      expect(v.safeParse(EvalRecord, l).success).toBe(true);
    }
    // a build failure never reaches a worker and is one record, with the compiler's message once
    const broken = streamed.filter((x) => x.label === "broken.cu");
    expect(broken).toMatchObject([{ input: BUILD_INPUT, verdict: "compile-error", code: "E_BUILD", worker: null }]);
    expect(streamed.find((x) => x.label === "wider.cu")).toMatchObject({ verdict: "layout-change" });
    // ranked: fastest match first (c9: 1.25×), c0 (0.80×) last of the matches, then the failures
    expect(r.candidates.map((c) => c.label)).toEqual([
      "c9.cu",
      "c8.cu",
      "c7.cu",
      "c6.cu",
      "c5.cu",
      "c4.cu",
      "c3.cu",
      "c2.cu",
      "c1.cu",
      "c0.cu",
      "broken.cu",
      "wider.cu",
    ]);
    expect(r.candidates.map((c) => c.rank)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, null, null]);
    expect(r.summary).toMatchObject({ candidates: 12, match: 10, "compile-error": 1, "layout-change": 1 });
    expect(r.exitCode).toBe(0);
    const table = rankedTable(r);
    expect(table.split("\n")[1]).toMatch(/^1\s+match\s+1\.25×\s+1\.23–1\.27\s+32\s+0\s+1\/1\s+c9\.cu$/);
    expect(table).toContain('expected a ";"');
    expect(err).toMatch(/\[ *12\/12\]/); // progress: candidates finished of those to evaluate
  });

  test("several inputs: a candidate is right only when right on all; each input's verdict said; a capture set's members are inputs", async () => {
    const set = join(tempDir(), "set");
    await makeCapture(join(set, "0-scale"));
    await makeCapture(join(set, "1-scale"));
    writeFileSync(
      join(set, "kerncap-captures.json"),
      JSON.stringify({
        format: "kerncap-capture-set",
        version: 1,
        command: ["./app"],
        captures: [
          { dir: "0-scale", kernel: "scale(float*, int)", launchIndex: 0 },
          { dir: "1-scale", kernel: "scale(float*, int)", launchIndex: 1 },
        ],
      }),
    );
    const files = candidateFiles({ "good.cu": "match 1.21", "overfit.cu": "match 2.0\nset/1-scale=mismatch" });
    const { value: r } = await quiet(() =>
      runEval(
        options([set], files, {
          open: () => (slot) => {
            const inner = inProcess().open()(slot, null);
            // the fake reads INPUT=WORD lines as the fake worker does
            return {
              ...inner,
              run: async (t) =>
                readFileSync(t.module, "utf8").includes(`${t.input}=mismatch`)
                  ? { ...(await inner.run(t)), verdict: "mismatch", reason: "differs", timing: null }
                  : inner.run(t),
            };
          },
        }),
      ),
    );
    expect(r.inputs).toEqual(["set/0-scale", "set/1-scale"]);
    const good = r.candidates.find((c) => c.label === "good.cu")!;
    const over = r.candidates.find((c) => c.label === "overfit.cu")!;
    expect(good).toMatchObject({ verdict: "match", rank: 1, inputs: [{ verdict: "match" }, { verdict: "match" }] });
    expect(good.speedup!).toBeCloseTo(1.21, 5);
    expect(over.verdict).toBe("mismatch");
    expect(over.rank).toBeNull();
    expect(over.inputs.map((i) => `${i.input}:${i.verdict}`).sort()).toEqual(["set/0-scale:match", "set/1-scale:mismatch"]);
    expect(over.reason).toStartWith("set/1-scale: ");
    // inputs of two kernels are refused
    const other = join(tempDir(), "other");
    await makeCapture(other);
    const m = JSON.parse(readFileSync(join(other, "kerncap.json"), "utf8"));
    m.kernel.name = "_Z4axpyPfi";
    writeFileSync(join(other, "kerncap.json"), JSON.stringify(m));
    expect(runEval(options([set, other], files))).rejects.toThrow(/captures of one kernel/);
  });

  test("names and messages are escaped on the terminal: a candidate named with an escape sequence, a compiler message with a newline", async () => {
    const cap = await captureWithSource();
    const d = tempDir("kerncap-cands-");
    const evil = join(d, "x\u001b[2Jy.cu");
    writeFileSync(evil, "compile-error");
    const { err, value: r } = await quiet(() => runEval(options([cap], [evil])));
    const table = rankedTable(r);
    expect(table).not.toContain("\u001b");
    expect(table).toContain("x\\x1b[2Jy.cu");
    expect(err).not.toContain("\u001b");
    expect(shortReason("build failed\nsrc/k.cu(1): error: bad \u202e thing")).toBe("src/k.cu(1): error: bad \\u202e thing");
  });

  test("a row's reason is short (a long message: its first clause and code), never cut inside a word; the full text once under the table", async () => {
    const noGpu =
      "no NVIDIA driver: libcuda could not be loaded; tried libcuda.so.1, libcuda.so, /usr/lib/x86_64-linux-gnu/libcuda.so.1: cannot open shared object file";
    expect(shortReason(noGpu, 120, "E_NO_GPU")).toBe("no NVIDIA driver (E_NO_GPU)");
    expect(shortReason("src/ has no file named a.cu", 120, "E_USAGE")).toBe("src/ has no file named a.cu"); // short: whole
    // a ": " inside a parenthesis is no clause's end: the candidate's own words, not "src/kernel.cu)" (nu89 #4)
    const own =
      'candidate outside writes "build.sh", the capture\'s own file, which is not a source file of the reproducer (paths are relative to the capture folder and under src/, as for edit_file: src/kernel.cu)';
    expect(shortReason(own, 160, "E_NOT_SOURCE")).toStartWith('candidate outside writes "build.sh", the capture\'s own file');
    expect(shortReason("candidate p: its patch is empty: give a unified diff against src/ (as git diff inside src/ writes it: a/k.cu)", 160, "E_PATCH")).toBe(
      "its patch is empty (E_PATCH)",
    );
    const cut = shortReason(noGpu, 60);
    expect(cut).toEndWith("…");
    expect(noGpu.startsWith(cut.slice(0, -1) + " ")).toBe(true); // at a word boundary
    const cap = await captureWithSource();
    const d = tempDir("kerncap-cands-");
    for (const n of ["a.cu", "b.cu"]) writeFileSync(join(d, n), "kernel");
    const { value: r } = await quiet(() =>
      runEval(
        options([cap], [join(d, "a.cu"), join(d, "b.cu")], {
          buildWith: async () => ({ failed: { verdict: "error", code: "E_NO_GPU", reason: noGpu, seconds: 0 } }),
        }),
      ),
    );
    const table = rankedTable(r);
    expect(r.candidates.map((c) => c.verdict)).toEqual(["error", "error"]);
    expect(table.split("\n").filter((l) => l.endsWith("  no NVIDIA driver (E_NO_GPU)")).length).toBe(2);
    expect(table.split(noGpu).length - 1).toBe(1);
    expect(table).toContain(`\n  a.cu, b.cu: ${noGpu}\n`);
  });
  test("tune's notes under its table: one error said once, with the configs that gave it", () => {
    const row = (label: string, error?: string): TuneRow<unknown> => ({
      config: {},
      label,
      captured: false,
      verdict: error ? "launch-error" : "match",
      medianUs: null,
      speedup: null,
      ...(error ? { error } : {}),
    });
    expect(tuneNotes([row("a", "no NVIDIA driver: x"), row("b"), row("c", "no NVIDIA driver: x"), row("d", "E2")])).toEqual([
      "  a, c: launch-error: no NVIDIA driver: x",
      "  d: launch-error: E2",
    ]);
  });

  test("a capture whose build/eval/ is a link out of it: refused before anything is written there", async () => {
    const cap = await captureWithSource();
    const outside = tempDir("kerncap-outside-");
    mkdirSync(join(cap, "build"));
    symlinkSync(outside, join(cap, "build/eval"));
    expect(runEval(options([cap], candidateFiles({ "k.cu": "match" })))).rejects.toMatchObject({ code: "E_UNSAFE_PATH" });
    expect(readdirSync(outside)).toEqual([]);
  });

  test("a capture whose build/ every user can write: each candidate is built in a private folder of the user's (0700), never in build/eval/, removed after", async () => {
    const cap = await captureWithSource();
    mkdirSync(join(cap, "build"));
    chmodSync(join(cap, "build"), 0o777);
    const dests: string[] = [];
    const build = fakeBuild();
    const buildWith: NonNullable<EvalOptions["buildWith"]> = async (d, m, c, dest) => {
      dests.push(dest);
      const st = statSync(dirname(dest));
      expect(st.mode & 0o777).toBe(0o700);
      expect(st.uid).toBe(process.geteuid!());
      return build(d, m, c, dest);
    };
    // a folder every user can write is a received capture's: its build runs only with the digest of what was shown
    const refused = await quiet(() => runEval(options([cap], candidateFiles({ "k.cu": "match" }), { buildWith }))).catch((e) => e);
    expect(refused.code).toBe("E_UNTRUSTED");
    const digest = /sha256 ([0-9a-f]{64})/.exec(refused.message)![1]!;
    const { err, value: r } = await quiet(() => runEval(options([cap], candidateFiles({ "k.cu": "match" }), { buildWith, trust: digest })));
    expect(r.records.length).toBeGreaterThan(0);
    expect(dests.length).toBe(1);
    expect(dests[0]!.startsWith(cap)).toBe(false);
    expect(existsSync(join(cap, "build/eval"))).toBe(false);
    expect(existsSync(dirname(dests[0]!))).toBe(false); // removed after the eval
    expect(err).toContain("build can be written by every user");
    chmodSync(join(cap, "build"), 0o755);
  });

  test("summaries: the geometric mean over inputs; the worst verdict wins; a later record of one input replaces an earlier", () => {
    const rec = (candidate: string, input: string, verdict: Rec["verdict"], speedup?: number): Rec => ({
      candidate,
      input,
      verdict,
      reason: verdict === "match" ? null : verdict,
      code: null,
      numerics: null,
      runSeconds: 0,
      device: null,
      timing: speedup ? { baselineMedianUs: 1, candidateMedianUs: 1 / speedup, speedup, low: speedup, high: speedup, verdict: "same", text: "" } : null,
      label: candidate,
      kind: "file",
      build: { seconds: 0, registers: null, stackFrameBytes: null },
      worker: 0,
      gpu: null,
      shard: null,
      at: "",
    });
    const s = summarize([
      rec("a", "x", "match", 2),
      rec("a", "y", "match", 0.5),
      rec("b", "x", "error"),
      rec("b", "x", "timeout"),
      rec("b", "y", "mismatch"),
      rec("c", "x", "fault"),
      rec("c", "y", "error"),
    ]);
    expect(s.map((c) => [c.candidate, c.verdict])).toEqual([
      ["a", "match"],
      ["c", "fault"],
      ["b", "timeout"],
    ]);
    expect(s[0]!.speedup!).toBeCloseTo(1, 10);
  });
});

test("--iters below a comparison's launches is said: no candidate would be compared (a new user's finding)", async () => {
  const few = await quiet(async () => evalSettings({ iters: "2" }, []));
  expect(few.value.iters).toBe(2);
  expect(few.err).toContain("--iters 2: fewer than 5 timed launches, so no candidate is compared with the captured module");
  const enough = await quiet(async () => evalSettings({ iters: "5" }, []));
  expect(enough.err).not.toContain("--iters");
});

describe("isolation: real worker processes", () => {
  test("a kernel that hangs at its first launch is killed at that launch's bound, not the judgement's; a slow first launch within it and a hang after it are not", async () => {
    const cap = await captureWithSource();
    const files = candidateFiles({ "first.cu": "hang-first", "slow.cu": "slow-first 400", "late.cu": "hang-late", "ok.cu": "match 1.1" });
    const t0 = performance.now();
    const { value: r } = await quiet(() => runEval(options([cap], files, { slots: [null, null], open: fakeWorkers(), timeoutS: 3 })));
    const by = Object.fromEntries(r.records.map((x) => [x.label, x]));
    // the fixture's kernel time is 4.5 µs: the first launch's bound is its floor, 1 s; the judgement's is --timeout's 3 s
    expect(by["first.cu"]).toMatchObject({ verdict: "timeout", code: "E_TIMEOUT", runSeconds: 1 });
    expect(by["first.cu"]!.reason).toStartWith("its first launch ran past 1.0 s");
    expect(by["late.cu"]).toMatchObject({ verdict: "timeout", runSeconds: 3 });
    expect(by["late.cu"]!.reason).toStartWith("its launches ran past 3.0 s");
    expect(by["slow.cu"]).toMatchObject({ verdict: "match" });
    expect(by["ok.cu"]).toMatchObject({ verdict: "match" });
    expect(performance.now() - t0).toBeLessThan(12_000);
    const m = (await import("../../src/format/capture-dir.ts")).openCapture(cap).manifest;
    expect(firstLaunchMs(m, SETTINGS, 3)).toBe(1000);
    // 100× the captured time where that is longer, never past the judgement's bound; none without a kernel time
    expect(firstLaunchMs({ ...m, timing: { ...m.timing!, app_launch_us: 50_000 } }, SETTINGS, 3)).toBe(5000);
    expect(firstLaunchMs({ ...m, timing: { ...m.timing!, app_launch_us: 50_000 } }, SETTINGS, 3)).toBeLessThanOrEqual(
      watchdogMs({ ...m, timing: { ...m.timing!, app_launch_us: 50_000 } }, SETTINGS, 3),
    );
    expect(firstLaunchMs({ ...m, timing: { ...m.timing!, app_launch_us: 0 } }, SETTINGS, 3)).toBeUndefined();
  }, 30_000);

  test("a hung kernel is killed at the watchdog's bound (timeout), a worker killed mid-candidate is that candidate's error, a fault retires its worker; the rest go on", async () => {
    const cap = await captureWithSource();
    const log = join(tempDir(), "log");
    writeFileSync(log, "");
    process.env.EVAL_FAKE_LOG = log;
    const files = candidateFiles({
      "a.cu": "match 1.1",
      "hang.cu": "hang",
      "b.cu": "match 0.9",
      "die.cu": "die",
      "fault.cu": "fault",
      "c.cu": "match 1.3",
      "d.cu": "mismatch",
    });
    const t0 = performance.now();
    let r;
    try {
      ({ value: r } = await quiet(() => runEval(options([cap], files, { slots: [null, null], open: fakeWorkers(), timeoutS: 1 }))));
    } finally {
      delete process.env.EVAL_FAKE_LOG;
    }
    const by = Object.fromEntries(r.records.map((x) => [x.label, x]));
    expect(by["hang.cu"]).toMatchObject({ verdict: "timeout", code: "E_TIMEOUT" });
    expect(by["hang.cu"]!.reason).toMatch(/ran past 1\.0 s/);
    expect(by["die.cu"]).toMatchObject({ verdict: "error", code: "E_WORKER" });
    expect(by["die.cu"]!.reason).toContain("SIGKILL");
    expect(by["fault.cu"]).toMatchObject({ verdict: "fault" });
    expect(by["d.cu"]).toMatchObject({ verdict: "mismatch" });
    for (const ok of ["a.cu", "b.cu", "c.cu"]) expect(by[ok]).toMatchObject({ verdict: "match" });
    expect(r.records.length).toBe(7);
    expect(performance.now() - t0).toBeLessThan(15_000);
    // the hung worker is gone; the candidate after a fault ran in another process than the fault
    const started = readFileSync(log, "utf8")
      .trim()
      .split("\n")
      .map((l) => l.split(" "));
    const pidOf = (label: string) => Number(started.find((s) => s[1]!.startsWith(label))![0]);
    expect(running(pidOf("hang.cu"))).toBe(false);
    const faultPid = pidOf("fault.cu");
    const after = started.slice(started.findIndex((s) => s[1]!.startsWith("fault.cu")) + 1);
    expect(after.every((s) => Number(s[0]) !== faultPid)).toBe(true);
    expect(r.exitCode).toBe(2); // die.cu could not be judged: --resume tries it again
    // --resume continues a --jsonl file: without one, the line says to give one first
    expect(unjudgedLine(r, "none")).toBe(
      "1 of 7 candidates could not be judged (error): rerun with --jsonl FILE, then --resume (with that --jsonl FILE) tries them again",
    );
    expect(unjudgedLine(r, "jsonl")).toEndWith(": the same command with --resume tries them again");
    const m = (await import("../../src/format/capture-dir.ts")).openCapture(cap).manifest;
    expect(watchdogMs(m, SETTINGS, 1)).toBeLessThan(1100);
    // a received manifest's figures bound the watchdog at WATCHDOG_MAX_MS, never past the timer's 2^31 - 1 ms (taken as 1 ms:
    // a candidate killed at once) nor for weeks; --timeout's floor (at most a day) still holds (adversary 64)
    const huge = { ...m, timing: { ...m.timing, app_launch_us: 4.1e8 } };
    expect(watchdogMs(huge, SETTINGS, 10)).toBe(WATCHDOG_MAX_MS);
    expect(watchdogMs({ ...m, regions: m.regions.map((r) => ({ ...r, size: 2 ** 45 })) }, SETTINGS, 10)).toBe(WATCHDOG_MAX_MS); // 32 TiB at 1 GB/s: past 6 h
    expect(watchdogMs(huge, SETTINGS, 86_400)).toBe(86_400_000);
    expect(WATCHDOG_MAX_MS).toBeLessThan(2 ** 31 - 1);
  }, 30_000);

  test("a worker makes the input resident as it starts; a fault's replacement starts at once, before the next candidate is built; an idle replacement is killed at the end", async () => {
    const cap = await captureWithSource();
    const d = tempDir();
    const tasks = join(d, "tasks");
    const warm = join(d, "warm");
    writeFileSync(tasks, "");
    writeFileSync(warm, "");
    process.env.EVAL_FAKE_LOG = tasks;
    process.env.EVAL_FAKE_WARM_LOG = warm;
    const files = candidateFiles({ "a.cu": "match 1.1", "fault.cu": "fault", "b.cu": "match 0.9" });
    // the time each build ended (ms since the epoch): its task could not exist before
    const builtAt = new Map<string, number>();
    const build = fakeBuild(1200);
    const buildWith: NonNullable<EvalOptions["buildWith"]> = async (dir, m, c, dest) => {
      const b = await build(dir, m, c, dest);
      builtAt.set(c.label, Date.now());
      return b;
    };
    let r;
    try {
      ({ value: r } = await quiet(() => runEval(options([cap], files, { slots: [null], jobs: 1, buildWith, open: fakeWorkers() }))));
    } finally {
      delete process.env.EVAL_FAKE_LOG;
      delete process.env.EVAL_FAKE_WARM_LOG;
    }
    expect(r.records.map((x) => [x.label, x.verdict]).sort()).toEqual([
      ["a.cu", "match"],
      ["b.cu", "match"],
      ["fault.cu", "fault"],
    ]);
    const rows = (f: string) =>
      readFileSync(f, "utf8")
        .trim()
        .split("\n")
        .map((l) => l.split(" "));
    const warmed = new Map(rows(warm).map((w) => [Number(w[0]), { dir: w[1], at: Number(w[2]) }]));
    const ran = rows(tasks).map((t) => ({ pid: Number(t[0]), label: t[1]!.replace(/@.*/, ""), at: Number(t[3]) }));
    expect(ran.map((t) => t.label)).toEqual(["a.cu", "fault.cu", "b.cu"]);
    // every worker that judged made the first input resident before its first candidate
    for (const t of ran) {
      const w = warmed.get(t.pid);
      expect(w?.dir).toBe(resolve(cap));
      if (ran.find((x) => x.pid === t.pid) === t) expect(w!.at).toBeLessThanOrEqual(t.at);
    }
    // the first worker started with the first candidate (after its build), not before
    expect(warmed.get(ran[0]!.pid)!.at).toBeGreaterThanOrEqual(builtAt.get("a.cu")!);
    // the fault retired its worker: b.cu ran in the replacement, started and resident before b.cu's build ended
    expect(ran[2]!.pid).not.toBe(ran[1]!.pid);
    expect(warmed.get(ran[2]!.pid)!.at).toBeLessThan(builtAt.get("b.cu")!);
    // two workers in all (none started after the last candidate), and none left running
    expect(warmed.size).toBe(2);
    for (const pid of warmed.keys()) expect(running(pid)).toBe(false);
  }, 30_000);

  test("SIGTERM during the GPU work ends the worker under a hung kernel and the eval; the records written stay", async () => {
    const cap = await captureWithSource();
    const files = candidateFiles({ "ok.cu": "match 1.1", "stuck.cu": "hang" });
    const d = tempDir();
    const log = join(d, "log");
    const jsonl = join(d, "r.jsonl");
    writeFileSync(log, "");
    const child = Bun.spawn([process.execPath, join(import.meta.dir, "eval-child.ts"), cap, jsonl, "0", ...files], {
      stdout: "ignore",
      stderr: "pipe",
      env: { ...process.env, EVAL_FAKE_LOG: log },
    });
    const t0 = Date.now();
    while (!readFileSync(log, "utf8").includes("stuck.cu")) {
      if (Date.now() - t0 > 20_000) throw new Error(`the hung candidate never started: ${await new Response(child.stderr).text()}`);
      await Bun.sleep(20);
    }
    const worker = Number(
      readFileSync(log, "utf8")
        .split("\n")
        .find((l) => l.includes("stuck.cu"))!
        .split(" ")[0],
    );
    expect(running(worker)).toBe(true);
    child.kill("SIGTERM");
    await child.exited;
    const t1 = Date.now();
    while (running(worker) && Date.now() - t1 < 15_000) await Bun.sleep(20);
    expect(running(worker)).toBe(false);
    expect(
      readFileSync(jsonl, "utf8")
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l).label),
    ).toEqual(["ok.cu"]);
  }, 40_000);

  test("the judge keeps an input resident across candidates and opens another input once; a lost context is a fault and retires it", async () => {
    const a = await captureWithSource();
    const b = await captureWithSource();
    const opened: string[] = [];
    let n = 0;
    const judge = new EvalJudge(
      () => n++,
      async (dir) => {
        opened.push(dir);
        const m = JSON.parse(readFileSync(join(dir, "kerncap.json"), "utf8"));
        return {
          ...noGpuSession(dir, m, async (o) => {
            const text = readFileSync(await o.modulePath!, "utf8");
            if (text === "fault") throw new KerncapError("E_CUDA", "CUDA_ERROR_ILLEGAL_ADDRESS");
            return noGpuResult(m.kernel.name, text === "bad");
          }),
          isContextLost: (e: unknown) => (e as KerncapError).code === "E_CUDA",
        };
      },
    );
    const mod = (text: string) => {
      const p = join(tempDir(), "m");
      writeFileSync(p, text);
      return p;
    };
    const task = (dir: string, text: string): EvalTask => ({ candidate: text, input: dir, dir, module: mod(text) });
    expect(await judge.judge(task(a, "good"), SETTINGS)).toMatchObject({ verdict: "match" });
    // a mismatch's outcome carries validate's mismatches (nu10 #3: how wrong, without validating again)
    expect(await judge.judge(task(a, "bad"), SETTINGS)).toMatchObject({
      verdict: "mismatch",
      reason: expect.stringContaining("0x7f0000000000"),
      judgement: { mismatches: [{ va: "0x7f0000000000", firstDiffOffset: 8, bytesDiffering: 4088 }] },
    });
    expect(await judge.judge(task(b, "good"), SETTINGS)).toMatchObject({ verdict: "match" });
    expect(opened).toEqual([a, b]);
    expect(n).toBe(3);
    expect(judge.lost()).toBe(false);
    expect(await judge.judge(task(b, "fault"), SETTINGS)).toMatchObject({ verdict: "fault", code: "E_CUDA" });
    expect(judge.lost()).toBe(true);
  });
});

describe("--resume, --shard, --merge", () => {
  test("after SIGKILL: the records written are kept, a last line cut short dropped, the rest evaluated once", async () => {
    const cap = await captureWithSource();
    const texts: Record<string, string> = {};
    for (let i = 0; i < 8; i++) texts[`k${i}.cu`] = `match 1.${i}`;
    const files = candidateFiles(texts);
    const jsonl = join(tempDir(), "r.jsonl");
    const child = Bun.spawn([process.execPath, join(import.meta.dir, "eval-child.ts"), cap, jsonl, "250", ...files], { stdout: "ignore", stderr: "pipe" });
    const t0 = Date.now();
    while (!(existsSync(jsonl) && readFileSync(jsonl, "utf8").split("\n").length > 3)) {
      if (Date.now() - t0 > 20_000) throw new Error("the child wrote no records");
      await Bun.sleep(20);
    }
    child.kill("SIGKILL");
    await child.exited;
    const before = readFileSync(jsonl, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l).label as string);
    expect(before.length).toBeGreaterThanOrEqual(3);
    expect(before.length).toBeLessThan(8);
    appendFileSync(jsonl, '{"schema":"kerncap.eval-record/1","candidate":"k7'); // the kill's cut
    const built: string[] = [];
    const { value: r } = await quiet(() => runEval(options([cap], files, { jsonl, resume: true, buildWith: fakeBuild(0, built) })));
    expect(built.sort()).toEqual(
      Object.keys(texts)
        .filter((k) => !before.includes(k))
        .sort(),
    );
    expect(r.candidates.length).toBe(8);
    const after = readFileSync(jsonl, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(after.length).toBe(8);
    expect(new Set(after.map((x) => x.candidate)).size).toBe(8);
  }, 40_000);

  test("--resume keeps a candidate's own fault (E_CONFINED, E_CANDIDATE …) of the same subject: not built again, no record added; a dead worker's error is tried again", async () => {
    const cap = await captureWithSource();
    const files = candidateFiles({ "a.cu": "match 1.2", "b.cu": "match 1.1", "c.cu": "match 1.3" });
    const jsonl = join(tempDir(), "r.jsonl");
    const faults: Record<string, { code: string; reason: string }> = {
      "b.cu": { code: "E_CONFINED", reason: "its build read /etc/hostname" },
      "c.cu": { code: "E_WORKER", reason: "the worker died" },
    };
    const calls: string[] = [];
    const buildWith: NonNullable<EvalOptions["buildWith"]> = async (dir, m, c, dest) => {
      calls.push(c.label);
      const f = faults[c.label];
      if (f) return { failed: { verdict: "error", code: f.code, reason: f.reason, seconds: 0 } };
      return fakeBuild(0, [])(dir, m, c, dest);
    };
    await quiet(() => runEval(options([cap], files, { jsonl, buildWith })));
    expect(calls.sort()).toEqual(["a.cu", "b.cu", "c.cu"]);
    const lines = () => readFileSync(jsonl, "utf8").trim().split("\n").length;
    const first = lines();
    calls.length = 0;
    const { value: r } = await quiet(() => runEval(options([cap], files, { jsonl, resume: true, buildWith })));
    expect(calls).toEqual(["c.cu"]); // E_WORKER (the "other" kind) again; E_CONFINED kept
    expect(lines()).toBe(first + 1);
    expect(Object.fromEntries(r.candidates.map((c) => [c.label, c.verdict]))).toEqual({ "a.cu": "match", "b.cu": "error", "c.cu": "error" });
  });

  test("--resume judges the module an earlier eval built where there was no GPU (E_NO_GPU), not building it again; a kept module changed since is built again (trial 11)", async () => {
    const cap = await captureWithSource();
    const files = candidateFiles({ "a.cu": "match 1.2", "b.cu": "match 1.5", "c.cu": "compile-error" });
    const jsonl = join(tempDir(), "r.jsonl");
    const noGpu: OpenRunner<EvalTask, EvalOutcome> = () => ({
      run: async (t) => ({
        candidate: t.candidate,
        input: t.input,
        verdict: "error",
        reason: "no NVIDIA driver",
        code: "E_NO_GPU",
        numerics: null,
        timing: null,
        runSeconds: 0,
        device: null,
      }),
      kill() {},
      close: async () => {},
    });
    const first: string[] = [];
    await quiet(() => runEval(options([cap], files, { jsonl, open: () => noGpu, buildWith: fakeBuild(0, first) })));
    expect(first.sort()).toEqual(["a.cu", "b.cu", "c.cu"]);
    const records = readFileSync(jsonl, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    const a = records.find((r) => r.label === "a.cu");
    expect(a).toMatchObject({ code: "E_NO_GPU", build: { module: "module", moduleSha256: expect.stringMatching(/^[0-9a-f]{64}$/) } });
    expect(a.copy).toStartWith(join(cap, "build/eval/"));
    // b.cu's kept module changed since its record: not what was built, so built again
    writeFileSync(join(records.find((r) => r.label === "b.cu").copy, "module"), "mismatch");
    const again: string[] = [];
    const { value: r, err } = await quiet(() => runEval(options([cap], files, { jsonl, resume: true, buildWith: fakeBuild(0, again) })));
    expect(again).toEqual(["b.cu"]); // a.cu's module judged as kept; c.cu's compile error is its record
    expect(err).toContain("a.cu: the module its earlier build kept is judged (build/eval/");
    expect(Object.fromEntries(r.candidates.map((c) => [c.label, c.verdict]))).toEqual({ "a.cu": "match", "b.cu": "match", "c.cu": "compile-error" });
    expect(r.candidates.find((c) => c.label === "a.cu")?.speedup).toBeCloseTo(1.2);
  });

  test("--build-only builds every candidate and judges none (no worker opened): records of verdict built, exit 0 with a compile error among them; --resume without it judges the kept modules, building none again (nu12 #5)", async () => {
    const cap = await captureWithSource();
    const files = candidateFiles({ "a.cu": "match 1.2", "b.cu": "match 1.5", "c.cu": "compile-error" });
    const jsonl = join(tempDir(), "r.jsonl");
    const first: string[] = [];
    const never = () => {
      throw new Error("--build-only opened a GPU worker");
    };
    const { value: b } = await quiet(() => runEval(options([cap], files, { jsonl, buildOnly: true, open: never, buildWith: fakeBuild(0, first) })));
    expect(first.sort()).toEqual(["a.cu", "b.cu", "c.cu"]);
    expect(b.exitCode).toBe(0);
    expect(Object.fromEntries(b.candidates.map((c) => [c.label, c.verdict]))).toEqual({ "a.cu": "built", "b.cu": "built", "c.cu": "compile-error" });
    expect(b.summary).toMatchObject({ built: 2, "compile-error": 1, error: 0 });
    const a = b.records.find((r) => r.label === "a.cu")!;
    expect(a).toMatchObject({ input: BUILD_INPUT, verdict: "built", timing: null, numerics: null, build: { registers: 32, module: "module" } });
    expect(v.safeParse(EvalRecord, a).success).toBe(true);
    // the same --build-only again: nothing left to build
    const again: string[] = [];
    await quiet(() => runEval(options([cap], files, { jsonl, resume: true, buildOnly: true, open: never, buildWith: fakeBuild(0, again) })));
    expect(again).toEqual([]);
    // on the GPU machine: judged from the kept modules, none built again; the compile error stays the candidate's record —
    // with other judging options than the build's too (a new user's finding: --resume --flush-l2 built every one again)
    const judged: string[] = [];
    const judging = { ...SETTINGS, flushL2: true, runs: 4, tolerance: { rtol: 1e-3 } };
    const { value: r } = await quiet(() => runEval(options([cap], files, { jsonl, resume: true, settings: judging, buildWith: fakeBuild(0, judged) })));
    expect(judged).toEqual([]);
    expect(Object.fromEntries(r.candidates.map((c) => [c.label, c.verdict]))).toEqual({ "a.cu": "match", "b.cu": "match", "c.cu": "compile-error" });
    // a kept module gone (an artifact without build/eval: nu13 #3) is built again, said; a confined build-only eval with --jsonl keeps its builds (nu13 #2)
    const jsonl2 = join(tempDir(), "r2.jsonl");
    await quiet(() => runEval(options([cap], files, { jsonl: jsonl2, buildOnly: true, confine: true, open: never, buildWith: fakeBuild(0, []) })));
    const kept2 = readFileSync(jsonl2, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(kept2.find((x) => x.label === "a.cu").copy).toBe(join(cap, "build/eval", copyName(kept2.find((x) => x.label === "a.cu").candidate)));
    rmSync(join(kept2.find((x) => x.label === "b.cu").copy, "module"));
    const rebuilt: string[] = [];
    const { err: said } = await quiet(() => runEval(options([cap], files, { jsonl: jsonl2, resume: true, buildWith: fakeBuild(0, rebuilt) })));
    expect(rebuilt).toEqual(["b.cu"]);
    expect(said).toMatch(
      /b\.cu: the module its earlier build kept \(build\/eval\/[0-9a-f]{16}\/module\) is gone \(the capture's build\/ was not carried over\?\): built again/,
    );
    // the file holds both runs' records: --merge ranks the judged ones, the built records superseded
    const merged = mergeEval([jsonl]);
    expect(Object.fromEntries(merged.candidates.map((c) => [c.label, c.verdict]))).toEqual({ "a.cu": "match", "b.cu": "match", "c.cu": "compile-error" });
  });

  test("--resume takes a record only of its input's subject now (adv22 #4: a patch's genuine match was kept after the src/ it patches changed and it no longer built): changed src/, another input of the name, no subject: judged again, said", async () => {
    const cap = await captureWithSource();
    const d = tempDir("kerncap-cands-");
    const patch = join(d, "p1.patch");
    writeFileSync(patch, '--- src/kernel.cu\n+++ edited/kernel.cu\n@@ -1 +1 @@\n-#include "util.h"\n+#include "util.h" // h\n');
    // the build of the patched copy: it fails once util.h says #error
    const buildOf =
      (built: string[]): NonNullable<EvalOptions["buildWith"]> =>
      async (dir, _m, c, dest) => {
        built.push(c.label);
        if (readFileSync(join(dir, "src/util.h"), "utf8").includes("#error"))
          return { failed: { verdict: "compile-error", code: "E_BUILD", reason: "src/util.h:2: error: the helper is broken", seconds: 0 } };
        mkdirSync(dest, { recursive: true });
        writeFileSync(join(dest, "module"), "match 2");
        return { built: { module: join(dest, "module"), seconds: 0, registers: 32, stackFrameBytes: 0 } };
      };
    const jsonl = join(tempDir(), "r.jsonl");
    const first = await quiet(() => runEval(options([cap], [patch], { jsonl, buildWith: buildOf([]) })));
    expect(first.value.candidates).toMatchObject([{ label: "p1.patch", verdict: "match" }]);
    const written = JSON.parse(readFileSync(jsonl, "utf8")) as Rec;
    expect(written.subject).toMatch(/^[0-9a-f]{64}$/);
    // unchanged: taken, nothing built
    const none: string[] = [];
    await quiet(() => runEval(options([cap], [patch], { jsonl, resume: true, buildWith: buildOf(none) })));
    expect(none).toEqual([]);
    // the header the patched kernel includes breaks: built again, its compile error the verdict, said naming it
    writeFileSync(join(cap, "src/util.h"), "#define TWO 2.0f\n#error the helper is broken\n");
    const built: string[] = [];
    const { value: r, err } = await quiet(() => runEval(options([cap], [patch], { jsonl, resume: true, buildWith: buildOf(built) })));
    expect(built).toEqual(["p1.patch"]);
    expect(r.candidates).toMatchObject([{ label: "p1.patch", verdict: "compile-error" }]);
    expect(err).toContain("p1.patch on cap: its record is of another subject (src/, the input or the run's options changed since): judged again");
    // the header back as it was: the first record (of this subject again) is taken; the later one, of the broken header, is not said "judged again" (nu7 #13)
    writeFileSync(join(cap, "src/util.h"), "#define TWO 2.0f\n");
    const back: string[] = [];
    const { value: r3, err: err3 } = await quiet(() => runEval(options([cap], [patch], { jsonl, resume: true, buildWith: buildOf(back) })));
    expect(back).toEqual([]);
    expect(r3.candidates).toMatchObject([{ label: "p1.patch", verdict: "match" }]);
    expect(err3).not.toContain("judged again");
    expect(err3).toContain("1 of 1 candidates already evaluated");
    // --resume of a results file that is not there: said, not "0 of 1 already evaluated" (a new user's finding: a typo went unnoticed)
    const typo = join(tempDir(), "typo.jsonl");
    const { err: err4 } = await quiet(() => runEval(options([cap], [patch], { jsonl: typo, resume: true, buildWith: buildOf([]) })));
    expect(err4).toContain(`--resume: no results file ${typo} yet (a new one, or a mistyped path?)`);
    expect(err4).not.toContain("already evaluated");
    // another capture named cap (its sources as they were), other options (a tolerance), a record that names no subject: judged again
    const other = await captureWithSource();
    const { subject: _, ...old } = written;
    for (const [dir, line, o] of [
      [other, recordLine("eval-record", written), {}],
      [cap, recordLine("eval-record", written), { settings: { ...SETTINGS, tolerance: { rtol: 0.5 } } }],
      [cap, recordLine("eval-record", old), {}],
    ] as const) {
      writeFileSync(jsonl, line);
      const again: string[] = [];
      const { err: said } = await quiet(() => runEval(options([dir], [patch], { jsonl, resume: true, buildWith: buildOf(again), ...o })));
      expect(again).toEqual(["p1.patch"]);
      if (line.length < recordLine("eval-record", written).length)
        expect(said).toContain("p1.patch on cap: its record names no subject (written before records did): judged again");
    }
  });

  test("unsharded evals merged: of one capture (other candidates) ranked together; of two captures refused as two evals, as check --merge refuses them (adversary 61: ranked as one, exit 0)", async () => {
    const cap = await captureWithSource();
    const other = await captureWithSource();
    writeFileSync(join(other, "src", "extra.h"), "#define EXTRA 1\n"); // its sources differ: another eval's subject
    const d = tempDir();
    const run = async (c: string, texts: Record<string, string>, name: string) => {
      const f = join(d, name);
      await quiet(() => runEval(options([c], candidateFiles(texts), { jsonl: f })));
      return f;
    };
    const a = await run(cap, { "a.cu": "match 1.0" }, "a.jsonl");
    const b = await run(cap, { "b.cu": "match 1.01" }, "b.jsonl");
    const theirs = await run(other, { "c.cu": "match 1.02" }, "c.jsonl");
    expect(
      mergeEval([a, b])
        .candidates.map((c) => c.label)
        .sort(),
    ).toEqual(["a.cu", "b.cu"]);
    expect(() => mergeEval([a, theirs])).toThrow(/hold the records of two different evals/);
  });

  test("shards are disjoint and cover the candidates; --merge ranks them together; a resume of another shard is refused", async () => {
    const cap = await captureWithSource();
    const texts: Record<string, string> = {};
    for (let i = 0; i < 9; i++) texts[`s${i}.cu`] = `match 1.0${i}`;
    const files = candidateFiles(texts);
    const d = tempDir();
    const outs = [0, 1, 2].map((k) => join(d, `shard-${k}.jsonl`));
    const labels: string[] = [];
    // a shard's file with records (a shard given no candidate holds its marker line only)
    const withRecords = (f: string) => existsSync(f) && readFileSync(f, "utf8").includes('"kerncap.eval-record/1"');
    for (const [k, f] of outs.entries()) {
      const { value: r } = await quiet(() => runEval(options([cap], files, { jsonl: f, shard: { index: k, count: 3 } })));
      labels.push(...r.candidates.map((c) => c.label));
    }
    expect(labels.sort()).toEqual(Object.keys(texts).sort());
    const merged = mergeEval(outs.filter((f) => existsSync(f)));
    expect(merged.candidates.map((c) => c.label)).toEqual(["s8.cu", "s7.cu", "s6.cu", "s5.cu", "s4.cu", "s3.cu", "s2.cu", "s1.cu", "s0.cu"]);
    // every shard of the eval, or --partial (nu14 #1: two of three shards merged, exit 0)
    const two = outs.filter((f) => withRecords(f)).slice(0, 2);
    expect(() => mergeEval(two)).toThrow(/the results files lack shards? \d\/3(, \d\/3)? of the eval/);
    const part = await quiet(async () => mergeEval(two, { partial: true }));
    expect(part.value.missingShards!.length).toBeGreaterThanOrEqual(1);
    expect(part.value.exitCode).toBe(2);
    expect(part.err).toMatch(/\(--partial\): (its|their) candidates are not in this report/);
    // an empty file (a shard stopped before its first line) beside every shard's: merged, said
    const empty = join(d, "shard-empty.jsonl");
    writeFileSync(empty, "");
    const withEmpty = await quiet(async () => mergeEval([...outs.filter((f) => existsSync(f)), empty]));
    expect(withEmpty.value.candidates).toHaveLength(9);
    expect(withEmpty.err).toContain("holds no eval record (a shard stopped before its first");
    // a shard given no candidate wrote its authenticated marker line; an empty file stands for no shard (adversary 31 #2)
    const marked = outs.find((f) => existsSync(f) && !readFileSync(f, "utf8").includes('"kerncap.eval-record/1"'));
    if (marked) {
      expect(JSON.parse(readFileSync(marked, "utf8").trim())).toMatchObject({ schema: "kerncap.eval-shard/1", auth: expect.stringMatching(/^hmac-sha256:/) });
      // the line has its published schema (kerncap schema eval-shard: a new user's finding, it had none)
      expect(v.safeParse(EvalShardMarker, JSON.parse(readFileSync(marked, "utf8").trim())).issues).toBeUndefined();
      expect(jsonSchemaOf("eval-shard")?.$id).toBe("kerncap.eval-shard/1");
      const others = outs.filter((f) => f !== marked);
      expect(() => mergeEval([...others, empty])).toThrow(/the results files lack shard/);
      // a marker made up (no authenticator) is refused
      const made = join(d, "made-up.jsonl");
      writeFileSync(
        made,
        `${JSON.stringify({ schema: "kerncap.eval-shard/1", shard: readFileSync(marked, "utf8").match(/"shard":"(\d+\/3)"/)![1], at: "x" })}\n`,
      );
      expect(() => mergeEval([...others, made])).toThrow(/carries no authenticator/);
    }
    // one shard's file given twice (or a copy): the same candidate and input in two files, refused naming both (trial 19: argument order chose the verdict)
    const one = outs.find((f) => withRecords(f))!;
    const copy = join(d, "copy.jsonl");
    writeFileSync(copy, readFileSync(one));
    expect(() => mergeEval([one, copy])).toThrow(`${copy} and ${one} both hold candidate`);
    // a file of yours in a folder others may rename entries of: merged, with a warning (trial 19: a team member moved an older run's folder to the new one's name)
    const team = join(d, "team");
    mkdirSync(team);
    chmodSync(team, 0o777);
    writeFileSync(join(team, "shard.jsonl"), readFileSync(one));
    const warned = await quiet(async () => mergeEval([join(team, "shard.jsonl")], { partial: true }));
    expect(warned.err).toContain(
      `${team} is writable by other users (mode 0777) and not sticky: another user could have put another of your files at this name`,
    );
    // a match without the numerics, device and worker of a run is no record of a judgement (a trial's forged one was ranked)
    const real = readFileSync(outs.find((f) => withRecords(f))!, "utf8")
      .trim()
      .split("\n")[0]!;
    const forged = join(d, "forged.jsonl");
    // written with this key's authenticator: the consistency check behind it refuses it
    writeFileSync(forged, recordLine("eval-record", { ...JSON.parse(real), verdict: "match", numerics: null, device: null, worker: null, timing: null }));
    expect(() => mergeEval([forged])).toThrow(/a match without the numerics, device or worker/);
    // a shard of an eval of another capture, every record genuine, is no shard of this one (adversary 48: capture B's shard 1/2 ranked as A's)
    const other = await captureWithSource();
    writeFileSync(join(other, "src", "extra.h"), "#define EXTRA 1\n"); // its sources differ: another subject
    const k = outs.findIndex((f) => withRecords(f));
    const theirs = join(d, "theirs.jsonl");
    await quiet(() => runEval(options([other], files, { jsonl: theirs, shard: { index: k, count: 3 } })));
    const mixed = outs.map((f, i) => (i === k ? theirs : f)).filter((f) => existsSync(f));
    expect(() => mergeEval(mixed)).toThrow(/hold shards K\/3 of two different evals/);
    // a shard given no candidate says its eval too: another eval's empty shard cannot stand for this one's (adversary 51)
    const runShard = async (c: string, index: number, name: string) => {
      const f = join(d, name);
      await quiet(() => runEval(options([c], files, { jsonl: f, shard: { index, count: 20 } })));
      return f;
    };
    let emptyK = -1;
    for (let i = 0; i < 20 && emptyK < 0; i++) if (!withRecords(await runShard(cap, i, `e20-${i}.jsonl`))) emptyK = i;
    expect(emptyK).toBeGreaterThanOrEqual(0);
    const ours = join(d, `e20-${emptyK}.jsonl`); // this eval's own empty shard: the same shard of another eval is not it
    const theirEmpty = await runShard(other, emptyK, "their-empty.jsonl");
    expect(() => mergeEval([ours, theirEmpty], { partial: true })).toThrow(/of two different evals/);
    // a shard file others can write is not ranked (a trial's forged match was)
    chmodSync(empty, 0o666);
    expect(() => mergeEval([empty])).toThrow(/can be written by others \(mode 666\): eval --merge would rank its records as judged/);
    const used = outs.find((f) => withRecords(f))!;
    expect(runEval(options([cap], files, { jsonl: used, resume: true }))).rejects.toThrow(/holds an eval of --shard/);
    expect(runEval(options([cap], files, { resume: true }))).rejects.toThrow(/--resume continues the results file of --jsonl/);
  });
});

describe.skipIf(!NVCC)("real builds (nvcc, no GPU)", () => {
  const BUILD_SH = `#!/usr/bin/env bash
set -euo pipefail
here="$(cd "$(dirname "\${BASH_SOURCE[0]}")" && pwd)"
out="\${1:-$here/build/kernel.cubin}"
mkdir -p "$(dirname "$out")"
"${NVCC}" -cubin -arch=sm_90 \${EXTRA_FLAGS:-} "$here/src/kernel.cu" -o "$out" >&2
echo "$out"
`;
  /** The capture of an extern "C" kernel (its name says nothing of its parameters: a changed layout is not a missing kernel). */
  async function externC(): Promise<string> {
    const cap = await captureWithSource(BUILD_SH);
    const m = JSON.parse(readFileSync(join(cap, "kerncap.json"), "utf8"));
    m.kernel.name = "scale";
    writeFileSync(join(cap, "kerncap.json"), JSON.stringify(m));
    writeFileSync(join(cap, "src/kernel.cu"), '#include "util.h"\nextern "C" __global__ void scale(float* x, int n) { x[threadIdx.x] *= TWO; }\n');
    return cap;
  }
  test("a C++ kernel rebuilt with another parameter list (its mangled name another): layout-change E_PARAM_LAYOUT, not a compile error; another name stays one (nu15)", async () => {
    const cap = await captureWithSource(BUILD_SH);
    const m = JSON.parse(readFileSync(join(cap, "kerncap.json"), "utf8"));
    m.kernel.name = "_Z5scalePfi";
    m.kernel.demangled = "scale(float*, int)";
    writeFileSync(join(cap, "kerncap.json"), JSON.stringify(m));
    writeFileSync(join(cap, "src/kernel.cu"), '#include "util.h"\n__global__ void scale(float* x, int n) { x[threadIdx.x] *= TWO; }\n');
    const d = tempDir("kerncap-cands-");
    for (const [name, text] of [
      ["wider", "__global__ void scale(float* x, long n) { x[0] = n; }\n"],
      ["renamed", "__global__ void scale2(float* x, int n) { x[0] = n; }\n"],
      ["same", "__global__ void scale(float* x, int n) { x[threadIdx.x] *= 3.0f; }\n"],
    ] as const) {
      mkdirSync(join(d, name));
      writeFileSync(join(d, name, "kernel.cu"), text);
    }
    const { value: r } = await quiet(() =>
      runEval({
        ...options(
          [cap],
          ["wider", "renamed", "same"].map((n) => join(d, n)),
          { buildOnly: true },
        ),
        buildWith: undefined,
      }),
    );
    const by = Object.fromEntries(r.records.map((x) => [x.label, x]));
    expect(by["wider"]).toMatchObject({ verdict: "layout-change", code: "E_PARAM_LAYOUT" });
    expect(by["wider"]!.reason).toContain("it defines scale(float*, long)");
    expect(by["renamed"]).toMatchObject({ verdict: "compile-error", code: "E_KERNEL_NOT_FOUND" });
    expect(by["same"]).toMatchObject({ verdict: "built" });
  }, 60_000);
  test("--build-timeout: a build past its limit is killed, a compile-error with build.timedOut, the table saying it timed out (nu14 #5)", async () => {
    const slow = BUILD_SH.replace("mkdir -p", 'if grep -q SLOW "$here/src/kernel.cu"; then sleep 30; fi\nmkdir -p');
    const cap = await captureWithSource(slow);
    const d = tempDir("kerncap-cands-");
    mkdirSync(join(d, "slow"));
    writeFileSync(join(d, "slow/kernel.cu"), '#include "util.h"\n// SLOW\n__global__ void scale(float* x, int n) { x[threadIdx.x] *= TWO; }\n');
    const saved = process.env.KERNCAP_BUILD_TIMEOUT;
    process.env.KERNCAP_BUILD_TIMEOUT = "2";
    try {
      const t0 = Date.now();
      const { value: r } = await quiet(() => runEval({ ...options([cap], [join(d, "slow")], { buildOnly: true }), buildWith: undefined }));
      expect(Date.now() - t0).toBeLessThan(20_000);
      const rec = r.records[0]!;
      expect(rec).toMatchObject({ verdict: "compile-error", code: "E_BUILD", build: { timedOut: true } });
      expect(shortReason(rec.reason, 160, rec.code)).toBe("build.sh timed out after 2 s");
    } finally {
      if (saved === undefined) delete process.env.KERNCAP_BUILD_TIMEOUT;
      else process.env.KERNCAP_BUILD_TIMEOUT = saved;
    }
  }, 60_000);
  test("each candidate built in its own copy, in parallel: a compile error once with the compiler's message, a changed parameter layout, registers of the rest; the capture untouched", async () => {
    const cap = await externC();
    const before = snapshot(cap);
    const d = tempDir("kerncap-cands-");
    writeFileSync(
      join(d, "kernel.cu"),
      '#include "util.h"\nextern "C" __global__ void scale(float* x, int n) { if (threadIdx.x < n) x[threadIdx.x] *= TWO; }\n',
    );
    mkdirSync(join(d, "syntax"));
    writeFileSync(join(d, "syntax/kernel.cu"), 'extern "C" __global__ void scale(float* x, int n) { x[0] = oops }\n');
    mkdirSync(join(d, "wider"));
    writeFileSync(join(d, "wider/kernel.cu"), 'extern "C" __global__ void scale(float* x, long n) { x[0] = n; }\n');
    mkdirSync(join(d, "renamed"));
    writeFileSync(join(d, "renamed/kernel.cu"), 'extern "C" __global__ void scale2(float* x, int n) { x[0] = n; }\n');
    writeFileSync(join(d, "three.patch"), "--- a/util.h\n+++ b/util.h\n@@ -1 +1 @@\n-#define TWO 2.0f\n+#define TWO 3.0f\n");
    mkdirSync(join(d, "many"));
    const undefinedNames = Array.from({ length: 80 }, (_, i) => `x[${i}] = oops${i};`).join("\n");
    writeFileSync(join(d, "many/kernel.cu"), `extern "C" __global__ void scale(float* x, int n) {\n${undefinedNames}\n}\n`);
    const cands = ["kernel.cu", "syntax", "wider", "renamed", "three.patch", "many"].map((n) => join(d, n));
    const modules: string[] = [];
    const open: EvalOptions["open"] = () => () => ({
      run: async (t) => (
        modules.push(t.module),
        { candidate: t.candidate, input: t.input, verdict: "match", reason: null, code: null, numerics: "bit-exact", timing: null, runSeconds: 0, device: null }
      ),
      kill() {},
      close: async () => {},
    });
    const { value: r } = await quiet(() => runEval({ ...options([cap], cands, { open }), buildWith: undefined }));
    const by = Object.fromEntries(r.records.map((x) => [x.label, x]));
    expect(by["syntax"]).toMatchObject({ verdict: "compile-error", code: "E_BUILD", input: BUILD_INPUT });
    expect(by["syntax"]!.reason!.match(/identifier "oops" is undefined/g)?.length).toBe(1);
    // the record carries the compiler's diagnostics, structured as E_BUILD's error.details.diagnostics (a harness reads file and line)
    expect(by["syntax"]!.diagnostics).toContainEqual(
      expect.objectContaining({ file: "src/kernel.cu", severity: "error", text: expect.stringContaining('identifier "oops" is undefined') }),
    );
    // a record carries the first 50 of the build's diagnostics (each record is an MCP progress notification too: adversary 65 06)
    expect(by["many"]).toMatchObject({ verdict: "compile-error", code: "E_BUILD" });
    expect(by["many"]!.diagnostics).toHaveLength(RECORD_DIAGNOSTICS_MAX);
    expect(by["many"]!.diagnostics![0]!.text).toContain('identifier "oops0" is undefined');
    expect(by["wider"]).toMatchObject({ verdict: "layout-change", code: "E_PARAM_LAYOUT" });
    expect(by["renamed"]).toMatchObject({ verdict: "compile-error", code: "E_KERNEL_NOT_FOUND" });
    expect(by["renamed"]!.reason).toContain("; it defines scale2"); // what it defines instead, as validate says (nu7 #11)
    // the table says the compiler's error line, not build.sh's "does not build"
    expect(
      rankedTable(r)
        .split("\n")
        .find((l) => l.includes("syntax")),
    ).toContain('identifier "oops" is undefined');
    for (const ok of ["kernel.cu", "three.patch"]) {
      expect(by[ok]).toMatchObject({ verdict: "match" });
      expect(by[ok]!.build.registers).toBeGreaterThan(0);
      expect(by[ok]!.build.stackFrameBytes).toBe(0);
      // spills, as validate's rebuild says them (nu14 #4: a triage of candidates that spill)
      expect(by[ok]!.build).toMatchObject({ spillStoreBytes: 0, spillLoadBytes: 0 });
      expect(r.candidates.find((c) => c.label === ok)).toMatchObject({ spillStoreBytes: 0, spillLoadBytes: 0 });
    }
    expect(new Set(modules).size).toBe(2); // two private copies, two modules
    for (const m of modules) expect(m.startsWith(join(cap, "build/eval/"))).toBe(true);
    // the copies hold what the candidates' files held: the user's alone (trial 18: a link's target landed 0644 in a team folder)
    expect(statSync(join(cap, "build/eval")).mode & 0o777).toBe(0o700);
    const copy = modules.find((m) => existsSync(join(m, "../../src/util.h")) && readFileSync(join(m, "../../src/util.h"), "utf8").includes("3.0f"));
    expect(copy).toBeDefined();
    const now = snapshot(cap);
    for (const k of Object.keys(before)) expect(now[k]).toBe(before[k]!); // nothing of the capture's changed (build/eval/ is new)
  }, 120_000);

  test("confined builds (a CUDA capture with a recorded source): an #include of a file outside the capture is a compile-error naming it, never its content; a changed build.sh runs nowhere", async () => {
    const cap = await externC();
    const m = JSON.parse(readFileSync(join(cap, "kerncap.json"), "utf8"));
    m.source = { cuda: { method: "source-root" } };
    writeFileSync(join(cap, "kerncap.json"), JSON.stringify(m));
    recordRendered(cap); // the build.sh of this test stands for the one kerncap wrote
    const secret = join(tempDir("kerncap-secret-"), "secret.h");
    writeFileSync(secret, "#define SECRET_TOKEN 12345\n");
    const d = tempDir("kerncap-cands-");
    writeFileSync(join(d, "kernel.cu"), '#include "util.h"\nextern "C" __global__ void scale(float* x, int n) { x[0] *= TWO; }\n');
    mkdirSync(join(d, "leak"));
    writeFileSync(join(d, "leak/kernel.cu"), `#include "${secret}"\nextern "C" __global__ void scale(float* x, int n) { x[0] = SECRET_TOKEN + oops; }\n`);
    const open: EvalOptions["open"] = () => () => ({
      run: async (t) => ({
        candidate: t.candidate,
        input: t.input,
        verdict: "match",
        reason: null,
        code: null,
        numerics: "bit-exact",
        timing: null,
        runSeconds: 0,
        device: null,
      }),
      kill() {},
      close: async () => {},
    });
    const { value: r } = await quiet(() => runEval({ ...options([cap], [join(d, "kernel.cu"), join(d, "leak")], { open }), buildWith: undefined }));
    const by = Object.fromEntries(r.records.map((x) => [x.label, x]));
    expect(by["kernel.cu"]).toMatchObject({ verdict: "match" });
    expect(by["leak"]).toMatchObject({ verdict: "error", code: "E_CONFINED" }); // refused, not a compiler's error
    expect(by["leak"]!.reason).toContain("secret.h");
    // a refused candidate keeps no copy (its record's copy null, the folder removed); the built one's is kept
    expect(by["leak"]!.copy).toBeNull();
    expect(existsSync(join(cap, "build/eval", copyName(by["leak"]!.candidate)))).toBe(false);
    expect(existsSync(by["kernel.cu"]!.copy!)).toBe(true);
    expect(JSON.stringify(r)).not.toContain("12345");
    // build.sh changed after capture (not what kerncap wrote, not trusted): no candidate's build runs
    writeFileSync(join(cap, "build.sh"), readFileSync(join(cap, "build.sh"), "utf8") + "# changed\n");
    const { value: r2 } = await quiet(() => runEval({ ...options([cap], [join(d, "kernel.cu")], { open }), buildWith: undefined }));
    expect(r2.records).toMatchObject([{ verdict: "error", code: "E_NOT_RENDERED" }]);
  }, 120_000);

  test("the verb: --json streams each record, then the kerncap.eval document; without a GPU each candidate is an error (exit 2), builds still judged", async () => {
    const cap = await captureWithSource(BUILD_SH);
    const d = tempDir("kerncap-cands-");
    mkdirSync(join(d, "syntax"));
    writeFileSync(join(d, "syntax/kernel.cu"), "__global__ void scale(float* x, int n) { x[0] = oops }\n");
    writeFileSync(join(d, "kernel.cu"), '#include "util.h"\n__global__ void scale(float* x, int n) { x[0] *= TWO; }\n');
    const p = Bun.spawn(
      [process.execPath, join(import.meta.dir, "../../src/cli/main.ts"), "eval", cap, join(d, "syntax"), join(d, "kernel.cu"), "--json", "--iters", "10"],
      { stdout: "pipe", stderr: "pipe", env: { ...process.env, CUDA_VISIBLE_DEVICES: "" } },
    );
    const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
    const lines = out
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => l.schema)).toEqual([documentId("eval-record"), documentId("eval-record"), documentId("eval")]);
    const doc = lines.at(-1)!;
    expect(doc.candidates.map((c: { label: string; verdict: string }) => `${c.label}:${c.verdict}`)).toEqual(["syntax:compile-error", "kernel.cu:error"]);
    expect(code).toBe(2);
    expect(err).toContain("could not be judged");
  }, 120_000);
});

test("Triton configs: one that changes a constexpr (the tile size) needs --grid; one of compile options alone runs on the captured grid", async () => {
  const cap = await captureWithSource();
  const m = JSON.parse(readFileSync(join(cap, "kerncap.json"), "utf8"));
  m.kernel.frontend = "triton";
  writeFileSync(join(cap, "kerncap.json"), JSON.stringify(m));
  writeFileSync(
    join(cap, "pinned.json"),
    JSON.stringify({
      fnName: "scale",
      python: "python3",
      signature: { x: "*fp32", n: "i32", BLOCK: "constexpr" },
      constexprs: [{ name: "BLOCK", expr: "1024" }],
      options: { num_warps: 4, num_stages: 3 },
    }),
  );
  expect(runEval(options([cap], ["BLOCK=512 num_warps=4"]))).rejects.toThrow(/changes constexprs \(tile sizes\).*give --grid/);
  // kerncap mcp's evaluate (--confine): a Triton build runs the candidate's Python, so only with --trust
  expect(runEval(options([cap], ["num_warps=8"], { confine: true }))).rejects.toMatchObject({ code: "E_UNTRUSTED" });
  const built: string[] = [];
  const { value: r } = await quiet(() =>
    runEval(
      options([cap], ["num_warps=8", "BLOCK=1024 num_stages=2"], {
        buildWith: async (_d, _m, c) => (
          built.push(c.label), { failed: { verdict: "compile-error", code: "E_BUILD", reason: `not on this machine: ${JSON.stringify(c.config)}`, seconds: 0 } }
        ),
      }),
    ),
  );
  expect(built.sort()).toEqual(["BLOCK=1024 num_stages=2", "num_warps=8"]);
  expect(r.candidates.map((c) => c.kind)).toEqual(["config", "config"]);
});

test("usage: the inputs come first; a candidate that is no file and no config is refused by name (E_USAGE, nothing evaluated)", async () => {
  const cap = await captureWithSource();
  expect(splitPositionals([cap, "a.cu", "b.patch"])).toEqual({ dirs: [cap], candidates: ["a.cu", "b.patch"], warnings: [] });
  expect(() => splitPositionals([cap])).toThrow(/no candidates given/);
  expect(() => splitPositionals(["a.cu", cap])).toThrow(/a\.cu is not a capture folder or a capture set/);
  expect(await thrownBy(() => splitPositionals(["a.cu", cap]))).toMatchObject({ code: "E_NOT_CAPTURE" }); // as every verb says it (nu10 #18a)
  expect(runEval(options([cap], ["nope.cu"]))).rejects.toThrow(/nope\.cu: no such file/);
  // a capture archive: said as one, with the unpack that makes it a folder (nu7 #21)
  const zip = join(tempDir(), "a2.zip");
  writeFileSync(zip, Buffer.concat([Buffer.from("PK\x03\x04"), Buffer.alloc(60)]));
  const e = (await thrownBy(() => splitPositionals([zip, "a.cu"])))!;
  expect(e).toMatchObject({ code: "E_NOT_CAPTURE", message: `${zip} is a capture archive, not a capture folder` });
  expect(e.hint).toContain(`Unpack it first: kerncap unpack ${zip} -o DIR`);
  const m = JSON.parse(readFileSync(join(cap, "kerncap.json"), "utf8"));
  m.kernel.frontend = "hip";
  writeFileSync(join(cap, "kerncap.json"), JSON.stringify(m));
  expect(runEval(options([cap], candidateFiles({ "k.cu": "match" })))).rejects.toMatchObject({ code: "E_FRONTEND" });
});

test("eval --json is JSON Lines to its end: an error that ends the run is one kerncap.error/1 line (nu7 #1: it was an indented document)", async () => {
  const cap = await captureWithSource();
  const p = Bun.spawn([process.execPath, join(import.meta.dir, "../../src/cli/main.ts"), "eval", cap, join(tempDir(), "nope.cu"), "--json"], {
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, code] = await Promise.all([new Response(p.stdout).text(), p.exited]);
  expect(code).toBe(2);
  const lines = out.trimEnd().split("\n");
  expect(lines.length).toBe(1);
  expect(JSON.parse(lines[0]!)).toMatchObject({ schema: documentId("error"), error: { code: "E_USAGE" } });
});

test("--jsonl FILE appends, run after run, as --help says: no earlier record is lost nor moved (nu7 #2: a third run lost the first's records); a file of other records is refused", async () => {
  const cap = await captureWithSource();
  const jsonl = join(tempDir(), "b.jsonl");
  const cands = candidateFiles({ "a.cu": "match 2", "b.cu": "match 3", "c.cu": "match" });
  let err = "";
  for (const c of cands) err += (await quiet(() => runEval(options([cap], [c], { jsonl })))).err;
  const labels = readFileSync(jsonl, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l).label);
  expect(labels).toEqual(["a.cu", "b.cu", "c.cu"]);
  expect(existsSync(`${jsonl}.previous`)).toBe(false);
  expect(err).toContain("holds 2 records of earlier evals: this eval's are appended after them");
  const other = join(tempDir(), "notes.jsonl");
  writeFileSync(other, '{"note": "mine"}\n');
  expect(quiet(() => runEval(options([cap], [cands[0]!], { jsonl: other })))).rejects.toMatchObject({ code: "E_RESULTS" });
  expect(readFileSync(other, "utf8")).toBe('{"note": "mine"}\n');
});

test("unfit candidates (nu7 #3: an empty patch, a diff that is none, a tree holding a link, a config for a CUDA capture, on the command line and in a list) are each their own error record; the others are still evaluated", async () => {
  const cap = await captureWithSource();
  const d = tempDir("kerncap-cands-");
  writeFileSync(join(d, "empty.patch"), "");
  writeFileSync(join(d, "junk.diff"), "not a patch\n");
  mkdirSync(join(d, "linked"));
  writeFileSync(join(d, "linked/kernel.cu"), "match");
  symlinkSync("/etc/passwd", join(d, "linked/extra.h"));
  const [good] = candidateFiles({ "kernel.cu": "match 2" });
  const cands = [join(d, "empty.patch"), join(d, "junk.diff"), join(d, "linked"), "BLOCK=64", good!];
  const { value: r } = await quiet(() => runEval(options([cap], cands)));
  const by = Object.fromEntries(r.records.map((x) => [x.label, x]));
  expect(by["empty.patch"]).toMatchObject({ verdict: "error", code: "E_PATCH", input: BUILD_INPUT, reason: expect.stringContaining("holds no file's diff") });
  expect(by["junk.diff"]).toMatchObject({ verdict: "error", code: "E_PATCH", input: BUILD_INPUT, reason: expect.stringContaining("not a patch") });
  expect(by["linked"]).toMatchObject({ verdict: "error", code: "E_CANDIDATE", reason: expect.stringContaining("extra.h is a symbolic link") });
  expect(by["BLOCK=64"]).toMatchObject({ verdict: "error", code: "E_CANDIDATE", reason: expect.stringContaining("needs a Triton capture") });
  expect(by["kernel.cu"]).toMatchObject({ verdict: "match" });
  expect(r.exitCode).toBe(2);
  expect(unjudgedLine(r, "none")).toContain("do not fit the capture's src/");
  // a candidate holding a file that cannot be read (trial 26: another user's 0600 file in a shared folder) is its own error too
  const unreadable = candidateOrRefusal(join(d, "closed"), () => {
    throw new KerncapError("E_IO", `cannot open ${join(d, "closed/kernel.cu")} (permission denied)`);
  });
  expect(unreadable.refused).toMatchObject({ code: "E_CANDIDATE", reason: expect.stringContaining("permission denied") });
  if (process.geteuid?.() !== 0) {
    mkdirSync(join(d, "closed"));
    writeFileSync(join(d, "closed/kernel.cu"), "match");
    chmodSync(join(d, "closed/kernel.cu"), 0o000);
    const { value: rc } = await quiet(() => runEval(options([cap], [join(d, "closed"), good!])));
    const byc = Object.fromEntries(rc.records.map((x) => [x.label, x]));
    expect(byc["closed"]).toMatchObject({ verdict: "error", code: "E_CANDIDATE" });
    expect(byc["kernel.cu"]).toMatchObject({ verdict: "match" });
  }
  // the same through --candidate-list
  const list = join(d, "list.json");
  writeFileSync(
    list,
    JSON.stringify({
      candidates: [
        { label: "junk", spec: join(d, "junk.diff") },
        { label: "ok", spec: good },
      ],
    }),
  );
  const { value: r2 } = await quiet(() => runEval(options([cap], listedCandidates(list))));
  expect(r2.records.map((x) => [x.label, x.verdict, x.code])).toEqual(
    expect.arrayContaining([
      ["junk", "error", "E_PATCH"],
      ["ok", "match", null],
    ]),
  );
});

test("a damaged input (a file's checksum) is refused once, naming it, before any candidate is built (nu7 #12: each was built, then E_CHECKSUM with a --resume that cannot help)", async () => {
  const cap = await captureWithSource();
  const m = JSON.parse(readFileSync(join(cap, "kerncap.json"), "utf8"));
  const f = m.files.find((x: { path: string }) => x.path.startsWith("kernel/"))!.path as string;
  const bytes = readFileSync(join(cap, f));
  bytes[0] ^= 1;
  writeFileSync(join(cap, f), bytes);
  const built: string[] = [];
  const e = await quiet(() => runEval(options([cap], candidateFiles({ "a.cu": "match", "b.cu": "match" }), { buildWith: fakeBuild(0, built) }))).catch(
    (x) => x,
  );
  expect(e).toBeInstanceOf(KerncapError);
  expect(e).toMatchObject({ code: "E_CHECKSUM", message: expect.stringContaining(`input cap (${cap}) is damaged: checksum mismatch in ${f}`) });
  expect(built).toEqual([]);
});

test("two evals of one capture at once (nu7 #10: they raced in one copy under build/eval/): the second builds in a private folder, both judge every candidate; a lock left by a killed eval is taken over", async () => {
  const cap = await captureWithSource();
  const cands = candidateFiles({ "a.cu": "match 2", "b.cu": "match 3", "c.cu": "match" });
  const dests: string[][] = [[], []];
  const build = (k: number): NonNullable<EvalOptions["buildWith"]> => {
    const inner = fakeBuild(80);
    return (dir, m, c, dest) => (dests[k]!.push(dest), inner(dir, m, c, dest));
  };
  const { err, value: rs } = await quiet(() =>
    Promise.all([0, 1].map((k) => runEval(options([cap], cands, { buildWith: build(k), jobs: 1, open: inProcess().open })))),
  );
  for (const r of rs) expect(r.records.map((x) => x.verdict)).toEqual(["match", "match", "match"]);
  const under = (k: number) => dests[k]!.filter((d) => d.startsWith(join(cap, "build/eval/"))).length;
  expect([under(0), under(1)].sort()).toEqual([0, 3]); // one eval's copies in build/eval, the other's elsewhere
  expect(new Set([...dests[0]!, ...dests[1]!]).size).toBe(6);
  // each record names its kept copy (nu7 #16: none did), the private folder's none
  const copies = rs.map((r) => r.records.map((x) => x.copy));
  const kept = under(0) === 3 ? 0 : 1;
  expect(copies[kept]!.sort()).toEqual(rs[kept]!.records.map((x) => join(cap, "build/eval", copyName(x.candidate))).sort());
  expect(copies[1 - kept]).toEqual([null, null, null]);
  expect(err).toContain("another kerncap eval of");
  expect(readdirSync(join(cap, "build/eval")).filter((n) => n.endsWith(".lock"))).toEqual([]); // given back
  // a lock whose eval was killed: taken over, the copies go in build/eval
  const gone = Bun.spawnSync(["true"]).pid;
  writeFileSync(join(cap, "build/eval/.kerncap-eval.lock"), `${gone}\n`);
  dests[0] = [];
  await quiet(() => runEval(options([cap], cands, { buildWith: build(0) })));
  expect(under(0)).toBe(3);
  // two shards at once (disjoint candidates: nu13 #1, the second's builds went to a private folder and --resume lost them): both keep theirs
  const six = candidateFiles(Object.fromEntries(Array.from({ length: 6 }, (_, i) => [`s${i}.cu`, `match 1.${i}`])));
  dests[0] = [];
  dests[1] = [];
  const shards = await quiet(() =>
    Promise.all([0, 1].map((k) => runEval(options([cap], six, { buildWith: build(k), jobs: 1, shard: { index: k, count: 2 }, open: inProcess().open })))),
  );
  expect(shards.err).not.toContain("another kerncap eval of");
  for (const r of shards.value) for (const x of r.records) expect(x.copy).toBe(join(cap, "build/eval", copyName(x.candidate)));
  expect(under(0) + under(1)).toBe(6);
});

describe("records carry proof of the kerncap that wrote them (adv20 #2: a made-up 100× match, no GPU ever run, was ranked first by --merge and --resume)", () => {
  const A = "7c1e9a4f2b6d08e35f9a1c7b4e2d6f08a3c5e7b9d1f2a4c6e8b0d3f5a7c9e1b2";
  const B = "e4b7d1a9c3f6082b5e8a1d4c7f0b3e6a9d2c5f8b1e4a7d0c3f6b9e2a5d8c1f47";
  /** The trial's edit of a genuine record into a 100× match whose numbers agree (evalRecordProblem takes it). */
  const forge = (genuine: Record<string, unknown>): Record<string, unknown> => ({
    ...genuine,
    verdict: "match",
    reason: null,
    code: null,
    numerics: "bit-exact: every region matches",
    device: { name: "NVIDIA H200", arch: "sm_90" },
    worker: 0,
    gpu: "0",
    baseline: "match",
    timing: { baselineMedianUs: 100, candidateMedianUs: 1, speedup: 100, low: 99, high: 101, verdict: "faster", decided: true, text: "100.00x faster" },
  });
  /** Write `text` at `f`, the user's own and written by no one else (the owner and mode checks pass, as for a copied file). */
  const own = (f: string, text: string) => (writeFileSync(f, text), chmodSync(f, 0o644), f);

  test("a forged record (numbers a run gives, no authenticator or another record's) is refused by --merge and --resume, naming the file and line; nothing ranked, nothing built", async () => {
    const cap = await captureWithSource();
    const files = candidateFiles({ "k.cu": "mismatch" });
    const d = tempDir();
    const real = join(d, "real.jsonl");
    await quiet(() => runEval(options([cap], files, { jsonl: real })));
    const genuine = JSON.parse(readFileSync(real, "utf8").split("\n")[0]!);
    expect(genuine.auth).toMatch(/^hmac-sha256:[0-9a-f]{16}:[0-9a-f]{64}$/);
    const forged = forge(genuine);
    // the forged record passes every consistency check: only its authenticator gives it away
    expect(mergeEval([own(join(d, "sealed.jsonl"), recordLine("eval-record", forged))]).candidates[0]).toMatchObject({
      verdict: "match",
      low: 99,
      high: 101,
      rank: 1,
    });
    const { auth: _, ...bare } = forged;
    for (const [name, rec, why] of [
      ["stale", forged, "its authenticator does not match its contents: it was changed after kerncap wrote it"],
      ["bare", bare, "it carries no authenticator (`auth`)"],
    ] as const) {
      const f = own(join(d, `${name}.jsonl`), `${JSON.stringify(rec)}\n`);
      const e = await thrownBy(() => mergeEval([f]));
      expect([e?.code, e?.exitCode], name).toEqual(["E_RECORD_AUTH", 2]);
      expect(e!.message).toStartWith(`${f}, line 1: ${why}`);
      expect(e!.hint).toStartWith(
        "Nothing was merged. A record is taken only from a kerncap holding the results key it was written with: merge where the shards were written (the same account on a machine that shares its home), or give every run and the merge the same KERNCAP_RESULTS_KEY",
      );
      // --resume of it: refused before any build, the file left as it is
      const built: string[] = [];
      const r = await thrownBy(() => quiet(() => runEval(options([cap], files, { jsonl: f, resume: true, buildWith: fakeBuild(0, built) }))));
      expect(r?.code).toBe("E_RECORD_AUTH");
      expect(r!.message).toStartWith(`${f}, line 1: ${why}`);
      expect(r!.hint).toContain("run without --resume to evaluate every candidate again, or write another --jsonl file");
      expect(built).toEqual([]);
      expect(readFileSync(f, "utf8")).toBe(`${JSON.stringify(rec)}\n`);
    }
    // the genuine record is taken
    expect(mergeEval([real]).candidates.map((c) => c.verdict)).toEqual(["mismatch"]);
    // its bytes changed without changing what JSON.parse keeps: a key given twice (a reader keeping the first sees
    // "match"), a key spelled with an escape, a space: each refused as changed (adversary 76 #02)
    const line = readFileSync(real, "utf8").split("\n")[0]!;
    for (const [name, text] of [
      ["twice", line.replace(/^\{/, '{"verdict":"match",')],
      ["escaped", line.replace('"candidate":', '"\\u0063andidate":')],
      ["spaced", line.replace('"verdict":', '"verdict": ')],
    ] as const) {
      expect(text, name).not.toBe(line);
      const f = own(join(d, `${name}.jsonl`), `${text}\n`);
      const e = await thrownBy(() => mergeEval([f]));
      expect([e?.code, e?.exitCode], name).toEqual(["E_RECORD_AUTH", 2]);
      expect(e!.message).toStartWith(`${f}, line 1: its text is not the one kerncap writes for what it holds (a key given twice`);
      const r = await thrownBy(() => quiet(() => runEval(options([cap], files, { jsonl: f, resume: true }))));
      expect(r?.code, name).toBe("E_RECORD_AUTH");
      expect(readFileSync(f, "utf8")).toBe(`${text}\n`);
    }
    // a line ended CRLF (a file moved through a Windows tool) reads as written
    expect(mergeEval([own(join(d, "crlf.jsonl"), readFileSync(real, "utf8").replace(/\n/g, "\r\n"))]).candidates.map((c) => c.verdict)).toEqual(["mismatch"]);
  });

  test("records written under one KERNCAP_RESULTS_KEY (the --jsonl file and the --json lines) merge and resume under it; under another key they are refused", async () => {
    const cap = await captureWithSource();
    const files = candidateFiles({ "a.cu": "match 1.5", "b.cu": "match 1.2" });
    const d = tempDir();
    const f = join(d, "shard.jsonl");
    const streamed: Rec[] = [];
    await withResultsKey(A, () => quiet(() => runEval(options([cap], files, { jsonl: f, onRecord: (r) => streamed.push(r) }))));
    // what --json prints is what the file holds, authenticator and all
    expect(streamed.map((r) => r.auth)).toEqual(
      readFileSync(f, "utf8")
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l).auth),
    );
    expect((await withResultsKey(A, () => mergeEval([f]))).candidates.map((c) => c.label)).toEqual(["a.cu", "b.cu"]);
    const [idA, idB] = [A, B].map((k) => keyId(Buffer.from(k, "hex")));
    const e = await withResultsKey(B, () => thrownBy(() => mergeEval([f])));
    expect([e?.code, e?.message]).toEqual([
      "E_RECORD_AUTH",
      `${f}, line 1: it was written under another results key (key id ${idA}; this kerncap's, from KERNCAP_RESULTS_KEY, is ${idB})`,
    ]);
    const built: string[] = [];
    await withResultsKey(A, () => quiet(() => runEval(options([cap], files, { jsonl: f, resume: true, buildWith: fakeBuild(0, built) }))));
    expect(built).toEqual([]); // every candidate already judged
    expect(
      (await withResultsKey(B, () => thrownBy(() => quiet(() => runEval(options([cap], files, { jsonl: f, resume: true, buildWith: fakeBuild(0, built) }))))))
        ?.code,
    ).toBe("E_RECORD_AUTH");
    expect(built).toEqual([]);
    // --json lines without a --jsonl file carry it too
    const alone: Rec[] = [];
    await withResultsKey(A, () => quiet(() => runEval(options([cap], files.slice(0, 1), { onRecord: (r) => alone.push(r) }))));
    expect(alone[0]!.auth).toStartWith(`hmac-sha256:${idA}:`);
  });

  test("a record changed after it was written (one field: the speedup within its interval) is refused by --merge and --resume, naming its line", async () => {
    const cap = await captureWithSource();
    const files = candidateFiles({ "a.cu": "match 1.5", "b.cu": "match 1.2" });
    const f = join(tempDir(), "r.jsonl");
    await quiet(() => runEval(options([cap], files, { jsonl: f })));
    const lines = readFileSync(f, "utf8").trim().split("\n");
    const i = lines.findIndex((l) => JSON.parse(l).label === "b.cu");
    const r = JSON.parse(lines[i]!);
    lines[i] = JSON.stringify({ ...r, timing: { ...r.timing, speedup: r.timing.high } });
    writeFileSync(f, `${lines.join("\n")}\n`);
    const e = await thrownBy(() => mergeEval([f]));
    expect([e?.code, e?.message]).toEqual([
      "E_RECORD_AUTH",
      `${f}, line ${i + 1}: its authenticator does not match its contents: it was changed after kerncap wrote it`,
    ]);
    expect((await thrownBy(() => quiet(() => runEval(options([cap], files, { jsonl: f, resume: true })))))?.message).toBe(e?.message);
  });
});

test("a received capture's refusal (E_UNTRUSTED) gives a command that runs as it is and remembers the trust, and keeps build.sh out of the message (nu10 #9: `kerncap eval DIR … --trust=` had a literal …, and 5.5 KB of build.sh in the message)", async () => {
  const saved = process.env.XDG_STATE_HOME;
  process.env.XDG_STATE_HOME = tempDir("kerncap-state-");
  try {
    const cap = await captureWithSource(stockBuildSh());
    markReceived(cap, join(dirname(cap), "cap.zip"));
    const digest = trustDigest(cap);
    const refused = await quiet(() => runEval(options([cap], candidateFiles({ "k.cu": "match" })))).catch((e) => e);
    expect(refused).toBeInstanceOf(KerncapError);
    expect(refused.code).toBe("E_UNTRUSTED");
    const command = refused.details.trust.command as string;
    expect(command).toBe(`kerncap validate ${cap} --build-only --trust=${digest}`);
    expect(command).not.toContain("…");
    expect(refused.hint).toContain(`${command} (kerncap's own build.sh: plain --trust is enough; remembered for this folder`);
    expect(refused.hint).toContain("then run the eval again");
    expect(refused.message).not.toContain("#!/usr/bin/env bash"); // build.sh shown on stderr (and named in details), not inlined
    expect(refused.message.length).toBeLessThan(1000);
    // the command, run as given (its build may fail here: the trust is recorded before it runs) ...
    const argv = command.split(" ").slice(2);
    await quiet(async () => runCommand(await commands.validate(), { rawArgs: argv })).catch(() => {});
    // ... lets the eval build the candidates, without --trust
    const { value: r } = await quiet(() => runEval(options([cap], candidateFiles({ "k.cu": "match" }))));
    expect(r.candidates.map((c) => c.verdict)).toEqual(["match"]);
    // a confined eval (kerncap mcp's agent reads the error document, not stderr): the files stay in the message, the command is the same
    const other = await captureWithSource(stockBuildSh());
    markReceived(other, join(dirname(other), "cap.zip"));
    const confined = await runEval(options([other], candidateFiles({ "k.cu": "match" }), { confine: true })).catch((e) => e);
    expect(confined.code).toBe("E_UNTRUSTED");
    // kerncap's own build.sh as one line there too, with its compile flags, the one part of it not the template's
    expect(confined.message).toContain("kerncap's own build.sh, not printed: its template's text, its compile flags -O2 ────");
    expect(confined.details.trust.command).toBe(`kerncap validate ${other} --build-only --trust=${trustDigest(other)}`);
  } finally {
    if (saved === undefined) delete process.env.XDG_STATE_HOME;
    else process.env.XDG_STATE_HOME = saved;
  }
}, 60_000);

test("a built candidate's records carry its module's SHA-256: two candidates that build one module share it (a comment-only edit); none for one that did not build (nu10 #15)", async () => {
  const cap = await captureWithSource();
  const cands = candidateFiles({ "kernel.cu": "match 1.1", "util.h": "compile-error" });
  const other = join(tempDir("kerncap-cands-"), "kernel.cu");
  writeFileSync(other, "match 1.1 // a comment only");
  // a build as a compiler's: comments make no code
  const build = fakeBuild();
  const buildWith: NonNullable<EvalOptions["buildWith"]> = async (d, m, c, dest) => {
    const b = await build(d, m, c, dest);
    if ("built" in b) writeFileSync(b.built.module, readFileSync(b.built.module, "utf8").replace(/\s*\/\/.*$/, ""));
    return b;
  };
  const { value: r } = await quiet(() => runEval(options([cap], [...cands, other], { buildWith })));
  const sha = new Bun.CryptoHasher("sha256").update("match 1.1").digest("hex");
  const built = r.records.filter((x) => x.verdict === "match");
  expect(built.length).toBe(2);
  for (const x of built) expect(x.build.moduleSha256).toBe(sha);
  expect(r.records.find((x) => x.verdict === "compile-error")!.build.moduleSha256).toBeUndefined();
  for (const x of r.records) expect(v.safeParse(EvalRecord, x).success).toBe(true);
});

test("--require-gpu: no usable GPU here ends the eval at once, E_NO_GPU, before any input is read or candidate built (nu10 #25: a harness learnt it only from each built candidate's record)", async () => {
  const cap = await captureWithSource();
  const built: string[] = [];
  const saved = process.env.KERNCAP_LIBCUDA;
  process.env.KERNCAP_LIBCUDA = join(tempDir(), "no-libcuda.so.1"); // a path to no file: no GPU, whatever the machine has
  try {
    const e = await quiet(() =>
      runEval({ ...options([cap], candidateFiles({ "a.cu": "match" }), { buildWith: fakeBuild(0, built) }), requireGpu: true }),
    ).catch((x) => x);
    expect(e).toMatchObject({ code: "E_NO_GPU", message: expect.stringContaining("(--require-gpu: nothing was built)") });
    expect(built).toEqual([]);
    expect(existsSync(join(cap, "build/eval"))).toBe(false);
  } finally {
    if (saved === undefined) delete process.env.KERNCAP_LIBCUDA;
    else process.env.KERNCAP_LIBCUDA = saved;
  }
  // the MCP tool passes it on
  expect(TOOLS.evaluate.argv({ dir: "cap", candidates: [{ name: "a", patch: "x" }], requireGpu: true })).toContain("--require-gpu");
  expect(TOOLS.evaluate.argv({ dir: "cap", candidates: [{ name: "a", patch: "x" }] })).not.toContain("--require-gpu");
});

test("--candidate-list: a FIFO, a link (to /dev/zero, to a file elsewhere) or a device is refused at once, naming it, never read (adversary 29: a FIFO hung eval, a link to /dev/zero grew to 10 GB)", async () => {
  const d = tempDir();
  const fifo = join(d, "list.fifo");
  expect(Bun.spawnSync(["mkfifo", fifo]).exitCode).toBe(0);
  const zero = join(d, "zero.json");
  symlinkSync("/dev/zero", zero);
  const secret = join(d, "secret.txt");
  writeFileSync(secret, "TOPSECRET words\n");
  const link = join(d, "link.json");
  symlinkSync(secret, link);
  for (const f of [fifo, zero, link, "/dev/null"]) {
    const t0 = performance.now();
    const e = await thrownBy(() => listedCandidates(f));
    expect(e?.code, f).toBe("E_USAGE");
    expect(e?.message).toContain(f);
    expect(e?.message).not.toContain("TOPSECRET");
    expect(performance.now() - t0).toBeLessThan(2000);
  }
});

test("the eval command line's own refusal (E_UNTRUSTED) gives that command with the digest, what a CI script pins (nu13 #13: it sent a script to validate and a remembered trust an ephemeral runner loses)", async () => {
  const cap = await captureWithSource(stockBuildSh());
  markReceived(cap, join(dirname(cap), "cap.zip"));
  const [cand] = candidateFiles({ "kernel.cu": "match" });
  const env = { ...process.env, XDG_STATE_HOME: tempDir("kerncap-state-"), KERNCAP_LIBCUDA: "" };
  const p = Bun.spawnSync([process.execPath, join(import.meta.dir, "../../src/cli/main.ts"), "eval", cap, cand!, "--json"], {
    env,
    stdout: "pipe",
    stderr: "pipe",
  });
  const out = p.stdout.toString();
  expect(out, p.stderr.toString()).toContain('"E_UNTRUSTED"');
  const e = JSON.parse(out).error; // refused before any record: the error document alone
  expect(e.code).toBe("E_UNTRUSTED");
  expect(e.details.trust.command).toBe(`kerncap eval ${cap} ${cand} --json --trust=${trustDigest(cap)}`);
});
