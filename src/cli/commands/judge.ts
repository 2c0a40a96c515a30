/**
 * `kerncap judge DIR [--atol A] [--rtol R] [--dtype T|REGION=T]… [--multiset REGION]… [--expect
 * nondeterministic|deterministic|any] [--clear]`: set how the capture's replays are judged, stored
 * in the capture folder (src/replay/judge-settings.ts) and used by every replay of it (replay,
 * validate, check, tune, the MCP tools; their own options override it for one run). With no
 * setting given, prints the settings.
 */
import { defineCommand, type ArgsDef, type ParsedArgs } from "citty";
import { resolve } from "node:path";
import { KerncapError } from "../../errors.ts";
import { collectWarnings, log } from "../../log.ts";
import { openCapture } from "../../format/capture-dir.ts";
import type { Manifest } from "../../format/manifest.ts";
import { JUDGE_LOCK, withCaptureLock } from "../../util/build-lock.ts";
import { JUDGE_FILE } from "../../format/file-names.ts";
import { MANIFEST_MAX_BYTES, readInCapture } from "../../format/paths.ts";
import {
  acceptCommand,
  acceptJudging,
  describeJudging,
  judgingAccepted,
  judgingNotOwn,
  judgingUnused,
  notUsedNote,
  readJudging,
  readJudgingFile,
  unusedJudgingNote,
  writeJudging,
  writtenJudgingDigest,
  type JudgeSettings,
} from "../../replay/judge-settings.ts";
import { declaredRegionTypesOf } from "../../frontends/index.ts"; // also the frontend registry: judgingNotOwn (receivedBecause) reads every frontend's run files (src/format/run-files.ts)
import { regionDtypeWarnings } from "../../replay/dtype-check.ts";
import { shellPath } from "../../util/shell-quote.ts";
import { multisetRegions } from "../../replay/tolerance-plan.ts";
import { elementType } from "../../replay/tolerance.ts";
import { dirArg, jsonArg, printJson, printText, toleranceOptions, trustArg, verboseArg } from "../args.ts";
import { notYours } from "../../format/received.ts";

/** The judging file's bytes as text (hex), null when there is none or it cannot be read: judge's `changed` compares them before and after. */
function storedBytes(dir: string): string | null {
  try {
    return readInCapture(dir, JUDGE_FILE, MANIFEST_MAX_BYTES)?.toString("hex") ?? null;
  } catch {
    return null;
  }
}

/** The stored settings for --clear, which replaces them: a file that does not read is said (log) and left to be replaced. */
function storedOrNote(dir: string): undefined {
  try {
    readJudging(dir);
  } catch (e) {
    log.warn(`${JUDGE_FILE} did not read (${(e as Error).message}): --clear replaces it`);
  }
  return undefined;
}

/**
 * Whether the settings read (`digest`, the SHA-256 of the bytes shown) may be accepted as asked:
 * `--accept=DIGEST` only when the file is still those bytes; plain `--accept` only where no other
 * user could have changed the file between the user's reading and this command (the folder, its way
 * and the file the user's alone: notYours, judgingNotOwn's "file").
 * @throws KerncapError E_TRUST_CHANGED (the digest differs), E_UNTRUSTED (plain --accept where others may write)
 */
function acceptable(dir: string, notOwn: { kind: "received" | "file"; why: string }, digest: string, accept: boolean | string): void {
  if (typeof accept === "string") {
    if (accept.toLowerCase().replace(/^sha256:/, "") !== digest)
      throw new KerncapError("E_TRUST_CHANGED", `${JUDGE_FILE} in ${dir} is not the file --accept=${accept} names (sha256 now ${digest}): nothing accepted`, {
        hint: `Read the settings again (kerncap judge ${shellPath(dir)}), then accept the digest it shows.`,
      });
    return;
  }
  const others = notYours(dir) ?? (notOwn.kind === "file" ? notOwn.why : undefined);
  if (others)
    throw new KerncapError(
      "E_UNTRUSTED",
      `plain --accept is not enough for ${dir}: ${others}, so ${JUDGE_FILE} could have changed since you read it: nothing accepted`,
      {
        hint: `Read them (kerncap judge ${shellPath(dir)} shows them with their digest), then run kerncap judge ${shellPath(dir)} --accept=${digest} to accept those bytes only.`,
      },
    );
}

