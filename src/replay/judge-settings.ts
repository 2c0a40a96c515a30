/**
 * A capture's judging settings (`kerncap judge DIR …`): how its replays are compared with the
 * app's after state — tolerance, element types (all regions or one), regions compared as
 * multisets, whether the kernel is expected to be nondeterministic. Stored in the capture folder
 * (JUDGE_FILE, written with writeInCapture: a temp file and a rename, no link followed) with its
 * own SHA-256 over the settings, so that `pack`/`unpack` carry it like any file of the folder and
 * a damaged file is refused. Every replay of the folder uses them (the engine reads them at
 * openReplay: replay, validate, check's workers, tune, the MCP tools); an option given on the
 * command line overrides its setting for that run only (mergeJudging).
 *
 * A received capture's settings are the sender's: they are shown by `inspect` with the rest.
 */
import { jsonText, oneLine } from "../escape.ts";
import { shellPath } from "../util/shell-quote.ts";
import { createHash } from "node:crypto";
import { accessSync, constants, rmSync } from "node:fs";
import * as v from "valibot";
import { KerncapError } from "../errors.ts";
import { log } from "../log.ts";
import type { Manifest } from "../format/manifest.ts";
import { notOwnEntry, receivedBecause } from "../format/received.ts";
import { stateDir, stateFileRisk, trustKey, type TrustRecord } from "../format/trust-records.ts";
import { JUDGE_FILE } from "../format/file-names.ts";
import { acceptJudging, judgingAccepted } from "../format/judge-accepted.ts";

export { acceptJudging, judgingAccepted };
import { readInCapture, resolveInCapture, writeInCapture } from "../format/paths.ts";
import { elementType, unknownElementType } from "./tolerance.ts";

// the file's schema (its id, the settings' shape) is src/format/judge-file.ts: `kerncap schema judge-settings` prints it
export { JUDGE_SCHEMA } from "../format/judge-file.ts";
import { JUDGE_SCHEMA, JudgeFile, type JudgeSettings } from "../format/judge-file.ts";
import { JSON_MAX_DEPTH, jsonDepth, nonFinite } from "../format/json-position.ts";
export type { JudgeSettings } from "../format/judge-file.ts";

