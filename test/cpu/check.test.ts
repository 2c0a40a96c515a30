/**
 * `kerncap check` (src/check/) without a GPU: discovery, shards, the timing decision, JUnit XML,
 * the results file and --resume after a kill, --merge, the exit codes and the progress lines, with
 * the per-capture runner replaced by a fake (CheckOptions.open); and the worker protocol through a
 * real worker process, whose captures fail for want of a GPU.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { overrideSandboxSupport } from "../../src/frontends/sandbox.ts";
afterEach(() => overrideSandboxSupport(undefined));
import { appendFileSync, chmodSync, chownSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import * as v from "valibot";
import { readBaseline } from "../../src/check/baseline.ts";
import { runCheck, type CheckOptions } from "../../src/check/check.ts";
import { mergeResults } from "../../src/check/merge.ts";
import { discoverCaptures, type CaptureRef } from "../../src/check/discover.ts";
import { junitXml, xmlEscape } from "../../src/check/junit.ts";
import type { OpenRunner } from "../../src/check/pool.ts";
import { CheckProgress } from "../../src/check/progress.ts";
import type { CheckRecord, Outcome } from "../../src/format/check-record.ts";
import { parseResults, RecordLog, ResultsLog } from "../../src/check/results.ts";
import { EVAL_RECORDS } from "../../src/eval/report.ts";
import type { CheckSettings } from "../../src/check/runner.ts";
import { checkCapture, checkReplayOptions } from "../../src/ops/check.ts";
import { parseShard, shardOf } from "../../src/check/shard.ts";
import { judgeTime } from "../../src/check/timing.ts";
import { serveTasks } from "../../src/check/worker.ts";
import { errorSummary, NOT_REPLAYED, recordLine, summaryTable } from "../../src/check/report.ts";
import { ERROR_CODES } from "../../src/error-codes.ts";
import { DOCUMENTS, jsonSchemaOf } from "../../src/format/documents.ts";
import { runCli } from "../../src/cli/main.ts";
import { cubinArch } from "../../src/codeobj/cubin.ts";
import { reproducerBuildEnv } from "../../src/env.ts";
import { KerncapError } from "../../src/errors.ts";
import { packCapture } from "../../src/format/archive.ts";
import { markReceived } from "../../src/format/received.ts";
import {
  checkOptions,
  fakeOutcome,
  makeCapture,
  recordLine as sealedLine,
  sealedText,
  stockBuildSh,
  tempDir,
  thrownBy,
  withResultsKey,
  stderrOf,
} from "./fixtures.ts";
import { keyId } from "../../src/format/record-auth.ts";
import { writeDemo } from "../../src/capture/demo.ts";

const HAS_GPU = existsSync("/dev/nvidiactl") || existsSync("/dev/nvidia0");
const MAIN = join(import.meta.dir, "../../src/cli/main.ts");
const SETTINGS: CheckSettings = { iters: 20, verify: true, rebuild: false, force: false, trust: false, tolerance: {} };

/** A corpus: corpus/a/one, corpus/a/two (a capture set's members), corpus/b.zip (packed), and junk. */
async function corpus(): Promise<string> {
  const root = join(tempDir(), "corpus");
  await makeCapture(join(root, "a/one"));
  await makeCapture(join(root, "a/two"));
  await makeCapture(join(root, "packed-src"));
  await packCapture(join(root, "packed-src"), join(root, "b.zip"));
  require("node:fs").rmSync(join(root, "packed-src"), { recursive: true });
  writeFileSync(join(root, "notes.txt"), "not a capture");
  writeFileSync(join(root, "other.zip"), "PK\x03\x04 not kerncap's");
  await makeCapture(join(root, "a/three.tmp-4242")); // being written (or left by a killed kerncap)
  mkdirSync(join(root, "empty/deeper"), { recursive: true });
  symlinkSync("..", join(root, "empty/loop")); // a link back up: visited once
  return root;
}

/** Times around `us` (±2% spread), n of them. */
const times = (us: number, n = 20) => Array.from({ length: n }, (_, i) => us * (0.98 + (0.04 * i) / (n - 1)));

/** A fake worker outcome. */
const outcome = (t: CaptureRef, o: Partial<Outcome> = {}): Outcome => fakeOutcome(t, { timing: { medianUs: 10, samplesUs: times(10) }, ...o });

/** Runners that answer with `f`; `calls` counts every capture handed out, `opened` every worker started. */
function fakeWorkers(f: (t: CaptureRef, n: number) => Outcome | Promise<Outcome>) {
  const calls: string[] = [];
  const opened: (string | null)[] = [];
  const open: OpenRunner = (_slot, gpu) => {
    opened.push(gpu);
    return { run: async (t) => (calls.push(t.id), f(t, calls.length)), kill() {}, close: async () => {} };
  };
  return { calls, opened, open: () => open };
}

const options = checkOptions;

describe("discovery", () => {
  test("nested folders, a packed archive; junk, temps and a link loop passed over; identities from the root's name", async () => {
    const root = await corpus();
    const d = await discoverCaptures([root]);
    expect(d.captures.map((c) => [c.id, c.kind])).toEqual([
      ["corpus/a/one", "folder"],
      ["corpus/a/two", "folder"],
      ["corpus/b", "archive"],
    ]);
    expect(d.passedOver.map((p) => p.path)).toEqual([join(root, "other.zip")]);
    // the same corpus elsewhere (another node's mount point) gives the same identities
    const copy = join(tempDir(), "corpus");
    require("node:fs").cpSync(root, copy, { recursive: true, verbatimSymlinks: true });
    expect((await discoverCaptures([copy])).captures.map((c) => c.id)).toEqual(d.captures.map((c) => c.id));
  });
  test("a symbolic link in the corpus is followed when it is the user's own (or root's), passed over, named, when another user's (trial 15: a link in a shared corpus led into the user's private folder)", async () => {
    const root = await corpus();
    const privateFolder = join(tempDir(), "private");
    await makeCapture(join(privateFolder, "secret"));
    symlinkSync(privateFolder, join(root, "mine"));
    const own = await discoverCaptures([root]);
    expect(own.captures.map((c) => c.id)).toContain("corpus/mine/secret");
    const me = process.geteuid?.() ?? 0;
    if (me === 0) {
      // another user's link (made theirs with lchown, as root may)
      require("node:fs").lchownSync(join(root, "mine"), 4242, 4242);
      const d = await discoverCaptures([root]);
      expect(d.captures.map((c) => c.id)).not.toContain("corpus/mine/secret");
      expect(d.passedOver).toContainEqual({ path: join(root, "mine"), reason: "a symbolic link of another user (uid 4242): not followed" });
    }
  });
  test("an archive of kerncap pack cut short (its central directory gone) is a capture whose check says E_ARCHIVE, not a .zip passed over (trial 8 #7: it dropped out of the suite silently)", async () => {
    const root = await corpus();
    const whole = readFileSync(join(root, "b.zip"));
    writeFileSync(join(root, "cut.zip"), whole.subarray(0, whole.length >> 1));
    const d = await discoverCaptures([root]);
    expect(d.captures).toContainEqual({ id: "corpus/cut", path: join(root, "cut.zip"), kind: "archive" });
    expect(d.passedOver.map((p) => p.path)).toContain(join(root, "other.zip")); // some other .zip still is
    expect((await discoverCaptures([join(root, "cut.zip")])).captures.map((c) => c.id)).toEqual(["cut"]);
    const only = join(tempDir(), "only");
    mkdirSync(only);
    writeFileSync(join(only, "cut.zip"), whole.subarray(0, whole.length >> 1));
    const main = join(import.meta.dir, "../../src/cli/main.ts");
    const p = Bun.spawnSync([process.execPath, main, "check", only, "--results", join(tempDir(), "r"), "--json"], { stdout: "pipe", stderr: "pipe" });
    expect(p.exitCode).toBe(2);
    expect(JSON.parse(p.stdout.toString()).captures[0]).toMatchObject({ id: "only/cut", status: "error", code: "E_ARCHIVE" });
  });
  test("a capture folder or an archive given itself; two captures of one identity refused; a missing root or a stray file is E_NOT_CAPTURE", async () => {
    const root = await corpus();
    const d = await discoverCaptures([join(root, "a/one"), join(root, "b.zip")]);
    expect(d.captures.map((c) => c.id)).toEqual(["b", "one"]);
    expect((await discoverCaptures([join(root, "a/one"), root + "/a/../a/one"])).captures.length).toBe(1); // one folder given twice: one capture
    await makeCapture(join(root, "../elsewhere/one"));
    const e = await discoverCaptures([join(root, "a/one"), join(root, "../elsewhere/one")]).catch((x) => x);
    expect(e).toBeInstanceOf(KerncapError);
    expect(e.message).toContain("have one identity, one");
    const gone = await discoverCaptures([join(root, "nope")]).catch((x) => x);
    expect(gone.code).toBe("E_NOT_CAPTURE"); // as every verb says a path that is no capture (nu #4)
    const junk = await discoverCaptures([join(root, "notes.txt")]).catch((x) => x);
    expect(junk.code).toBe("E_NOT_CAPTURE");
    expect(junk.message).toContain("neither a folder nor an archive");
  });
});

describe("copies of one identity in a shared corpus (trial 20: another user's NAME.zip beside the user's NAME/ stopped the whole check)", () => {
  test.skipIf(process.geteuid?.() !== 0)(
    "another user's copy is passed over with a warning naming it (escaped), the user's own checked; two of one owner stay refused",
    async () => {
      const root = join(tempDir(), "corpus");
      await makeCapture(join(root, "vcap"));
      const other = join(tempDir(), "x");
      await makeCapture(other);
      const zip = join(root, "vcap.zip");
      await packCapture(other, zip);
      // two copies of the user's own: refused as before
      const same = await discoverCaptures([root]).catch((x) => x);
      expect(same).toBeInstanceOf(KerncapError);
      expect(same.message).toContain("have one identity, corpus/vcap");
      chownSync(zip, 4242, 4242); // the attacker's drop
      const d = await discoverCaptures([root]);
      expect(d.captures).toEqual([{ id: "corpus/vcap", path: join(root, "vcap"), kind: "folder" }]);
      expect(d.passedOver).toContainEqual({
        path: zip,
        reason: `it has the identity corpus/vcap of your own ${join(root, "vcap")}, and belongs to another user (uid 4242): yours is checked`,
        warn: true,
      });
      // the CLI goes on: the warning on stderr (a name with escapes shown escaped), the capture checked (E_NO_GPU here, no identity refusal)
      const odd = join(root, "e\x1b]0;PWN\x07x");
      await makeCapture(odd);
      const oddZip = `${odd}.zip`;
      await packCapture(other, oddZip);
      chownSync(oddZip, 4242, 4242);
      const { err } = await stderrOf(() => runCli(["check", root, "--results", join(tempDir(), "r"), "--print-summary", "none"]));
      expect(err).not.toContain("have one identity");
      expect(err).toContain(`passed over ${zip}: it has the identity corpus/vcap of your own`);
      expect(err).toContain("belongs to another user (uid 4242)");
      expect(err).not.toContain("\x1b]0;PWN");
      expect(err).toContain("2 captures could not be checked");
      // a newline in another user's folder name stays in its line (adversary 46: a forged "[kerncap] ✔" line after it)
      const forged = join(root, "zz\n[kerncap] ✔ all verified");
      await makeCapture(forged);
      await packCapture(other, `${forged}.zip`);
      chownSync(`${forged}.zip`, 4242, 4242);
      const nl = await stderrOf(() => runCli(["check", root, "--results", join(tempDir(), "r2"), "--print-summary", "none"]));
      expect(nl.err).toContain("passed over");
      expect(nl.err).not.toContain("\n[kerncap] ✔ all verified");
      // two copies of another user's (none of the user's): both passed over with a warning, nothing of the user's stopped (trial 23)
      chownSync(join(root, "vcap"), 4242, 4242);
      chownSync(zip, 4343, 4343);
      const theirs = await discoverCaptures([root]);
      expect(theirs.captures.map((c) => c.id)).not.toContain("corpus/vcap");
      expect(theirs.captures.map((c) => c.id)).toContain(`corpus/${basename(odd)}`);
      expect(theirs.passedOver.filter((p) => p.reason.includes("captures of other users have its identity corpus/vcap"))).toHaveLength(2);
    },
    60_000,
  );

  test.skipIf(process.geteuid?.() !== 0)(
    "another user's kerncap.json at the root of a shared corpus (or in any folder above yours) is their capture, not a wall: your captures below it are still found (trial 23)",
    async () => {
      const root = join(tempDir(), "corpus");
      await makeCapture(join(root, "mine"));
      await makeCapture(join(root, "deep/mine2"));
      const other = join(tempDir(), "x");
      await makeCapture(other);
      for (const f of readdirSync(other)) cpSync(join(other, f), join(root, f), { recursive: true });
      // yours: the root's kerncap.json holds the folder, as before
      expect((await discoverCaptures([root])).captures.map((c) => c.id)).toEqual(["corpus"]);
      // the attacker's: their capture is checked, and so is every capture of yours below it
      for (const f of readdirSync(other)) chownSync(join(root, f), 4242, 4242);
      const d = await discoverCaptures([root]);
      expect(d.captures.map((c) => c.id)).toEqual(["corpus", "corpus/deep/mine2", "corpus/mine"]);
      // their folders inside it are their capture's, not walked
      mkdirSync(join(root, "theirs"));
      await makeCapture(join(root, "theirs/c"));
      chownSync(join(root, "theirs"), 4242, 4242);
      expect((await discoverCaptures([root])).captures.map((c) => c.id)).not.toContain("corpus/theirs/c");
    },
    60_000,
  );
});