/** The settings after this command: `prior` (nothing with `clear`) with each option given replacing its key; `expect` "any" drops the expectation. */
export function judgedSettings(
  prior: JudgeSettings | undefined,
  given: ReturnType<typeof toleranceOptions>,
  expect: string | undefined,
  clear: boolean,
): JudgeSettings {
  const s: JudgeSettings = clear ? {} : { ...(prior ?? {}) };
  if (given.atol !== undefined) s.atol = given.atol;
  if (given.rtol !== undefined) s.rtol = given.rtol;
  // stored by kerncap's name of the type (float → fp32, as inspect shows it: a new user's finding, "float" stored as typed)
  const named = (t: string) => elementType(t) ?? t;
  if (given.dtype !== undefined) s.dtype = named(given.dtype);
  if (given.dtypes) s.dtypes = { ...(s.dtypes ?? {}), ...Object.fromEntries(Object.entries(given.dtypes).map(([r, t]) => [r, named(t)])) };
  if (given.multiset) s.multiset = given.multiset;
  if (expect !== undefined) {
    if (!["nondeterministic", "deterministic", "any"].includes(expect))
      throw new KerncapError("E_USAGE", `--expect ${JSON.stringify(expect)}: give nondeterministic, deterministic or any`, {
        hint: "nondeterministic: 8 checked runs from the start; deterministic: runs that differ are a mismatch; any: find out (the default).",
      });
    if (expect === "any") delete s.nondeterministic;
    else s.nondeterministic = expect === "nondeterministic";
  }
  return s;
}

/**
 * judge's own help for the tolerance options: each stores a setting that every replay of the capture
 * uses (replay's --atol … (toleranceArgs) say the one-run override; their defaults would mislead here: an option
 * left out keeps what is stored). The names and types of toleranceArgs, so toleranceOptions reads both.
 */
const judgeArgs = {
  atol: {
    type: "string",
    description:
      "Store the absolute tolerance per element that every replay of the capture uses (|got − expected| ≤ atol + rtol·|expected|; a verb's own --atol overrides it for one run); left out, the stored one stays",
  },
  rtol: {
    type: "string",
    description: "Store the relative tolerance per element that every replay of the capture uses; left out, the stored one stays",
  },
  dtype: {
    type: "string",
    description:
      "Store the element type of the regions whose type the kernel signature does not give, or with REGION=T of one region (N in inspect's order, 0x…, param:N; repeatable; each REGION=T is added to those stored); left out, the stored types stay",
    valueHint: "T|REGION=T",
  },
  multiset: {
    type: "string",
    description:
      "Store the regions compared as multisets of elements (an atomic append or compaction): N (inspect's order), a VA 0x… inside it, param:N, changed or all; repeat or comma-separate. This run's values replace the stored list; --clear empties it",
    valueHint: "REGION",
  },
} as const satisfies ArgsDef;

export default defineCommand({
  meta: {
    name: "judge",
    description:
      "Set how a capture's replays are judged (tolerance, element types, multiset regions, expected nondeterminism), stored in the capture folder; with no setting, show them",
  },
  args: {
    ...dirArg,
    ...judgeArgs,
    expect: {
      type: "string",
      description: "nondeterministic (8 checked runs from the start), deterministic (runs that differ are a mismatch) or any (find out; the default)",
      valueHint: "KIND",
    },
    clear: { type: "boolean", description: "Start from no settings (then any given here); alone, remove them", default: false },
    accept: {
      type: "boolean",
      description:
        "Use the settings a received capture came with (the sender's: unused until accepted, for this folder and this file; settings you write with judge are accepted as you write them); --accept=DIGEST accepts them only if the file is still the one shown with that digest (needed where another user can change it)",
      default: false,
    },
    ...jsonArg,
    ...verboseArg,
  },
  run({ args, rawArgs }) {
    // every WARN line on stderr is also an entry of --json's warnings (a --dtype that does not fit its region among them)
    const warned = collectWarnings();
    try {
      const dir = String(args.dir);
      const { manifest: m } = openCapture(dir);
      // read, changed and written by one judge at a time (two at once each wrote over the other's setting: adversary 35)
      return withCaptureLock(dir, JUDGE_LOCK, "judging settings were written", () => judgeLocked(dir, m, args, rawArgs, warned));
    } finally {
      warned.stop();
    }
  },
});

/**
 * judge's work once it holds the capture's judge lock (withCaptureLock): the stored settings read, the
 * given ones merged and written, acceptance, the document or line printed.
 * @returns the exit status (0)
 */