/** The settings as stored and hashed: keys in a fixed order, absent ones left out. */
function canonical(s: JudgeSettings): JudgeSettings {
  const out: JudgeSettings = {};
  if (s.atol !== undefined) out.atol = s.atol;
  if (s.rtol !== undefined) out.rtol = s.rtol;
  if (s.dtype !== undefined) out.dtype = s.dtype;
  if (s.dtypes && Object.keys(s.dtypes).length) out.dtypes = Object.fromEntries(Object.entries(s.dtypes).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  if (s.multiset?.length) out.multiset = [...s.multiset];
  if (s.nondeterministic !== undefined) out.nondeterministic = s.nondeterministic;
  return out;
}

const digest = (s: JudgeSettings) =>
  createHash("sha256")
    .update(JSON.stringify(canonical(s)))
    .digest("hex");

/** Every element type named is one kerncap knows. @throws KerncapError E_USAGE naming the bad one */
export function checkSettings(s: JudgeSettings): JudgeSettings {
  const types = [...(s.dtype !== undefined ? [["dtype ", s.dtype]] : []), ...Object.entries(s.dtypes ?? {}).map(([r, t]) => [`dtype ${r}=`, t])];
  for (const [what, t] of types) if (!elementType(t!)) throw unknownElementType(`--${what}${t}`, t!, what !== "dtype ");
  return s;
}

/**
 * The capture's stored settings, or undefined when it has none (no JUDGE_FILE).
 * @throws KerncapError E_JUDGE (not JSON, not the schema, a link or other non-file),
 *   E_CHECKSUM (the settings do not hash as the file says: altered or damaged)
 */
export function readJudging(dir: string): JudgeSettings | undefined {
  return readStored(dir)?.settings;
}

/**
 * The stored settings with the SHA-256 of the bytes they were read from (hex: the digest
 * `kerncap judge DIR --accept=DIGEST` takes), in one read; undefined without a file.
 * @throws KerncapError E_JUDGE (not readable, not JSON, not the schema), E_CHECKSUM (changed by hand)
 */
export function readJudgingFile(dir: string): { settings: JudgeSettings; file: string } | undefined {
  return readStored(dir);
}

function readStored(dir: string): { settings: JudgeSettings; file: string } | undefined {
  const hint = `Replace them: \`kerncap judge ${shellPath(dir)} --clear\` followed by the settings you want (--clear alone removes them), or remove ${JUDGE_FILE}.`;
  let bytes: Buffer | undefined;
  try {
    bytes = readInCapture(dir, JUDGE_FILE, 1 << 20);
  } catch (e) {
    throw new KerncapError("E_JUDGE", `${JUDGE_FILE} in ${dir} cannot be read: ${(e as Error).message}`, { hint });
  }
  if (!bytes) return undefined;
  const text = bytes.toString("utf8");
  const depth = jsonDepth(text);
  if (depth > JSON_MAX_DEPTH)
    throw new KerncapError(
      "E_JUDGE",
      `${JUDGE_FILE} in ${dir} nests ${depth} levels deep (the settings kerncap judge writes nest fewer than ${JSON_MAX_DEPTH})`,
      { hint },
    );
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new KerncapError("E_JUDGE", `${JUDGE_FILE} in ${dir} is not valid JSON: ${(e as Error).message}`, { hint });
  }
  const inf = nonFinite(json);
  if (inf) throw new KerncapError("E_JUDGE", `${JUDGE_FILE} in ${dir} is not kerncap's judging settings: ${inf}`, { hint });
  const r = v.safeParse(JudgeFile, json, { abortEarly: true });
  if (!r.success)
    throw new KerncapError(
      "E_JUDGE",
      `${JUDGE_FILE} in ${dir} is not kerncap's judging settings: ${oneLine(v.getDotPath(r.issues[0]) ?? "(top level)")}: ${oneLine(r.issues[0].message)}`,
      { hint },
    );
  if (digest(r.output.settings) !== r.output.sha256)
    throw new KerncapError("E_CHECKSUM", `checksum mismatch in ${JUDGE_FILE}: the judging settings were changed after \`kerncap judge\` wrote them`, { hint });
  return { settings: checkSettings(r.output.settings), file: createHash("sha256").update(bytes).digest("hex") };
}

/**
 * Store `s` as the capture's settings (replacing any), or remove the file when `s` is empty.
 * @returns the file's path, or undefined when none is left
 * @throws KerncapError E_USAGE (checkSettings), E_IO (a folder this user may not write), E_UNSAFE_PATH / E_IO (writeInCapture)
 */
export function writeJudging(dir: string, s: JudgeSettings): string | undefined {
  const c = canonical(checkSettings(s));
  try {
    accessSync(dir, constants.W_OK);
  } catch {
    // a read-only copy or mount: said as such, not as the temp file's EROFS with another verb's hint (a new user's finding)
    throw new KerncapError("E_IO", `${shellPath(dir)} is not writable: kerncap judge stores the capture's settings in it (${JUDGE_FILE})`, {
      hint: "Give the judging options on the command line of replay, validate or check for a run (--rtol, --atol, --dtype, --multiset), or judge a copy of your own (kerncap pack, then kerncap unpack).",
    });
  }
  if (!Object.keys(c).length) {
    // an empty setting is no file: the capture is judged as captured (resolved inside the folder, never through a link)
    const { path, stats } = resolveInCapture(dir, JUDGE_FILE);
    if (stats) rmSync(path);
    return undefined;
  }
  return writeInCapture(dir, JUDGE_FILE, judgingText(c));
}

/** The bytes writeJudging writes for settings `s` (already checked), as text. */
function judgingText(c: JudgeSettings): string {
  return jsonText({ schema: JUDGE_SCHEMA, settings: c, sha256: digest(c) }, 1) + "\n";
}