describe("shards", () => {
  const ids = Array.from({ length: 2000 }, (_, i) => `prod/model-${i % 37}/kernel-${i}`);
  test("every capture in exactly one shard; the same one whatever the order or the rest of the corpus", () => {
    for (const n of [1, 2, 3, 8]) {
      const shards = ids.map((id) => shardOf(id, n));
      expect(shards.every((s) => s >= 0 && s < n)).toBe(true);
      // independent of the list: the shard of each id alone, and of the ids in reverse
      expect([...ids].reverse().map((id) => shardOf(id, n))).toEqual([...shards].reverse());
    }
    expect(shardOf("corpus/a/one", 4)).toBe(shardOf("corpus/a/one", 4));
  });
  test("balanced: each of 8 shards holds 2000/8 ± 20%", () => {
    const counts = new Array(8).fill(0);
    for (const id of ids) counts[shardOf(id, 8)]++;
    for (const c of counts) expect(Math.abs(c - 250)).toBeLessThan(50);
  });
  test("K/N parsed; K ≥ N, N = 0 and other text refused", () => {
    expect(parseShard("3/8")).toEqual({ index: 3, count: 8 });
    for (const bad of ["8/8", "1/0", "a/b", "2", "-1/4"]) expect(() => parseShard(bad)).toThrow(KerncapError);
  });
});

describe("the timing decision", () => {
  test("50% slower: slower; 3% slower within ±2% noise: same; 30% faster: faster; no baseline; too few runs", () => {
    const base = times(10);
    const slow = judgeTime(times(15), base, 10);
    expect(slow.verdict).toBe("slower");
    expect(slow.ratio!).toBeCloseTo(1.5, 2);
    expect(slow.low!).toBeGreaterThan(1.1);
    expect(slow.reason).toContain("1.50×");
    expect(judgeTime(times(10.3), base, 10).verdict).toBe("same");
    expect(judgeTime(times(7), base, 10).verdict).toBe("faster");
    expect(judgeTime(times(10), undefined, 10).verdict).toBe("no-baseline");
    expect(judgeTime(times(15, 4), base, 10).verdict).toBe("too-few-runs");
    // a noisy kernel: a 15% shift whose interval reaches below +10% is not called slower
    const noisy = (us: number) => Array.from({ length: 10 }, (_, i) => us * (0.7 + 0.06 * i));
    expect(judgeTime(noisy(11.5), noisy(10), 10).verdict).toBe("same");
  });
});

/** A structural check of JUnit XML against the common junit-10 XSD's required parts, through python3's xml.etree. */
function junitStructure(xml: string): {
  suites: Record<string, string>;
  cases: { attrs: Record<string, string>; children: { tag: string; attrs: Record<string, string>; text: string }[] }[];
} {
  const py = `
import json, sys, xml.etree.ElementTree as ET
root = ET.fromstring(sys.stdin.buffer.read())
assert root.tag == "testsuites", root.tag
suites = list(root)
assert len(suites) == 1 and suites[0].tag == "testsuite"
s = suites[0]
for a in ("name", "tests", "failures", "errors", "skipped", "time", "timestamp", "hostname"):
    assert a in s.attrib, a
cases = []
for el in s:
    assert el.tag in ("properties", "testcase", "system-out", "system-err"), el.tag
    if el.tag != "testcase":
        continue
    for a in ("classname", "name", "time"):
        assert a in el.attrib, a
    float(el.attrib["time"])
    kids = []
    for k in el:
        assert k.tag in ("failure", "error", "skipped", "system-out", "system-err"), k.tag
        if k.tag in ("failure", "error"):
            assert "message" in k.attrib and "type" in k.attrib
        kids.append({"tag": k.tag, "attrs": k.attrib, "text": k.text or ""})
    assert sum(k["tag"] in ("failure", "error", "skipped") for k in kids) <= 1
    cases.append({"attrs": el.attrib, "children": kids})
n = lambda t: sum(any(k["tag"] == t for k in c["children"]) for c in cases)
assert int(s.attrib["tests"]) == len(cases)
assert int(s.attrib["failures"]) == n("failure") and int(s.attrib["errors"]) == n("error") and int(s.attrib["skipped"]) == n("skipped")
print(json.dumps({"suites": s.attrib, "cases": cases}))
`;
  const p = Bun.spawnSync(["python3", "-c", py], { stdin: Buffer.from(xml) });
  if (p.exitCode !== 0) throw new Error(`not valid JUnit: ${p.stderr.toString()}`);
  return JSON.parse(p.stdout.toString());
}

function record(id: string, status: CheckRecord["status"], o: Partial<CheckRecord> = {}): CheckRecord {
  const t: CaptureRef = { id, path: `/c/${id}`, kind: "folder" };
  return { ...outcome(t), status, time: null, worker: 0, gpu: null, ...o };
}

describe("the end of a check with errors", () => {
  /** A record of status `status` (error: with `code`). */
  const rec = (id: string, status: CheckRecord["status"], code: string | null = null) => ({ id, status, code }) as unknown as CheckRecord;
  test("the count line: no 'checked' and no time when none was (trial nu5: '6 captures checked (0.0 s of checks): 6 error'); errors counted in the plural", () => {
    const six = [...["a", "b", "c", "d", "e"].map((x) => rec(x, "error", "E_NO_GPU")), rec("f", "error", "E_CHECKSUM")];
    expect(summaryTable(six, 0, "none")).toBe("6 captures: 6 errors");
    expect(summaryTable([rec("a", "error", "E_NO_GPU")], 0, "none")).toBe("1 capture: 1 error");
    expect(summaryTable([rec("a", "error", "E_NO_GPU"), rec("b", "skipped", "E_ARCH")], 0, "none")).toBe("2 captures: 1 error, 1 skipped");
    expect(summaryTable([rec("a", "error", "E_NO_GPU"), rec("b", "error", "E_NO_GPU"), rec("c", "ok")], 1, "none")).toBe(
      "3 captures checked (1.0 s of checks): 2 errors, 1 ok",
    );
  });
  test("no GPU: the machine's message once above the table, each row (progress line and table) 'no GPU (E_NO_GPU)', after its --rebuild's build", () => {
    const msg = "no NVIDIA driver: libcuda could not be loaded; tried libcuda.so.1, libcuda.so: cannot open shared object file";
    const rs = [
      record("c/a", "error", { code: "E_NO_GPU", reason: msg, kernel: "k" }),
      record("c/b", "error", { code: "E_NO_GPU", reason: `rebuilt by the pruned TU in 0.20 s (it compiles)${NOT_REPLAYED}${msg}`, kernel: "k" }),
      record("c/c", "error", { code: "E_CHECKSUM", reason: "kernel/params.bin: checksum mismatch", kernel: "k" }),
    ];
    const table = summaryTable(rs, 0);
    expect(table.split(msg).length - 1).toBe(1); // said once
    const lines = table.split("\n");
    expect(lines[0]).toBe(`no GPU here (E_NO_GPU, 2 captures): ${msg}`);
    expect(lines[1]).toStartWith("STATUS");
    expect(recordLine(rs[0]!)).toEndWith("c/a  k — no GPU (E_NO_GPU)");
    expect(recordLine(rs[1]!)).toEndWith("c/b  k — rebuilt by the pruned TU in 0.20 s (it compiles); not replayed: no GPU (E_NO_GPU)");
    expect(recordLine(rs[2]!)).toEndWith("c/c  k — kernel/params.bin: checksum mismatch"); // another error keeps its reason
    expect(summaryTable([rs[2]!], 0)).not.toContain("no GPU here");
  });
  test("a received capture's refusal: each row (progress line, table, JUnit message) its short words, the whole reason once in the record and the JUnit element (nu16 #14)", () => {
    const long = `c/r is a received capture (it was unpacked from an archive): what its build runs (build.sh: printed on stderr; the digest of all of it: sha256 ${"a".repeat(64)}) and what it compiles would run with your rights, so kerncap runs it only once you pass --trust`;
    const r = record("c/r", "error", { code: "E_UNTRUSTED", reason: long, kernel: "k" });
    expect(recordLine(r)).toEndWith(
      "c/r  k — received: its build runs only after --trust (the record's reason names what it runs and its digest) (E_UNTRUSTED)",
    );
    expect(summaryTable([r], 0)).not.toContain("is a received capture");
    const xml = junitXml([r], { seconds: 1 });
    expect(xml.split("is a received capture").length - 1).toBe(1); // the element's text, not the message attribute too
    expect(xml).toContain('message="received: its build runs only after --trust');
  });
  test("errors counted by code, most first, each with its next step: E_NO_GPU → the GPU's machine and --resume; E_CHECKSUM → capture again or restore; E_UNTRUSTED → --trust; others → the code's hint", () => {
    const six = [...["a", "b", "c", "d", "e"].map((x) => rec(`m2/${x}`, "error", "E_NO_GPU")), rec("m2/broken", "error", "E_CHECKSUM")];
    const { line, steps } = errorSummary(six, "run");
    expect(line).toBe("6 of 6 captures could not be checked: 5 E_NO_GPU, 1 E_CHECKSUM");
    expect(steps).toHaveLength(2);
    expect(steps[0]).toStartWith("E_NO_GPU (5): no GPU here");
    expect(steps[0]).toContain("on a machine with the captures' GPU and driver, the same command with --resume checks them again, and only them");
    expect(steps[0]).toContain("here, kerncap check --rebuild --build-only checks that they build, with no GPU"); // nu83 #8: what works here
    expect(steps[1]).toStartWith("E_CHECKSUM (1: m2/broken): the capture is damaged");
    expect(steps[1]).toContain("capture it again or restore it from a copy");
    const single = errorSummary([rec("one", "error", "E_NO_GPU")], "run");
    expect(single.line).toBe("1 of 1 capture could not be checked: 1 E_NO_GPU");
    expect(single.steps[0]).toContain("with the capture's GPU and driver, the same command with --resume checks it again, and only it");
    const mixed = errorSummary(
      [
        rec("r", "error", "E_UNTRUSTED"),
        rec("b", "error", "E_BUILD"),
        rec("ok", "ok"),
        rec("x", "error", "E_X\u001b[31m"),
        ...["1", "2", "3", "4"].map((x) => rec(x, "error", "E_CHECKSUM")),
      ],
      "merge",
    );
    expect(mixed.line).toBe("7 of 8 captures could not be checked: 4 E_CHECKSUM, 1 E_BUILD, 1 E_UNTRUSTED, 1 E_X\\x1b[31m");
    expect(mixed.steps[0]).toStartWith("E_CHECKSUM (4: 1, 2, 3 and 1 more): the captures are damaged");
    expect(mixed.steps[0]).toEndWith("their shards' commands with --resume check them again");
    expect(mixed.steps[1]).toBe(`E_BUILD (1: b): ${ERROR_CODES.E_BUILD.hint}`);
    expect(mixed.steps[2]).toContain("if you trust it, its shard's command with --trust --resume checks it again");
    expect(mixed.steps[2]).toContain(
      "where plain --trust is not enough (another user's capture, a folder others write, a build.sh of its own), run kerncap validate DIR --trust=DIGEST",
    ); // trial 11: the hint looped
    expect(mixed.steps[3]).not.toContain("\u001b"); // a code from someone's results file, escaped
  });
  test("the verb: the error line by code and one next step per code, on stderr", async () => {
    const root = join(tempDir(), "corpus");
    mkdirSync(root);
    const { dir } = writeDemo(join(root, "broken"), false);
    appendFileSync(join(dir, "kernel/params.bin"), "x");
    const results = join(tempDir(), "r");
    const { value, err } = await stderrOf(() => runCli(["check", root, "--results", results, "--print-summary", "none"]));
    expect(value).toBe(2);
    expect(err).toContain(`results: ${join(results, "results.jsonl")} (--resume reads them`); // where the records went, said
    expect(existsSync(join(results, "results.jsonl"))).toBe(true);
    expect(err).toContain("1 of 1 capture could not be checked: 1 E_CHECKSUM");
    expect(err).toContain("E_CHECKSUM (1: corpus/broken): the capture is damaged");
    expect(err).not.toContain("captures could not be checked");
  });
});

