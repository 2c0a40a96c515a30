import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, symlinkSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describeJudging, mergeJudging, readJudging, writeJudging } from "../../../src/replay/judge-settings.ts";

const dir = () => mkdtempSync(join(tmpdir(), "kerncap-judge-"));

describe("a capture's judging settings", () => {
  test("round trip: written with its checksum, read back the same (keys in a fixed order); none stored: undefined; empty settings remove the file", () => {
    const d = dir();
    expect(readJudging(d)).toBeUndefined();
    const s = { multiset: ["2"], rtol: 1e-3, dtypes: { "param:1": "bf16", "0": "fp16" }, nondeterministic: true };
    writeJudging(d, s);
    const text = readFileSync(join(d, "kerncap-judge.json"), "utf8");
    expect(JSON.parse(text)).toMatchObject({ schema: "kerncap.judge-settings/1", sha256: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect(readJudging(d)).toEqual({ rtol: 1e-3, dtypes: { "0": "fp16", "param:1": "bf16" }, multiset: ["2"], nondeterministic: true });
    expect(Object.keys(JSON.parse(text).settings)).toEqual(["rtol", "dtypes", "multiset", "nondeterministic"]);
    expect(writeJudging(d, {})).toBeUndefined();
    expect(existsSync(join(d, "kerncap-judge.json"))).toBe(false);
  });
  test("a damaged or altered file is refused: not JSON, another shape, settings that do not hash as the file says, a link at its name", () => {
    const d = dir();
    const f = join(d, "kerncap-judge.json");
    writeFileSync(f, "{");
    expect(() => readJudging(d)).toThrow(/not valid JSON/);
    writeFileSync(f, JSON.stringify({ schema: "kerncap.judge-settings/1", settings: { rtol: "big" }, sha256: "0".repeat(64) }));
    expect(() => readJudging(d)).toThrow(/settings\.rtol/);
    writeJudging(d, { rtol: 1e-3 });
    writeFileSync(f, readFileSync(f, "utf8").replace("0.001", "1"));
    expect(() => readJudging(d)).toThrow(/checksum mismatch in kerncap-judge\.json/);
    const e = dir();
    writeJudging(d, { rtol: 1e-3 });
    symlinkSync(f, join(e, "kerncap-judge.json"));
    expect(() => readJudging(e)).toThrow(/symbolic link|link/);
    expect(() => writeJudging(e, { rtol: 1 })).toThrow(/link/);
    expect(() => writeJudging(d, { dtype: "float128" })).toThrow(/not a known element type/);
    // a sender's file naming an inherited key as its type (its checksum right: no key needed): refused, never "compare nothing" (adversary 80 #21)
    for (const dtype of ["constructor", "__proto__"]) {
      const settings = { dtype };
      const sha256 = new Bun.CryptoHasher("sha256").update(JSON.stringify(settings)).digest("hex");
      writeFileSync(f, JSON.stringify({ schema: "kerncap.judge-settings/1", settings, sha256 }));
      expect(() => readJudging(d), dtype).toThrow(/not a known element type/);
      expect(() => writeJudging(d, settings), dtype).toThrow(/not a known element type/);
    }
    // a received file nested 100 000 levels (200 KB, under the read limit): refused as such, not a stack overflow (adversary 73)
    writeFileSync(f, `{"rtol":${"[".repeat(100_000)}${"]".repeat(100_000)}}`);
    expect(() => readJudging(d)).toThrow(/nests 100001 levels deep/);
  });
  test("one run's options over the stored settings: each option given wins, per-region types merged; the settings in effect are named", () => {
    const stored = { rtol: 1e-3, atol: 1e-6, multiset: ["2"], dtypes: { "0": "bf16", "1": "fp16" }, nondeterministic: true };
    const m = mergeJudging(stored, { rtol: 0, dtypes: { "1": "fp32" } });
    expect(m.options).toEqual({ rtol: 0, atol: 1e-6, multiset: ["2"], dtypes: { "0": "bf16", "1": "fp32" }, nondeterministic: true });
    expect(m.fromCapture.sort()).toEqual(["atol", "dtypes", "multiset", "nondeterministic"]);
    expect(mergeJudging(undefined, { atol: 1 })).toEqual({ options: { atol: 1 }, fromCapture: [] });
    expect(describeJudging(stored)).toBe("atol 0.000001, rtol 0.001, dtype 0=bf16, dtype 1=fp16, multiset 2, nondeterministic");
  });
});

describe("whose judging settings a replay uses (trial 17: a sender's atol 1e308 judged every edit MATCH)", () => {
  test("the user's own capture's are used; a received capture's are not until accepted, for that folder and that file; a changed file asks again", async () => {
    const { makeCapture, tempDir } = await import("../fixtures.ts");
    const { markReceived } = await import("../../../src/format/received.ts");
    const { readManifest } = await import("../../../src/format/capture-dir.ts");
    const { acceptJudging, judgingAccepted, judgingInEffect, readJudgingFile, writtenJudgingDigest } = await import("../../../src/replay/judge-settings.ts");
    const saved = process.env.XDG_STATE_HOME;
    process.env.XDG_STATE_HOME = tempDir(); // this test's own acceptance records
    try {
      const own = join(tempDir(), "own");
      await makeCapture(own);
      writeJudging(own, { atol: 1e-3 });
      expect(judgingInEffect(own, readManifest(own), true)).toEqual({ settings: { atol: 1e-3 } });
      const got = join(tempDir(), "got");
      await makeCapture(got);
      writeJudging(got, { atol: 1e308, multiset: ["all"] });
      markReceived(got, "cap.zip"); // as unpack leaves it
      const m = readManifest(got);
      const first = judgingInEffect(got, m, true);
      expect(first.settings).toBeUndefined();
      expect(first.ignored).toContain("holds the sender's judging settings; not used until you accept them");
      expect(judgingAccepted(got)).toBe(false);
      expect(acceptJudging(got, readJudgingFile(got)!.file)).toBe(true);
      expect(judgingInEffect(got, m, true).settings).toEqual({ atol: 1e308, multiset: ["all"] });
      // the sender (or anyone who can write the folder) changes the file afterwards: not accepted any more
      writeJudging(got, { rtol: 1 });
      expect(judgingInEffect(got, m, true).settings).toBeUndefined();
      // what the user writes is accepted by the digest of the bytes written, never by the file read back: another user who
      // replaces it between the write and the acceptance (adversary round 70: a received folder they can write) gets nothing accepted
      writeJudging(got, { rtol: 1e-3 });
      const wrote = writtenJudgingDigest({ rtol: 1e-3 });
      expect(wrote).toBe(readJudgingFile(got)!.file);
      writeJudging(got, { atol: 1e300, multiset: ["all"] }); // the other user's file, in its place before the acceptance
      expect(acceptJudging(got, wrote)).toBe(true);
      expect(judgingInEffect(got, m, true).settings).toBeUndefined();
      writeJudging(got, { rtol: 1e-3 }); // the bytes written, back: accepted
      expect(judgingInEffect(got, m, true).settings).toEqual({ rtol: 1e-3 });
      writeJudging(got, { rtol: 1 }); // the file the folders below copy
      // another folder with the same file is another acceptance
      const other = join(tempDir(), "other");
      await makeCapture(other);
      writeFileSync(join(other, "kerncap-judge.json"), readFileSync(join(got, "kerncap-judge.json")));
      markReceived(other, "cap.zip");
      expect(judgingInEffect(other, readManifest(other), true).settings).toBeUndefined();
      // trial 18 F5: a setting of the user's own on a received capture starts from none; the sender's others are not adopted with it
      const main = join(import.meta.dir, "../../../src/cli/main.ts");
      const judge = (...a: string[]) => Bun.spawnSync([process.execPath, main, "judge", other, ...a], { stdout: "pipe", stderr: "pipe", env: process.env });
      const set = judge("--rtol", "1e-6", "--json");
      expect(set.exitCode, set.stderr.toString()).toBe(0);
      expect(JSON.parse(set.stdout.toString()).settings).toEqual({ rtol: 1e-6 });
      expect(set.stderr.toString()).toContain("the sender's judging settings (rtol 1)");
      expect(set.stderr.toString()).toContain("are not accepted: starting from none");
      expect(judgingInEffect(other, readManifest(other), true).settings).toEqual({ rtol: 1e-6 }); // the user's, accepted as written
      // --accept with a setting: the user took the sender's, then changed one
      const third = join(tempDir(), "third");
      await makeCapture(third);
      writeJudging(third, { atol: 1e-2, multiset: ["all"] });
      markReceived(third, "cap.zip");
      const both = Bun.spawnSync([process.execPath, main, "judge", third, "--accept", "--rtol", "1e-6", "--json"], { stdout: "pipe", env: process.env });
      expect(JSON.parse(both.stdout.toString()).settings).toEqual({ atol: 1e-2, multiset: ["all"], rtol: 1e-6 });
    } finally {
      if (saved === undefined) delete process.env.XDG_STATE_HOME;
      else process.env.XDG_STATE_HOME = saved;
    }
  });

  test("a capture made here whose kerncap-judge.json its group (or every user, or as root another user) may write: not used until accepted, said by inspect, judge and the replay's note (trial 20)", async () => {
    const { makeCapture, tempDir } = await import("../fixtures.ts");
    const { readManifest } = await import("../../../src/format/capture-dir.ts");
    const { receivedReasons } = await import("../../../src/format/received.ts");
    const { judgingInEffect } = await import("../../../src/replay/judge-settings.ts");
    const { chmodSync, chownSync, statSync } = await import("node:fs");
    const saved = process.env.XDG_STATE_HOME;
    process.env.XDG_STATE_HOME = tempDir();
    try {
      const cap = join(tempDir(), "cap");
      await makeCapture(cap);
      const m = readManifest(cap);
      writeJudging(cap, { rtol: 1e-6 });
      const file = join(cap, "kerncap-judge.json");
      expect(judgingInEffect(cap, m, true).settings).toEqual({ rtol: 1e-6 });
      // the victim shares the file with the team; a member copies the bytes of a file of their own in place (owner unchanged)
      chmodSync(file, 0o664);
      const theirs = join(tempDir(), "theirs");
      await makeCapture(theirs);
      writeJudging(theirs, { atol: 1e30, rtol: 1e30 });
      writeFileSync(file, readFileSync(join(theirs, "kerncap-judge.json")));
      expect(statSync(file).mode & 0o777).toBe(0o664);
      expect(receivedReasons(cap, m)).toEqual([]); // still made here: the settings alone are not used
      const r = judgingInEffect(cap, m, true);
      expect(r.settings).toBeUndefined();
      expect(r.ignored).toContain(`kerncap-judge.json can be written by every member of its group (gid ${statSync(file).gid}, mode 664)`);
      expect(r.ignored).toContain(`kerncap judge ${cap} --accept`);
      const main = join(import.meta.dir, "../../../src/cli/main.ts");
      const run = (...a: string[]) => Bun.spawnSync([process.execPath, main, ...a], { stdout: "pipe", stderr: "pipe", env: process.env });
      const ins = run("inspect", cap, "--json");
      expect(JSON.parse(ins.stdout.toString()).judgingUsed).toBe(false);
      const text = run("inspect", cap).stdout.toString();
      expect(text).toContain("NOT USED: kerncap-judge.json can be written by every member of its group");
      const shown = run("judge", cap);
      expect(shown.exitCode).toBe(0);
      expect(shown.stderr.toString()).toContain("so its judging settings may be another user's; not used until you read them and accept them");
      // every user may write it: the same; the user reads them and accepts: used while the file stays as it is
      chmodSync(file, 0o646);
      expect(judgingInEffect(cap, m, true).ignored).toContain("kerncap-judge.json can be written by every user (mode 646)");
      // plain --accept is not enough where others may write the file: it could change between the reading and --accept (trial 23 F6)
      const plain = run("judge", cap, "--accept", "--json");
      expect(plain.exitCode).toBe(2);
      expect(JSON.parse(plain.stdout.toString()).error.code).toBe("E_UNTRUSTED");
      expect(judgingInEffect(cap, m, true).settings).toBeUndefined();
      // the review shows the digest of the bytes shown; --accept=DIGEST accepts those bytes only
      const review = run("judge", cap).stderr.toString();
      const digest = /--accept=([0-9a-f]{64})/.exec(review)?.[1];
      expect(digest, review).toBeDefined();
      writeJudging(theirs, { atol: 1e300, multiset: ["all"] }); // swapped in after the review
      const swapped = readFileSync(join(theirs, "kerncap-judge.json"));
      const reviewed = readFileSync(file);
      writeFileSync(file, swapped);
      const late = run("judge", cap, `--accept=${digest}`, "--json");
      expect(late.exitCode, late.stdout.toString()).toBe(2);
      expect(JSON.parse(late.stdout.toString()).error.code).toBe("E_TRUST_CHANGED");
      expect(judgingInEffect(cap, m, true).settings).toBeUndefined();
      writeFileSync(file, reviewed);
      expect(run("judge", cap, `--accept=sha256:${digest!.toUpperCase()}`).exitCode).toBe(0);
      expect(judgingInEffect(cap, m, true).settings).toEqual({ atol: 1e30, rtol: 1e30 });
      writeJudging(theirs, { atol: 5 }); // the member changes it again: asks again
      writeFileSync(file, readFileSync(join(theirs, "kerncap-judge.json")));
      expect(judgingInEffect(cap, m, true).settings).toBeUndefined();
      // a setting the user writes starts from none and is accepted as written; chmod go-w makes the file the user's alone
      const set = run("judge", cap, "--rtol", "1e-5", "--json");
      expect(JSON.parse(set.stdout.toString()).settings).toEqual({ rtol: 1e-5 });
      expect(judgingInEffect(cap, m, true).settings).toEqual({ rtol: 1e-5 });
      chmodSync(file, 0o644);
      writeJudging(cap, { rtol: 1e-4 });
      expect(judgingInEffect(cap, m, true).settings).toEqual({ rtol: 1e-4 });
      if (process.geteuid?.() === 0) {
        chownSync(file, 65534, 65534); // another user's file in the user's own capture
        expect(judgingInEffect(cap, m, true).ignored).toContain("kerncap-judge.json belongs to another user (uid 65534");
      }
    } finally {
      if (saved === undefined) delete process.env.XDG_STATE_HOME;
      else process.env.XDG_STATE_HOME = saved;
    }
  }, 60_000);
});

// adversary 35: two judges at once each read the stored settings, added theirs and wrote; one's was lost though both said "changed"
describe("two kerncap judge at once on one capture", () => {
  test("each setting is kept: the second judge reads what the first wrote (the capture folder held while one judge reads, merges and writes)", async () => {
    const { makeCapture, tempDir } = await import("../fixtures.ts");
    const main = join(import.meta.dir, "../../../src/cli/main.ts");
    const env = { ...process.env, XDG_STATE_HOME: tempDir() };
    const cap = join(tempDir(), "cap");
    await makeCapture(cap);
    for (let round = 0; round < 4; round++) {
      writeJudging(cap, {});
      const a = Bun.spawn([process.execPath, main, "judge", cap, "--atol", `0.${round + 1}`, "--json"], { stdout: "pipe", stderr: "pipe", env });
      const b = Bun.spawn([process.execPath, main, "judge", cap, "--rtol", `0.0${round + 1}`, "--json"], { stdout: "pipe", stderr: "pipe", env });
      expect([await a.exited, await b.exited]).toEqual([0, 0]);
      expect(readJudging(cap), `round ${round}`).toEqual({ atol: Number(`0.${round + 1}`), rtol: Number(`0.0${round + 1}`) });
    }
  }, 60_000);
});
