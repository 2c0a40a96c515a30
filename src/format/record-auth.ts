/**
 * The authenticator of a results record (`kerncap check`'s results.jsonl and --json captures,
 * `kerncap eval`'s --jsonl and --json record lines): proof that a kerncap holding the results key
 * wrote it. `auth` is "hmac-sha256:KEYID:MAC": MAC the HMAC-SHA256 (64 hex digits) of the
 * record's canonical bytes (canonicalJson of the record with its document id as `schema` and
 * without `auth`), KEYID the key's id (keyId: 16 hex digits of a hash of the key, which says
 * whether two runs share a key and nothing of it). `--merge` and `--resume` of both verbs take a
 * record only with a valid one (recordAuthProblem): the consistency checks (./check-record.ts
 * recordProblem, src/eval/report.ts evalRecordProblem) cannot tell a made-up record from a run's,
 * and a file copied so that it is the user's passes the owner and mode checks.
 *
 * The results key (resultsKey): KERNCAP_RESULTS_KEY when set (hex, at least 32 digits: 16 bytes;
 * a secret the runs of a CI matrix or a Slurm array share, so that their shards merge anywhere
 * the variable is set), else a key kerncap makes once for the user (32 random bytes as hex,
 * RESULTS_KEY_FILE in the user's own state folder, ./trust-records.ts stateDir: written whole to a
 * file of its own (0600, O_EXCL|O_NOFOLLOW) and linked to its name, so two kerncaps make one; read
 * only as a regular file of the user's that no one else can read or write). Without either (no state folder of the user's own and no variable), records are written
 * without `auth`, said once (keyForWriting): no --merge or --resume takes them.
 */
import { closeSync, constants, fstatSync, fsyncSync, linkSync, openSync, readFileSync, rmSync, writeSync } from "node:fs";
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { join } from "node:path";
import { KerncapError } from "../errors.ts";
import { jsonText } from "../escape.ts";
import { nonFinite } from "./json-position.ts";
import { resultsKeyOverride, type Env } from "../env.ts";
import { log } from "../log.ts";
import { stateDir, stateFolderRisk } from "./trust-records.ts";

/** The key's file in the user's state folder. */
export const RESULTS_KEY_FILE = "results-key";
/** The record field that holds the authenticator. */
export const AUTH_FIELD = "auth";
/** The fewest hex digits KERNCAP_RESULTS_KEY may have (16 bytes). */
export const MIN_KEY_HEX = 32;
const AUTH_RE = /^hmac-sha256:([0-9a-f]{16}):([0-9a-f]{64})$/;

/** A results key: its bytes, its id (keyId) and where it came from (for messages). */
export interface ResultsKey {
  bytes: Buffer;
  id: string;
  /** "KERNCAP_RESULTS_KEY", or the key file's path. */
  from: string;
}

/** A key's id: the first 16 hex digits of SHA-256 over a label and the key (says which key, not the key). */
export const keyId = (bytes: Buffer): string => createHash("sha256").update("kerncap results key id\0").update(bytes).digest("hex").slice(0, 16);

/** What KERNCAP_RESULTS_KEY is, said in the hints. */
const KEY_HOW = `KERNCAP_RESULTS_KEY: at least ${MIN_KEY_HEX} hex digits (16 bytes) of a secret, e.g. \`openssl rand -hex 32\``;

/**
 * KERNCAP_RESULTS_KEY's key, undefined when unset or empty.
 * @throws KerncapError E_USAGE for a weaker one: not hex, fewer than MIN_KEY_HEX digits, or digits
 *   repeated as no random key is (fewer than 6 distinct: "0000…", "abab…")
 */
export function envKey(env: Env = process.env): ResultsKey | undefined {
  const raw = resultsKeyOverride(env);
  if (raw === undefined) return undefined;
  const hex = raw.trim().toLowerCase();
  const why = !/^[0-9a-f]*$/.test(hex)
    ? "is not hex"
    : hex.length < MIN_KEY_HEX
      ? `has ${hex.length} hex digits, fewer than ${MIN_KEY_HEX} (16 bytes)`
      : hex.length % 2
        ? "has an odd number of hex digits"
        : patterned(Buffer.from(hex, "hex"));
  if (why)
    throw new KerncapError("E_USAGE", `KERNCAP_RESULTS_KEY ${why}: too weak to authenticate results records`, {
      hint: `Set ${KEY_HOW}, the same for every run whose records are merged; or unset it to use your own key (in kerncap's state folder).`,
    });
  const bytes = Buffer.from(hex, "hex");
  return { bytes, id: keyId(bytes), from: "KERNCAP_RESULTS_KEY" };
}