describe("JUnit XML", () => {
  test("no GPU: the error's message is the row's short reason, its text the machine's whole message once; a rebuild by the pruned TU is named so", () => {
    const msg = "no NVIDIA driver: libcuda could not be loaded; tried libcuda.so.1";
    const r = record("c/a", "error", {
      code: "E_NO_GPU",
      reason: `rebuilt by the pruned TU in 0.20 s (it compiles)${NOT_REPLAYED}${msg}`,
      rebuild: { builder: "pruned", seconds: 0.2, targetArch: null },
    });
    const xml = junitXml([r], { seconds: 1 });
    expect(xml.split(msg).length - 1).toBe(1);
    const e = junitStructure(xml).cases[0]!.children.find((c) => c.tag === "error")!;
    expect(e.attrs.message).toBe("rebuilt by the pruned TU in 0.20 s (it compiles); not replayed: no GPU (E_NO_GPU)");
    expect(e.text).toBe(r.reason!);
    expect(junitStructure(xml).cases[0]!.children.find((c) => c.tag === "system-out")!.text).toContain("rebuilt by the pruned TU in 0.20 s");
  });
  test("escaping: markup, quotes, control characters and a lone surrogate leave a well-formed file with the same text", () => {
    expect(xmlEscape(`a<b>&"c'`)).toBe("a&lt;b&gt;&amp;&quot;c&apos;");
    expect(xmlEscape("x\x01y\uD800z\n", true)).toBe("x\\x01y\\ud800z&#10;");
    expect(xmlEscape("ok \u{1F600}")).toBe("ok \u{1F600}"); // a surrogate pair is one character, kept
    const nasty = `template<int N> k<&"quoted"'> \x1b[31mred\x1b[0m \x00`;
    const xml = junitXml([record("c/mm", "mismatch", { kernel: nasty, reason: `region 0x7f00 <differs> & "more"\nsecond line` })], {
      seconds: 1,
      timestamp: "2026-12-01T00:00:00",
      hostname: "node<1>",
    });
    const s = junitStructure(xml);
    expect(s.suites.hostname).toBe("node<1>");
    const f = s.cases[0]!.children.find((c) => c.tag === "failure")!;
    expect(f.attrs.message).toBe(`mismatch: region 0x7f00 <differs> & "more"\nsecond line`);
    expect(s.cases[0]!.children.find((c) => c.tag === "system-out")!.text).toContain('template<int N> k<&"quoted"\'> \\x1b[31mred');
  });
  test("structure: failure for mismatch and slower, error, skipped with its reason; counts agree", () => {
    const slower = record("prod/attn/softmax", "slower", {
      time: { verdict: "slower", ratio: 1.5, low: 1.3, high: 1.7, baselineMedianUs: 10, slowerPct: 10, reason: "1.50× the baseline's 10.0 µs" },
    });
    const rs = [
      record("prod/attn/ok", "ok"),
      record("prod/mm", "mismatch", { reason: "1 of 2 regions differ" }),
      slower,
      record("e", "error", { code: "E_CHECKSUM", reason: "checksum mismatch" }),
      record("s", "skipped", { reason: "captured on sm_90, this GPU is sm_100" }),
    ];
    const s = junitStructure(junitXml(rs, { seconds: 2.5 }));
    expect(s.suites).toMatchObject({ tests: "5", failures: "2", errors: "1", skipped: "1", time: "2.500" });
    const byName = Object.fromEntries(s.cases.map((c) => [`${c.attrs.classname}.${c.attrs.name}`, c.children.map((k) => k.tag)]));
    expect(byName).toEqual({
      "prod.attn.ok": ["system-out"],
      "prod.mm": ["failure", "system-out"],
      "prod.attn.softmax": ["failure", "system-out"],
      "kerncap.e": ["error", "system-out"],
      "kerncap.s": ["skipped", "system-out"],
    });
    expect(s.cases[2]!.children[0]!.attrs).toMatchObject({ type: "slower" });
    expect(s.cases[3]!.children[0]!.attrs).toMatchObject({ type: "E_CHECKSUM", message: "checksum mismatch" });
    expect(s.cases[4]!.children[0]!.attrs.message).toBe("captured on sm_90, this GPU is sm_100");
  });
});

describe("results file", () => {
  test("a file under the results file's name that others may write, or (as root) another user owns, is refused at the open: nothing appended (adversary 73: linked in after the name was checked)", () => {
    const dir = tempDir();
    const path = join(dir, "res.jsonl");
    writeFileSync(path, "theirs\n");
    chmodSync(path, 0o666); // the attacker's own file, hard-linked in under the name
    for (const o of [{ resume: false }, { resume: true }]) {
      let e: unknown;
      try {
        RecordLog.openKind(path, EVAL_RECORDS, o);
      } catch (x) {
        e = x;
      }
      expect(e instanceof KerncapError && e.code).toBe("E_UNSAFE_PATH");
      expect(String((e as Error).message)).toContain("can be written by others");
    }
    if (process.geteuid?.() === 0) {
      chmodSync(path, 0o644);
      chownSync(path, 65534, 65534);
      expect(() => RecordLog.openKind(path, EVAL_RECORDS, { resume: false })).toThrow(/belongs to another user/);
    }
    expect(readFileSync(path, "utf8")).toBe("theirs\n");
    // the user's own file, as eval makes it: opened
    const own = join(dir, "own.jsonl");
    RecordLog.openKind(own, EVAL_RECORDS, { resume: false }).log.close();
    expect(existsSync(own)).toBe(true);
  });

  test("a kernel name with C1 controls, bidi overrides and zero-width characters is written escaped (\\uNNNN) and reads back the same, its record's authentication intact (adversary 38: raw in results.jsonl, shown by cat)", () => {
    const dir = tempDir();
    const path = join(dir, "results.jsonl");
    const nasty = "k\u009b31m\u202eexe\u200b\u2028end";
    const { log } = ResultsLog.open(path, { resume: false, previous: join(dir, "prev.jsonl") });
    log.append(record("a", "ok", { kernel: nasty }));
    log.close();
    const text = readFileSync(path, "utf8");
    expect(text).not.toMatch(/[\u0080-\u009f\u200b\u202e\u2028]/);
    expect(text).toContain("\\u009b31m\\u202eexe\\u200b\\u2028end");
    const again = ResultsLog.open(path, { resume: true, previous: join(dir, "prev.jsonl") });
    again.log.close();
    expect(again.kept.map((r) => r.kernel)).toEqual([nasty]);
  });

  test("a last line cut short by a kill is dropped and cut off; a damaged line before the last is an error naming it", () => {
    const dir = tempDir();
    const path = join(dir, "results.jsonl");
    const { log } = ResultsLog.open(path, { resume: false, previous: join(dir, "prev.jsonl") });
    log.append(record("a", "ok"));
    log.append(record("b", "mismatch", { verdict: "mismatch" })); // as check writes it: the status follows from the verdict
    log.close();
    const whole = readFileSync(path, "utf8");
    appendFileSync(path, whole.split("\n")[0]!.slice(0, 57)); // the kill came mid-write
    const r = parseResults(path, readFileSync(path, "utf8"));
    expect(r.records.map((x) => x.id)).toEqual(["a", "b"]);
    expect(r.truncated).toBe(true);
    expect(r.validBytes).toBe(Buffer.byteLength(whole));
    const again = ResultsLog.open(path, { resume: true, previous: join(dir, "prev.jsonl") });
    again.log.append(record("c", "ok"));
    again.log.close();
    expect(parseResults(path, readFileSync(path, "utf8"))).toMatchObject({ truncated: false, records: [{ id: "a" }, { id: "b" }, { id: "c" }] });
    const lines = readFileSync(path, "utf8").split("\n");
    writeFileSync(path, [lines[0], "{ not json", lines[2], ""].join("\n"));
    expect(() => parseResults(path, readFileSync(path, "utf8"))).toThrow(/results\.jsonl, line 2/);
    // a last line that does not begin as a record does (a one-line file of something else: a settings file, a note) is no
    // cut record: refused, never dropped and written over (adversary 28); so is one of another kind's records
    for (const other of ['{"important":"the user config, one line, no final newline"}', "[[[[", '{"schema":"kerncap.eval-record/1","candidate":"x"']) {
      writeFileSync(path, other);
      expect(() => parseResults(path, other)).toThrow(
        /results\.jsonl, line 1: .*does not begin as a kerncap\.check-record\/1 record that a kill cut short would/,
      );
    }
    // any beginning of a record's own start is one, however short the kill left it
    for (const cut of ["{", '{"sche', '{"schema":"kerncap.check-record/1"', '{"schema":"kerncap.check-record/1","id":"x"'])
      expect(parseResults(path, cut)).toMatchObject({ records: [], truncated: true, validBytes: 0 });
  });
});

