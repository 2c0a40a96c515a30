/**
 * `kerncap check` on a CI runner without a GPU (the workers faked where a replay would run):
 * --merge's shard coverage (a missing shard, --partial, one file given twice), a --write-baseline
 * that would hold no capture, the results folder's lock, --rebuild --build-only, and the damaged
 * memory image said as E_CHECKSUM before the GPU is looked for.
 */
import { expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runCheck } from "../../../src/check/check.ts";
import { mergeResults } from "../../../src/check/merge.ts";
import type { CaptureRef } from "../../../src/check/discover.ts";
import type { OpenRunner } from "../../../src/check/pool.ts";
import type { Outcome } from "../../../src/format/check-record.ts";
import { runCli } from "../../../src/cli/main.ts";
import { RESULTS_LOCK } from "../../../src/check/results.ts";
import { hostname } from "node:os";
import { checkCapture } from "../../../src/ops/check.ts";
import { writeDemo } from "../../../src/capture/demo.ts";
import { summaryTable } from "../../../src/check/report.ts";
import type { CheckSettings } from "../../../src/check/runner.ts";

const HAS_GPU = existsSync("/dev/nvidiactl") || existsSync("/dev/nvidia0");
const SETTINGS: CheckSettings = { iters: 20, verify: true, rebuild: false, force: false, trust: false, tolerance: {} };
import { checkOptions, fakeOutcome, makeCapture, stockBuildSh, tempDir, thrownBy, stderrOf } from "../fixtures.ts";
import { markReceived } from "../../../src/format/received.ts";
import { readManifest } from "../../../src/format/capture-dir.ts";
import { requireTrustedBuild } from "../../../src/ops/gates.ts";

/** Workers that answer with `f`. */
function fakeWorkers(f: (t: CaptureRef) => Outcome | Promise<Outcome>): () => OpenRunner {
  return () => () => ({ run: async (t) => f(t), kill() {}, close: async () => {} });
}

/** Captures root/c0 … root/c{n-1}. */
async function corpus(n: number): Promise<string> {
  const root = join(tempDir(), "corpus");
  for (let i = 0; i < n; i++) await makeCapture(join(root, `c${i}`));
  return root;
}

/** The results files of shards 0 … n-1 of `root`, each in its own folder; every shard holds a capture. */
async function shardFiles(root: string, n: number): Promise<string[]> {
  const files: string[] = [];
  for (let k = 0; k < n; k++) {
    const res = join(tempDir(), `shard${k}`);
    const r = await runCheck(
      checkOptions(
        [root],
        res,
        fakeWorkers((t) => fakeOutcome(t)),
        { shard: { index: k, count: n } },
      ),
    );
    expect(r.captures.length, `shard ${k} holds a capture`).toBeGreaterThan(0);
    files.push(join(res, "results.jsonl"));
  }
  return files;
}

test("--merge of a run's shards with one missing: E_RESULTS (exit 2) naming it and --partial; --partial merges the rest, says it and puts an <error> per missing shard in the JUnit", async () => {
  const root = await corpus(6);
  const files = await shardFiles(root, 2);
  const e = await thrownBy(() => mergeResults([files[0]!], { slowerPct: 10 }));
  expect(e?.code).toBe("E_RESULTS");
  expect(e?.exitCode).toBe(2);
  expect(e?.message).toContain("lack shard 1/2 of the run");
  expect(e?.hint).toContain("--partial");
  const junit = join(tempDir(), "all.xml");
  const { err, value: m } = await stderrOf(() => mergeResults([files[0]!], { slowerPct: 10, partial: true, junit }));
  expect(err).toContain("merged without shard 1/2 (--partial)");
  expect(m.missingShards).toEqual(["1/2"]);
  expect(m.exitCode).toBe(2); // every capture ok, but not every shard there: never green
  const xml = readFileSync(junit, "utf8");
  expect(xml).toContain('<testcase classname="kerncap" name="shard 1 of 2" time="0.000">');
  expect(xml).toContain('type="E_RESULTS"');
  expect(xml).toContain('<property name="missingShards" value="1"/>');
  // every shard: merged, no missing
  const all = mergeResults(files, { slowerPct: 10 });
  expect(all.exitCode).toBe(0);
  expect(all.missingShards).toBeUndefined();
  // the CLI: exit 2 without --partial, the report with it; --partial without --merge a usage error
  const refused = await stderrOf(() => runCli(["check", "--merge", files[0]!, "--print-summary", "none"]));
  expect(refused.value).toBe(2);
  expect(refused.err).toContain("shard 1/2");
  expect((await stderrOf(() => runCli(["check", "--merge", "--partial", files[0]!, "--print-summary", "none"]))).value).toBe(2);
  const usage = await stderrOf(() => runCli(["check", root, "--partial", "--results", join(tempDir(), "r")]));
  expect(usage.value).toBe(2);
  expect(usage.err).toContain("--partial applies to --merge only");
}, 60_000);