/**
 * Why a key's bytes follow a pattern no random key of that length shows (a phrase), or undefined:
 * a few hex digits repeated (fewer than 6 distinct), a 4-byte run that comes back, bytes that count
 * up or down by one step, every byte's two digits alike (`00112233…`), fewer distinct bytes than
 * half of them, every byte a printable character (a passphrase in hex). Each is met by a random
 * 16-byte key with a chance below 1e-6. A trial's keys
 * `0123456789abcdef` twice, `0102…0f10` and `00112233…eeff` passed the digit count alone.
 */
export function patterned(b: Buffer): string | undefined {
  const hex = b.toString("hex");
  if (new Set(hex).size < 6) return "repeats a few digits, as no random key does";
  const runs = new Set<string>();
  for (let i = 0; i + 4 <= b.length; i++) {
    const w = hex.slice(2 * i, 2 * i + 8);
    if (runs.has(w)) return "repeats a run of its bytes, as no random key does";
    runs.add(w);
  }
  const steps = new Set<number>();
  for (let i = 1; i < b.length; i++) steps.add((b[i]! - b[i - 1]! + 256) % 256);
  if (steps.size === 1) return "counts up or down by one step, as no random key does";
  if ([...b].every((x) => x >> 4 === (x & 15))) return "doubles every digit, as no random key does";
  // one step for two fifths of the key, then another (`0123…ef` then `fedc…10`: adversary 32 #5); a random key's most
  // common step comes back that often with a chance below 1e-8
  const stepCount = new Map<number, number>();
  for (let i = 1; i < b.length; i++) {
    const d = (b[i]! - b[i - 1]! + 256) % 256;
    stepCount.set(d, (stepCount.get(d) ?? 0) + 1);
  }
  if (Math.max(...stepCount.values()) >= Math.max(3, Math.ceil(0.4 * (b.length - 1))))
    return "counts up or down by one step for much of its length, as no random key does";
  if (new Set(b).size < b.length / 2) return "repeats its bytes, as no random key does";
  // text in hex (xxd -p of a passphrase: adversary 31 #4 guessed one offline from a results file): every byte printable,
  // as a random 16-byte key is with a chance of (98/256)^16, about 2e-7
  if ([...b].every((x) => (x >= 0x20 && x < 0x7f) || x === 9 || x === 10 || x === 13)) return "is text written in hex (a passphrase), as no random key is";
  return undefined;
}

const cache = new Map<string, ResultsKey | string>();

/**
 * The results key: KERNCAP_RESULTS_KEY's (envKey), else the user's key file in the state folder
 * (made on first use), else a phrase saying why there is none (no state folder of the user's own,
 * or a key file that is not the user's alone). Cached per variable value and state folder.
 * @throws KerncapError E_USAGE (a weak KERNCAP_RESULTS_KEY)
 */
export function resultsKey(env: Env = process.env): ResultsKey | string {
  const fromEnv = envKey(env);
  if (fromEnv) return fromEnv;
  const state = stateDir(env);
  if (!state)
    return `no results key: KERNCAP_RESULTS_KEY is not set, and kerncap has no state folder of your own to keep one in (${stateFolderRisk() ?? "none"})`;
  const known = cache.get(state);
  if (known !== undefined) return known;
  const k = keyFile(join(state, RESULTS_KEY_FILE));
  if (typeof k !== "string") cache.set(state, k); // a missing or refused key is looked for again
  return k;
}

/**
 * The user's own key, for what says "this user, here" rather than "these runs" (src/format/made-here.ts):
 * the key file in the user's state folder (made on first use), else KERNCAP_RESULTS_KEY's (a machine
 * with no state folder of the user's own), else undefined. A KERNCAP_RESULTS_KEY set for one check
 * or eval (a shared secret of a Slurm array) does not change which captures are the user's.
 */
export function ownKey(env: Env = process.env): ResultsKey | undefined {
  const state = stateDir(env);
  if (state) {
    const known = cache.get(state);
    const k = known ?? keyFile(join(state, RESULTS_KEY_FILE));
    if (typeof k !== "string") {
      cache.set(state, k);
      return k;
    }
  }
  try {
    return envKey(env);
  } catch {
    return undefined;
  }
}