function judgeLocked(dir: string, m: Manifest, args: ParsedArgs<typeof judgeArgs>, rawArgs: string[], warned: { list: string[] }): number {
  const given = toleranceOptions(args, rawArgs);
  const before = storedBytes(dir);
  const changing = Boolean(args.clear) || args.expect !== undefined || Object.values(given).some((x) => x !== undefined);
  // --clear starts from nothing: a stored file that no longer reads (changed by hand, damaged) is replaced, not read
  const accept = trustArg(args.accept, rawArgs, "accept");
  const read = args.clear ? storedOrNote(dir) : readJudgingFile(dir);
  const prior = read?.settings;
  let settings = prior ?? {};
  let file: string | null = prior ? resolve(dir, JUDGE_FILE) : null;
  let wrote: string | undefined; // the digest of the bytes this command wrote (what it accepts: never the file read back)
  // a received capture's settings not accepted (the sender's): a setting the user writes starts from none, never
  // adopting the sender's others with it (trial 18: --rtol kept the sender's atol 1e308 and accepted it all)
  // the same for a file another user owns or may write (trial 20: a team member copied atol 1e30 over a group-writable one)
  const notOwn = prior !== undefined ? judgingNotOwn(dir, m) : undefined;
  const unaccepted = notOwn !== undefined && !judgingAccepted(dir, read?.file);
  const senders = changing && !args.clear && !accept && prior !== undefined && unaccepted;
  if (senders)
    log.warn(
      notOwn.kind === "received"
        ? `the sender's judging settings (${describeJudging(prior)}) are not accepted: starting from none (kerncap judge ${shellPath(dir)} --accept adopts them)`
        : `the judging settings in ${JUDGE_FILE} (${describeJudging(prior)}) are not accepted (${notOwn.why}): starting from none (kerncap judge ${shellPath(dir)} --accept adopts them)`,
    );
  else if (!changing && !accept && prior !== undefined && unaccepted) log.warn(unusedJudgingNote(dir, notOwn, read?.file)); // shown, and said unused, with the digest to accept them by
  if (accept && read && notOwn) acceptable(dir, notOwn, read.file, accept);
  if (changing) {
    settings = judgedSettings(senders ? undefined : prior, given, args.expect === undefined ? undefined : String(args.expect), Boolean(args.clear) || senders);
    // every region named must be one of this capture's, before anything is written
    const params = readInCapture(dir, m.params.file, m.params.size);
    const p = params ? new Uint8Array(params) : new Uint8Array(m.params.size);
    if (settings.multiset) multisetRegions(m, p, settings.multiset);
    for (const r of Object.keys(settings.dtypes ?? {})) multisetRegions(m, p, [r], "dtype");
    // a type named now that does not fit its region (its size, the signature's type) is said, and stored as given
    for (const w of regionDtypeWarnings(m, p, given.dtypes ?? {}, declaredRegionTypesOf(m))) log.warn(w);
    file = writeJudging(dir, settings) ?? null;
    if (file) wrote = writtenJudgingDigest(settings);
  }
  // settings the user wrote, or accepted as they are: a received capture's replays use them from now on (judgingInEffect)
  if (file && (changing || accept) && judgingNotOwn(dir, m)) {
    // what is accepted is the bytes shown (read once above), or the file the user just wrote
    if (!acceptJudging(dir, changing ? wrote : read?.file))
      log.warn("kerncap keeps no state folder of your own (XDG_STATE_HOME), so a received capture's settings stay unused");
    else if (accept) log.success(`accepted: the replays of ${dir} use these settings (until ${JUDGE_FILE} changes)`);
  } else if (accept && !file) log.info(`${dir} has no judging settings to accept`);
  // a received capture's settings not accepted are shown as what they are: unused (as inspect says it);
  // no settings, nothing used (inspect's judgingUsed false too: nu10 #11)
  const used = file !== null && !judgingUnused(dir, m);
  // the settings awaiting acceptance: the digest of the bytes shown, and the command that accepts them (nu10 #28)
  const digest = !file || used ? undefined : changing ? wrote : read?.file;
  const awaiting = digest ? { digest, command: acceptCommand(shellPath(dir), digest) } : null;
  // changed: the stored settings differ from those before (the same --rtol twice, a --clear of none: unchanged; a new user's finding)
  const changed = changing && storedBytes(dir) !== before;
  if (args.json) printJson("judge", { dir: resolve(dir), file, changed, settings, used, accept: awaiting, warnings: warned.list });
  else
    printText(
      `${changing ? "judging settings now" : "judging settings"}: ${describeJudging(settings)}${file ? ` (${file})` : ""}${file && !used ? `; ${notUsedNote(dir, judgingNotOwn(dir, m), changing ? undefined : read?.file)}` : ""}\n`,
    );
  return 0;
}