test("--merge of a whole-corpus run's file with a shard's, or of shards of two counts: E_RESULTS naming both", async () => {
  const root = await corpus(4);
  const whole = join(tempDir(), "whole");
  await runCheck(
    checkOptions(
      [root],
      whole,
      fakeWorkers((t) => fakeOutcome(t)),
    ),
  );
  const [s0] = await shardFiles(root, 1 + 1);
  const mixed = await thrownBy(() => mergeResults([join(whole, "results.jsonl"), s0!], { slowerPct: 10, partial: true }));
  expect(mixed?.code).toBe("E_RESULTS");
  expect(mixed?.message).toContain("records of a run without --shard");
  expect(mixed?.message).toContain(join(whole, "results.jsonl"));
  const three = join(tempDir(), "three");
  // a shard of three: another run's (captures may repeat across the runs: their ids then in two files, said first)
  const other = await corpus(1);
  await runCheck(
    checkOptions(
      [other],
      three,
      fakeWorkers((t) => fakeOutcome(t, { id: `x/${t.id}` })),
      { shard: { index: 0, count: 1 } },
    ),
  );
  const counts = await thrownBy(() => mergeResults([s0!, join(three, "results.jsonl")], { slowerPct: 10, partial: true }));
  expect(counts?.code).toBe("E_RESULTS");
  expect(counts?.message).toContain("shards of two counts");
}, 60_000);

test("--merge given one file twice (a glob overlap, or a link to it): a warning naming it, merged once", async () => {
  const root = await corpus(3);
  const whole = join(tempDir(), "whole");
  await runCheck(
    checkOptions(
      [root],
      whole,
      fakeWorkers((t) => fakeOutcome(t)),
    ),
  );
  const f = join(whole, "results.jsonl");
  const link = join(tempDir(), "link.jsonl");
  symlinkSync(f, link);
  const { err, value } = await stderrOf(() => mergeResults([f, f, link], { slowerPct: 10 }));
  expect(value.captures.length).toBe(3);
  expect(err).toContain(`${f} was given to --merge twice: merged once`);
  expect(err).toContain(`${link} was given to --merge twice (as ${f} too): merged once`);
}, 60_000);

test("--write-baseline from a run that timed no capture (no GPU): not written, an existing FILE untouched, said; a written one says how many captures it holds", async () => {
  const root = await corpus(3);
  const noGpu = fakeWorkers((t) =>
    fakeOutcome(t, { outcome: "error", verdict: null, numerics: null, timing: null, device: null, code: "E_NO_GPU", reason: "no NVIDIA driver" }),
  );
  const fresh = join(tempDir(), "new.json");
  const { err, value } = await stderrOf(() => runCheck(checkOptions([root], join(tempDir(), "r"), noGpu, { writeBaseline: fresh })));
  expect(value.exitCode).toBe(2);
  expect(existsSync(fresh)).toBe(false);
  expect(err).toContain(`--write-baseline ${fresh} not written: no capture of this run was timed (3 captures, none a timed match)`);
  // one written before: left as it is
  const r1 = join(tempDir(), "r1");
  const two = await stderrOf(() =>
    runCheck(
      checkOptions(
        [root],
        r1,
        fakeWorkers((t) => (t.id === "corpus/c1" ? fakeOutcome(t, { verdict: "mismatch", reason: "differs" }) : fakeOutcome(t))),
        { writeBaseline: fresh },
      ),
    ),
  );
  expect(two.err).toContain(`baseline ${fresh}: 2 of 3 captures of this run`);
  const before = readFileSync(fresh, "utf8");
  expect(Object.keys(JSON.parse(before).captures).sort()).toEqual(["corpus/c0", "corpus/c2"]);
  await stderrOf(() => runCheck(checkOptions([root], join(tempDir(), "r2"), noGpu, { writeBaseline: fresh })));
  expect(readFileSync(fresh, "utf8")).toBe(before);
  // --merge of the no-GPU run: the same
  const merged = join(tempDir(), "merged.json");
  const m = await stderrOf(() => mergeResults([join(r1, "results.jsonl")], { slowerPct: 10, writeBaseline: merged }));
  expect(m.err).toContain(`baseline ${merged}: 2 of 3 captures of this run`);
  const r3 = join(tempDir(), "r3");
  await stderrOf(() => runCheck(checkOptions([root], r3, noGpu)));
  const none = await stderrOf(() => mergeResults([join(r3, "results.jsonl")], { slowerPct: 10, writeBaseline: join(tempDir(), "m2.json") }));
  expect(none.err).toContain("not written: no capture of this run was timed");
}, 60_000);