/**
 * The SHA-256 of the file writeJudging writes for `s` (hex): what the user accepts by writing them
 * (kerncap judge), taken from the bytes written, never from the file read back (a folder another
 * user can write may hold their file by then: adversary round 70).
 * @throws KerncapError E_USAGE for settings that do not check (as writeJudging)
 */
export function writtenJudgingDigest(s: JudgeSettings): string {
  return createHash("sha256")
    .update(judgingText(canonical(checkSettings(s))))
    .digest("hex");
}

/** Options of one run as the engine takes them (ReplayOptions' tolerance fields). */
export interface JudgingOptions {
  atol?: number;
  rtol?: number;
  dtype?: string;
  dtypes?: Record<string, string>;
  multiset?: string[];
  nondeterministic?: boolean;
}

/**
 * One run's judging: each option given for the run (`run`) over the stored setting (`stored`);
 * per-region types merged, the run's winning for a region both name.
 * @returns the merged options and the names of the stored settings in effect (for the verdict's "judged with the capture's settings: …")
 */
export function mergeJudging(stored: JudgeSettings | undefined, run: JudgingOptions): { options: JudgingOptions; fromCapture: string[] } {
  const s = stored ?? {};
  const fromCapture: string[] = [];
  const pick = <K extends keyof JudgingOptions>(k: K): JudgingOptions[K] => {
    if (run[k] !== undefined) return run[k];
    if (s[k] !== undefined) fromCapture.push(k);
    return s[k] as JudgingOptions[K];
  };
  const options: JudgingOptions = {
    atol: pick("atol"),
    rtol: pick("rtol"),
    dtype: pick("dtype"),
    multiset: pick("multiset"),
    nondeterministic: pick("nondeterministic"),
  };
  if (s.dtypes && Object.keys(s.dtypes).some((r) => !run.dtypes?.[r])) fromCapture.push("dtypes");
  const dtypes = { ...(s.dtypes ?? {}), ...(run.dtypes ?? {}) };
  if (Object.keys(dtypes).length) options.dtypes = dtypes;
  for (const k of Object.keys(options) as (keyof JudgingOptions)[]) if (options[k] === undefined) delete options[k];
  return { options, fromCapture };
}

/** "rtol 0.001, multiset 2, dtype 3=bf16, nondeterministic": the settings in one line. */
export function describeJudging(s: JudgeSettings): string {
  const parts: string[] = [];
  if (s.atol !== undefined) parts.push(`atol ${s.atol}`);
  if (s.rtol !== undefined) parts.push(`rtol ${s.rtol}`);
  if (s.dtype !== undefined) parts.push(`dtype ${s.dtype}`);
  for (const [r, t] of Object.entries(s.dtypes ?? {})) parts.push(`dtype ${r}=${t}`);
  if (s.multiset?.length) parts.push(`multiset ${s.multiset.join(",")}`);
  if (s.nondeterministic !== undefined) parts.push(s.nondeterministic ? "nondeterministic" : "deterministic");
  return parts.join(", ") || "none (bit-exact, types from the signature or fp32)";
}

/*
 * Whose judging settings a replay uses. A capture's kerncap-judge.json decides verdicts: its tolerances, element types and multiset regions can make any result read as
 * MATCH, and its checksum has no key (anyone can write a file that reads). The user's own capture's
 * settings are theirs; a received capture's (unpacked, another machine's, another user's folder:
 * src/format/received.ts) are the sender's, and used only once the user accepts that file
 * (`kerncap judge DIR --accept`, or setting them with `kerncap judge`), recorded in the user's state
 * folder (src/format/trust-records.ts stateDir) for that folder (its path, device, inode, owner,
 * birth time) and that file's digest: a changed file asks again (a trial: a sender's atol 1e308 and
 * "all regions as multisets" judged every edit MATCH on the receiver's machine).
 */