describe("a check with fake workers", () => {
  test("first check records the baseline; the next one times against it: a 50% slower kernel fails (exit 1) and JUnit says so", async () => {
    const root = await corpus();
    const results = join(tempDir(), "res");
    const first = fakeWorkers((t) => outcome(t));
    const r1 = await runCheck(options([root], results, first.open));
    expect(r1.exitCode).toBe(0);
    expect(r1.captures.map((c) => c.time?.verdict)).toEqual(["no-baseline", "no-baseline", "no-baseline"]);
    expect(Object.keys(readBaseline(join(results, "baseline.json")).captures).sort()).toEqual(["corpus/a/one", "corpus/a/two", "corpus/b"]);
    const junit = join(results, "j.xml");
    const second = fakeWorkers((t) => outcome(t, t.id === "corpus/a/two" ? { timing: { medianUs: 15, samplesUs: times(15) } } : {}));
    const r2 = await runCheck(options([root], results, second.open, { junit }));
    expect(r2.exitCode).toBe(1);
    expect(r2.captures[0]).toMatchObject({ id: "corpus/a/two", status: "slower", time: { verdict: "slower" } });
    expect(r2.captures.slice(1).map((c) => c.status)).toEqual(["ok", "ok"]);
    expect(existsSync(join(results, "results.previous.jsonl"))).toBe(true); // the first run's, kept
    const s = junitStructure(readFileSync(junit, "utf8"));
    expect(s.suites).toMatchObject({ tests: "3", failures: "1" });
    // the default baseline keeps the first check's times: the slow run did not replace them
    expect(readBaseline(join(results, "baseline.json")).captures["corpus/a/two"]!.medianUs).toBe(10);
    // --baseline FILE is only read; --write-baseline writes this run's
    const wb = join(results, "new-baseline.json");
    await runCheck(options([root], results, second.open, { baseline: join(results, "baseline.json"), writeBaseline: wb }));
    expect(readBaseline(wb).captures["corpus/a/two"]!.medianUs).toBe(15);
    expect(v.safeParse(DOCUMENTS.check, { schema: "kerncap.check/1", ...r2 }).success).toBe(true);
  });
  test("exit codes: a mismatch 1, an error alone 2, skipped 0; a baseline on another GPU is not compared", async () => {
    const root = await corpus();
    const run = async (f: (t: CaptureRef) => Outcome) => (await runCheck(options([root], join(tempDir(), "r"), fakeWorkers(f).open))).exitCode;
    expect(await run((t) => outcome(t, t.id.endsWith("one") ? { verdict: "mismatch", numerics: "mismatch", reason: "differs" } : {}))).toBe(1);
    expect(await run((t) => outcome(t, t.id.endsWith("one") ? { outcome: "error", verdict: null, code: "E_CHECKSUM", reason: "damaged" } : {}))).toBe(2);
    expect(await run((t) => outcome(t, t.id.endsWith("one") ? { outcome: "skipped", verdict: null, code: "E_ARCH", reason: "sm_100" } : {}))).toBe(0);
    const results = join(tempDir(), "r");
    await runCheck(options([root], results, fakeWorkers((t) => outcome(t)).open));
    const other = await runCheck(
      options(
        [root],
        results,
        fakeWorkers((t) => outcome(t, { device: { name: "NVIDIA B200", arch: "sm_100" }, timing: { medianUs: 30, samplesUs: times(30) } })).open,
      ),
    );
    expect(other.exitCode).toBe(0);
    expect(other.captures[0]!.time).toMatchObject({ verdict: "not-comparable" });
  });
  test("--flush-l2: a baseline timed warm is not compared with a flushed run (nor the other way); one recorded flushed says so and is compared with flushed runs", async () => {
    const root = await corpus();
    const results = join(tempDir(), "r");
    await runCheck(options([root], results, fakeWorkers((t) => outcome(t)).open)); // warm: the default baseline
    const flushed = (medianUs: number) => fakeWorkers((t) => outcome(t, { timing: { medianUs, samplesUs: times(medianUs), l2: "flushed" } })).open;
    // flushed times are longer: against the warm baseline they would all be "slower"
    const r = await runCheck(options([root], results, flushed(30)));
    expect(r.exitCode).toBe(0);
    expect(r.captures.map((c) => c.time?.verdict)).toEqual(["not-comparable", "not-comparable", "not-comparable"]);
    expect(r.captures[0]!.time!.reason).toBe(
      "the baseline was timed with L2 warm, this run with L2 flushed (--flush-l2): compare with a baseline timed the same way (--baseline FILE, or another --results folder)",
    );
    // a baseline of flushed runs records it (read back through its schema) and compares flushed runs only
    const fb = join(results, "flushed-baseline.json");
    await runCheck(options([root], results, flushed(30), { baseline: join(results, "baseline.json"), writeBaseline: fb }));
    expect(readBaseline(fb).captures["corpus/b"]).toMatchObject({ medianUs: 30, l2: "flushed" });
    const again = await runCheck(options([root], results, flushed(30), { baseline: fb }));
    expect(again.captures.map((c) => c.time?.verdict)).toEqual(["same", "same", "same"]);
    const warm = await runCheck(options([root], results, fakeWorkers((t) => outcome(t)).open, { baseline: fb }));
    expect(warm.captures[0]!.time).toMatchObject({
      verdict: "not-comparable",
      reason: expect.stringContaining("timed with L2 flushed (--flush-l2), this run with L2 warm"),
    });
  });
  test("--resume after a kill: the finished captures are not checked again, the cut line is dropped", async () => {
    const root = await corpus();
    const results = join(tempDir(), "res");
    const all = await runCheck(options([root], results, fakeWorkers((t) => outcome(t)).open));
    const path = join(results, "results.jsonl");
    const lines = readFileSync(path, "utf8").split("\n");
    // as a SIGKILL during the third capture's record would leave it
    writeFileSync(path, lines.slice(0, 1).join("\n") + "\n" + lines[1]!.slice(0, 40));
    const again = fakeWorkers((t) => outcome(t));
    const r = await runCheck(options([root], results, again.open, { resume: true }));
    expect(again.calls).toEqual(
      all.captures
        .map((c) => c.id)
        .sort()
        .slice(1),
    );
    expect(r.captures.map((c) => c.id).sort()).toEqual(all.captures.map((c) => c.id).sort());
    expect(parseResults(path, readFileSync(path, "utf8"))).toMatchObject({ truncated: false });
    expect(parseResults(path, readFileSync(path, "utf8")).records.length).toBe(3);
  });
  test("a worker that dies: that capture's error, a new worker for the rest; --resume checks it again", async () => {
    const root = await corpus();
    const results = join(tempDir(), "res");
    const w = fakeWorkers((t, n) => {
      if (n === 2) throw new Error("the worker process ended (SIGSEGV)");
      return outcome(t);
    });
    const r = await runCheck(options([root], results, w.open));
    expect(r.exitCode).toBe(2);
    expect(r.captures[0]).toMatchObject({ status: "error", code: "E_WORKER", reason: "the worker process ended (SIGSEGV)" });
    expect(w.opened.length).toBe(2);
    const again = fakeWorkers((t) => outcome(t));
    expect((await runCheck(options([root], results, again.open, { resume: true }))).exitCode).toBe(0);
    expect(again.calls).toEqual([r.captures[0]!.id]);
  });
  test("--resume checks again every capture that ended in an error (no GPU then), not those with a verdict", async () => {
    const root = await corpus();
    const results = join(tempDir(), "res");
    const first = fakeWorkers((t) =>
      t.id === "corpus/b"
        ? outcome(t)
        : outcome(t, { outcome: "error", verdict: null, numerics: null, code: "E_NO_GPU", reason: "no NVIDIA driver", timing: null }),
    );
    expect((await runCheck(options([root], results, first.open))).exitCode).toBe(2);
    const again = fakeWorkers((t) => outcome(t));
    const { value: r, err } = await stderrOf(() => runCheck(options([root], results, again.open, { resume: true })));
    expect(again.calls.sort()).toEqual(["corpus/a/one", "corpus/a/two"]);
    expect(r.exitCode).toBe(0);
    expect(err).toContain("1 capture already checked, 2 captures that ended in an error checked again"); // one, not "1 captures"
  });
  test("--resume counts captures, not records: a capture that ended in an error at each of three runs is one capture checked again (trial 7 #9)", async () => {
    const root = await corpus();
    const results = join(tempDir(), "res");
    const failing = () =>
      fakeWorkers((t) =>
        t.id === "corpus/b"
          ? outcome(t)
          : outcome(t, { outcome: "error", verdict: null, numerics: null, code: "E_NO_GPU", reason: "no NVIDIA driver", timing: null }),
      );
    expect((await runCheck(options([root], results, failing().open))).exitCode).toBe(2);
    expect((await runCheck(options([root], results, failing().open, { resume: true }))).exitCode).toBe(2);
    expect((await runCheck(options([root], results, failing().open, { resume: true }))).exitCode).toBe(2);
    const again = fakeWorkers((t) => outcome(t));
    const { err } = await stderrOf(() => runCheck(options([root], results, again.open, { resume: true })));
    expect(err).toContain("1 capture already checked, 2 captures that ended in an error checked again");
  });
  test("--resume takes a record only of the capture's subject now (adv22 #1: a genuine ok record of this capture before its src/ broke, or of another capture under its id, was taken): changed src/ with --rebuild, another capture, other options, no subject: checked again, each said", async () => {
    const root = join(tempDir(), "corpus");
    await makeCapture(join(root, "b"));
    mkdirSync(join(root, "b/src"), { recursive: true });
    writeFileSync(join(root, "b/src/k.cu"), "__global__ void k() {}\n");
    const results = join(tempDir(), "res");
    const rebuild = { settings: { ...SETTINGS, rebuild: true } };
    await runCheck(options([root], results, fakeWorkers((t) => outcome(t)).open, rebuild));
    const path = join(results, "results.jsonl");
    const written = JSON.parse(readFileSync(path, "utf8")) as CheckRecord;
    expect(written.subject).toMatch(/^[0-9a-f]{64}$/);
    // unchanged: taken, nothing checked
    const same = fakeWorkers((t) => outcome(t));
    expect((await runCheck(options([root], results, same.open, { ...rebuild, resume: true }))).exitCode).toBe(0);
    expect(same.calls).toEqual([]);
    // --trust is not one: it only lets a received capture's build run (refused without it: an error record, checked again
    // anyway), so the refusal's "--trust --resume checks it again, and only it" holds (a new user's finding: all were)
    const trusting = fakeWorkers((t) => outcome(t));
    await runCheck(options([root], results, trusting.open, { settings: { ...SETTINGS, rebuild: true, trust: true }, resume: true }));
    expect(trusting.calls).toEqual([]);
    // its record is the writer's; other options (no --rebuild, a tolerance) are another subject
    for (const o of [{ settings: SETTINGS }, { settings: { ...SETTINGS, rebuild: true, tolerance: { rtol: 0.5 } } }]) {
      writeFileSync(path, sealedLine("check-record", written));
      const other = fakeWorkers((t) => outcome(t));
      await runCheck(options([root], results, other.open, { ...o, resume: true }));
      expect(other.calls).toEqual(["corpus/b"]);
    }
    // src/ changed since (it no longer compiles): checked again, said naming it
    writeFileSync(path, sealedLine("check-record", written));
    writeFileSync(join(root, "b/src/k.cu"), "this is not C++ at all @@@\n");
    const again = fakeWorkers((t) =>
      outcome(t, { outcome: "error", verdict: null, numerics: null, code: "E_BUILD", reason: "the build failed", timing: null }),
    );
    const { value: r, err } = await stderrOf(() => runCheck(options([root], results, again.open, { ...rebuild, resume: true })));
    expect(again.calls).toEqual(["corpus/b"]);
    expect(r.exitCode).toBe(2);
    expect(r.captures).toMatchObject([{ id: "corpus/b", status: "error", code: "E_BUILD" }]);
    expect(err).toContain("corpus/b: its record is of another subject (the capture, its reproducer or the run's options changed since): checked again");
    // another capture under the same identity (another corpus named alike), and a record that names no subject (written before records did)
    const elsewhere = join(tempDir(), "corpus");
    await makeCapture(join(elsewhere, "b"));
    const { subject: _, ...old } = written;
    for (const [dir, line] of [
      [elsewhere, sealedLine("check-record", written)],
      [root, sealedLine("check-record", old)],
    ] as const) {
      writeFileSync(path, line);
      const w = fakeWorkers((t) => outcome(t));
      const { err: said } = await stderrOf(() => runCheck(options([dir], results, w.open, { resume: true, ...(dir === root ? rebuild : {}) })));
      expect(w.calls).toEqual(["corpus/b"]);
      if (dir === root) expect(said).toContain("corpus/b: its record names no subject (written before records did): checked again");
    }
  });
  test("--resume with another --shard than the run began with (or none): refused naming both, nothing checked", async () => {
    const root = await corpus();
    const results = join(tempDir(), "res");
    const first = fakeWorkers((t) => outcome(t));
    const a = await runCheck(options([root], results, first.open, { shard: { index: 0, count: 2 } }));
    expect(a.captures.every((c) => c.shard === "0/2")).toBe(true);
    for (const [shard, want] of [
      [undefined, "holds a run of --shard 0/2; this one is of the whole corpus (no --shard)"],
      [{ index: 1, count: 2 }, "holds a run of --shard 0/2; this one is of --shard 1/2"],
    ] as const) {
      const w = fakeWorkers((t) => outcome(t));
      let e: unknown;
      try {
        await runCheck(options([root], results, w.open, { resume: true, ...(shard ? { shard } : {}) }));
      } catch (x) {
        e = x;
      }
      expect((e as KerncapError).code).toBe("E_USAGE");
      expect((e as KerncapError).message).toContain(want);
      expect(w.calls).toEqual([]);
    }
    // the same shard resumes
    const same = fakeWorkers((t) => outcome(t));
    expect((await runCheck(options([root], results, same.open, { resume: true, shard: { index: 0, count: 2 } }))).exitCode).toBe(0);
  });
  test("nothing checked, nothing left: no capture found, a shard that holds none, an interruption before the first record", async () => {
    const root = await corpus();
    const cwd = tempDir();
    // no capture at all (an empty folder, a missing path): E_NOT_CAPTURE, as clean says it, and no results folder
    const empty = tempDir();
    mkdirSync(join(empty, "deeper"));
    for (const paths of [[empty], [join(root, "missing")], [join(root, "notes.txt")], [empty, join(root, "missing")]]) {
      const e = await runCheck(options(paths, join(cwd, "res"), fakeWorkers((t) => outcome(t)).open)).catch((x) => x);
      expect(e.code, paths[0]).toBe("E_NOT_CAPTURE");
      expect(existsSync(join(cwd, "res")), paths[0]).toBe(false);
    }
    const p = Bun.spawnSync([process.execPath, MAIN, "check", empty], { cwd, stdout: "pipe", stderr: "pipe" });
    expect(p.exitCode).toBe(2);
    expect(readdirSync(cwd)).toEqual([]);
    // a shard that holds none of the captures: no folder made, and a previous run's results stay as they are
    const ids = (await discoverCaptures([root])).captures.map((c) => c.id);
    const count = 16;
    const index = Array.from({ length: count }, (_, k) => k).find((k) => ids.every((id) => shardOf(id, count) !== k))!;
    expect(index).toBeDefined();
    const none = await stderrOf(() =>
      runCheck(options([root], join(cwd, "res"), fakeWorkers((t) => outcome(t)).open, { shard: { index, count }, junit: join(cwd, "j.xml") })),
    );
    expect(none.err).toContain("this shard holds no capture");
    expect(none.value).toMatchObject({ results: null, exitCode: 0, captures: [] });
    expect(existsSync(join(cwd, "res"))).toBe(false);
    expect(junitStructure(readFileSync(join(cwd, "j.xml"), "utf8")).suites).toMatchObject({ tests: "0" });
    const before = join(tempDir(), "res");
    await runCheck(options([root], before, fakeWorkers((t) => outcome(t)).open));
    const kept = readFileSync(join(before, "results.jsonl"), "utf8");
    await stderrOf(() => runCheck(options([root], before, fakeWorkers((t) => outcome(t)).open, { shard: { index, count } })));
    expect(readdirSync(before).sort()).toEqual(["baseline.json", "results.jsonl"]);
    expect(readFileSync(join(before, "results.jsonl"), "utf8")).toBe(kept);
    // interrupted (SIGINT) before any capture finished: the folder it made is gone again
    const stopped = fakeWorkers(async (t) => (process.emit("SIGINT" as never), await Bun.sleep(1), outcome(t)));
    const e = await runCheck(options([root], join(cwd, "res"), stopped.open)).catch((x) => x);
    expect(e).toMatchObject({ code: "E_INTERRUPTED", exitCode: 130 });
    expect(e.message).toContain("interrupted before any of 3 captures was checked: nothing written");
    expect(existsSync(join(cwd, "res"))).toBe(false);
    // interrupted after the first capture, with --junit: the file holds it and every capture left as an error (trial 8 #11: no file at all)
    let n = 0;
    const late = fakeWorkers(async (t) => {
      if (n++ === 1) process.emit("SIGINT" as never);
      await Bun.sleep(1);
      return outcome(t);
    });
    const junit = join(cwd, "int.xml");
    const e2 = await runCheck(options([root], join(cwd, "res2"), late.open, { junit })).catch((x) => x);
    expect(e2).toMatchObject({ code: "E_INTERRUPTED", exitCode: 130 });
    const xml = readFileSync(junit, "utf8");
    const j = junitStructure(xml);
    expect(j.suites).toMatchObject({ tests: "3" });
    expect(Number(j.suites.errors)).toBeGreaterThanOrEqual(1);
    expect(xml).toContain('type="E_INTERRUPTED"');
    expect(xml).toContain("not checked: the run was interrupted (SIGINT); kerncap check --resume continues");
    expect(xml).toContain('<property name="interrupted"');
  });
  test("--gpus 0,0,1: three workers, each capture once; --shard: disjoint shards whose merge is the whole corpus", async () => {
    const root = await corpus();
    const w = fakeWorkers(async (t) => (await Bun.sleep(5), outcome(t)));
    // several workers: their replays' timed launches take turns per GPU, through a private folder of timing windows
    // (src/util/timing-window.ts) made for the run and removed after it; one worker gets none
    const windows: (string | undefined)[] = [];
    const r = await runCheck(
      options([root], join(tempDir(), "r"), w.open, {
        gpus: ["0", "0", "1"],
        open: (_say, timingWindows) => (windows.push(timingWindows), w.open()),
      }),
    );
    expect(windows.length).toBe(1);
    expect(windows[0]).toMatch(/kerncap-timing-\d+-/);
    expect(existsSync(windows[0]!)).toBe(false);
    const one: (string | undefined)[] = [];
    const w1 = fakeWorkers((t) => outcome(t));
    await runCheck(options([root], join(tempDir(), "r1"), w1.open, { gpus: [null], open: (_say, t) => (one.push(t), w1.open()) }));
    expect(one).toEqual([undefined]);
    const m0 = (await import("../../src/format/capture-dir.ts")).openCapture(join(root, "a/one")).manifest;
    const settings = { iters: 20, verify: true, rebuild: false, force: false, trust: false, tolerance: {} };
    expect(checkReplayOptions(m0, { ...settings, timingWindows: tempDir() }, {}).timingWindow).toBeDefined();
    expect(checkReplayOptions(m0, settings, {}).timingWindow).toBeUndefined();
    expect(w.opened.sort()).toEqual(["0", "0", "1"]);
    expect(w.calls.sort()).toEqual(["corpus/a/one", "corpus/a/two", "corpus/b"]);
    expect(r.captures.map((c) => c.gpu).sort()).toEqual(["0", "0", "1"]);
    const files: string[] = [];
    const seen: string[] = [];
    for (let k = 0; k < 3; k++) {
      const res = join(tempDir(), `shard${k}`);
      const s = await runCheck(
        options([root], res, fakeWorkers((t) => outcome(t, t.id === "corpus/b" ? { verdict: "mismatch", reason: "differs" } : {})).open, {
          shard: { index: k, count: 3 },
        }),
      );
      seen.push(...s.captures.map((c) => c.id));
      files.push(join(res, "results.jsonl"));
    }
    expect(seen.sort()).toEqual(["corpus/a/one", "corpus/a/two", "corpus/b"]);
    const junit = join(tempDir(), "all.xml");
    const m = mergeResults(files, { slowerPct: 10, junit });
    expect(m.captures.map((c) => c.id)).toEqual(["corpus/b", "corpus/a/one", "corpus/a/two"]); // the regression first
    expect(m.exitCode).toBe(1);
    expect(junitStructure(readFileSync(junit, "utf8")).suites).toMatchObject({ tests: "3", failures: "1" });
    // a shard of another run (a loose tolerance), every record genuine, is not a shard of this one (adversary 50)
    const k = files.findIndex((f) => existsSync(f) && readFileSync(f, "utf8").includes('"kerncap.check-record/1"'));
    const loose = join(tempDir(), "loose");
    const base = options([root], loose, fakeWorkers((t) => outcome(t)).open);
    await runCheck({ ...base, settings: { ...base.settings, tolerance: { atol: 1e30, rtol: 1e30 } }, shard: { index: k, count: 3 } });
    const mixed = files.map((f, i) => (i === k ? join(loose, "results.jsonl") : f)).filter((f) => existsSync(f));
    expect(() => mergeResults(mixed, { slowerPct: 10 })).toThrow(/hold shards K\/3 of two different runs/);
  });
  test("--merge refuses another run's part: an empty shard's document of a run with other options, two unsharded runs of other corpora, a shard run after a capture changed (adversary 51)", async () => {
    const { jsonDocument } = await import("../../src/format/documents.ts");
    const root = await corpus();
    const run = async (shard: { index: number; count: number } | undefined, settings?: Partial<CheckOptions["settings"]>, paths = [root]) => {
      const res = join(tempDir(), "r");
      const base = options(paths, res, fakeWorkers((t) => outcome(t)).open);
      const r = await runCheck({ ...base, settings: { ...base.settings, ...settings }, ...(shard ? { shard } : {}) });
      const doc = join(tempDir(), "doc.json");
      writeFileSync(doc, JSON.stringify(jsonDocument("check", r)));
      return { r, doc, file: join(res, "results.jsonl") };
    };
    // five shards over three captures: at least two hold none, and their documents say so
    const five = await Promise.all([0, 1, 2, 3, 4].map((index) => run({ index, count: 5 })));
    expect(
      mergeResults(
        five.map((x) => x.doc),
        { slowerPct: 10 },
      ).captures,
    ).toHaveLength(3);
    const empty = five.findIndex((x) => !x.r.captures.length);
    expect(empty).toBeGreaterThanOrEqual(0);
    const loose = await run({ index: empty, count: 5 }, { tolerance: { atol: 1e30, rtol: 1e30 } });
    const swapped = five.map((x, i) => (i === empty ? loose.doc : x.doc));
    expect(() => mergeResults(swapped, { slowerPct: 10 })).toThrow(/hold shards K\/5 of two different runs/);
    // two unsharded runs of two corpora: not one run
    const other = join(tempDir(), "elsewhere");
    await makeCapture(join(other, "c"));
    const [a, b] = [await run(undefined), await run(undefined, {}, [other])];
    expect(() => mergeResults([a.file, b.file], { slowerPct: 10 })).toThrow(/hold the records of two different runs/);
    // shard 0/2 run, then a capture of the corpus changed, then shard 1/2 run: two runs
    const first = await run({ index: 0, count: 2 });
    writeFileSync(join(root, "a/one/kerncap-judge.json"), "{}\n");
    const second = await run({ index: 1, count: 2 });
    expect(() =>
      mergeResults(
        [first.file, second.file].filter((f) => existsSync(f)),
        { slowerPct: 10, partial: true },
      ),
    ).toThrow(/two different runs/);
  });

  test("--merge of a results file without a record, of text that is not one, or of a folder: exit 2 naming it, never a green run", async () => {
    const d = tempDir();
    const empty = join(d, "empty.jsonl"),
      bad = join(d, "bad.jsonl"),
      cut = join(d, "cut.jsonl");
    writeFileSync(empty, "");
    writeFileSync(bad, "this is not a record");
    writeFileSync(cut, '{"schema":"kerncap.check-record/1","id":"x"'); // a shard killed in its first write (as RecordLog writes a record)
    for (const f of [empty, bad, cut]) {
      let e: unknown;
      try {
        mergeResults([f], { slowerPct: 10 });
      } catch (x) {
        e = x;
      }
      expect((e as KerncapError).code, f).toBe("E_RESULTS");
      // text that is no record, even on its last line, is named as such (a one-line file of something else is no cut record)
      expect((e as KerncapError).message).toBe(
        f === bad
          ? `${f}, line 1: JSON Parse error: Unexpected identifier "this"; and it does not begin as a kerncap.check-record/1 record that a kill cut short would`
          : `${f} holds no check record`,
      );
      expect((e as KerncapError).exitCode).toBe(2);
    }
    expect(() => mergeResults([d], { slowerPct: 10 })).toThrow(`${d} is a folder, not a results file`);
  });
  test("--merge: a capture in two results files is refused naming both (trial 18 F1: a forged shard's record, read last, was kept); one file's later record of a capture is kept (--resume appends it)", async () => {
    const root = await corpus();
    const d = tempDir();
    await runCheck(
      options([root], join(d, "shard-0"), fakeWorkers((t) => outcome(t, t.id === "corpus/b" ? { verdict: "mismatch", reason: "differs" } : {})).open),
    );
    const real = join(d, "shard-0", "results.jsonl");
    // another file holding an ok record of the failing capture
    mkdirSync(join(d, "shard-9"));
    const extra = join(d, "shard-9", "results.jsonl");
    const lines = readFileSync(real, "utf8").trim().split("\n");
    const failing = lines.find((l) => JSON.parse(l).id === "corpus/b")!;
    writeFileSync(extra, sealedLine("check-record", { ...JSON.parse(failing), verdict: "match", reason: null, status: "ok" })); // written by a kerncap of this key
    const junit = join(d, "all.xml");
    let e: unknown;
    try {
      mergeResults([real, extra], { slowerPct: 10, junit });
    } catch (x) {
      e = x;
    }
    expect([(e as KerncapError).code, (e as KerncapError).exitCode]).toEqual(["E_RESULTS", 2]);
    expect((e as KerncapError).message).toBe(`corpus/b is in two results files, ${real} and ${extra}: one run's shards are disjoint`);
    expect(existsSync(junit)).toBe(false);
    expect(await stderrOf(() => runCli(["check", "--merge", real, extra]))).toMatchObject({ value: 2 });
    // options of a replay are refused with --merge, never silently ignored (trial 8 #4: --rtol 0.5 --iters 50 --no-verify changed nothing)
    for (const opt of [
      ["--rtol", "0.5"],
      ["--iters=50"],
      ["--no-verify"],
      ["--dtype", "fp16"],
      ["--multiset", "0"],
      ["--runs", "4"],
      ["--allow-version-mismatch"],
    ]) {
      const { err, value } = await stderrOf(() => runCli(["check", "--merge", real, ...opt]));
      expect(value, opt.join(" ")).toBe(2);
      expect(err).toContain(`--merge joins results files: ${opt[0]!.split("=")[0]} does not apply`);
    }
    // within one file (a --resume after an error appends the capture's new record): the later record
    const resumed = join(d, "resumed.jsonl");
    writeFileSync(resumed, `${readFileSync(real, "utf8")}${readFileSync(extra, "utf8")}`);
    expect(mergeResults([resumed], { slowerPct: 10 }).captures.find((c) => c.id === "corpus/b")?.status).toBe("ok");
  });
  test("--merge (and --resume) refuse a record whose numbers no check gives, naming the file and line: ratio 1.00 beside medians of 100 µs and 10 µs, low -1e999, slowerPct 1e999, a median not its samples' (trial 18 F1)", async () => {
    const d = tempDir();
    const f = join(d, "results.jsonl");
    const same = { verdict: "same", ratio: 1, low: 0.99, high: 1.01, baselineMedianUs: 100, slowerPct: 5, reason: null };
    const raw = (o: Partial<Record<keyof CheckRecord, unknown>>) =>
      JSON.stringify({ schema: "kerncap.check-record/1", ...record("corpus/x", "ok", { timing: { medianUs: 100, samplesUs: times(100) } }), ...o });
    // with its authenticator: only the numbers are wrong
    const line = (o: Partial<Record<keyof CheckRecord, unknown>>) => sealedText(raw(o));
    // what a check writes: a ratio of 1.00 beside medians of 100 µs and 100 µs
    writeFileSync(f, `${line({ time: same })}\n`);
    expect(mergeResults([f], { slowerPct: 10 }).exitCode).toBe(0);
    for (const [bad, why] of [
      [line({ time: { ...same, baselineMedianUs: 10 } }), "time.ratio 1 is not near timing.medianUs / time.baselineMedianUs (100 / 10 = 10)"],
      [sealedText(raw({ time: { ...same, low: "-INF" } }).replace('"-INF"', "-1e999")), "time.low is -Infinity"],
      [sealedText(raw({ time: { ...same, slowerPct: "INF" } }).replace('"INF"', "1e999")), "time.slowerPct is Infinity"],
      [line({ time: same, timing: { medianUs: 100, samplesUs: times(10) } }), "timing.medianUs 100 is not the median of timing.samplesUs"],
      [
        line({ status: "slower", time: { ...same, verdict: "slower", ratio: 1.2, low: 0.9, high: 1.3 } }),
        'time.verdict is "slower" but its interval [0.9, 1.3] does not lie above 1',
      ],
      [line({ seconds: -1 }), "seconds is -1: a time is not negative"],
    ] as const) {
      writeFileSync(f, `${line({})}\n${bad}\n`);
      let e: unknown;
      try {
        mergeResults([f], { slowerPct: 10 });
      } catch (x) {
        e = x;
      }
      expect((e as KerncapError).code, why).toBe("E_RESULTS");
      expect((e as KerncapError).message).toStartWith(`${f}, line 2: ${why}`);
      // --resume reads the results file through the same check
      expect(() => parseResults(f, readFileSync(f, "utf8") + `${line({})}\n`)).toThrow(why);
    }
  });
  test("--junit or --write-baseline that cannot be written: refused before any capture is checked, no temp file left", async () => {
    const root = await corpus();
    const d = tempDir();
    for (const [k, v, want] of [
      ["junit", d, "is a folder"],
      ["junit", join(d, "no/x.xml"), "there is no folder"],
      ["writeBaseline", join(d, "none", "b.json"), "there is no folder"],
    ] as const) {
      const w = fakeWorkers((t) => outcome(t));
      let e: unknown;
      try {
        await runCheck(options([root], join(tempDir(), "r"), w.open, { [k]: v }));
      } catch (x) {
        e = x;
      }
      expect((e as KerncapError).code).toBe("E_USAGE");
      expect((e as KerncapError).message).toContain(want);
      expect(w.calls).toEqual([]); // no capture checked
    }
    expect(readdirSync(d)).toEqual([]);
    // a --write-baseline FILE that holds something else (a user's settings): refused before anything runs, left as it was (adversary 28)
    const other = join(d, "settings.json");
    writeFileSync(other, '{"important":"x"}\n');
    const w = fakeWorkers((t) => outcome(t));
    let e: unknown;
    try {
      await runCheck(options([root], join(tempDir(), "r"), w.open, { writeBaseline: other }));
    } catch (x) {
      e = x;
    }
    expect((e as KerncapError).code).toBe("E_BASELINE");
    expect((e as KerncapError).message).toContain(`${other} is not a kerncap check baseline`);
    expect(w.calls).toEqual([]);
    expect(readFileSync(other, "utf8")).toBe('{"important":"x"}\n');
  });
  test("--baseline with nothing at its path (a typo): E_BASELINE (exit 2) before anything runs, check and --merge; a link to nothing is refused as a link", async () => {
    const root = await corpus();
    const d = tempDir();
    const missing = join(d, "nope.json");
    const results = join(d, "r");
    const w = fakeWorkers((t) => outcome(t));
    let e: unknown;
    try {
      await runCheck(options([root], results, w.open, { baseline: missing }));
    } catch (x) {
      e = x;
    }
    expect([(e as KerncapError).code, (e as KerncapError).exitCode]).toEqual(["E_BASELINE", 2]);
    expect((e as KerncapError).message).toBe(`no baseline file at ${missing}; --write-baseline FILE makes one`);
    expect(w.calls).toEqual([]); // nothing checked
    expect(existsSync(results)).toBe(false); // nor the results folder made
    const rec = join(d, "one.jsonl");
    await runCheck(options([root], join(d, "ok"), fakeWorkers((t) => outcome(t)).open));
    writeFileSync(rec, readFileSync(join(d, "ok", "results.jsonl")));
    expect(() => mergeResults([rec], { slowerPct: 10, baseline: missing })).toThrow(`no baseline file at ${missing}`);
    const cli = await stderrOf(() => runCli(["check", root, "--results", results, "--baseline", missing]));
    expect(cli.value).toBe(2);
    expect(cli.err).toContain("--write-baseline FILE makes one");
    // a link to nothing: there is something at the path, and kerncap reads no baseline through a link
    const dangling = join(d, "dangling.json");
    symlinkSync(join(d, "gone.json"), dangling);
    expect(() => mergeResults([rec], { slowerPct: 10, baseline: dangling })).toThrow("is a symbolic link");
  });
  test("progress off a terminal: one plain line per capture, no redraw", async () => {
    const root = await corpus();
    const { err } = await stderrOf(() => runCheck(options([root], join(tempDir(), "r"), fakeWorkers((t) => outcome(t)).open)));
    const done = err.split("\n").filter((l) => /^\[\d\/3\] /.test(l));
    expect(done.length).toBe(3);
    expect(done[0]).toMatch(/^\[1\/3\] ok +no baseline +10\.0 µs {2}corpus\/a\/one {2}scale\(float\*, int\)/);
    expect(err).not.toContain("\r");
    expect(err).not.toContain("\x1b[");
    // on a terminal the status line is redrawn in place and erased before each finished line
    let tty = "";
    let clock = 0;
    const p = new CheckProgress(2, { live: true, write: (s) => void (tty += s), now: () => clock });
    p.started("x", 0);
    clock = 4000;
    p.finished(record("x", "ok"), 0);
    p.started("y", 0);
    p.stop();
    // drawn, erased for the finished line, drawn again with the time left (1 of 2 in 4 s: 4 s more)
    expect(tty).toStartWith("\r\x1b[Kchecking: 0 of 2 captures (0%); now x\r\x1b[K[1/2] ok");
    expect(tty).toContain("\r\x1b[Kchecking: 1 of 2 captures (50%), about 4 s left");
    expect(tty).toEndWith("\r\x1b[K");
  });
});

