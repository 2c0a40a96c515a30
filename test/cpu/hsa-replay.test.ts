/**
 * `kerncap replay` of a hip capture through the one replay engine and the HSA backend, without an
 * AMD GPU: KERNCAP_HSA_PATH points at test/apps/hip/fake_libhsa.c (host memory for device memory,
 * the captured VAs mapped at their addresses, the kernel run as a C function on the dispatch
 * packet's kernarg). The capture is synthetic (raw_version 2 hashed on the CPU, as c/hsa/kerncap_hsa.c writes it) with a
 * real gfx90a code object from hipcc (the engine reads its metadata for the kernel descriptor).
 * Covered: the verdict and exit codes, the shared options --verify/--no-verify, --atol/--rtol,
 * --dtype, --runs, --iters, and the result document's keys (the CUDA engine's).
 * NOT covered: the real ROCr runtime, a GPU, hsa_amd_vmem on ROCm 6.
 */
import * as v from "valibot";
import { DOCUMENTS } from "../../src/format/documents.ts";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Manifest } from "../../src/format/manifest.ts";
import { buildFakeHsa, compileScale, hipScaleCapture, SCALE_N } from "../hip-fixture.ts";

const ROOT = resolve(import.meta.dir, "../..");
const MAIN = join(ROOT, "src/cli/main.ts");
const haveGcc = !!Bun.which("gcc");
const haveHipcc = !!Bun.which("hipcc");
const SKIP = !haveGcc || !haveHipcc;
const REASON = !haveGcc ? "(skipped: gcc missing)" : !haveHipcc ? "(skipped: hipcc missing; run scripts/install-rocm.sh)" : "";

const N = SCALE_N; // floats in the data region
const DATA_VA = 0x7e5a_0000_0000n;
const INPUT_VA = 0x7e5a_0010_0000n;

let tmp = "";
let fake = "";
let module = new Uint8Array();
beforeAll(() => {
  if (SKIP) return;
  tmp = mkdtempSync(join(tmpdir(), "kerncap-hsa-replay-"));
  fake = join(tmp, "libfake_hsa.so");
  buildFakeHsa(fake);
  compileScale(join(tmp, "scale.co"));
  module = new Uint8Array(readFileSync(join(tmp, "scale.co")));
});
afterAll(() => tmp && rmSync(tmp, { recursive: true, force: true }));

/**
 * A hip capture of scale(data, 2, N) (test/hip-fixture.ts): data holds k before and `after(k)`
 * after (2k: what the kernel computes), an input region the kernel does not touch.
 */
function hipCapture(name: string, after?: (k: number) => number, chunkBytes?: number): Promise<string> {
  return hipScaleCapture(tmp, name, { module, dataVa: DATA_VA, inputVa: INPUT_VA, after, chunkBytes });
}

function replay(dir: string, ...args: string[]) {
  const p = Bun.spawnSync([process.execPath, MAIN, "replay", dir, "--json", ...args], {
    env: { ...process.env, KERNCAP_HSA_PATH: fake, KERNCAP_NO_ASLR_RETRY: "1" },
    stdout: "pipe",
    stderr: "pipe",
    timeout: 60_000,
  });
  const out = p.stdout.toString();
  let doc: Record<string, any> = {};
  try {
    doc = JSON.parse(out);
  } catch {
    throw new Error(`no JSON document (exit ${p.exitCode}): ${out}\n${p.stderr.toString()}`);
  }
  return { code: p.exitCode, doc, stderr: p.stderr.toString() };
}

/**
 * `kerncap replay DIR --against scale.co` (the same code object as an edited module) on the fake
 * runtime with `fakeEnv`'s FAKE_HSA_* behaviour; its exit code, output and stderr.
 */
function replayAgainst(dir: string, fakeEnv: Record<string, string>, ...args: string[]) {
  const p = Bun.spawnSync([process.execPath, MAIN, "replay", dir, "--against", join(tmp, "scale.co"), ...args], {
    env: { ...process.env, KERNCAP_HSA_PATH: fake, KERNCAP_NO_ASLR_RETRY: "1", ...fakeEnv },
    stdout: "pipe",
    stderr: "pipe",
    timeout: 60_000,
  });
  return { code: p.exitCode, out: p.stdout.toString(), err: p.stderr.toString() };
}