/**
 * Why the capture's judging settings may be someone else's, so that they are used only once
 * accepted (judgingAccepted), or undefined when they are the user's: the capture is received
 * (receivedBecause), or its JUDGE_FILE belongs to another user or others may write it (a team
 * member who copies a file of their own over a group-writable one leaves its owner the user's:
 * trial 20). `kind` says which.
 */
export function judgingNotOwn(dir: string, m: Manifest): { kind: "received" | "file"; why: string } | undefined {
  const received = receivedBecause(dir, m);
  if (received) return { kind: "received", why: received };
  let st;
  try {
    st = resolveInCapture(dir, JUDGE_FILE).stats;
  } catch {
    return undefined; // a link, not a file: readJudging refuses it (E_JUDGE)
  }
  const theirs = st && notOwnEntry(JUDGE_FILE, st);
  return theirs ? { kind: "file", why: theirs } : undefined;
}

/**
 * What is said where settings are not used (judgingNotOwn): the received capture's, or the file's
 * that another user owns or may write, with the ways out (read them, then `kerncap judge DIR
 * --accept`; for the file, also make it the user's alone).
 */
export function unusedJudgingNote(dir: string, not: { kind: "received" | "file"; why: string }, digest?: string): string {
  return not.kind === "received"
    ? `${JUDGE_FILE} of this received capture holds the sender's judging settings; not used until you accept them (${acceptCommand(dir, digest)}), the capture judged as captured: ${not.why}`
    : `${not.why}, so its judging settings may be another user's; not used until you read them and accept them (${acceptCommand(dir, digest)}: used while the file stays as it is), or make the file yours alone (chmod go-w, or kerncap judge ${shellPath(dir)} --clear and your own settings); the capture judged as captured`;
}

/** The command that accepts the settings shown: with the digest of the bytes shown (`--accept=DIGEST`: accepted only if the file is still those bytes) when known. */
export function acceptCommand(dir: string, digest?: string): string {
  return `kerncap judge ${shellPath(dir)} --accept${digest ? `=${digest}` : ""}`;
}

/**
 * Whether capture `dir` (manifest `m`) holds judging settings its replays do not use: someone
 * else's (judgingNotOwn: a received capture's, or a file another user owns or may write) not
 * accepted as they are (judgingInEffect's rule, without reading them).
 */
export function judgingUnused(dir: string, m: Manifest): boolean {
  return judgingNotOwn(dir, m) !== undefined && !judgingAccepted(dir);
}

/** The one phrase inspect and judge put after settings that are not used (judgingNotOwn's `not`), with the way out. */
export function notUsedNote(dir: string, not: { kind: "received" | "file"; why: string } | undefined, digest?: string): string {
  return !not || not.kind === "received"
    ? `NOT USED: they came with a received folder (a copy, an archive), until you accept them (${acceptCommand(dir, digest)})`
    : `NOT USED: ${not.why}, so they may be another user's; read them, then accept them (${acceptCommand(dir, digest)}) or make the file yours alone (chmod go-w)`;
}

/**
 * The judging settings a replay of capture `dir` uses: the stored ones (readJudging) of the user's
 * own capture in a file of the user's alone, or ones the user accepted (judgingNotOwn: a received
 * capture's, a file another user owns or may write); else none, with `ignored` saying why (and a
 * warning, once per call, unless `quiet`).
 * @throws KerncapError as readJudging (a file that does not read)
 */
export function judgingInEffect(dir: string, m: Manifest, quiet = false): { settings: JudgeSettings | undefined; ignored?: string } {
  const stored = readStored(dir);
  if (!stored) return { settings: undefined };
  const { settings } = stored;
  const not = judgingNotOwn(dir, m);
  if (!not || judgingAccepted(dir, stored.file)) return { settings }; // the bytes accepted are the bytes used (one read: no swap between)
  const ignored = unusedJudgingNote(dir, not);
  if (!quiet) log.warn(ignored);
  return { settings: undefined, ignored };
}
