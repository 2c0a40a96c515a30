/**
 * `kerncap check` on the GPU (issue 28): a corpus of cheap captures (test/apps/structs.cu:
 * scale_jobs, in-place axpy; test/apps/verdicts.cu: float-atomic partial sums, a faulting
 * launch), one of them packed, several copies of one at the same VAs (so every capture after the
 * first in a worker proves that the previous one's fixed-VA spans were released), and a planted
 * mismatch. Checked: verdicts, the baseline's first record and the timed comparison, --junit,
 * --gpus 0,0 (verdicts equal to one worker), --shard + --merge, --rebuild, and --resume after a
 * SIGKILL. Figures go to $KERNCAP_GPU_OUT/check.json.
 *
 * Only bun:test, node:*, ./harness.ts and kc64 imports; drives $KERNCAP_BIN. Skips without a GPU,
 * kerncap binary or nvcc.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { cpSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { kc64 } from "../../src/format/kc64.ts";
import { APPS, BIN, json, kerncap, manifest, run, skipReason, workDir } from "./harness.ts";

const SKIP = !!skipReason("check tests", [[!Bun.which("nvcc"), "no nvcc"]]);
const WORK = workDir("kerncap-check-");
const CORPUS = join(WORK, "corpus");
const kc = (args: string[], timeoutMs = 300_000) => run([BIN, ...args], { cwd: WORK, timeoutMs });
const figures: Record<string, unknown> = {};
const COPIES = 6;
afterAll(() => {
  if (process.env.KERNCAP_GPU_OUT) writeFileSync(join(process.env.KERNCAP_GPU_OUT, "check.json"), JSON.stringify(figures, null, 2));
});

/** id → [status, verdict, numerics] of a check document. */
const verdicts = (doc: any) => Object.fromEntries(doc.captures.map((c: any) => [c.id, [c.status, c.verdict, c.numerics]]));

beforeAll(() => {
  if (SKIP) return;
  const structs = join(WORK, "structs");
  const verd = join(WORK, "verdicts");
  for (const [bin, src] of [
    [structs, "structs.cu"],
    [verd, "verdicts.cu"],
  ]) {
    const p = run(["nvcc", "-O2", "-lineinfo", "-arch=sm_90", "-o", bin!, join(APPS, src!)], { cwd: WORK });
    if (p.code !== 0) throw new Error(p.stderr);
  }
  // appFails: the app dies of its own fault after the capture, and run passes its exit code on
  const cap = (out: string, kernel: string, dispatch: number, argv: string[], appFails = false) => {
    mkdirSync(dirname(out), { recursive: true }); // run writes DIR, never its parent folders
    const r = kerncap(WORK, ["run", "--kernel", kernel, "--dispatch", String(dispatch), "--out", out, "--", ...argv]);
    const ok = appFails ? r.code === 1 && existsSync(join(out, "kerncap.json")) : r.code === 0;
    if (!ok) throw new Error(`capture ${out} (exit ${r.code}): ${r.stderr}`);
  };
  cap(join(CORPUS, "structs/scale_jobs"), "scale_jobs", 1, [structs, "3"]);
  cap(join(WORK, "axpy"), "axpy_inplace", 2, [structs, "3"]);
  cap(join(CORPUS, "verdicts/sum"), "partial_sums", 1, [verd, "sum"]);
  cap(join(CORPUS, "verdicts/oob"), "write_oob", 0, [verd, "oob"], true);
  const p = kerncap(WORK, ["pack", join(WORK, "axpy"), "-o", join(CORPUS, "structs/axpy.zip")]);
  if (p.code !== 0) throw new Error(p.stderr);
  for (let i = 0; i < COPIES; i++) cpSync(join(CORPUS, "structs/scale_jobs"), join(CORPUS, `copies/scale_jobs-${i}`), { recursive: true });
});