describe.skipIf(SKIP)(`kerncap replay of a hip capture on the fake HSA runtime ${REASON}`, () => {
  test("match: exit 0, the CUDA engine's document (verdict, numerics, determinism, timing, check)", async () => {
    const dir = await hipCapture("exact");
    const r = replay(dir, "--iters", "4", "--runs", "2");
    expect(r.stderr).not.toContain("E_");
    expect(r.code).toBe(0);
    const d = r.doc;
    expect(d.schema).toBe("kerncap.replay/1");
    expect(d.verdict).toBe("match");
    expect(d.kernel).toBe("scale(float*, float, int)");
    expect(d.regionsChecked).toBe(2);
    expect(d.bytesChecked).toBe(N * 4 + 4096);
    expect(d.mismatches).toEqual([]);
    expect(d.numerics).toMatchObject({ verdict: "bit-exact", atol: 0, rtol: 0, regions: [] });
    expect(d.determinism).toEqual({ runs: 2, runsDiffering: 0, nondeterministic: false });
    expect(d.timing.iters).toBe(4);
    expect(d.timing.method).toContain("wall clock");
    expect(d.timing.appUs).toBe(5);
    expect(d.device).toEqual({ name: "Fake MI210", arch: "gfx90a" });
    expect(d.check.scannedOn).toBe("host");
    expect(d.reserve.spans).toBe(2);
    expect(d.restore.storedBytes).toBeGreaterThan(0);
    for (const k of [
      "dir",
      "verdict",
      "regionsChecked",
      "bytesChecked",
      "mismatches",
      "timing",
      "restore",
      "determinism",
      "check",
      "reserve",
      "module",
      "device",
      "numerics",
    ])
      expect(d).toHaveProperty(k);
    // the document as `kerncap schema replay` describes it
    const check = v.safeParse(DOCUMENTS.replay, d);
    expect(check.success, JSON.stringify(check.issues?.slice(0, 3).map((i) => [v.getDotPath(i), i.message]))).toBe(true);
  });

  test("--verify: a damaged before.bin is E_CHECKSUM (exit 2); --no-verify replays it and the region mismatches (exit 1)", async () => {
    const dir = await hipCapture("damaged");
    const m = JSON.parse(readFileSync(join(dir, "kerncap.json"), "utf8")) as Manifest;
    const f = join(dir, m.memory.before);
    const bytes = new Uint8Array(readFileSync(f));
    const at = m.regions[0]!.before.extents[0]![2]; // file offset of the data region's first stored chunk
    bytes[at + 20] ^= 0x40; // float 5
    writeFileSync(f, bytes);
    const bad = replay(dir);
    expect(bad.code).toBe(2);
    expect(bad.doc.error.code).toBe("E_CHECKSUM");
    const r = replay(dir, "--no-verify", "--iters", "0");
    expect(r.code).toBe(1);
    expect(r.doc.verdict).toBe("mismatch");
    expect(r.doc.mismatches).toHaveLength(1);
    expect(r.doc.mismatches[0]).toMatchObject({ va: `0x${DATA_VA.toString(16)}`, changedInApp: true, firstDiffOffset: 20 });
  });

  test("a received capture (memory/ group-writable: another user may replace after.bin) is verified even with --no-verify: the damaged before.bin is E_CHECKSUM, one warning says why (trial 22)", async () => {
    const dir = await hipCapture("damaged-shared");
    const m = JSON.parse(readFileSync(join(dir, "kerncap.json"), "utf8")) as Manifest;
    const f = join(dir, m.memory.before);
    const bytes = new Uint8Array(readFileSync(f));
    bytes[m.regions[0]!.before.extents[0]![2] + 20] ^= 0x40;
    writeFileSync(f, bytes);
    chmodSync(join(dir, "memory"), 0o775);
    const r = replay(dir, "--no-verify", "--iters", "0");
    expect(r.code).toBe(2);
    expect(r.doc.error.code).toBe("E_CHECKSUM");
    expect(r.stderr).toContain("is a received capture (memory can be written by every member of its group");
    expect(r.stderr.match(/checksums are checked though --no-verify was given/g)).toHaveLength(1);
    // the user's own again: --no-verify replays it as asked (the region mismatches)
    chmodSync(join(dir, "memory"), 0o755);
    const own = replay(dir, "--no-verify", "--iters", "0");
    expect(own.code).toBe(1);
    expect(own.stderr).not.toContain("checksums are checked though");
  });

  test("--rtol/--atol/--dtype: an after state off by 1e-6 relative mismatches bit for bit, matches within --rtol 1e-5, not as --dtype u8", async () => {
    const dir = await hipCapture("noisy", (k) => 2 * k * (1 + 1e-6));
    const exact = replay(dir, "--iters", "0");
    expect(exact.code).toBe(1);
    expect(exact.doc.numerics.verdict).toBe("mismatch");
    const tol = replay(dir, "--iters", "0", "--rtol", "1e-5");
    expect(tol.code).toBe(0);
    expect(tol.doc.numerics.verdict).toBe("within-tolerance");
    expect(tol.doc.numerics.rtol).toBe(1e-5);
    expect(tol.doc.numerics.regions[0]).toMatchObject({ dtype: "fp32", dtypeSource: "default", verdict: "within-tolerance", overTolerance: 0 });
    const abs = replay(dir, "--iters", "0", "--atol", "0.01", "--dtype", "fp32");
    expect(abs.code).toBe(0);
    expect(abs.doc.numerics.regions[0]).toMatchObject({ dtype: "fp32", dtypeSource: "option" });
    const u8 = replay(dir, "--iters", "0", "--rtol", "1e-5", "--dtype", "u8");
    expect(u8.code).toBe(1);
    expect(u8.doc.numerics.regions[0]).toMatchObject({ dtype: "u8", dtypeSource: "option", verdict: "mismatch" });
  });

  test("judging settings stored in the capture (kerncap judge): used by replay, overridden by an option for one run; a mixed corpus in one check run", async () => {
    const noisy = await hipCapture("judged", (k) => 2 * k * (1 + 1e-6));
    const plain = await hipCapture("plain-noisy", (k) => 2 * k * (1 + 1e-6));
    const env = { ...process.env, KERNCAP_HSA_PATH: fake, KERNCAP_NO_ASLR_RETRY: "1" };
    const kc = (...a: string[]) => Bun.spawnSync([process.execPath, MAIN, ...a], { env, stdout: "pipe", stderr: "pipe", timeout: 120_000 });
    const j = kc("judge", noisy, "--rtol", "1e-5", "--dtype", "0=fp32", "--json");
    expect(j.exitCode, j.stderr.toString()).toBe(0);
    expect(JSON.parse(j.stdout.toString())).toMatchObject({ changed: true, settings: { rtol: 1e-5, dtypes: { "0": "fp32" } } });
    const r = replay(noisy, "--iters", "0");
    expect(r.code).toBe(0);
    expect(r.doc.numerics).toMatchObject({ verdict: "within-tolerance", rtol: 1e-5, settings: { file: "kerncap-judge.json", used: ["rtol", "dtypes"] } });
    expect(r.doc.numerics.regions[0]).toMatchObject({ dtypeSource: "option" });
    // the option given for one run wins; the settings stay
    expect(replay(noisy, "--iters", "0", "--rtol", "0").code).toBe(1);
    expect(replay(noisy, "--iters", "0").code).toBe(0);
    expect(replay(plain, "--iters", "0").code).toBe(1);
    // one check run over both: each capture judged with its own settings
    const res = join(tmp, "check-res");
    const c = kc("check", noisy, plain, "--results", res, "--iters", "1", "--json");
    const doc = JSON.parse(c.stdout.toString());
    const byDir = Object.fromEntries(doc.captures.map((x: any) => [x.id.split("/").pop(), x.verdict]));
    expect(byDir, c.stderr.toString()).toEqual({ judged: "match", "plain-noisy": "mismatch" });
    // --expect deterministic: the deterministic fake kernel stays a match, and the expectation is in the document
    kc("judge", plain, "--rtol", "1e-5", "--expect", "deterministic");
    const d = replay(plain, "--iters", "0");
    expect(d.code).toBe(0);
    expect(d.doc.determinism.expected).toBe("deterministic");
  });

  test("a nondeterministic kernel (FAKE_HSA_JITTER): chunks whose replays never varied but differ from the app by 1 ulp are judged by the kernel's noise (MATCH within the kernel's nondeterminism); 5 ulp planted there: MISMATCH", async () => {
    // element 2000 (a chunk past the jittering first 64 elements) is 1 ulp off in the app's after state
    const bump = (x: number, u: number) => {
      const f = new Float32Array([x]);
      new Uint32Array(f.buffer)[0]! += u;
      return f[0]!;
    };
    // 4 KiB chunks: the jittering elements in chunk 0, element 2000 in chunk 1 (its replays never vary)
    const dir = await hipCapture("jitter", (k) => (k === 2000 ? bump(2 * k, 1) : 2 * k), 4096);
    const env = { ...process.env, KERNCAP_HSA_PATH: fake, KERNCAP_NO_ASLR_RETRY: "1", FAKE_HSA_JITTER: "64" };
    const rep = (d: string) => {
      const p = Bun.spawnSync([process.execPath, MAIN, "replay", d, "--iters", "0"], { env, stdout: "pipe", stderr: "pipe", timeout: 60_000 });
      const j = Bun.spawnSync([process.execPath, MAIN, "replay", d, "--iters", "1", "--json"], { env, stdout: "pipe", stderr: "pipe", timeout: 60_000 });
      return { code: p.exitCode, text: p.stdout.toString(), doc: JSON.parse(j.stdout.toString()) };
    };
    const ok = rep(dir);
    expect(ok.code, ok.text).toBe(0);
    expect(ok.doc.determinism.nondeterministic).toBe(true);
    expect(ok.doc.determinism.runs).toBeGreaterThanOrEqual(8);
    const region = ok.doc.numerics.regions[0];
    expect(region.kernelNoise).toMatchObject({ region: 0, ulp: 2, regions: [0], appUlp: 1, elementsDiffering: 1, outside: 0 });
    expect(ok.text).toStartWith("MATCH within the kernel's nondeterminism");
    expect(ok.text).toMatch(/region 0 never varied in \d+ runs; the app differs by 1 ulp \(1 element\), within the 2 ulp seen in region 0/);
    const sv = v.safeParse(DOCUMENTS.replay, ok.doc);
    expect(sv.success, JSON.stringify(sv.issues?.slice(0, 3).map((i) => [v.getDotPath(i), i.message]))).toBe(true);
    // the same 1 ulp without the jitter (a deterministic kernel): bit for bit, a MISMATCH
    expect(replay(dir, "--iters", "0").code).toBe(1);
    // planted: 5 ulp in one element of a chunk that never varies
    const bad = await hipCapture("jitter-planted", (k) => (k === 2000 ? bump(2 * k, 1) : k === 2500 ? bump(2 * k, 5) : 2 * k), 4096);
    const b = rep(bad);
    expect(b.code).toBe(1);
    expect(b.doc.numerics.regions[0].kernelNoise).toMatchObject({ outside: 1, appUlp: 5 });
    expect(b.text).toMatch(/the app differs by up to 5 ulp in 1 of 2 differing elements, beyond the 2 ulp seen in region 0/);
  });

  test("--against itself: the baseline, the candidate and a second load of each timed in balanced rounds (the A/A floors), whole blocks of 8, the document's compare", async () => {
    const dir = await hipCapture("against");
    const dir2 = await hipCapture("against2");
    const r = replay(dir, "--against", dir2, "--iters", "10");
    expect(r.code).toBe(0);
    const c = r.doc.compare;
    expect(c.aa).not.toBeNull();
    expect(c.bb).not.toBeNull();
    expect(c.pairs).toBeGreaterThanOrEqual(16);
    expect(c.pairs % 8).toBe(0);
    expect(c.method).toContain("each module loaded twice");
    expect(c.margin).toBeGreaterThanOrEqual(0.01);
    expect(r.doc.against.timing.iters).toBe(c.pairs);
    const check = v.safeParse(DOCUMENTS.replay, r.doc);
    expect(check.success, JSON.stringify(check.issues?.slice(0, 3).map((i) => [v.getDotPath(i), i.message]))).toBe(true);
    // --repeat: the whole comparison 3 times on the one restored memory
    const rep = replay(dir, "--against", dir2, "--iters", "6", "--repeat", "3");
    expect(rep.code).toBe(0);
    expect(rep.doc.repeats).toHaveLength(3);
    expect(rep.doc.repeats[0].compare).toEqual(rep.doc.compare);
    for (const x of rep.doc.repeats) expect(x.seconds).toBeGreaterThan(0);
    expect(v.safeParse(DOCUMENTS.replay, rep.doc).success).toBe(true);
    expect(replay(dir, "--repeat", "3").doc.error.code).toBe("E_USAGE");
  });

  test("an edited kernel whose runs differ where the captured kernel's do not (FAKE_HSA_JITTER_FROM: the candidate's dispatches only): MISMATCH, not its own envelope; with --rtol each run is judged on its own", async () => {
    const dir = await hipCapture("edit-jitter");
    const co = join(tmp, "scale.co");
    // the captured kernel's 3 checked runs are dispatches 0-2; the candidate's from 3 on move by 0, 1, 2 ulp
    const run = (...args: string[]) => replayAgainst(dir, { FAKE_HSA_JITTER: "64", FAKE_HSA_JITTER_FROM: "3" }, "--iters", "5", ...args);
    const j = run("--json");
    const doc = JSON.parse(j.out);
    expect(j.code, j.err).toBe(1);
    expect(doc.verdict).toBe("match"); // the captured kernel
    const other = doc.against;
    expect(other.verdict).toBe("mismatch");
    // its own envelope holds the app's values (its runs spread 0-2 ulp around them): judged by it alone, a MATCH
    expect(other.numerics.verdict).toBe("within-spread");
    expect(other.determinism.reference).toMatchObject({ runs: 3, nondeterministic: false });
    expect(other.determinism.reference.beyond).toContain("where the captured kernel's 3 runs are bit-identical: nondeterminism the edit brought in");
    expect(run().out).toContain("against " + co + ": MISMATCH (the edited kernel's checked runs differ among themselves");
    // a tolerance: each of its runs on its own within 1e-6 of the app's: a MATCH, said so
    const t = run("--json", "--rtol", "1e-6");
    const td = JSON.parse(t.out);
    expect(t.code, t.err).toBe(0);
    expect(td.against.verdict).toBe("match");
    expect(td.against.determinism.reference).toEqual({ runs: 3, nondeterministic: false, eachRunWithinTolerance: true });
    const sv = v.safeParse(DOCUMENTS.replay, td);
    expect(sv.success, JSON.stringify(sv.issues?.slice(0, 3).map((i) => [v.getDotPath(i), i.message]))).toBe(true);
  });

  test("an edited kernel that skips its work once timed (FAKE_HSA_SKIP_FROM: every dispatch after the checked runs and warm-ups): one timed launch checked, MISMATCH", async () => {
    const dir = await hipCapture("edit-skip");
    // checked runs: the captured kernel's 0-2, the candidate's 3-5, one more of each (6, 7); 2 warm-ups each (8-11); timed from 12
    const p = replayAgainst(dir, { FAKE_HSA_SKIP_FROM: "12" }, "--iters", "8", "--json");
    const doc = JSON.parse(p.out);
    expect(p.code, p.err).toBe(1);
    expect(doc.verdict).toBe("match"); // the captured kernel's timed launches are not checked: it is what the app ran
    expect(doc.against.verdict).toBe("mismatch");
    expect(doc.against.numerics.verdict).toBe("bit-exact"); // every checked run was right
    expect(doc.against.check.timedLaunch.round).toBeGreaterThanOrEqual(0);
    expect(doc.against.check.timedLaunch.differs).toBe("region 0 chunk 0");
    // without the skip, the timed launch checked is the checked runs' bytes
    const q = replayAgainst(dir, {}, "--iters", "8", "--json");
    const ok = JSON.parse(q.out);
    expect(q.code, q.err).toBe(0);
    expect(ok.against.check.timedLaunch.differs).toBeUndefined();
    expect(ok.against.check.timedLaunch.round).toBeLessThan(8);
  });

  test("an edited kernel that writes the memory mapped around its region (FAKE_HSA_STRAY_FROM: where a result could be kept between launches): MISMATCH naming the address (trial 19 R1)", async () => {
    const dir = await hipCapture("edit-stray");
    const p = replayAgainst(dir, { FAKE_HSA_STRAY_FROM: "3" }, "--iters", "5", "--json");
    const doc = JSON.parse(p.out);
    expect(p.code, p.err).toBe(1);
    expect(doc.verdict).toBe("match"); // the captured kernel (dispatches 0-2) wrote nothing there
    expect(doc.against.verdict).toBe("mismatch");
    expect(doc.against.numerics.verdict).toBe("bit-exact"); // its outputs were right
    // the padding begins where the data region ends; its first chunk holds the float written there
    expect(doc.against.check.outsideRegions).toStartWith(`0x${(DATA_VA + BigInt(N * 4)).toString(16)} (`);
    expect(doc.against.check.outsideRegions).toContain("mapped around the regions: no allocation of the app's");
    // the same kernel without the stray write: nothing found there
    const q = replayAgainst(dir, {}, "--iters", "5", "--json");
    expect(q.code, q.err).toBe(0);
    expect(JSON.parse(q.out).against.check.outsideRegions).toBeUndefined();
  });

  test("a kernel the module lacks is E_KERNEL_NOT_IN_MODULE; a taken VA is E_VA_TAKEN", async () => {
    const dir = await hipCapture("renamed");
    const mf = join(dir, "kerncap.json");
    const m = JSON.parse(readFileSync(mf, "utf8"));
    m.kernel.name = "_Z5otherPffi";
    writeFileSync(mf, JSON.stringify(m));
    const r = replay(dir, "--no-verify");
    expect(r.code).toBe(2);
    expect(r.doc.error.code).toBe("E_KERNEL_NOT_IN_MODULE");
    const dir2 = await hipCapture("taken");
    const p = Bun.spawnSync([process.execPath, MAIN, "replay", dir2, "--json"], {
      env: { ...process.env, KERNCAP_HSA_PATH: fake, KERNCAP_NO_ASLR_RETRY: "1", KERNCAP_FAULT_VA_TAKEN: "1" },
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(p.exitCode).toBe(2);
    expect(JSON.parse(p.stdout.toString()).error.code).toBe("E_VA_TAKEN");
  });

  test("KERNCAP_TIMING: another setup is used and named in timing.method; a word it does not know is E_USAGE before any device work", async () => {
    const dir = await hipCapture("timing-setup");
    const run = (value: string) =>
      Bun.spawnSync([process.execPath, MAIN, "replay", dir, "--json", "--iters", "3", "--runs", "1"], {
        env: { ...process.env, KERNCAP_HSA_PATH: fake, KERNCAP_NO_ASLR_RETRY: "1", KERNCAP_TIMING: value },
        stdout: "pipe",
        stderr: "pipe",
        timeout: 60_000,
      });
    const ok = run("warmup=5,restore=host");
    expect(ok.exitCode).toBe(0);
    const d = JSON.parse(ok.stdout.toString());
    expect(d.verdict).toBe("match");
    expect(d.timing.iters).toBe(3);
    expect(d.timing.method).toContain("5 warm-up dispatches");
    expect(d.timing.method).toContain("(KERNCAP_TIMING spin=30,warmup=5,restore=host,l2=restored,clock=events)");
    // the defaults are not named
    const plain = replay(dir, "--iters", "2").doc.timing;
    expect(plain.method).not.toContain("KERNCAP_TIMING");
    expect(plain.clock).toBe("events");
    expect(plain.clockNote).toBeUndefined();
    // clock=cupti where the backend has no kernel clock: timed as before, the result and a warning say why
    const cupti = run("clock=cupti");
    expect(cupti.exitCode).toBe(0);
    const c = JSON.parse(cupti.stdout.toString());
    expect(c.verdict).toBe("match");
    expect(c.timing.clock).toBe("events");
    expect(c.timing.clockNote).toBe("clock=cupti not used: the amd backend has no kernel clock");
    expect(cupti.stderr.toString()).toContain("KERNCAP_TIMING clock=cupti: the amd backend has no kernel clock; timing with the backend's timers");
    const bad = run("warmup=5,l2=cold");
    expect(bad.exitCode).toBe(2);
    const e = JSON.parse(bad.stdout.toString()).error;
    expect(e.code).toBe("E_USAGE");
    expect(e.message).toContain('"l2=cold"');
  });
});