describe("a rebuild for another architecture", () => {
  test.skipIf(!Bun.which("nvcc"))(
    "-arch=<this GPU> appended to EXTRA_FLAGS: nvcc compiles for the last -arch, the one build.sh's own -arch comes before",
    () => {
      expect(reproducerBuildEnv({ force: false, targetArch: "sm_100" }, { EXTRA_FLAGS: "-G" }).EXTRA_FLAGS).toBe("-G -arch=sm_100");
      expect(reproducerBuildEnv({ force: false }, {}).EXTRA_FLAGS).toBeUndefined();
      const dir = tempDir();
      writeFileSync(join(dir, "k.cu"), "__global__ void k(float *p) { p[0] = 1; }\n");
      const extra = reproducerBuildEnv({ force: false, targetArch: "sm_100" }, {}).EXTRA_FLAGS!;
      // templates/cuda/build.sh.hbs: "$nvcc" -cubin -arch={{arch}} -x cu {{flags}} ${EXTRA_FLAGS:-} SOURCE -o OUT
      const p = Bun.spawnSync(["nvcc", "-cubin", "-arch=sm_90", "-x", "cu", ...extra.split(" "), join(dir, "k.cu"), "-o", join(dir, "k.cubin")], {
        stderr: "pipe",
      });
      expect(p.exitCode, p.stderr.toString()).toBe(0);
      expect(cubinArch(new Uint8Array(readFileSync(join(dir, "k.cubin"))))).toBe("sm_100");
    },
  );
});