test("two checks on one --results folder at once: the second refused (E_RESULTS) naming the first's pid, nothing of the first's touched; a killed run's lock taken over; the lock gone after a run", async () => {
  const root = await corpus(2);
  const res = join(tempDir(), "r");
  let go!: () => void;
  const gate = new Promise<void>((r) => (go = r));
  const first = runCheck(
    checkOptions(
      [root],
      res,
      fakeWorkers(async (t) => (await gate, fakeOutcome(t))),
    ),
  );
  await Bun.sleep(50);
  const second = await thrownBy(() =>
    runCheck(
      checkOptions(
        [root],
        res,
        fakeWorkers((t) => fakeOutcome(t)),
      ),
    ),
  );
  expect(second?.code).toBe("E_RESULTS");
  expect(second?.message).toContain(`another kerncap check (process ${process.pid}) is running in ${res}`);
  expect(second?.hint).toContain("another --results DIR");
  go();
  expect((await first).captures.length).toBe(2);
  expect(parseResultsCount(join(res, "results.jsonl"))).toBe(2); // the first run's records alone
  expect(existsSync(join(res, RESULTS_LOCK))).toBe(false);
  // a lock whose process is gone (killed): taken over
  const dead = Bun.spawnSync(["true"]).pid;
  writeFileSync(join(res, RESULTS_LOCK), `${dead} ${hostname()}\n`);
  expect(
    (
      await runCheck(
        checkOptions(
          [root],
          res,
          fakeWorkers((t) => fakeOutcome(t)),
        ),
      )
    ).captures.length,
  ).toBe(2);
  expect(existsSync(join(res, RESULTS_LOCK))).toBe(false);
  // one of another host (a shared file system): refused, saying how to clear it
  writeFileSync(join(res, RESULTS_LOCK), `4242 other-node\n`);
  const other = await thrownBy(() =>
    runCheck(
      checkOptions(
        [root],
        res,
        fakeWorkers((t) => fakeOutcome(t)),
      ),
    ),
  );
  expect(other?.message).toContain("(process 4242 on other-node)");
  expect(other?.hint).toContain(`remove ${join(res, RESULTS_LOCK)}`);
}, 60_000);

/** The number of lines of a results file. */
function parseResultsCount(path: string): number {
  return readFileSync(path, "utf8").split("\n").filter(Boolean).length;
}

test.skipIf(HAS_GPU)(
  "no GPU: a flipped byte in memory/after.bin's stored chunk is E_CHECKSUM naming it (checked on the CPU), not E_NO_GPU, plain and --rebuild (before the build); --no-verify: E_NO_GPU",
  async () => {
    const dir = join(tempDir(), "cap");
    await makeCapture(dir);
    const task: CaptureRef = { id: "cap", path: dir, kind: "folder" };
    expect((await checkCapture(task, SETTINGS)).code).toBe("E_NO_GPU"); // undamaged: the missing GPU
    const after = join(dir, "memory/after.bin");
    const bytes = readFileSync(after);
    bytes[100] = bytes[100]! ^ 0xff;
    writeFileSync(after, bytes);
    const plain = await checkCapture(task, SETTINGS);
    expect([plain.outcome, plain.code], plain.reason ?? "").toEqual(["error", "E_CHECKSUM"]);
    expect(plain.reason).toContain("memory/after.bin");
    writeFileSync(join(dir, "build.sh"), "#!/bin/sh\ntouch built\n");
    const rebuilt = await stderrOf(() => checkCapture(task, { ...SETTINGS, rebuild: true }));
    expect(rebuilt.value.code, rebuilt.value.reason ?? "").toBe("E_CHECKSUM");
    expect(rebuilt.value.reason).toContain("memory/after.bin");
    expect(rebuilt.value.rebuild).toBeNull();
    expect(existsSync(join(dir, "built"))).toBe(false);
    expect((await checkCapture(task, { ...SETTINGS, verify: false })).code).toBe("E_NO_GPU");
  },
  60_000,
);

