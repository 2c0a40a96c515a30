/**
 * src/format/record-auth.ts: the results key (KERNCAP_RESULTS_KEY, refused when weak; else the
 * user's key file in the state folder, 0600, made once and checked on read) and a record's
 * authenticator (a record sealed verifies, whatever its keys' order; one field changed, none, or
 * another key's does not). The verbs' use of it: test/cpu/check.test.ts and test/cpu/eval.test.ts.
 */
import { expect, test } from "bun:test";
import { chmodSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import {
  canonicalJson,
  envKey,
  patterned,
  keyForReading,
  keyForWriting,
  recordAuthProblem,
  resultsKey,
  RESULTS_KEY_FILE,
  sealRecord,
  type ResultsKey,
} from "../../../src/format/record-auth.ts";
import { KerncapError } from "../../../src/errors.ts";
import { tempDir } from "../fixtures.ts";

const A = "7c1e9a4f2b6d08e35f9a1c7b4e2d6f08a3c5e7b9d1f2a4c6e8b0d3f5a7c9e1b2";
const B = "e4b7d1a9c3f6082b5e8a1d4c7f0b3e6a";
const key = (hex: string): ResultsKey => envKey({ KERNCAP_RESULTS_KEY: hex })!;
const SCHEMA = "kerncap.check-record/1";
const rec = {
  id: "corpus/a",
  status: "ok",
  verdict: "match",
  timing: { medianUs: 3, samplesUs: [2.9, 3, 3.1] },
  device: { name: "NVIDIA H200", arch: "sm_90" },
  shard: null,
};

/** The state folder of a fresh home of the user's own (the key file goes into $XDG_STATE_HOME/kerncap). */
const freshState = () => ({ XDG_STATE_HOME: join(tempDir(), "state"), HOME: tempDir() });

test("KERNCAP_RESULTS_KEY: hex of at least 32 digits is the key; a weaker value is refused, E_USAGE, saying why and how to make one", () => {
  expect(key(A).bytes).toEqual(Buffer.from(A, "hex"));
  expect(key(` ${A.toUpperCase()}\n`).id).toBe(key(A).id); // case and surrounding blanks are not the key
  expect(key(A).id).not.toBe(key(B).id);
  expect(envKey({})).toBeUndefined();
  // a random key is never taken for a pattern (the checks' chance on 16 random bytes is below 1e-6)
  for (let i = 0; i < 20_000; i++) expect(patterned(randomBytes(16))).toBeUndefined();
  for (const [weak, why] of [
    ["0123456789abcdef0123456789abcde", "has 31 hex digits, fewer than 32 (16 bytes)"],
    ["correct horse battery staple, surely long enough", "is not hex"],
    [`${A}0`, "has an odd number of hex digits"],
    ["ab".repeat(32), "repeats a few digits, as no random key does"],
    // patterns a digit count alone let through (a trial's keys)
    ["0123456789abcdef0123456789abcdef", "repeats a run of its bytes, as no random key does"],
    ["0102030405060708090a0b0c0d0e0f10", "counts up or down by one step, as no random key does"],
    ["00112233445566778899aabbccddeeff", "counts up or down by one step, as no random key does"],
    ["00113322554477669988bbaaddccffee", "doubles every digit, as no random key does"],
    ["0123456789abcdeffedcba9876543210", "counts up or down by one step for much of its length, as no random key does"],
    // a passphrase in hex (adversary 31 #4: guessed offline from one results file, then records forged)
    [Buffer.from("kerncap-ci-results-2026!").toString("hex"), "is text written in hex (a passphrase), as no random key is"],
  ]) {
    let e: unknown;
    try {
      envKey({ KERNCAP_RESULTS_KEY: weak });
    } catch (x) {
      e = x;
    }
    expect(e, weak).toBeInstanceOf(KerncapError);
    expect((e as KerncapError).code).toBe("E_USAGE");
    expect((e as KerncapError).message).toBe(`KERNCAP_RESULTS_KEY ${why}: too weak to authenticate results records`);
    expect((e as KerncapError).hint).toContain("openssl rand -hex 32");
    // the writers ask first: a weak key stops a run before any record
    expect(() => keyForWriting({ KERNCAP_RESULTS_KEY: weak })).toThrow(why);
  }
});

test("without the variable: a key made once in the state folder (0600, 64 hex digits), the same on every read; a key file others can read, or a link, is no key", () => {
  const env = freshState();
  const k = resultsKey(env) as ResultsKey;
  expect(typeof k).toBe("object");
  const file = join(env.XDG_STATE_HOME, "kerncap", RESULTS_KEY_FILE);
  expect(k.from).toBe(file);
  expect(statSync(file).mode & 0o777).toBe(0o600);
  expect(readFileSync(file, "utf8")).toMatch(/^[0-9a-f]{64}\n$/);
  expect((resultsKey({ ...env }) as ResultsKey).id).toBe(k.id);
  // the variable wins over the file
  expect((resultsKey({ ...env, KERNCAP_RESULTS_KEY: A }) as ResultsKey).id).toBe(key(A).id);

  const open = freshState();
  mkdirSync(join(open.XDG_STATE_HOME, "kerncap"), { recursive: true, mode: 0o700 });
  const openFile = join(open.XDG_STATE_HOME, "kerncap", RESULTS_KEY_FILE);
  writeFileSync(openFile, `${A}${A}\n`, { mode: 0o644 });
  chmodSync(openFile, 0o644);
  expect(resultsKey(open)).toBe(`no results key: ${openFile} can be read or written by others (mode 644; 600 expected)`);

  const linked = freshState();
  mkdirSync(join(linked.XDG_STATE_HOME, "kerncap"), { recursive: true, mode: 0o700 });
  symlinkSync(file, join(linked.XDG_STATE_HOME, "kerncap", RESULTS_KEY_FILE));
  expect(resultsKey(linked)).toStartWith(`no results key: ${join(linked.XDG_STATE_HOME, "kerncap", RESULTS_KEY_FILE)} cannot be read`);
});

test("no key at all (no state folder of the user's own, no variable): records are written without one, said once; reading them back is E_RECORD_AUTH naming the file", () => {
  const home = tempDir();
  chmodSync(home, 0o777); // others may swap the state folder: kerncap keeps none there
  const env = { XDG_STATE_HOME: join(home, "state"), HOME: home };
  expect(resultsKey(env)).toStartWith("no results key: KERNCAP_RESULTS_KEY is not set, and kerncap has no state folder of your own");
  let said = "";
  const orig = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((s: string) => ((said += s), true)) as typeof process.stderr.write;
  try {
    expect(keyForWriting(env)).toBeUndefined();
    expect(keyForWriting(env)).toBeUndefined();
  } finally {
    process.stderr.write = orig;
  }
  expect(said.match(/no --merge or --resume will take them/g)).toHaveLength(1);
  expect(sealRecord(SCHEMA, { ...rec, auth: "old" } as object, undefined)).toEqual(rec);
  let e: unknown;
  try {
    keyForReading("/x/results.jsonl", "Nothing was merged.", env);
  } catch (x) {
    e = x;
  }
  expect([(e as KerncapError).code, (e as KerncapError).exitCode]).toEqual(["E_RECORD_AUTH", 2]);
  expect((e as KerncapError).message).toStartWith("/x/results.jsonl: its records cannot be verified: no results key");
  expect((e as KerncapError).hint).toStartWith("Nothing was merged. Set KERNCAP_RESULTS_KEY");
});

test("a sealed record verifies as it reads back, whatever the order of its keys; one field changed, no authenticator, another key's or another kind's does not", () => {
  const k = key(A);
  const sealed = sealRecord(SCHEMA, rec, k);
  expect(sealed.auth).toMatch(new RegExp(`^hmac-sha256:${k.id}:[0-9a-f]{64}$`));
  const line = JSON.parse(JSON.stringify({ schema: SCHEMA, ...sealed }));
  expect(recordAuthProblem(SCHEMA, line, k)).toBeUndefined();
  const reordered = Object.fromEntries(Object.entries(line).reverse());
  expect(recordAuthProblem(SCHEMA, reordered, k)).toBeUndefined();
  // one field, one digit
  expect(recordAuthProblem(SCHEMA, { ...line, timing: { ...line.timing, medianUs: 3.0001 } }, k)).toBe(
    "its authenticator does not match its contents: it was changed after kerncap wrote it",
  );
  // a field added (valibot would drop it; the authenticator covers every field of the line)
  expect(recordAuthProblem(SCHEMA, { ...line, note: "x" }, k)).toContain("changed after kerncap wrote it");
  const { auth: _, ...bare } = line;
  expect(recordAuthProblem(SCHEMA, bare, k)).toStartWith("it carries no authenticator (`auth`)");
  expect(recordAuthProblem(SCHEMA, { ...line, auth: "sha256:abc" }, k)).toBe("its authenticator (`auth`) is not one kerncap writes (hmac-sha256:KEYID:MAC)");
  expect(recordAuthProblem(SCHEMA, line, key(B))).toBe(
    `it was written under another results key (key id ${k.id}; this kerncap's, from KERNCAP_RESULTS_KEY, is ${key(B).id})`,
  );
  // the document id is covered: a check record is no eval record
  expect(recordAuthProblem("kerncap.eval-record/1", line, k)).toContain("changed after kerncap wrote it");
  // JSON's 1e999 (Infinity) is never what kerncap wrote (it writes null)
  const withNull = sealRecord(SCHEMA, { ...rec, time: null }, k);
  expect(recordAuthProblem(SCHEMA, { ...withNull, schema: SCHEMA, time: Infinity }, k)).toContain("changed after");
  expect(canonicalJson({ b: [1, "x", null], a: { d: undefined, c: -0 } })).toBe('{"a":{"c":0},"b":[1,"x",null]}');
});

test("eight kerncaps making the key at once (a job array on a shared home) make one: every one reads it whole, none goes without", async () => {
  const env = freshState();
  const src = join(import.meta.dir, "../../../src/format/record-auth.ts");
  const code = `const { resultsKey } = await import(${JSON.stringify(src)}); const k = resultsKey(); console.log(typeof k === "string" ? k : k.id);`;
  const procs = Array.from({ length: 8 }, () =>
    Bun.spawn([process.execPath, "-e", code], { env: { ...process.env, ...env, KERNCAP_RESULTS_KEY: "" }, stdout: "pipe" }),
  );
  const ids = await Promise.all(procs.map(async (p) => (await new Response(p.stdout).text()).trim()));
  expect(new Set(ids).size, ids.join("\n")).toBe(1);
  expect(ids[0]).toMatch(/^[0-9a-f]{16}$/);
  expect(readdirSync(join(env.XDG_STATE_HOME, "kerncap"))).toEqual([RESULTS_KEY_FILE]); // no temp file left
});