describe("the verb", () => {
  test("usage errors exit 2 before any work; `kerncap schema check` prints the document's schema", async () => {
    const root = await corpus();
    for (const argv of [
      ["check"],
      ["check", root, "--shard", "2/2"],
      ["check", root, "--gpus", "0,,1"],
      ["check", "--merge", "x.jsonl", "--gpus", "0"],
      ["check", root, "--allow-version-mismatch"],
      ["check", root, "--force"],
      ["check", root, "-f"],
      ["check", root, "--trust"],
      ["check", "--merge", "x.jsonl", "--trust"],
      ["check", root, "--slower", "-3"],
      ["check", join(root, "missing")],
    ]) {
      const { value } = await stderrOf(() => runCli(argv));
      expect([argv.join(" "), value]).toEqual([argv.join(" "), 2]);
    }
    const { err } = await stderrOf(() => runCli(["check", root, "--slower", "-5"]));
    expect(err).toContain("--slower 10 (percent; 10 is the default)"); // not --atol's "1e-5 … bit-exact"
    expect(err).not.toContain("bit-exact");
    expect(jsonSchemaOf("check")).toMatchObject({ $id: "kerncap.check/1", title: "kerncap check --json" });
    expect(jsonSchemaOf("check-record")).toMatchObject({ $id: "kerncap.check-record/1" });
  });
  test("--gpus: device indices (non-negative integers) or GPU-/MIG- UUIDs, comma-separated; anything else is a usage error with a hint", async () => {
    const { parseGpus } = await import("../../src/cli/commands/check.ts");
    expect(parseGpus("0,1, 1")).toEqual(["0", "1", "1"]);
    // one spelling per device index (eval's timing windows are per GPU: adversary 75)
    expect(parseGpus("00,01,10")).toEqual(["0", "1", "10"]);
    expect(parseGpus("GPU-5a3b6c1e-0d2f-4a4b-9c1d-2e3f4a5b6c7d,MIG-4f1e2d3c-1a2b-3c4d-5e6f-7a8b9c0d1e2f")).toHaveLength(2);
    for (const bad of ["x", "-1", "1.5", "0,x", "gpu0", "+1", "0x1", ""]) {
      let e: unknown;
      try {
        parseGpus(bad);
      } catch (x) {
        e = x;
      }
      expect([bad, e instanceof KerncapError && e.code === "E_USAGE" && (e.hint ?? "").includes("--gpus 0,1")]).toEqual([bad, true]);
    }
    const root = await corpus();
    const { value, err } = await stderrOf(() => runCli(["check", root, "--gpus", "x"]));
    expect(value).toBe(2);
    expect(err).toContain('--gpus "x"');
  });
  test("--rebuild of a received capture: refused (E_UNTRUSTED) before its build.sh or the GPU, unless --trust", async () => {
    const dir = join(tempDir(), "cap");
    await makeCapture(dir);
    writeFileSync(join(dir, "build.sh"), stockBuildSh()); // kerncap's own: plain --trust runs it (a hand-written one needs --trust=DIGEST)
    const nvcc = join(tempDir(), "nvcc");
    writeFileSync(nvcc, `#!/bin/sh\ntouch ${JSON.stringify(join(dir, "built"))}\n`, { mode: 0o755 });
    const savedNvcc = process.env.NVCC;
    process.env.NVCC = nvcc;
    markReceived(dir, "cap.zip");
    const task: CaptureRef = { id: "cap", path: dir, kind: "folder" };
    const refused = await stderrOf(() => checkCapture(task, { ...SETTINGS, rebuild: true }));
    expect([refused.value.outcome, refused.value.code]).toEqual(["error", "E_UNTRUSTED"]);
    expect(refused.value.reason).toContain("received capture");
    expect(refused.err).toContain("kerncap's own build.sh, not printed: its template's text, its compile flags"); // kerncap's own: one line (check's log)
    expect(existsSync(join(dir, "built"))).toBe(false);
    const state = process.env.XDG_STATE_HOME;
    process.env.XDG_STATE_HOME = tempDir(); // the trust record goes here, not into the user's state folder
    try {
      const trusted = await stderrOf(() => checkCapture(task, { ...SETTINGS, rebuild: true, trust: true }));
      expect(trusted.value.code).not.toBe("E_UNTRUSTED");
    } finally {
      if (state === undefined) delete process.env.XDG_STATE_HOME;
      else process.env.XDG_STATE_HOME = state;
      if (savedNvcc === undefined) delete process.env.NVCC;
      else process.env.NVCC = savedNvcc;
    }
  });
  test("--rebuild without a GPU: each reproducer is still built (a compile error is the capture's error, with the compiler's message; a build that works is recorded and said before the missing GPU)", async () => {
    const { dir } = writeDemo(join(tempDir(), "cap"), false); // kerncap's own reproducer of a real module
    const nvcc = join(tempDir(), "nvcc");
    const savedNvcc = process.env.NVCC;
    process.env.NVCC = nvcc;
    const task: CaptureRef = { id: "cap", path: dir, kind: "folder" };
    try {
      // a compiler that fails, as nvcc on an edit that does not compile
      writeFileSync(nvcc, `#!/bin/sh\necho 'src/kernel.cu(3): error: identifier "undefined_name" is undefined' >&2\nexit 1\n`, { mode: 0o755 });
      const bad = await stderrOf(() => checkCapture(task, { ...SETTINGS, rebuild: true }));
      expect([bad.value.outcome, bad.value.code]).toEqual(["error", "E_BUILD"]);
      expect(bad.value.reason).toContain("undefined_name");
      // one that builds: the module the capture holds, copied to -o
      writeFileSync(nvcc, `#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && cp ${JSON.stringify(join(dir, "kernel/module.fatbin"))} "$2"; shift; done\n`, {
        mode: 0o755,
      });
      const ok = await stderrOf(() => checkCapture(task, { ...SETTINGS, rebuild: true }));
      expect([ok.value.outcome, ok.value.code], ok.value.reason ?? "").toEqual(["error", "E_NO_GPU"]);
      expect(ok.value.reason).toMatch(/^rebuilt by build\.sh in \d+\.\d\d s \(it compiles\); not replayed: no NVIDIA driver/);
      expect(ok.value.rebuild).toMatchObject({ builder: "build.sh", targetArch: null });
      // the compiler the build ran and the toolkit its module names, as validate --build-only says them (a new user's finding)
      expect(ok.value.rebuild?.nvcc).toBe(nvcc);
      expect(ok.value.rebuild && "toolkit" in ok.value.rebuild).toBe(true);
    } finally {
      if (savedNvcc === undefined) delete process.env.NVCC;
      else process.env.NVCC = savedNvcc;
    }
  });
  test("--rebuild of a damaged capture: E_CHECKSUM as plain check says it, before its build.sh, the trust question or the missing GPU", async () => {
    const { dir } = writeDemo(join(tempDir(), "cap"), false);
    appendFileSync(join(dir, "kernel/params.bin"), "x"); // trial nu5: rebuilt, then "not replayed: no NVIDIA driver" (E_NO_GPU)
    const built = join(tempDir(), "built");
    const nvcc = join(tempDir(), "nvcc");
    writeFileSync(
      nvcc,
      `#!/bin/sh\ntouch ${JSON.stringify(built)}\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && cp ${JSON.stringify(join(dir, "kernel/module.fatbin"))} "$2"; shift; done\n`,
      {
        mode: 0o755,
      },
    );
    const savedNvcc = process.env.NVCC;
    process.env.NVCC = nvcc;
    const task: CaptureRef = { id: "cap", path: dir, kind: "folder" };
    try {
      const plain = await stderrOf(() => checkCapture(task, SETTINGS));
      const rebuilt = await stderrOf(() => checkCapture(task, { ...SETTINGS, rebuild: true }));
      for (const r of [plain.value, rebuilt.value]) {
        expect([r.outcome, r.code], r.reason ?? "").toEqual(["error", "E_CHECKSUM"]);
        expect(r.reason).toContain("kernel/params.bin has 9 bytes, the manifest says 8");
      }
      expect(rebuilt.value.rebuild).toBeNull();
      expect(existsSync(built)).toBe(false); // never built
      markReceived(dir, "cap.zip"); // a received one too: not asked to be trusted (its build.sh not printed)
      const received = await stderrOf(() => checkCapture(task, { ...SETTINGS, rebuild: true }));
      expect(received.value.code).toBe("E_CHECKSUM");
      expect(received.err).not.toContain("end of build.sh");
    } finally {
      if (savedNvcc === undefined) delete process.env.NVCC;
      else process.env.NVCC = savedNvcc;
    }
  });
  test("--rebuild of an archive: the refusal and --trust name the archive, never the temporary folder it is unpacked into; nothing is recorded", async () => {
    const dir = join(tempDir(), "cap");
    await makeCapture(dir);
    writeFileSync(join(dir, "build.sh"), stockBuildSh()); // kerncap's own: check's plain --trust runs it
    const zip = join(tempDir(), "cap.zip");
    await packCapture(dir, zip);
    const task: CaptureRef = { id: "cap", path: zip, kind: "archive" };
    const refused = await stderrOf(() => checkCapture(task, { ...SETTINGS, rebuild: true }));
    expect([refused.value.outcome, refused.value.code]).toEqual(["error", "E_UNTRUSTED"]);
    expect(refused.value.reason).toContain(zip);
    expect(refused.value.reason).not.toContain("kerncap-check-");
    expect(refused.value.reason).not.toContain("shown above"); // the record and the table come after, far from the print
    expect(refused.err).toContain(`──── ${zip}`);
    expect(refused.err).toContain("──── build.sh ("); // kerncap's own: one line
    expect(refused.err).not.toContain("kerncap-check-");
    const state = process.env.XDG_STATE_HOME;
    const here = tempDir();
    process.env.XDG_STATE_HOME = here;
    try {
      const trusted = await stderrOf(() => checkCapture(task, { ...SETTINGS, rebuild: true, trust: true }));
      expect(trusted.value.code).not.toBe("E_UNTRUSTED");
      expect(trusted.err).toContain(zip);
      expect(trusted.err).not.toContain("kerncap-check-");
      expect(existsSync(join(here, "kerncap/trusted-builds.json"))).toBe(false); // no trust record for a folder that is gone after the check
    } finally {
      if (state === undefined) delete process.env.XDG_STATE_HOME;
      else process.env.XDG_STATE_HOME = state;
    }
  });
  test("--rebuild --trust of an archive another user owns (as root) or every user or the group may write: plain --trust refused as for such a folder, naming the archive, nothing built (trial 20)", async () => {
    overrideSandboxSupport(null); // the trust rules on a machine that cannot make the sandbox: its stand-in tools write outside (a received build's sandbox: test/cpu/frontends/sandbox.test.ts)
    const dir = join(tempDir(), "cap");
    await makeCapture(dir);
    writeFileSync(join(dir, "build.sh"), stockBuildSh()); // kerncap's own: plain --trust would run it
    const corpusDir = tempDir();
    const zip = join(corpusDir, "azip.zip");
    await packCapture(dir, zip);
    const built = join(tempDir(), "built");
    const nvcc = join(tempDir(), "nvcc");
    writeFileSync(nvcc, `#!/bin/sh\ntouch ${JSON.stringify(built)}\nexit 1\n`, { mode: 0o755 });
    const savedNvcc = process.env.NVCC;
    const state = process.env.XDG_STATE_HOME;
    process.env.NVCC = nvcc;
    process.env.XDG_STATE_HOME = tempDir();
    const task: CaptureRef = { id: "azip", path: zip, kind: "archive" };
    try {
      const cases: [string, () => void][] = [
        ["can be written by every user (mode 646)", () => chmodSync(zip, 0o646)],
        ["can be written by every member of its group", () => chmodSync(zip, 0o664)],
      ];
      if (process.geteuid?.() === 0)
        cases.push(["belongs to another user (uid 4242; you are uid 0)", () => (chmodSync(zip, 0o644), chownSync(zip, 4242, 4242))]);
      for (const [why, make] of cases) {
        make();
        const plain = await stderrOf(() => checkCapture(task, { ...SETTINGS, rebuild: true, trust: true }));
        expect([plain.value.outcome, plain.value.code], plain.value.reason ?? "").toEqual(["error", "E_UNTRUSTED"]);
        expect(plain.value.reason).toContain("plain --trust is not enough here: the archive");
        expect(plain.value.reason).toContain(`${zip} ${why}`);
        expect(plain.value.reason).not.toContain("kerncap-check-");
        expect(existsSync(built)).toBe(false); // nothing of it ran
      }
      // the user's own archive, mode 0644: plain --trust as before
      if (process.geteuid?.() === 0) chownSync(zip, 0, 0);
      chmodSync(zip, 0o644);
      const own = await stderrOf(() => checkCapture(task, { ...SETTINGS, rebuild: true, trust: true }));
      expect(own.value.code, own.value.reason ?? "").not.toBe("E_UNTRUSTED");
      expect(existsSync(built)).toBe(true);
    } finally {
      if (state === undefined) delete process.env.XDG_STATE_HOME;
      else process.env.XDG_STATE_HOME = state;
      if (savedNvcc === undefined) delete process.env.NVCC;
      else process.env.NVCC = savedNvcc;
    }
  });
  test("the worker protocol: settings, then one outcome line per task line", async () => {
    const tasks = [
      '{"settings":' + JSON.stringify(SETTINGS) + "}",
      '{"task":{"id":"a","path":"/x/a","kind":"folder"}}',
      "",
      '{"task":{"id":"b","path":"/x/b.zip","kind":"archive"}}',
    ];
    const got: Outcome[] = [];
    await serveTasks(
      (async function* () {
        yield* tasks;
      })(),
      (o) => got.push(o),
      async (t, s) => outcome(t, { note: `iters ${s.iters}` }),
    );
    expect(got.map((o) => [o.id, o.note])).toEqual([
      ["a", "iters 20"],
      ["b", "iters 20"],
    ]);
    const bad = await serveTasks(
      (async function* () {
        yield "{}";
      })(),
      () => {},
      async (t) => outcome(t),
    ).catch((e) => e);
    expect(bad.code).toBe("E_USAGE");
  });
  test("a worker whose device context went with a kernel fault says so with that outcome and stops; the queue starts another for the next capture", async () => {
    const tasks = [
      '{"settings":' + JSON.stringify(SETTINGS) + "}",
      '{"task":{"id":"a","path":"/x/a","kind":"folder"}}',
      '{"task":{"id":"b","path":"/x/b","kind":"folder"}}',
    ];
    const got: [string, boolean][] = [];
    let resets = 0;
    await serveTasks(
      (async function* () {
        yield* tasks;
      })(),
      (o, retire) => got.push([o.id, retire]),
      async (t) => (t.id === "a" && resets++, outcome(t)),
      () => resets > 0,
    );
    expect(got).toEqual([["a", true]]); // b is left for the next worker
    const root = await corpus();
    const opened: number[] = [];
    const seen: string[] = [];
    const open: OpenRunner = () => {
      const n = opened.push(opened.length);
      let done = false;
      return { run: async (t) => (seen.push(`${n}:${t.id}`), (done = true), outcome(t)), kill() {}, close: async () => {}, retired: () => done };
    };
    const r = await runCheck(options([root], join(tempDir(), "r"), () => open));
    expect(r.exitCode).toBe(0);
    expect(opened.length).toBe(seen.length); // one worker per capture, each retiring after its first
    expect(new Set(seen.map((s) => s.split(":")[0])).size).toBe(seen.length);
  });
  test.skipIf(HAS_GPU)("a real worker process on a machine without a GPU: each capture an error naming it, exit 2, results and JUnit written", async () => {
    const root = await corpus();
    const cwd = tempDir();
    const p = Bun.spawnSync([process.execPath, MAIN, "check", root, "--gpus", "0,0", "--junit", "j.xml", "--json"], { cwd, stdout: "pipe", stderr: "pipe" });
    expect(p.exitCode).toBe(2);
    const doc = JSON.parse(p.stdout.toString());
    expect(v.safeParse(DOCUMENTS.check, doc).success).toBe(true);
    expect(doc.captures.map((c: CheckRecord) => [c.id, c.status, c.code])).toEqual([
      ["corpus/a/one", "error", "E_NO_GPU"],
      ["corpus/a/two", "error", "E_NO_GPU"],
      ["corpus/b", "error", "E_NO_GPU"],
    ]);
    expect(new Set(doc.captures.map((c: CheckRecord) => c.worker))).toEqual(new Set([0, 1]));
    expect(parseResults("r", readFileSync(join(cwd, "kerncap-check/results.jsonl"), "utf8")).records.length).toBe(3);
    expect(junitStructure(readFileSync(join(cwd, "j.xml"), "utf8")).suites).toMatchObject({ tests: "3", errors: "3" });
  });
});

