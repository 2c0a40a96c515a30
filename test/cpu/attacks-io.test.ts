/**
 * The attack suite of kerncap's own writers and printers (docs/security.md), run in CI on the CPU:
 * each test plays one attack as another local user sharing a folder, a colleague's archive or a
 * crafted results file would, and asserts it is refused (exit 2, a message naming the cause) or
 * comes to nothing.
 *  - files written beside the user's: links planted at the temp names of the next pids, a target
 *    that is a link (results.jsonl, profile/, the JUnit report);
 *  - untrusted text before a terminal: ESC, OSC, C1, bidi overrides, line separators and newlines
 *    in an archive's index, a check record's kernel name, pack's warnings, the build.sh shown
 *    before --trust;
 *  - crafted results files (--merge, --baseline, --write-baseline);
 *  - an unbounded --grid expression;
 *  - hostile kernel names and paths rendered through every reproducer template (and export's README), then run.
 */
import { describe, expect, test } from "bun:test";
import { chmodSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { inflateSync } from "fflate";
import { writeBaseline, BASELINE_SCHEMA } from "../../src/check/baseline.ts";
import { runCheck, writeJunit, type CheckOptions } from "../../src/check/check.ts";
import { mergeResults } from "../../src/check/merge.ts";
import type { OpenRunner } from "../../src/check/pool.ts";
import { CheckProgress } from "../../src/check/progress.ts";
import { RESULTS_FILE } from "../../src/check/results.ts";
import { Writable } from "node:stream";
import { runCli } from "../../src/cli/main.ts";
import { KerncapError } from "../../src/errors.ts";
import { escapeForTerminal, jsonText } from "../../src/escape.ts";
import { createLog, log } from "../../src/log.ts";
import { packCapture, PACK_INDEX, type PackIndex } from "../../src/format/archive.ts";
import { readManifest } from "../../src/format/capture-dir.ts";
import type { CheckRecord, Outcome } from "../../src/format/check-record.ts";
import { documentId } from "../../src/format/documents.ts";
import { requireTrustedBuild } from "../../src/format/trust.ts";
import { CHECKOUT_TEMPLATES, renderTemplateDir, TEMPLATE_ESCAPES } from "../../src/frontends/templates.ts";
import { evalGrid } from "../../src/frontends/tune.ts";
import { checkOptions, fakeOutcome, makeCapture, recordLine, tempDir, testResultsKey, output } from "./fixtures.ts";
import { sealRecord } from "../../src/format/record-auth.ts";
import { rawZip, readRawZip, storedEntry } from "./zip-fixture.ts";

const H200 = { name: "NVIDIA H200", arch: "sm_90" };
const MAIN = join(import.meta.dir, "../../src/cli/main.ts");
/** What a terminal must never be given raw: ESC, BEL, CSI as one C1 byte, bidi overrides and isolates, line separators. */
const RAW_CONTROLS = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
/** An OSC that sets the window title, a screen clear, a C1 CSI, a bidi override, a line separator, a fake line. */
const HOSTILE_TEXT = "k\x1b]0;PWNED\x07\x1b[2J\x9b31m\u202eexe.txt\u2028\nFAKE: all good";
/** Invisible characters (Unicode general category Cf and the tag block): zero-width space and joiners, word joiner, BOM, soft hyphen, Mongolian vowel separator, tags, an Arabic number sign. */
const INVISIBLE = [
  "\u200b",
  "\u200c",
  "\u200d",
  "\u2060",
  "\u2064",
  "\ufeff",
  "\u00ad",
  "\u180e",
  "\u{e0000}",
  "\u{e0041}",
  "\u{e007f}",
  "\u0600",
  "\ufff9",
  "\u034f",
  "\ufe0f",
  "\u17b4",
  "\u115f",
  "\u3164",
];
/** Any of them raw (Cf, the tag block, or another default-ignorable code point: trial 25, `sa\u034fx\ufe0fpy` printed as "saxpy"). */
const RAW_INVISIBLE = /[\p{Cf}\p{Default_Ignorable_Code_Point}\u{e0000}-\u{e007f}]/u;

async function refusal(fn: () => unknown): Promise<KerncapError> {
  try {
    await fn();
  } catch (e) {
    if (e instanceof KerncapError) return e;
    throw e;
  }
  throw new Error("no refusal");
}

/**
 * The victim of a planted link: a file outside the folder, and links to it at `FILE.tmp-<pid>` for
 * this process's pid and the next 64 (what kerncap's writers named their temps).
 */
function plantTempLinks(file: string): { victim: string; intact: () => boolean } {
  const victim = join(tempDir(), "victim.txt");
  writeFileSync(victim, "precious\n");
  for (let pid = process.pid; pid < process.pid + 64; pid++) symlinkSync(victim, `${file}.tmp-${pid}`);
  return { victim, intact: () => readFileSync(victim, "utf8") === "precious\n" };
}

function outcome(id: string, o: Partial<Outcome> = {}): Outcome {
  return fakeOutcome({ id, path: `/x/${id}` }, { at: "2026-01-01T00:00:00.000Z", ...o });
}

function record(id: string, o: Partial<CheckRecord> = {}): CheckRecord {
  return {
    ...outcome(id),
    status: "ok",
    time: { verdict: "no-baseline", ratio: null, low: null, high: null, baselineMedianUs: null, slowerPct: 10, reason: null },
    worker: 0,
    gpu: null,
    shard: null,
    ...o,
  };
}

/** Records as a results file holds them, each with its authenticator (written as check writes them). */
const jsonl = (recs: object[]) => recs.map((r) => recordLine("check-record", r)).join("");

/** A corpus of one capture, and runCheck options whose workers answer `o` without a GPU. */
async function oneCaptureCheck(results: string, o: Partial<Outcome> = {}, extra: Partial<CheckOptions> = {}): Promise<CheckOptions> {
  const root = join(tempDir(), "corpus");
  await makeCapture(join(root, "a"));
  const open: OpenRunner = () => ({ run: async (t) => ({ ...outcome(t.id), path: t.path, ...o }), kill() {}, close: async () => {} });
  return checkOptions([root], results, () => open, extra);
}

describe("files written beside the user's: no link is followed", () => {
  test("--junit into a folder where links to another file are planted at FILE.tmp-<pid> for the next pids: that file is untouched", async () => {
    const dir = tempDir();
    const junit = join(dir, "check.xml");
    const { intact } = plantTempLinks(junit);
    const r = mergeResults([writeResults(dir, [record("a")])], { slowerPct: 10 });
    writeJunit(junit, r);
    expect(intact()).toBe(true);
    expect(lstatSync(junit).isFile()).toBe(true);
    expect(readFileSync(junit, "utf8")).toContain("<testsuites");
  });

  test("--write-baseline with planted temp links: the linked file is untouched, the baseline written", async () => {
    const dir = tempDir();
    const out = join(dir, "baseline.json");
    const { intact } = plantTempLinks(out);
    const { value } = await output(() => runCli(["check", "--merge", writeResults(dir, [record("a")]), "--write-baseline", out]));
    expect(value).toBe(0);
    expect(intact()).toBe(true);
    expect(JSON.parse(readFileSync(out, "utf8")).captures.a.medianUs).toBe(10);
  });

  test("RESULTS/baseline.json a check records, with planted temp links: the linked file is untouched", async () => {
    const results = join(tempDir(), "res");
    mkdirSync(results);
    const { intact } = plantTempLinks(join(results, "baseline.json"));
    const o = await oneCaptureCheck(results);
    await output(() => runCheck(o));
    expect(intact()).toBe(true);
    expect(Object.keys(JSON.parse(readFileSync(join(results, "baseline.json"), "utf8")).captures)).toEqual(["corpus/a"]);
  });

  test("pack -o with planted temp links: the linked file is neither truncated nor written", async () => {
    const root = tempDir();
    await makeCapture(join(root, "cap"));
    const out = join(root, "cap.zip");
    const { intact } = plantTempLinks(out);
    await packCapture(join(root, "cap"), out);
    expect(intact()).toBe(true);
    expect(readFileSync(out).subarray(0, 2).toString()).toBe("PK");
  });

  test("a target that is itself a link (--junit, --write-baseline, pack -o): exit 2 naming it, nothing written through it", async () => {
    const dir = tempDir();
    const victim = join(dir, "victim.txt");
    writeFileSync(victim, "precious\n");
    const res = writeResults(dir, [record("a")]);
    for (const [opt, name] of [
      ["--junit", "j.xml"],
      ["--write-baseline", "b.json"],
    ] as const) {
      symlinkSync(victim, join(dir, name));
      const { value, err } = await output(() => runCli(["check", "--merge", res, opt, join(dir, name)]));
      expect(value, err).toBe(2);
      expect(err).toContain(`${join(dir, name)} (${opt}) is a symbolic link`);
      expect(lstatSync(join(dir, name)).isSymbolicLink()).toBe(true);
    }
    // -o a link to an archive of kerncap's elsewhere, with --force: refused, never replaced nor written through
    await makeCapture(join(dir, "cap"));
    const other = join(tempDir(), "other.zip");
    await packCapture(join(dir, "cap"), other);
    const before = readFileSync(other);
    symlinkSync(other, join(dir, "cap.zip"));
    const e = await refusal(() => packCapture(join(dir, "cap"), join(dir, "cap.zip"), { force: true }));
    expect(e.code).toBe("E_UNSAFE_PATH");
    expect(readFileSync(other).equals(before)).toBe(true);
    expect(lstatSync(join(dir, "cap.zip")).isSymbolicLink()).toBe(true);
    expect(readFileSync(victim, "utf8")).toBe("precious\n");
  });

  test("results.jsonl a link (check --resume): refused, the linked file neither cut nor appended to", async () => {
    const results = join(tempDir(), "res");
    mkdirSync(results);
    const victim = join(tempDir(), "victim.jsonl");
    writeFileSync(victim, "");
    symlinkSync(victim, join(results, RESULTS_FILE));
    const o = await oneCaptureCheck(results, {}, { resume: true });
    const { error } = await output(() => runCheck(o));
    expect(error).toBeInstanceOf(KerncapError);
    expect((error as KerncapError).code).toBe("E_UNSAFE_PATH");
    expect((error as KerncapError).message).toContain(`${join(results, RESULTS_FILE)} (the check's results file) is a symbolic link`);
    expect(readFileSync(victim, "utf8")).toBe("");
  });

  test("results.jsonl a dangling link: refused, no file created where it points", async () => {
    for (const resume of [false, true]) {
      const results = join(tempDir(), "res");
      mkdirSync(results);
      const target = join(tempDir(), "created.jsonl");
      symlinkSync(target, join(results, RESULTS_FILE));
      const o = await oneCaptureCheck(results, {}, { resume });
      const { error } = await output(() => runCheck(o));
      expect((error as KerncapError).code, String(error)).toBe("E_UNSAFE_PATH");
      expect(existsSync(target)).toBe(false);
    }
  });

  test("profile/ a link to another folder: refused before the profiler runs, nothing written there", async () => {
    const root = tempDir();
    const dir = join(root, "cap");
    await makeCapture(dir);
    const elsewhere = join(root, "elsewhere");
    mkdirSync(elsewhere);
    symlinkSync(elsewhere, join(dir, "profile"));
    // a fake ncu that writes the report where it is told and says it ran
    const bin = join(root, "bin");
    mkdirSync(bin);
    const ran = join(root, "ncu-ran");
    writeFileSync(
      join(bin, "ncu"),
      `#!/bin/bash\ntouch ${ran}\nwhile [ $# -gt 0 ]; do if [ "$1" = --export ]; then touch "$2.ncu-rep"; fi; shift; done\nexit 1\n`,
    );
    chmodSync(join(bin, "ncu"), 0o755);
    const path = process.env.PATH;
    process.env.PATH = `${bin}:${path}`;
    try {
      const { value, err } = await output(() => runCli(["profile", dir]));
      expect(value, err).toBe(2);
      expect(err).toContain("profile");
      expect(err).toContain("symbolic link");
    } finally {
      process.env.PATH = path;
    }
    expect(existsSync(ran)).toBe(false);
    expect(readdirSync(elsewhere)).toEqual([]);
  });
});

/** Write records as a results file in dir; @returns its path. */
function writeResults(dir: string, recs: object[], name = "r.jsonl"): string {
  const p = join(dir, name);
  writeFileSync(p, jsonl(recs));
  return p;
}

describe("untrusted text never reaches a terminal raw", () => {
  /** A packed capture whose archive is rewritten: index `idx` (from the packed one) and entries renamed under `root`. */
  async function evilArchive(edit: (idx: PackIndex) => PackIndex) {
    const dir = tempDir();
    await makeCapture(join(dir, "cap"));
    const p = await packCapture(join(dir, "cap"), join(dir, "cap.zip"));
    const entries = readRawZip(p.archive);
    const idx = edit(JSON.parse(new TextDecoder().decode(Bun.inflateSync(entries[0]!.data as Uint8Array<ArrayBuffer>))) as PackIndex);
    const rename = (n: string) => `${idx.root}${n.slice("cap".length)}`;
    const files = idx.files.map((f) => ({ ...f, entry: rename(f.entry) }));
    const out = join(dir, "evil.zip");
    writeFileSync(
      out,
      rawZip([storedEntry(`${idx.root}/${PACK_INDEX}`, JSON.stringify({ ...idx, files })), ...entries.slice(1).map((e) => ({ ...e, name: rename(e.name) }))]),
    );
    return { dir, archive: out };
  }

  test("an archive's index warnings with ESC, OSC, C1, U+202E and newlines: unpack prints each escaped, on one line", async () => {
    const a = await evilArchive((idx) => ({ ...idx, warnings: [HOSTILE_TEXT] }));
    const { value, err } = await output(() => runCli(["unpack", a.archive, "-o", join(a.dir, "out")]));
    expect(value, err).toBe(0);
    expect(err).not.toMatch(RAW_CONTROLS);
    const line = err.split("\n").find((l) => l.includes("noted at pack time"))!;
    expect(line).toContain("k\\x1b]0;PWNED\\x07\\x1b[2J\\x9b31m\\u202eexe.txt\\u2028\\nFAKE: all good");
    expect(err).not.toMatch(/^FAKE/m);
  });

  test("an archive's root folder named with ESC and a newline: exit 2 naming it escaped, no folder made", async () => {
    const a = await evilArchive((idx) => ({ ...idx, root: "cap\x1b]0;PWNED\x07\nx" }));
    const cwd = process.cwd();
    process.chdir(a.dir);
    try {
      const { value, err } = await output(() => runCli(["unpack", a.archive]));
      expect(value, err).toBe(2);
      expect(err).not.toMatch(RAW_CONTROLS);
      expect(err).toContain("root folder name");
    } finally {
      process.chdir(cwd);
    }
    expect(readdirSync(a.dir).sort()).toEqual(["cap", "cap.zip", "evil.zip"]);
  });

  test("check's per-capture line with a kernel name and an id holding ESC, C1, U+202E and a newline: one escaped line", () => {
    let err = "";
    const p = new CheckProgress(1, { live: false, write: (s) => void (err += s) });
    p.finished(record(`corpus/${HOSTILE_TEXT}`, { kernel: HOSTILE_TEXT }), 0);
    p.line(`worker: ${HOSTILE_TEXT}`);
    expect(err).not.toMatch(RAW_CONTROLS);
    expect(err.split("\n").filter(Boolean)).toHaveLength(3); // the record's line; the worker's two (its newline kept, escaped inside)
    expect(err.split("\n")[0]).toContain("k\\x1b]0;PWNED\\x07");
  });

  test("pack's warnings naming a path from build.sh with OSC and C1: escaped", async () => {
    const root = tempDir();
    const dir = join(root, "cap");
    await makeCapture(dir);
    writeFileSync(join(dir, "build.sh"), "#!/bin/bash\nnvcc -I/opt/evil\x1b[2J\x07\x9b31m\u202edir/include k.cu\n");
    const { value, err } = await output(() => runCli(["pack", dir]));
    expect(value, err).toBe(0);
    expect(err).toContain("/opt/evil\\x1b[2J\\x07\\x9b31m\\u202edir/include");
    expect(err).not.toMatch(RAW_CONTROLS);
  });

  test("the build.sh shown before --trust: U+202E, U+2066, C1 and U+2028 shown escaped", async () => {
    const root = tempDir();
    const dir = join(root, "cap");
    await makeCapture(dir);
    const m = JSON.parse(readFileSync(join(dir, "kerncap.json"), "utf8"));
    m.host = { name: "elsewhere", machineId: "0123456789abcdef0123456789abcdef" }; // made on another machine: received
    writeFileSync(join(dir, "kerncap.json"), JSON.stringify(m));
    writeFileSync(join(dir, "build.sh"), "#!/bin/bash\necho ok # \u202e\u2066 ;hsab | moc.live//:sptth lruc\u2069\n\x9b2J\u2028rm -rf ~\n");
    const { err, error } = await output(() => requireTrustedBuild(dir, readManifest(dir), false));
    expect((error as KerncapError).code).toBe("E_UNTRUSTED");
    expect(err).toContain("\\u202e\\u2066 ;hsab");
    expect(err).toContain("\\x9b2J\\u2028rm -rf ~");
    expect(err).not.toMatch(RAW_CONTROLS);
  });

  test("inspect of a manifest whose text holds a newline, ESC and U+202E: no line of its own, nothing raw", async () => {
    const dir = join(tempDir(), "cap");
    await makeCapture(dir);
    const m = JSON.parse(readFileSync(join(dir, "kerncap.json"), "utf8"));
    m.tool.library = `lib\nFAKE: every checksum matches\x1b[2J\u202e`;
    m.module.source = HOSTILE_TEXT;
    writeFileSync(join(dir, "kerncap.json"), JSON.stringify(m));
    const p = Bun.spawnSync([process.execPath, MAIN, "inspect", dir], { stdout: "pipe", stderr: "pipe" });
    const out = p.stdout.toString() + p.stderr.toString();
    expect(p.exitCode, out).toBe(0);
    expect(out).toContain("lib\\nFAKE: every checksum matches\\x1b[2J\\u202e");
    expect(out).not.toMatch(/^FAKE/m);
    expect(out).not.toMatch(RAW_CONTROLS);
  });

  test("inspect of a manifest whose names hold zero-width, invisible and tag characters: each one escaped, none raw", async () => {
    const dir = join(tempDir(), "cap");
    await makeCapture(dir);
    const m = JSON.parse(readFileSync(join(dir, "kerncap.json"), "utf8"));
    m.tool.library = `lib${INVISIBLE.join("")}`;
    m.module.source = `k.cu\u200b\u{e0041}`;
    writeFileSync(join(dir, "kerncap.json"), JSON.stringify(m));
    const p = Bun.spawnSync([process.execPath, MAIN, "inspect", dir], { stdout: "pipe", stderr: "pipe" });
    const out = p.stdout.toString() + p.stderr.toString();
    expect(p.exitCode, out).toBe(0);
    expect(out).toContain(
      "lib\\u200b\\u200c\\u200d\\u2060\\u2064\\ufeff\\xad\\u180e\\u{e0000}\\u{e0041}\\u{e007f}\\u0600\\ufff9\\u034f\\ufe0f\\u17b4\\u115f\\u3164",
    );
    expect(out).not.toMatch(RAW_INVISIBLE);
  });

  test("the log escapes whatever it is given (a compiler's message, an error quoting a manifest); --json documents stay JSON", async () => {
    expect(escapeForTerminal(HOSTILE_TEXT)).not.toMatch(RAW_CONTROLS);
    const logged = await output(() => {
      log.warn(`nvcc said: ${HOSTILE_TEXT}`);
      log.error(new KerncapError("E_MANIFEST", HOSTILE_TEXT).message);
    });
    expect(logged.err).toContain("nvcc said: k\\x1b]0;PWNED\\x07\\x1b[2J\\x9b31m\\u202eexe.txt\\u2028");
    expect(logged.err).not.toMatch(RAW_CONTROLS);
    const dir = tempDir();
    const res = writeResults(dir, [record("a", { kernel: HOSTILE_TEXT })]);
    // a process of its own: check sets stdout aside for its data (src/cli/args.ts keepStdoutForData)
    const run = (...extra: string[]) => Bun.spawnSync([process.execPath, MAIN, "check", "--merge", res, ...extra], { stdout: "pipe", stderr: "pipe" });
    const text = run();
    expect(text.exitCode).toBe(0);
    expect(text.stdout.toString()).toContain("k\\x1b]0;PWNED");
    expect(text.stdout.toString() + text.stderr.toString()).not.toMatch(RAW_CONTROLS);
    const json = run("--json");
    expect(JSON.parse(json.stdout.toString()).captures[0].kernel).toBe(HOSTILE_TEXT);
    // the document's text holds no C1, bidi override or line separator raw (JSON.stringify escapes only C0): a terminal shows it inert
    expect(json.stdout.toString()).not.toMatch(RAW_CONTROLS);
    expect(json.stdout.toString()).not.toMatch(RAW_INVISIBLE);
    expect(json.stdout.toString()).toContain("\\u009b31m\\u202eexe.txt\\u2028");
  });

  test("on a terminal (consola's fancy reporter) a name's backquotes and underscores show as written, not as colour", () => {
    let shown = "";
    const sink = new Writable({ write: (c, _e, done) => ((shown += c.toString()), done()) });
    const fancy = createLog({ stream: sink, fancy: true });
    const name = "a `id` b _c_ d \uFDD0";
    fancy.info(`kernel ${name}`);
    fancy.warn(`kernel ${name}`);
    const plain = Bun.stripANSI(shown);
    expect(plain.split("\n").filter((l) => l.includes("kernel"))).toHaveLength(2);
    for (const l of plain.split("\n").filter((l) => l.includes("kernel"))) expect(l).toContain("kernel a `id` b _c_ d \\u{FDD0}");
    expect(shown).not.toContain("\uFDD1");
  });
});

describe("crafted results files", () => {
  test("--merge of a record whose time judgement has a null interval: exit 2 naming the file and line", async () => {
    const dir = tempDir();
    const bad = record("b", {
      status: "slower",
      time: { verdict: "slower", ratio: 1.5, low: null, high: 1.6, baselineMedianUs: 10, slowerPct: 10, reason: "x" },
    });
    const f = writeResults(dir, [record("a"), bad]);
    const e = await refusal(() => mergeResults([f], { slowerPct: 10 }));
    expect(e.code).toBe("E_RESULTS");
    expect(e.message).toContain(`${f}, line 2: time.low is null`);
    const { value, err } = await output(() => runCli(["check", "--merge", f]));
    expect(value).toBe(2);
    expect(err).not.toContain("internal error");
    // the same record in a --json document: named by its index
    const doc = join(dir, "doc.json");
    writeFileSync(doc, JSON.stringify({ captures: [record("a"), bad].map((r) => sealRecord(documentId("check-record"), r, testResultsKey())) }));
    expect((await refusal(() => mergeResults([doc], { slowerPct: 10 }))).message).toContain(`${doc}, captures[1]: time.low is null`);
  });

  test("ids __proto__ and constructor: judged against their own baseline entries, and written to a baseline, none dropped", async () => {
    const dir = tempDir();
    const samples = Array.from({ length: 20 }, (_, i) => 10 * (0.98 + (0.04 * i) / 19));
    const entry = { kernel: "k", device: H200, samplesUs: samples, medianUs: 10, at: "2026-01-01T00:00:00.000Z" };
    const base = join(dir, "base.json");
    writeFileSync(
      base,
      `{"schema":"${BASELINE_SCHEMA}","captures":{"__proto__":${JSON.stringify(entry)},"constructor":${JSON.stringify(entry)},"toString":${JSON.stringify(entry)}}}`,
    );
    const f = writeResults(
      dir,
      ["__proto__", "constructor", "toString", "hasOwnProperty"].map((id) => record(id)),
    );
    const r = mergeResults([f], { slowerPct: 10, baseline: base });
    expect(r.captures.map((c) => `${c.id}: ${c.time?.verdict}`).sort()).toEqual([
      "__proto__: same",
      "constructor: same",
      "hasOwnProperty: no-baseline",
      "toString: same",
    ]);
    const out = join(dir, "out.json");
    mergeResults([f], { slowerPct: 10, writeBaseline: out });
    expect(Object.keys(JSON.parse(readFileSync(out, "utf8")).captures).sort()).toEqual(["__proto__", "constructor", "hasOwnProperty", "toString"]);
    const { value, err } = await output(() => runCli(["check", "--merge", f, "--baseline", base]));
    expect(value, err).toBe(0);
    // a baseline written by writeBaseline reads back with the same ids
    writeBaseline(join(dir, "again.json"), JSON.parse(readFileSync(out, "utf8")));
    expect(Object.keys(JSON.parse(readFileSync(join(dir, "again.json"), "utf8")).captures)).toHaveLength(4);
  });
});

describe("bounded expressions", () => {
  test("tune --grid of 20 000 nested parentheses, or 3 000 signs: E_USAGE (exit 2), no stack overflow", () => {
    for (const src of ["(".repeat(20000) + "1" + ")".repeat(20000), "-".repeat(3000) + "1", "(".repeat(2000) + "1" + ")".repeat(2000)]) {
      let e: unknown;
      try {
        evalGrid(src, { M: 1 });
      } catch (x) {
        e = x;
      }
      expect(e).toBeInstanceOf(KerncapError);
      expect((e as KerncapError).code).toBe("E_USAGE");
      expect((e as KerncapError).message.length).toBeLessThan(400);
    }
    expect(evalGrid("cdiv(M, 2) * ((((3))))", { M: 8 })).toEqual([12, 1, 1]);
    expect(() => evalGrid("constructor", {})).toThrow("unknown name constructor");
    expect(() => evalGrid("constructor(1, 2)", {})).toThrow("unknown function constructor");
  });
});

describe("hostile names through every reproducer template", () => {
  /** Names a capture could carry: a newline then a command, $(…), backticks, quotes, a comment's end, Python's triple quote, U+202E. */
  const HOSTILE = 'evil\n touch PWNED_NL\n$(touch PWNED_SUB)`touch PWNED_BT`\'"*/"""\u202e#';
  /** The same as a file name (no slash). */
  const HOSTILE_FILE = HOSTILE.replace("/", "");
  const pwned = (dir: string) => readdirSync(dir).filter((n) => n.startsWith("PWNED"));

  /** A context where every field a template reads is hostile (flags as the renderers pass them: shell words). */
  function hostileCtx(extra: Record<string, unknown> = {}): Record<string, unknown> {
    const h = HOSTILE;
    return {
      kernelName: h,
      kernelDisplayName: h,
      arch: h,
      originalSource: h,
      definitionCopy: h,
      compiledSource: h,
      tuSource: h,
      sliceKind: h,
      sliceReason: h,
      projectRoot: h,
      flags: TEMPLATE_ESCAPES.shq!(`-DX=${h}`),
      flagsFrom: h,
      assumed: h,
      missing: h,
      method: h,
      copiedCount: 1,
      referenced: 0,
      overlay: false,
      rdc: false,
      sliced: true,
      sourceCopy: h,
      files: [{ original: h, copy: h }],
      kernelFile: h,
      tritonVersion: h,
      python: h,
      sourceFile: h,
      originalCopy: h,
      command: h,
      match: h,
      matchIndex: h,
      device: h,
      pinnedSummary: h,
      autotuneSummary: h,
      numWarps: h,
      ...extra,
    };
  }

  function render(frontend: string, ctx: Record<string, unknown>): string {
    const out = tempDir();
    renderTemplateDir(join(CHECKOUT_TEMPLATES, frontend), out, ctx);
    return out;
  }

  /** The README holds no raw line of the name: its newline, bidi override and controls are escaped. */
  function readmeIsInert(out: string): void {
    const md = readFileSync(join(out, "README.md"), "utf8");
    expect(md).not.toMatch(/^ touch PWNED_NL/m);
    expect(md).not.toContain("\u202e");
    expect(md).toContain("evil\\n touch PWNED_NL");
  }

  /** A fake compiler on PATH that writes the file after -o and records its arguments. */
  function fakeTool(name: string): { bin: string; argsFile: string } {
    const bin = tempDir();
    const argsFile = join(bin, "args");
    writeFileSync(
      join(bin, name),
      `#!/bin/bash\nprintf '%s\\n' "$@" >>"${argsFile}"\nwhile [ $# -gt 0 ]; do if [ "$1" = -o ]; then : >"$2"; fi; shift; done\n`,
    );
    chmodSync(join(bin, name), 0o755);
    return { bin, argsFile };
  }

  function runScript(out: string, env: Record<string, string>): { code: number; err: string } {
    const syntax = Bun.spawnSync(["bash", "-n", join(out, "build.sh")], { stderr: "pipe" });
    expect(syntax.exitCode, syntax.stderr.toString()).toBe(0);
    const p = Bun.spawnSync(["bash", join(out, "build.sh")], { cwd: out, env: { ...process.env, ...env }, stdout: "pipe", stderr: "pipe" });
    return { code: p.exitCode ?? -1, err: p.stderr.toString() };
  }

  for (const sliced of [true, false]) {
    test(`CUDA build.sh (${sliced ? "sliced" : "whole TU"}) and README.md: nothing from the name runs; nvcc gets the names as single words`, () => {
      const out = render("cuda", hostileCtx({ sliced, rdc: !sliced, tuSource: HOSTILE_FILE, compiledSource: HOSTILE_FILE }));
      mkdirSync(join(out, "src"));
      writeFileSync(join(out, "src", HOSTILE_FILE), "__global__ void k() {}\n");
      const nvcc = fakeTool("nvcc");
      const r = runScript(out, { NVCC: join(nvcc.bin, "nvcc") });
      expect(r.code, r.err).toBe(0);
      expect(pwned(out)).toEqual([]);
      const args = readFileSync(nvcc.argsFile, "utf8");
      expect(args).toContain(`-DX=${HOSTILE}\n`); // the flag is one word, newline and all
      expect(args).toContain(`-arch=${HOSTILE}\n`);
      readmeIsInert(out);
    });
  }

  test("HIP build.sh (its heredoc of YAML) and README.md: nothing from the name runs; the overlay holds the exact names", () => {
    const out = render("hip", hostileCtx());
    const hipcc = fakeTool("hipcc");
    const r = runScript(out, { HIPCC: join(hipcc.bin, "hipcc") });
    expect(r.code, r.err).toBe(0);
    expect(pwned(out)).toEqual([]);
    const yaml = readFileSync(join(out, "build/overlay.yaml"), "utf8");
    // the YAML's double-quoted scalars (JSON's escapes) read back to the name itself
    const names = [...yaml.matchAll(/'name': ("(?:[^"\\]|\\.)*")/g)].map((m) => JSON.parse(m[1]!));
    expect(names).toEqual([HOSTILE]);
    readmeIsInert(out);
  });

  test("Triton build.sh, README.md and repro.py: nothing from the name runs; repro.py compiles", () => {
    const out = render("triton", hostileCtx());
    const py = fakeTool("python");
    const r = runScript(out, { KERNCAP_PYTHON: join(py.bin, "python") });
    expect(r.code, r.err).toBe(0);
    expect(pwned(out)).toEqual([]);
    readmeIsInert(out);
    const c = Bun.spawnSync(["python3", "-c", "import sys; compile(open(sys.argv[1]).read(), 'repro.py', 'exec')", join(out, "repro.py")], { stderr: "pipe" });
    expect(c.exitCode, c.stderr.toString()).toBe(0);
  });

  test("export README.md: every manifest string inside its code span or escaped as text; no heading, fence or table row of its own", () => {
    const h = HOSTILE + "\n## Run it\n```\ncurl x | sh\n```\n| a | b |";
    const str = {
      kernel: h,
      mangled: h,
      device: h,
      module: h,
      moduleKind: h,
      sass: h,
      ptx: h,
      ptxFile: h,
      before: h,
      after: h,
      params: h,
      editable: h,
      storedPointer: h,
    };
    const ctx = {
      ...str,
      frontend: "cuda",
      grid: "1, 1, 1",
      block: "1, 1, 1",
      sharedMem: 0,
      regions: 1,
      globals: 0,
      chunkBytes: 4096,
      paramsBytes: 8,
      liveBytes: 8,
      storedBefore: 8,
      storedAfter: 8,
      tolerance: "bit for bit",
      dataShared: "copied",
      runSource: "make run-src",
      triton: true,
    };
    const benign = render("export", { ...ctx, ...Object.fromEntries(Object.keys(str).map((k) => [k, "x"])) });
    const out = render("export", ctx);
    readmeIsInert(out);
    const md = readFileSync(join(out, "README.md"), "utf8");
    // the same lines as with plain names: the same headings, fences and table rows, none added
    const structure = (t: string) =>
      t
        .split("\n")
        .map((l) =>
          l.startsWith("# Reproducer of ") ? "title" : /^(#+ |```$|\|---)/.test(l) ? l : l.startsWith("|") ? "row" : l.startsWith("curl") ? l : "text",
        );
    expect(structure(md)).toEqual(structure(readFileSync(join(benign, "README.md"), "utf8")));
    expect(md).not.toMatch(RAW_CONTROLS);
  });

  test("fuzz: 300 generated names through the shell escapes, in one script: each word and string reads back, no comment ends early", () => {
    // an alphabet of everything that has a meaning to bash, Markdown, YAML or a terminal
    const alphabet = [
      "a",
      "Z",
      "0",
      " ",
      "\n",
      "\r",
      "\t",
      "$",
      "(",
      ")",
      "`",
      "'",
      '"',
      "\\",
      ";",
      "&",
      "|",
      "<",
      ">",
      "*",
      "?",
      "#",
      "!",
      "~",
      "{",
      "}",
      "[",
      "]",
      "=",
      "%",
      "/",
      "-",
      "\x1b",
      "\x07",
      "\x9b",
      "\u202e",
      "\u2028",
      "é",
      "😀",
    ];
    let seed = 12345;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    const names = Array.from({ length: 300 }, () => Array.from({ length: 1 + rand(24) }, () => alphabet[rand(alphabet.length)]).join(""));
    const T = TEMPLATE_ESCAPES;
    const script = names.map((s) => `# ${T.shComment!(s)}\nprintf '%s\\0' ${T.shq!(s)} "${T.dq!(s)}"`).join("\n") + "\n";
    const dir = tempDir();
    writeFileSync(join(dir, "fuzz.sh"), script);
    const p = Bun.spawnSync(["bash", join(dir, "fuzz.sh")], { cwd: dir, stdout: "pipe", stderr: "pipe" });
    expect(p.exitCode, p.stderr.toString()).toBe(0);
    const got = p.stdout.toString().split("\0").slice(0, -1);
    expect(got).toEqual(names.flatMap((s) => [s, escapeForTerminal(s, { oneLine: true })]));
    expect(readdirSync(dir)).toEqual(["fuzz.sh"]);
    for (const s of names) {
      expect(T.mdCode!(s)).not.toMatch(RAW_CONTROLS);
      expect(T.mdCode!(s)).not.toContain("\n");
      expect(T.mdText!(s).replace(/\\./g, "")).not.toMatch(/[\n|`*_<[\]&]/); // every special character escaped
      // a table row: GFM ends a cell at each unescaped `|`, before code spans: one cell, whatever the name
      expect(`| a | ${T.mdCodeCell!(s)} |`.split(/(?<!\\)\|/).length, s).toBe(4);
    }
  });

  test("README templates: a code span in a table row is mdCodeCell, and text escapes `&` (adversary 74: a compile flag's `|` ended the cell, then a link and <img> rendered; `&ZeroWidthSpace;` became the character)", () => {
    const flags = "-DX=<img src=https://evil.example/p.png> [Download the fix](https://evil.example/fix.sh) |";
    const row = `| compile flags | ${TEMPLATE_ESCAPES.mdCodeCell!(flags)} |`;
    expect(row.split(/(?<!\\)\|/).length).toBe(4); // two cells: the flags stay in theirs, in one code span
    expect(TEMPLATE_ESCAPES.mdText!("H100&ZeroWidthSpace; SXM&rlm;")).toBe("H100\\&ZeroWidthSpace; SXM\\&rlm;");
    const misuse: string[] = [];
    for (const f of new Bun.Glob("**/*.hbs").scanSync(join(import.meta.dir, "../../templates")))
      readFileSync(join(import.meta.dir, "../../templates", f), "utf8")
        .split("\n")
        .forEach((l, i) => {
          if (/\|/.test(l.replace(/{{[^}]*}}/g, "")) && l.includes("{{mdCode ")) misuse.push(`${f}:${i + 1}`);
        });
    expect(misuse).toEqual([]);
  });

  test("the Python and C literal escapes read back to the name in python3 and a C compiler", () => {
    const py = Bun.spawnSync(["python3", "-c", `import sys; sys.stdout.write(${TEMPLATE_ESCAPES.pyStr!(HOSTILE)})`], { stdout: "pipe", stderr: "pipe" });
    expect(py.stdout.toString(), py.stderr.toString()).toBe(HOSTILE);
    const dir = tempDir();
    writeFileSync(
      join(dir, "t.c"),
      `#include <stdio.h>\n/* ${TEMPLATE_ESCAPES.cComment!(HOSTILE)} */\nint main(void) { fputs(${TEMPLATE_ESCAPES.cStr!(HOSTILE)}, stdout); return 0; }\n`,
    );
    const cc = Bun.spawnSync(["cc", "-o", join(dir, "t"), join(dir, "t.c")], { stderr: "pipe" });
    expect(cc.exitCode, cc.stderr.toString()).toBe(0);
    expect(Bun.spawnSync([join(dir, "t")], { stdout: "pipe" }).stdout.toString()).toBe(HOSTILE);
    expect(pwned(dir)).toEqual([]);
  });
});

describe("bidi controls and line separators in the files a viewer renders", () => {
  test("JUnit XML and the HTML reports show U+202E, U+2066 and U+2028 as \\uNNNN, never raw; C1 controls are not HTML characters", async () => {
    const { xmlEscape } = await import("../../src/check/junit.ts");
    const { esc } = await import("../../src/util/html-report.ts");
    const hostile = "ker\u202enel\u2066x\u2028y\u0085z<b>";
    for (const out of [xmlEscape(hostile), xmlEscape(hostile, true), esc(hostile)]) {
      expect(out).not.toMatch(/[\u202a-\u202e\u2066-\u2069\u2028\u2029]/);
      expect(out).toContain("\\u202e");
      expect(out).toContain("\\u2028");
      expect(out).not.toContain("<b>");
    }
    expect(esc(hostile)).not.toContain("\u0085");
    // and JUnit XML shows DEL and the C1 controls (U+009B is a CSI by itself) as text, as a terminal does
    const c1 = "A\u009b2JC\u0085D\u007f";
    for (const out of [xmlEscape(c1), xmlEscape(c1, true)]) {
      expect(out).not.toMatch(/[\u007f-\u009f]/);
      expect(out).toContain("\\x9b");
    }
  });

  test("a manifest holding C1, bidi, line-separator and zero-width characters as JSON escapes keeps them escaped through pack, unpack and export (adversary 76 #09: written raw)", async () => {
    const d = tempDir();
    const cap = join(d, "c1");
    expect((await output(() => runCli(["demo", cap]))).value).toBe(0);
    rmSync(join(cap, "kerncap-made-here.json"), { force: true });
    const mf = join(cap, "kerncap.json");
    const m = JSON.parse(readFileSync(mf, "utf8"));
    // a device name so is refused when the manifest is read (no device, kernel or symbol name holds one: adversary 90 #05)
    const named = JSON.parse(readFileSync(mf, "utf8"));
    named.device.name = "H100\u009b2J\u009b31m \u202eevil\u2028x\u200b";
    writeFileSync(mf, jsonText(named, 2) + "\n");
    const refusedPack = await output(() => runCli(["pack", cap, "-o", join(d, "c0.zip")]));
    expect(refusedPack.value).toBe(2);
    expect(refusedPack.err).toContain("device.name: holds a control character");
    // the application's own words (its command line) may hold them: kept as escapes through pack, unpack and export
    m.command = [...m.command, "H100\u009b2J\u009b31m \u202eevil\u2028x\u200b"];
    writeFileSync(mf, jsonText(m, 2) + "\n");
    const raw = /[\u007f-\u009f\u200b\u202e\u2028]/;
    expect(readFileSync(mf, "utf8")).not.toMatch(raw);
    expect((await output(() => runCli(["pack", cap, "-o", join(d, "c1.zip")]))).value).toBe(0);
    const packed = readRawZip(join(d, "c1.zip")).find((e) => e.name.endsWith("/kerncap.json"))!;
    const packedText = new TextDecoder().decode(packed.method === 8 ? inflateSync(packed.data) : packed.data);
    expect(JSON.parse(packedText).command).toEqual(m.command);
    expect(packedText).not.toMatch(raw);
    expect((await output(() => runCli(["unpack", join(d, "c1.zip"), "-o", join(d, "c1-un")]))).value).toBe(0);
    const exported = await output(() => runCli(["export", cap, "-o", join(d, "c1-exp"), "--trust"]));
    expect(exported.value, exported.err).toBe(0);
    for (const f of [join(d, "c1-un", "kerncap.json"), join(d, "c1-exp", "data", "kerncap.json")]) {
      const text = readFileSync(f, "utf8");
      expect(text, f).not.toMatch(raw);
      if (f.includes("c1-un")) expect(JSON.parse(text).command, f).toEqual(m.command); // the same value, spelled as escapes (export ships no command line)
    }
  });

  test("zero-width and invisible format characters (Cf, tags) are escaped the same in JUnit, HTML, CSV and on the terminal", async () => {
    const { xmlEscape } = await import("../../src/check/junit.ts");
    const { esc, csv } = await import("../../src/util/html-report.ts");
    const hostile = `sa${INVISIBLE.join("x")}py`;
    for (const out of [
      xmlEscape(hostile),
      xmlEscape(hostile, true),
      esc(hostile),
      csv([[hostile]]),
      escapeForTerminal(hostile),
      escapeForTerminal(hostile, { oneLine: true }),
    ]) {
      expect(out).not.toMatch(RAW_INVISIBLE);
      expect(out).toContain("\\u200b");
      expect(out).toContain("\\u{e0041}");
    }
  });
});

describe("results, baseline and merge inputs from someone else", () => {
  test("a FIFO as check --merge, eval --merge, --baseline or the results file to resume: refused at once (exit 2), never a hang", async () => {
    const { mergeEval } = await import("../../src/eval/report.ts");
    const { readBaseline } = await import("../../src/check/baseline.ts");
    const { RecordLog, CHECK_RECORDS } = await import("../../src/check/results.ts");
    const dir = tempDir();
    const fifo = join(dir, "results.jsonl");
    expect(Bun.spawnSync(["mkfifo", fifo]).exitCode).toBe(0);
    const t0 = performance.now();
    for (const [fn, code] of [
      [() => mergeResults([fifo], { slowerPct: 10 }), "E_RESULTS"],
      [() => mergeEval([fifo]), "E_RESULTS"],
      [() => readBaseline(fifo), "E_BASELINE"],
      [() => RecordLog.openKind(fifo, CHECK_RECORDS, { resume: true, previous: join(dir, "old") }), "E_RESULTS"],
    ] as [() => unknown, "E_RESULTS" | "E_BASELINE"][]) {
      const e = await refusal(fn);
      expect(e.code).toBe(code);
      expect(e.exitCode).toBe(2);
    }
    expect(performance.now() - t0).toBeLessThan(5_000);
  });

  test("a results file past 64 MiB is refused before it is read (its records' text would be multiplied by the reports)", async () => {
    const { readResults } = await import("../../src/check/results.ts");
    const dir = tempDir();
    const big = join(dir, "big.jsonl");
    writeFileSync(big, "");
    Bun.spawnSync(["truncate", "-s", `${(64 << 20) + 1}`, big]);
    const e = await refusal(() => readResults(big));
    expect(e.code).toBe("E_RESULTS");
    expect(e.message).toContain("more than the 64 MiB");
  });

  test("a --merge of files past 256 MiB in all is refused before any is read (each under 64 MiB)", async () => {
    const { mergeEval } = await import("../../src/eval/report.ts");
    const dir = tempDir();
    const files = Array.from({ length: 5 }, (_, i) => join(dir, `shard-${i}.jsonl`));
    for (const f of files) {
      writeFileSync(f, "");
      Bun.spawnSync(["truncate", "-s", `${60 << 20}`, f]);
    }
    for (const fn of [() => mergeResults(files, { slowerPct: 10 }), () => mergeEval(files)]) {
      const e = await refusal(fn);
      expect(e.code).toBe("E_RESULTS");
      expect(e.message).toContain("more than the 256 MiB one merge reads");
    }
  });
});

describe("output paths through another user's link (adversary 38 #09)", () => {
  // lchown to another user needs root; as another user the same layout cannot be made
  test.skipIf(process.getuid?.() !== 0)(
    "pack, unpack and export -o through a link another user made in a sticky folder anyone may write: E_UNSAFE_PATH naming it, nothing written where it points; the user's own link there is followed",
    async () => {
      const { lchownSync } = await import("node:fs");
      const root = tempDir();
      const shared = join(root, "tmp");
      mkdirSync(shared);
      chmodSync(shared, 0o1777);
      const mine = join(root, "mine");
      mkdirSync(mine);
      const cap = join(root, "cap");
      await makeCapture(cap);
      const zip = join(root, "cap.zip");
      await packCapture(cap, zip);
      const planted = join(shared, "work");
      symlinkSync(mine, planted);
      lchownSync(planted, 65534, 65534);
      for (const argv of [
        ["pack", cap, "-o", join(planted, "p.zip")],
        ["unpack", zip, "-o", join(planted, "u")],
        ["export", cap, "-o", join(planted, "e")],
      ]) {
        const r = await output(() => runCli(argv));
        expect(r.value, argv.join(" ")).toBe(2);
        expect(r.err).toContain("E_UNSAFE_PATH");
        expect(r.err).toContain("a symbolic link that another user (uid 65534) made");
      }
      expect(readdirSync(mine)).toEqual([]);
      // `..` after the link: the output path is made absolute by its text (tmp/work/.. is tmp), so the link is never walked
      const r1 = await output(() => runCli(["pack", cap, "-o", `${planted}/../p.zip`]));
      expect(r1.value).toBe(0);
      expect(existsSync(join(shared, "p.zip"))).toBe(true);
      expect(existsSync(join(root, "p.zip"))).toBe(false);
      // and a path handed on as written is judged as the kernel walks it: through the link, then up from where it led
      const { refusePlantedLinks } = await import("../../src/util/write-file.ts");
      expect(() => refusePlantedLinks(`${planted}/../x`)).toThrow("a symbolic link that another user (uid 65534) made");
      // a link in a folder of its owner's (not sticky), who can point it elsewhere at any time (adversary 40: /tmp/k08own/o)
      const theirs = join(shared, "theirs");
      mkdirSync(theirs);
      symlinkSync(mine, join(theirs, "o"));
      lchownSync(join(theirs, "o"), 65534, 65534);
      lchownSync(theirs, 65534, 65534);
      const r2 = await output(() => runCli(["pack", cap, "-o", join(theirs, "o", "p.zip")]));
      expect(r2.value).toBe(2);
      expect(r2.err).toContain("a folder of theirs");
      expect(readdirSync(mine)).toEqual([]);
      // a link of the user's own in the same folder is theirs to follow
      const own = join(shared, "own");
      symlinkSync(mine, own);
      expect((await output(() => runCli(["pack", cap, "-o", join(own, "p.zip")]))).value).toBe(0);
      expect(readdirSync(mine)).toEqual(["p.zip"]);
    },
    60_000,
  );
});