test("check --rebuild --build-only: each capture rebuilt, none replayed, no GPU looked for: exit 0 when every one built (verdict built, its rebuild, JUnit says built), 2 when one did not (E_BUILD); a replay's options refused", async () => {
  const corpusDir = join(tempDir(), "corpus");
  mkdirSync(corpusDir);
  const { dir } = writeDemo(join(corpusDir, "cap"), false); // kerncap's own reproducer of a real module
  const nvcc = join(tempDir(), "nvcc");
  const savedNvcc = process.env.NVCC;
  process.env.NVCC = nvcc;
  try {
    writeFileSync(nvcc, `#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && cp ${JSON.stringify(join(dir, "kernel/module.fatbin"))} "$2"; shift; done\n`, {
      mode: 0o755,
    });
    const junit = join(tempDir(), "j.xml");
    const res = join(tempDir(), "r");
    const ok = await stderrOf(() => runCli(["check", corpusDir, "--rebuild", "--build-only", "--results", res, "--junit", junit, "--print-summary", "none"]));
    expect(ok.value, ok.err).toBe(0);
    expect(ok.err).toContain("built by build.sh in");
    expect(ok.err).not.toContain("the next validates"); // validate's note of its next builds is no check's (a new user's finding: once per capture)
    const rec = JSON.parse(readFileSync(join(res, "results.jsonl"), "utf8").trim());
    expect(rec).toMatchObject({
      outcome: "done",
      verdict: "built",
      status: "ok",
      code: null,
      time: null,
      timing: null,
      rebuild: { builder: "build.sh", targetArch: null },
    });
    expect(rec.rebuild.registers).toBeGreaterThan(0); // the rebuilt kernel's figures (nu14 #7)
    expect([rec.kernel, rec.symbol]).toEqual(["saxpy(Saxpy const*)", "_Z5saxpyPK5Saxpy"]); // the name to read and the key, as every document gives them
    expect(rec.rebuild).toMatchObject({ spillStoreBytes: 0, spillLoadBytes: 0 });
    expect(rec.note).toMatch(/^built by build\.sh in \d+\.\d\d s; not replayed \(--build-only\)$/);
    expect(readFileSync(junit, "utf8")).toContain("not replayed (--build-only)");
    expect(readFileSync(junit, "utf8")).not.toContain("rebuilt by"); // the note says the build once (nu14 #10)
    // no baseline read or written by a build-only run: none named (nu16 #5: the JUnit and report named a baseline.json never made)
    expect(readFileSync(junit, "utf8")).not.toContain('name="baseline"');
    expect(readFileSync(junit, "utf8")).toContain('<property name="buildOnly" value="true"/>');
    expect(existsSync(join(res, "baseline.json"))).toBe(false);
    expect(summaryTable([rec], 1)).toContain("1 ok (1 of them built only: --build-only replays none)");
    // a later run without --build-only does not take the build's record as a replay's (--resume: checked again)
    const sub = await stderrOf(() => runCli(["check", corpusDir, "--rebuild", "--results", res, "--resume", "--print-summary", "none"]));
    expect(sub.err).toContain("checked again");
    // one that does not build: its error, exit 2
    writeFileSync(nvcc, `#!/bin/sh\necho 'src/kernel.cu(3): error: identifier "undefined_name" is undefined' >&2\nexit 1\n`, { mode: 0o755 });
    const res2 = join(tempDir(), "r2");
    const bad = await stderrOf(() => runCli(["check", corpusDir, "--rebuild", "--build-only", "--results", res2, "--print-summary", "none"]));
    expect(bad.value).toBe(2);
    const failed = JSON.parse(readFileSync(join(res2, "results.jsonl"), "utf8").trim());
    expect(failed).toMatchObject({ status: "error", code: "E_BUILD", verdict: null });
    // the compiler's diagnostics, the capture's paths, as validate and eval say them (nu14 #7)
    expect(failed.diagnostics[0]).toMatchObject({ file: "src/kernel.cu", line: 3, severity: "error" });
    expect(failed.reason).toContain('src/kernel.cu:3: error: identifier "undefined_name" is undefined');
    expect(failed.reason).not.toContain(corpusDir);
    // usage: without --rebuild, with a replay's options
    for (const extra of [
      [],
      ["--rebuild", "--baseline", "b.json"],
      ["--rebuild", "--write-baseline", "b.json"],
      ["--rebuild", "--runs", "5"],
      ["--rebuild", "--iters=50"],
    ]) {
      const u = await stderrOf(() => runCli(["check", corpusDir, "--build-only", ...extra, "--results", join(tempDir(), "r3")]));
      expect(u.value, extra.join(" ")).toBe(2);
      expect(u.err, extra.join(" ")).toContain(
        extra.length ? `--build-only replays nothing: ${extra[1]!.split("=")[0]} does not apply` : "--build-only applies to --rebuild only",
      );
    }
  } finally {
    if (savedNvcc === undefined) delete process.env.NVCC;
    else process.env.NVCC = savedNvcc;
  }
}, 120_000);