/** The key in `file`, made when absent (linked whole to its name: two kerncaps at once make one key), or why it cannot be used. */
function keyFile(file: string): ResultsKey | string {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW);
      try {
        const st = fstatSync(fd);
        const uid = process.geteuid?.();
        if (!st.isFile()) return `no results key: ${file} is not a regular file`;
        if (uid !== undefined && st.uid !== uid) return `no results key: ${file} belongs to another user (uid ${st.uid})`;
        if (st.mode & 0o077) return `no results key: ${file} can be read or written by others (mode ${(st.mode & 0o777).toString(8)}; 600 expected)`;
        const hex = readFileSync(fd, "utf8").trim();
        if (!/^[0-9a-f]{64}$/.test(hex)) return `no results key: ${file} does not hold one (64 hex digits)`;
        const bytes = Buffer.from(hex, "hex");
        return { bytes, id: keyId(bytes), from: file };
      } finally {
        closeSync(fd);
      }
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") return `no results key: ${file} cannot be read (${(e as Error).message})`;
    }
    // written whole beside it, then linked to its name: a kerncap starting at the same time (a Slurm array on a shared home) reads all of it or none; link fails on an existing name (the other's key is read)
    const tmp = `${file}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`;
    try {
      const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
      try {
        writeSync(fd, randomBytes(32).toString("hex") + "\n");
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      linkSync(tmp, file);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") return `no results key: ${file} cannot be made (${(e as Error).message})`;
    } finally {
      rmSync(tmp, { force: true });
    }
  }
  return `no results key: ${file} cannot be read`;
}

/** The reasons for no key already said (each said once per process). */
const saidNoKey = new Set<string>();

/**
 * The key a run writes its records with, or undefined when there is none (resultsKey's phrase,
 * each said once per process: the records are written without `auth`, and no --merge or --resume
 * takes them). Asked before the run, so a weak KERNCAP_RESULTS_KEY stops it before any work.
 * @throws KerncapError E_USAGE (a weak KERNCAP_RESULTS_KEY)
 */
export function keyForWriting(env: Env = process.env): ResultsKey | undefined {
  const k = resultsKey(env);
  if (typeof k !== "string") return k;
  if (!saidNoKey.has(k))
    log.warn(
      `${k}: this run's records carry no authenticator, so no --merge or --resume will take them (set ${KEY_HOW}, or give kerncap a state folder of your own)`,
    );
  saidNoKey.add(k);
  return undefined;
}

/**
 * The key records read back are verified with.
 * @throws KerncapError E_RECORD_AUTH when there is none (naming `path`, the file whose records would be verified), E_USAGE (a weak KERNCAP_RESULTS_KEY)
 */
export function keyForReading(path: string, hint: string, env: Env = process.env): ResultsKey {
  const k = resultsKey(env);
  if (typeof k !== "string") return k;
  throw new KerncapError("E_RECORD_AUTH", `${path}: its records cannot be verified: ${k}`, {
    hint: `${hint} Set ${KEY_HOW} (the one the records were written with), or give kerncap a state folder of your own.`,
  });
}

/**
 * `x` as canonical JSON: object keys sorted (by UTF-16 code unit), no space, undefined members
 * left out, strings and finite numbers as JSON.stringify writes them; a non-finite number as
 * "Infinity"/"NaN", which no record kerncap writes holds (JSON has none: JSON.parse reads 1e999 as
 * Infinity), so such a record never verifies.
 */
export function canonicalJson(x: unknown): string {
  if (typeof x === "number") return Number.isFinite(x) ? JSON.stringify(x) : String(x);
  if (Array.isArray(x)) return `[${x.map((y) => (y === undefined ? "null" : canonicalJson(y))).join(",")}]`;
  if (x && typeof x === "object") {
    const o = x as Record<string, unknown>;
    const keys = Object.keys(o)
      .filter((k) => o[k] !== undefined)
      .sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`).join(",")}}`;
  }
  return JSON.stringify(x) ?? "null";
}

/** The MAC of record `rec` (auth left out, `schema` set to `schema`) under `key`, as it is: 64 hex digits. */
function macOf(schema: string, rec: object, key: ResultsKey): string {
  const { [AUTH_FIELD]: _, ...body } = rec as Record<string, unknown>;
  return createHmac("sha256", key.bytes)
    .update(canonicalJson({ ...body, schema }))
    .digest("hex");
}