describe.skipIf(SKIP)("kerncap check", () => {
  test("a corpus: every capture matches (the fault reproduced), copies at one VA in one worker, the baseline recorded, then compared; JUnit", () => {
    const junit = join(WORK, "first.xml");
    const r = kc(["check", CORPUS, "--json", "--junit", junit, "--results", join(WORK, "res")]);
    const doc = json(r);
    figures.first = {
      code: r.code,
      seconds: doc.seconds,
      verdicts: verdicts(doc),
      perCapture: doc.captures.map((c: any) => ({ id: c.id, seconds: c.seconds, replaySeconds: c.replaySeconds, medianUs: c.timing?.medianUs })),
    };
    expect(r.code, r.stderr).toBe(0);
    expect(doc.captures.length).toBe(4 + COPIES);
    for (const c of doc.captures) expect([c.id, c.status, c.verdict]).toEqual([c.id, "ok", "match"]);
    expect(doc.captures.find((c: any) => c.id === "corpus/structs/axpy").path).toEndWith("axpy.zip");
    expect(doc.captures.every((c: any) => c.time?.verdict === "no-baseline" || c.timing === null)).toBe(true);
    const base = JSON.parse(readFileSync(join(WORK, "res/baseline.json"), "utf8"));
    expect(Object.keys(base.captures).length).toBe(3 + COPIES); // the faulting capture has no times
    const xml = readFileSync(junit, "utf8");
    expect(xml).toContain(`<testsuite name="kerncap check" tests="${4 + COPIES}" failures="0" errors="0" skipped="0"`);
    // again: timed against the baseline (a loose threshold: times of two processes differ more than within one)
    const again = kc(["check", CORPUS, "--json", "--results", join(WORK, "res"), "--slower", "50"]);
    const d2 = json(again);
    figures.second = d2.captures.map((c: any) => ({ id: c.id, time: c.time }));
    expect(again.code, again.stderr).toBe(0);
    for (const c of d2.captures.filter((x: any) => x.timing)) expect(["same", "faster"], c.id).toContain(c.time.verdict);
  });

  test("a planted mismatch fails (exit 1, JUnit failure); the others stay ok", () => {
    const bad = join(WORK, "bad-corpus");
    mkdirSync(bad, { recursive: true });
    cpSync(join(CORPUS, "structs/scale_jobs"), join(bad, "scale_jobs"), { recursive: true });
    cpSync(join(CORPUS, "verdicts/sum"), join(bad, "sum"), { recursive: true });
    // the app's after state altered and its chunk hash re-sealed with kerncap's own kc64 (inspect --verify passes)
    const dir = join(bad, "scale_jobs");
    const m = manifest(dir);
    const reg = m.regions.find((x: any) => x.changed);
    const f = join(dir, m.memory.after);
    const bytes = readFileSync(f);
    const off = reg.after.extents[0][2];
    bytes.writeFloatLE(bytes.readFloatLE(off) + 1000, off);
    writeFileSync(f, bytes);
    const len = Math.min(m.memory.chunkBytes, reg.size - reg.after.extents[0][0] * m.memory.chunkBytes);
    reg.after.hashes = kc64(bytes.subarray(off, off + len)).hex + reg.after.hashes.slice(16);
    writeFileSync(join(dir, "kerncap.json"), JSON.stringify(m));
    const junit = join(WORK, "bad.xml");
    const r = kc(["check", bad, "--json", "--junit", junit, "--results", join(WORK, "res-bad")]);
    const doc = json(r);
    figures.planted = verdicts(doc);
    expect(r.code).toBe(1);
    expect(doc.captures[0]).toMatchObject({ id: "bad-corpus/scale_jobs", status: "mismatch", verdict: "mismatch" });
    expect(doc.captures[1]).toMatchObject({ status: "ok" });
    expect(readFileSync(junit, "utf8")).toContain('<failure message="mismatch: ');
  });

  test("--gpus 0,0: two workers, the same verdicts as one", () => {
    const one = json(kc(["check", CORPUS, "--json", "--results", join(WORK, "res-one")]));
    const r = kc(["check", CORPUS, "--json", "--gpus", "0,0", "--results", join(WORK, "res-two")]);
    const two = json(r);
    figures.gpus = { one: one.seconds, two: two.seconds, workers: [...new Set(two.captures.map((c: any) => c.worker))] };
    expect(r.code, r.stderr).toBe(0);
    expect(verdicts(two)).toEqual(verdicts(one));
    expect(new Set(two.captures.map((c: any) => c.worker))).toEqual(new Set([0, 1]));
  });

  test("--shard 0/2 and 1/2 are disjoint; --merge joins them into the whole corpus with one JUnit", () => {
    const files: string[] = [];
    const ids: string[] = [];
    for (const k of [0, 1]) {
      const res = join(WORK, `shard-${k}`);
      const r = kc(["check", CORPUS, "--json", "--shard", `${k}/2`, "--results", res]);
      expect(r.code, r.stderr).toBe(0);
      ids.push(...json(r).captures.map((c: any) => c.id));
      files.push(join(res, "results.jsonl"));
    }
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.length).toBe(4 + COPIES);
    const junit = join(WORK, "merged.xml");
    const m = kc(["check", "--merge", ...files, "--json", "--junit", junit]);
    expect(m.code, m.stderr).toBe(0);
    expect(
      json(m)
        .captures.map((c: any) => c.id)
        .sort(),
    ).toEqual([...ids].sort());
    expect(readFileSync(junit, "utf8")).toContain(`tests="${4 + COPIES}"`);
  });

  test("--rebuild: the CUDA reproducer rebuilt with the nvcc installed now, then replayed: still a match", () => {
    const r = kc(["check", join(CORPUS, "structs/scale_jobs"), "--rebuild", "--json", "--results", join(WORK, "res-rebuild")]);
    const doc = json(r);
    figures.rebuild = doc.captures[0];
    expect(r.code, r.stderr).toBe(0);
    expect(doc.captures[0]).toMatchObject({ status: "ok", verdict: "match", rebuild: { targetArch: null } });
    expect(["build.sh", "pruned"]).toContain(doc.captures[0].rebuild.builder);
  });

  test("--rebuild --build-only: rebuilt with this nvcc, replayed nowhere (verdict built, exit 0)", () => {
    const r = kc(["check", join(CORPUS, "structs/scale_jobs"), "--rebuild", "--build-only", "--json", "--results", join(WORK, "res-build-only")]);
    const doc = json(r);
    expect(r.code, r.stderr).toBe(0);
    expect(doc.captures[0]).toMatchObject({ status: "ok", verdict: "built", timing: null });
    expect(doc.captures[0].rebuild).toBeTruthy();
  });

  test("SIGKILL in the middle, then --resume: nothing checked twice, nothing lost", async () => {
    const res = join(WORK, "res-kill");
    const { BUN_BE_BUN: _, ...env } = process.env;
    // many timed launches make each capture take a while
    const p = Bun.spawn([BIN, "check", CORPUS, "--iters", "10000", "--results", res], { cwd: WORK, env, stdout: "ignore", stderr: "pipe" });
    const file = join(res, "results.jsonl");
    const t0 = Date.now();
    while (Date.now() - t0 < 120_000 && (!existsSync(file) || readFileSync(file, "utf8").split("\n").filter(Boolean).length < 2)) await Bun.sleep(20);
    p.kill("SIGKILL");
    await p.exited;
    const before = readFileSync(file, "utf8").split("\n").filter(Boolean).length;
    figures.kill = { recordsAtKill: before, of: 4 + COPIES };
    expect(before).toBeGreaterThanOrEqual(2);
    expect(before).toBeLessThan(4 + COPIES);
    await Bun.sleep(2000); // the orphaned worker finishes its capture, finds its parent gone, exits
    const r = kc(["check", CORPUS, "--iters", "20", "--results", res, "--resume", "--json"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(new RegExp(`resuming .*: ${before} captures already checked`));
    const doc = json(r);
    expect(doc.captures.length).toBe(4 + COPIES);
    const lines = readFileSync(file, "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l).id);
    expect(new Set(lines).size).toBe(lines.length);
    expect(lines.length).toBe(4 + COPIES);
  });
});