test("check --rebuild --build-only --jobs N: the captures built side by side, each in a worker of its own; --jobs without --build-only, or beside --gpus, refused (nu13 #17)", async () => {
  const corpusDir = join(tempDir(), "corpus");
  mkdirSync(corpusDir);
  let module = "";
  for (const n of ["a", "b", "c"]) module = join(writeDemo(join(corpusDir, n), false).dir, "kernel/module.fatbin");
  const nvcc = join(tempDir(), "nvcc");
  const log = join(tempDir(), "nvcc.log");
  const savedNvcc = process.env.NVCC;
  process.env.NVCC = nvcc;
  try {
    // each compile: its start and end (ms) in the log, a second apart
    writeFileSync(
      nvcc,
      `#!/bin/sh\necho "start $(date +%s%3N)" >> ${JSON.stringify(log)}\nsleep 1\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && cp ${JSON.stringify(module)} "$2"; shift; done\necho "end $(date +%s%3N)" >> ${JSON.stringify(log)}\n`,
      { mode: 0o755 },
    );
    const res = join(tempDir(), "r");
    const ok = await stderrOf(() => runCli(["check", corpusDir, "--rebuild", "--build-only", "--jobs", "3", "--results", res, "--print-summary", "none"]));
    expect(ok.value, ok.err).toBe(0);
    const recs = readFileSync(join(res, "results.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(recs.map((r) => r.verdict)).toEqual(["built", "built", "built"]);
    // the most compiles running at one time
    let now = 0;
    let most = 0;
    const events = readFileSync(log, "utf8")
      .trim()
      .split("\n")
      .map((l) => l.split(" "))
      .map(([k, t]) => [Number(t), k === "start" ? 1 : -1] as const)
      .sort((x, y) => x[0] - y[0] || x[1] - y[1]);
    for (const [, d] of events) most = Math.max(most, (now += d));
    expect(most).toBeGreaterThanOrEqual(2);
    expect(new Set(recs.map((r) => r.worker)).size).toBeGreaterThanOrEqual(2);
    for (const [extra, said] of [
      [["--rebuild", "--jobs", "2"], "--jobs applies to --rebuild --build-only"],
      [["--rebuild", "--build-only", "--jobs", "2", "--gpus", "0"], "--gpus does not apply"],
      [["--rebuild", "--build-only", "--jobs", "0"], "--jobs"],
    ] as const) {
      const u = await stderrOf(() => runCli(["check", corpusDir, ...extra, "--results", join(tempDir(), "r3")]));
      expect(u.value, extra.join(" ")).toBe(2);
      expect(u.err, extra.join(" ")).toContain(said);
    }
  } finally {
    if (savedNvcc === undefined) delete process.env.NVCC;
    else process.env.NVCC = savedNvcc;
  }
}, 120_000);

test("check --rebuild and validate of a received capture: kerncap's own build.sh shown as one line (name, size, sha256, kerncap's own, its compile flags), not its ~140 lines; a hand-written one printed whole", async () => {
  const dir = join(tempDir(), "cap");
  await makeCapture(dir);
  const stock = stockBuildSh();
  writeFileSync(join(dir, "build.sh"), stock);
  markReceived(dir, "cap.zip");
  const task: CaptureRef = { id: "cap", path: dir, kind: "folder" };
  const own = await stderrOf(() => checkCapture(task, { ...SETTINGS, rebuild: true }));
  expect(own.value.code).toBe("E_UNTRUSTED");
  const sha = new Bun.CryptoHasher("sha256").update(stock).digest("hex");
  expect(own.err).toContain(
    `──── build.sh (${Buffer.byteLength(stock)} bytes, sha256 ${sha}): kerncap's own build.sh, not printed: its template's text, its compile flags -O2 ────\n`,
  );
  expect(own.err).not.toContain("end of build.sh");
  expect(own.err).not.toContain(stock.split("\n").find((l) => l.includes("nvcc"))!);
  // validate's gate (the same function, outside check): one line too (a new user read kerncap's own 140 lines to learn nothing)
  const gate = await stderrOf(() => thrownBy(() => requireTrustedBuild(dir, readManifest(dir), false)));
  expect(gate.value?.code).toBe("E_UNTRUSTED");
  expect(gate.err).toContain("kerncap's own build.sh, not printed: its template's text, its compile flags -O2 ────");
  expect(gate.err).not.toContain("end of build.sh");
  // a build.sh of its own: printed whole, in check too
  writeFileSync(join(dir, "build.sh"), `${stock}\necho mine\n`);
  const theirs = await stderrOf(() => checkCapture(task, { ...SETTINGS, rebuild: true }));
  expect(theirs.value.code).toBe("E_UNTRUSTED");
  expect(theirs.err).toContain("echo mine");
  expect(theirs.err).toContain("──── end of build.sh ────");
}, 60_000);

test("--merge of --json documents: a shard that held no capture counts by its document's shard; a merge's own document merges again (its records' shards, not its null shard)", async () => {
  const root = await corpus(1);
  const docs: string[] = [];
  for (let k = 0; k < 3; k++) {
    const r = await runCheck(
      checkOptions(
        [root],
        join(tempDir(), `s${k}`),
        fakeWorkers((t) => fakeOutcome(t)),
        { shard: { index: k, count: 3 } },
      ),
    );
    const f = join(tempDir(), `s${k}.json`);
    writeFileSync(f, JSON.stringify({ schema: "kerncap.check/1", ...r }));
    docs.push(f);
  }
  const m = mergeResults(docs, { slowerPct: 10 }); // two of the three shards hold no capture: their documents say which they are
  expect(m.captures.length).toBe(1);
  expect(m.missingShards).toBeUndefined();
  const merged = join(tempDir(), "merged.json");
  writeFileSync(merged, JSON.stringify({ schema: "kerncap.check/1", ...m }));
  expect(mergeResults([merged], { slowerPct: 10, partial: true }).captures.length).toBe(1);
  // a document's shard is taken only from the run's own authenticated claim (adversary 31 #2: a hand-written empty
  // shard stood for the failing one, exit 0): the claim of another shard, of fewer captures, or none, refused
  const real = JSON.parse(readFileSync(docs.find((f) => JSON.parse(readFileSync(f, "utf8")).captures.length)!, "utf8"));
  const empty = JSON.parse(readFileSync(docs.find((f) => !JSON.parse(readFileSync(f, "utf8")).captures.length)!, "utf8"));
  const forgeries: [string, object][] = [
    ["no authenticator", { ...empty, shardAuth: undefined }],
    ["another shard's authenticator", { ...empty, shard: real.shard, shardAuth: empty.shardAuth }],
    ["its captures left out", { ...real, captures: [], summary: { ...real.summary, captures: 0 } }],
    ["a one-shard run's claim made up", { ...empty, shard: { index: 0, count: 1 } }],
  ];
  for (const [what, doc] of forgeries) {
    const f = join(tempDir(), "forged.json");
    writeFileSync(f, JSON.stringify(doc));
    expect(() => mergeResults([f, ...docs.filter((d) => d !== f)], { slowerPct: 10 }), what).toThrow(/is not authenticated/);
  }
}, 60_000);

test("a shard count no run takes (past --shard's 100000, or not a safe integer) is refused, E_RESULTS, not listed shard by shard (adversary 32: 2^32-1 missing shards, 12 GB; 2^53+1, an internal error)", async () => {
  const { missingShards } = await import("../../../src/check/merge.ts");
  for (const k of ["0/4294967295", "0/9007199254740993", "5/5", "0/0"]) {
    let e: unknown;
    try {
      missingShards(new Map([[k, new Set(["f.json"])]]));
    } catch (x) {
      e = x;
    }
    expect((e as { code?: string }).code, k).toBe("E_RESULTS");
    expect((e as Error).message).toContain("is no shard a run takes");
  }
  expect(missingShards(new Map([["1/3", new Set(["f.json"])]]))).toEqual(["0/3", "2/3"]);
});