/**
 * The authenticator of `rec` as it is (a record parsed from its line: the one recordAuthProblem
 * expects), "hmac-sha256:KEYID:MAC". Writers use sealRecord, which takes the record as it reads back.
 */
export const authenticatorOf = (schema: string, rec: object, key: ResultsKey): string => `hmac-sha256:${key.id}:${macOf(schema, rec, key)}`;

/**
 * `rec` with its authenticator under `key` (any earlier `auth` replaced), or without one when
 * there is no key (keyForWriting). `schema`: the document id of its lines (documentId("check-record")…).
 */
export function sealRecord<T extends object>(schema: string, rec: T, key: ResultsKey | undefined): T & { auth?: string } {
  const { [AUTH_FIELD]: _, ...body } = rec as Record<string, unknown>;
  if (!key) return body as T;
  // as it reads back: JSON.stringify leaves out undefined members and writes -0 as 0
  return { ...(body as T), [AUTH_FIELD]: authenticatorOf(schema, JSON.parse(JSON.stringify(body)), key) };
}

/**
 * Why `raw` (a record as parsed from its line, or a --json document's capture) does not carry a
 * valid authenticator under `key` (a phrase), or undefined when it does. `schema`: its document
 * id, which the MAC covers (a line's own `schema` was checked against it).
 */
export function recordAuthProblem(schema: string, raw: unknown, key: ResultsKey): string | undefined {
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) return "it is not a record";
  const auth = (raw as Record<string, unknown>)[AUTH_FIELD];
  if (auth === undefined || auth === null)
    return "it carries no authenticator (`auth`): no kerncap holding a results key wrote it (made by hand, or by a kerncap without a key or before records carried one)";
  const m = typeof auth === "string" ? AUTH_RE.exec(auth) : null;
  if (!m) return "its authenticator (`auth`) is not one kerncap writes (hmac-sha256:KEYID:MAC)";
  if (m[1] !== key.id)
    return `it was written under another results key (key id ${m[1]}; this kerncap's, from ${key.from === "KERNCAP_RESULTS_KEY" ? "KERNCAP_RESULTS_KEY" : "your state folder"}, is ${key.id})`;
  const want = Buffer.from(macOf(schema, raw, key), "hex");
  if (!timingSafeEqual(want, Buffer.from(m[2]!, "hex"))) return "its authenticator does not match its contents: it was changed after kerncap wrote it";
  return undefined;
}

/**
 * Why `text` (a record's line, or a --json document holding records) is not the text kerncap
 * writes for `parsed` (what JSON.parse made of it: src/escape.ts jsonText, one line, or with
 * `indent` spaces), or undefined when it is. The MAC covers the parsed record, and JSON.parse keeps
 * the last of a key given twice: a key put before a record's own (`"verdict":"match"` ahead of the
 * real one) passed its authenticator while a reader that keeps the first saw it (adversary 76), as
 * did keys spelled with escapes. A line kerncap wrote reads back to itself. A text holding a
 * number JSON.parse reads as Infinity (1e999) is left to the record's own checks, which name it.
 */
export function spellingProblem(text: string, parsed: unknown, indent?: number): string | undefined {
  // JSON.stringify's spelling too (C1 and bidi characters raw: the same values), as files written before jsonText hold
  if (jsonText(parsed, indent) === text || JSON.stringify(parsed, null, indent) === text) return undefined;
  // a number JSON.parse read as Infinity: said as such by the record's own checks (json-position.ts nonFinite)
  if (nonFinite(parsed)) return undefined;
  return "its text is not the one kerncap writes for what it holds (a key given twice, or a key or value spelled with escapes or spaces kerncap does not write): it was changed after kerncap wrote it";
}

/**
 * The hint of a record refused by recordAuthProblem (E_RECORD_AUTH) on `verb`: `what` says what
 * was not done ("Nothing was merged."), `then` the way out for a record changed after it was
 * written (run the shard again, start a new file).
 */
export function recordAuthHint(verb: "merge" | "resume", what: string, then: string): string {
  const where =
    verb === "merge"
      ? `merge where the shards were written (the same account on a machine that shares its home), or give every run and the merge the same ${KEY_HOW} (docs/environment.md)`
      : `resume as the account that wrote the file, or with the KERNCAP_RESULTS_KEY it was written with`;
  return `${what} A record is taken only from a kerncap holding the results key it was written with: ${where}. A record changed after it was written is never taken: ${then}.`;
}