describe("results records carry proof of the kerncap that wrote them (adv20 #2: a made-up ok record, no GPU ever run, was merged and resumed as checked)", () => {
  const A = "7c1e9a4f2b6d08e35f9a1c7b4e2d6f08a3c5e7b9d1f2a4c6e8b0d3f5a7c9e1b2";
  const B = "e4b7d1a9c3f6082b5e8a1d4c7f0b3e6a9d2c5f8b1e4a7d0c3f6b9e2a5d8c1f47";
  const H200 = { name: "NVIDIA H200", arch: "sm_90" };
  /** A worker without a GPU: what the trial's genuine template record said. */
  const noGpu = (t: CaptureRef) =>
    outcome(t, { outcome: "error", verdict: null, numerics: null, timing: null, device: null, code: "E_NO_GPU", reason: "no NVIDIA driver" });
  /** The trial's edit of a genuine record into an ok match whose numbers agree (recordProblem takes it). */
  const forge = (genuine: Record<string, unknown>): Record<string, unknown> => ({
    ...genuine,
    outcome: "done",
    status: "ok",
    verdict: "match",
    numerics: "bit-exact: every region matches",
    reason: null,
    code: null,
    device: H200,
    gpu: "0",
    timing: { medianUs: 3, samplesUs: [2.9, 3, 3.1] },
    time: { verdict: "no-baseline", ratio: null, low: null, high: null, baselineMedianUs: null, slowerPct: 10, reason: "no baseline" },
  });
  /** Write `text` at `f`, the user's own and written by no one else (the owner and mode checks pass, as for a copied file). */
  const own = (f: string, text: string) => (writeFileSync(f, text), require("node:fs").chmodSync(f, 0o644), f);

  test("a forged record (numbers a check gives, no authenticator or another record's) is refused by --merge (a results file, a --json document, the CLI: exit 2) and --resume, naming the file and line; no capture checked", async () => {
    const root = await corpus();
    const d = tempDir();
    await runCheck(options([join(root, "a/one")], join(d, "real"), fakeWorkers(noGpu).open));
    const genuine = JSON.parse(readFileSync(join(d, "real", "results.jsonl"), "utf8").split("\n")[0]!);
    expect(genuine.auth).toMatch(/^hmac-sha256:[0-9a-f]{16}:[0-9a-f]{64}$/);
    const forged = forge(genuine);
    // the forged record passes every consistency check: only its authenticator gives it away
    expect(mergeResults([own(join(d, "sealed.jsonl"), sealedLine("check-record", forged))], { slowerPct: 10 }).captures[0]!.status).toBe("ok");
    const { auth: _, ...bare } = forged;
    for (const [name, rec, why] of [
      ["stale", forged, "its authenticator does not match its contents: it was changed after kerncap wrote it"],
      ["bare", bare, "it carries no authenticator (`auth`)"],
    ] as const) {
      const f = own(join(d, `${name}.jsonl`), `${JSON.stringify(rec)}\n`);
      const e = await thrownBy(() => mergeResults([f], { slowerPct: 10 }));
      expect([e?.code, e?.exitCode], name).toEqual(["E_RECORD_AUTH", 2]);
      expect(e!.message).toStartWith(`${f}, line 1: ${why}`);
      expect(e!.hint).toStartWith(
        "Nothing was merged. A record is taken only from a kerncap holding the results key it was written with: merge where the shards were written (the same account on a machine that shares its home), or give every run and the merge the same KERNCAP_RESULTS_KEY",
      );
      const cli = await stderrOf(() => runCli(["check", "--merge", f]));
      expect(cli.value).toBe(2);
      expect(cli.err).toContain(`${f}, line 1: ${why}`);
      // in a --json document, by its index
      const doc = own(join(d, `${name}.json`), JSON.stringify({ captures: [rec] }));
      expect((await thrownBy(() => mergeResults([doc], { slowerPct: 10 })))?.message).toStartWith(`${doc}, captures[0]: ${why}`);
      // --resume of a results folder holding it: refused before any capture is checked, the file left as it is
      const res = join(d, `res-${name}`);
      mkdirSync(res);
      const results = own(join(res, "results.jsonl"), `${JSON.stringify(rec)}\n`);
      const w = fakeWorkers((t) => outcome(t));
      const r = await thrownBy(() => runCheck(options([join(root, "a/one")], res, w.open, { resume: true })));
      expect(r?.code).toBe("E_RECORD_AUTH");
      expect(r!.message).toStartWith(`${results}, line 1: ${why}`);
      expect(r!.hint).toContain("resume as the account that wrote the file, or with the KERNCAP_RESULTS_KEY it was written with");
      expect(r!.hint).toContain("run without --resume to check everything again");
      expect(w.calls).toEqual([]);
      expect(readFileSync(results, "utf8")).toBe(`${JSON.stringify(rec)}\n`);
    }
    // the genuine record is taken: the capture could not be checked
    expect(mergeResults([join(d, "real", "results.jsonl")], { slowerPct: 10 }).captures.map((c) => c.status)).toEqual(["error"]);
    // its bytes changed without changing what JSON.parse keeps (a key given twice ahead of the record's own): refused as
    // changed, in a results file and in a --json document, indented as printed or on one line (adversary 76 #02)
    const line = readFileSync(join(d, "real", "results.jsonl"), "utf8").split("\n")[0]!;
    const twice = line.replace(/^\{/, '{"status":"ok","outcome":"done",');
    const dupFile = own(join(d, "twice.jsonl"), `${twice}\n`);
    const dupErr = await thrownBy(() => mergeResults([dupFile], { slowerPct: 10 }));
    expect([dupErr?.code, dupErr?.exitCode]).toEqual(["E_RECORD_AUTH", 2]);
    expect(dupErr!.message).toStartWith(`${dupFile}, line 1: its text is not the one kerncap writes for what it holds (a key given twice`);
    const printed = JSON.stringify({ captures: [JSON.parse(line)] }, null, 2);
    expect(mergeResults([own(join(d, "printed.json"), `${printed}\n`)], { slowerPct: 10 }).captures.map((c) => c.status)).toEqual(["error"]);
    const dupDoc = own(join(d, "twice.json"), `${printed.replace('"captures": [\n    {', '"captures": [\n    {\n      "status": "ok",')}\n`);
    expect(await thrownBy(() => mergeResults([dupDoc], { slowerPct: 10 }))).toMatchObject({ code: "E_RECORD_AUTH" });
  });

  test("a record written under one KERNCAP_RESULTS_KEY merges and resumes under the same key; under another, or the user's own key, it is refused naming both key ids", async () => {
    const root = await corpus();
    const d = tempDir();
    const res = join(d, "res");
    await withResultsKey(A, () => runCheck(options([root], res, fakeWorkers((t) => outcome(t)).open)));
    const f = join(res, "results.jsonl");
    const [idA, idB] = [A, B].map((k) => keyId(Buffer.from(k, "hex")));
    expect((await withResultsKey(A, () => mergeResults([f], { slowerPct: 10 }))).captures.map((c) => c.status)).toEqual(["ok", "ok", "ok"]);
    const other = await withResultsKey(B, () => thrownBy(() => mergeResults([f], { slowerPct: 10 })));
    expect([other?.code, other?.message]).toEqual([
      "E_RECORD_AUTH",
      `${f}, line 1: it was written under another results key (key id ${idA}; this kerncap's, from KERNCAP_RESULTS_KEY, is ${idB})`,
    ]);
    const mine = await withResultsKey(undefined, () => thrownBy(() => mergeResults([f], { slowerPct: 10 })));
    expect(mine?.message).toStartWith(`${f}, line 1: it was written under another results key (key id ${idA}; this kerncap's, from your state folder, is `);
    // --resume: under the same key nothing is checked again; under another, refused before any capture
    const same = fakeWorkers((t) => outcome(t));
    await withResultsKey(A, () => runCheck(options([root], res, same.open, { resume: true })));
    expect(same.calls).toEqual([]);
    const w = fakeWorkers((t) => outcome(t));
    expect((await withResultsKey(B, () => thrownBy(() => runCheck(options([root], res, w.open, { resume: true })))))?.code).toBe("E_RECORD_AUTH");
    expect(w.calls).toEqual([]);
  });

  test("a record changed after it was written (one field) is refused by --merge and --resume, naming its line", async () => {
    const root = await corpus();
    const res = join(tempDir(), "res");
    await runCheck(options([root], res, fakeWorkers((t) => outcome(t, t.id === "corpus/b" ? { verdict: "mismatch", reason: "differs" } : {})).open));
    const f = join(res, "results.jsonl");
    const written = readFileSync(f, "utf8");
    const lines = written.trim().split("\n");
    const i = lines.findIndex((l) => JSON.parse(l).id === "corpus/b");
    for (const edit of [
      { seconds: 0.02 }, // one field, one digit
      { verdict: "match", reason: null, status: "ok" }, // the mismatch turned ok: verdict and status agree, numbers untouched
    ]) {
      const edited = [...lines];
      edited[i] = JSON.stringify({ ...JSON.parse(lines[i]!), ...edit });
      writeFileSync(f, `${edited.join("\n")}\n`);
      const e = await thrownBy(() => mergeResults([f], { slowerPct: 10 }));
      expect([e?.code, e?.message]).toEqual([
        "E_RECORD_AUTH",
        `${f}, line ${i + 1}: its authenticator does not match its contents: it was changed after kerncap wrote it`,
      ]);
      const w = fakeWorkers((t) => outcome(t));
      expect((await thrownBy(() => runCheck(options([root], res, w.open, { resume: true }))))?.message).toBe(e?.message);
      expect(w.calls).toEqual([]);
    }
    writeFileSync(f, written);
    expect(mergeResults([f], { slowerPct: 10 }).captures.map((c) => c.status)).toEqual(["mismatch", "ok", "ok"]);
  });
});
