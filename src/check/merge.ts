/**
 * `kerncap check --merge FILE…`: the results files of a run's shards (results.jsonl, or --json
 * documents) joined into one report (src/check/check.ts CheckReport), each record's authenticator
 * verified, the shards' coverage of the run checked (missingShards), timed again against a
 * --baseline, with its --write-baseline and JUnit XML.
 */
import { escapeForTerminal, oneLine } from "../escape.ts";
import { existsSync, realpathSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import * as v from "valibot";
import { KerncapError } from "../errors.ts";
import { shardClaimProblem } from "./shard.ts";
import { assertMergeSize, INPUT_FILE_MAX_BYTES, readInputFile } from "../format/paths.ts";
import { escapedForMessage } from "../format/archive-common.ts";
import { log } from "../log.ts";
import { warnSharedParent } from "../cache.ts";
import { documentId } from "../format/documents.ts";
import { keyForReading, recordAuthHint, recordAuthProblem, sealRecord, spellingProblem, type ResultsKey } from "../format/record-auth.ts";
import { CheckRecord, recordProblem } from "../format/check-record.ts";
import { readBaseline, requireBaselineFile, writeRunBaseline } from "./baseline.ts";
import { checkOutputFile, recordOf, refuseNotOwn, reportOf, writeJunit, type CheckReport } from "./check.ts";
import { parseResults } from "./results.ts";
import { didYouMean } from "../format/near-names.ts";

/** The hint of a record --merge refuses for its authenticator. */
const MERGE_AUTH_HINT = recordAuthHint("merge", "Nothing was merged.", "run that shard again, without --resume");

/**
 * The records of one file given to --merge: a results file (JSON Lines) or a --json document,
 * read once (refused when another user owns it or could write it: refuseNotOwn), each record's
 * authenticator verified (src/format/record-auth.ts) before its schema and numbers.
 * A results file that holds no record is an error (a shard that died before its first capture, or
 * not a results file at all: merging it would pass for a green run); a last line cut short is
 * said. A --json document of no capture (a shard that held none) gives none.
 * @throws KerncapError E_USAGE (no such file, a folder), E_RESULTS, E_UNSAFE_PATH, E_RECORD_AUTH (a record without a valid authenticator, naming its line or captures[N]; no key to verify with)
 */
function recordsIn(path: string): { records: CheckRecord[]; shard?: string; runSubject?: string } {
  const hint = "Give the results.jsonl files of the shards (RESULTS/results.jsonl), or their --json documents.";
  if (!existsSync(path)) throw new KerncapError("E_USAGE", `no such results file: ${path}`, { hint: `${hint}${didYouMean(path)}` });
  if (statSync(path).isDirectory())
    throw new KerncapError("E_USAGE", `${path} is a folder, not a results file`, {
      hint: `Give ${join(path, "results.jsonl")}, the file a \`kerncap check --results ${path}\` wrote.`,
    });
  const text = readInputFile(path, "results file", "E_RESULTS", INPUT_FILE_MAX_BYTES, refuseNotOwn(path, "results file"));
  let doc: { captures?: unknown; shard?: unknown } | undefined;
  try {
    doc = path.endsWith(".jsonl") ? undefined : JSON.parse(text);
  } catch {
    doc = undefined; // JSON Lines under another name
  }
  if (doc !== undefined) {
    // a --json document says how many captures its run had: none is a shard that held none
    if (Array.isArray(doc?.captures) && doc.captures.length) {
      const key = keyForReading(path, MERGE_AUTH_HINT);
      // its bytes as kerncap printed them (indented, or one line): a key given twice in a record passes the MAC (adversary 76)
      const body = text.replace(/\r?\n$/, "");
      const respelled = spellingProblem(body, doc, 2) && spellingProblem(body, doc);
      if (respelled) throw new KerncapError("E_RECORD_AUTH", `${escapeForTerminal(path, { oneLine: true })}: ${respelled}`, { hint: MERGE_AUTH_HINT });
      doc.captures.forEach((x, i) => {
        const forged = recordAuthProblem(documentId("check-record"), x, key);
        if (forged) throw new KerncapError("E_RECORD_AUTH", `${path}, captures[${i}]: ${forged}`, { hint: MERGE_AUTH_HINT });
      });
    }
    const r = v.safeParse(v.array(CheckRecord), doc?.captures, { abortEarly: true });
    if (!r.success)
      throw new KerncapError(
        "E_RESULTS",
        `${path} is neither a results file nor a kerncap check --json document: captures${v.getDotPath(r.issues[0]) ? `.${oneLine(v.getDotPath(r.issues[0])!)}` : ""}: ${oneLine(r.issues[0].message)}`,
        { hint },
      );
    r.output.forEach((x, i) => {
      const problem = recordProblem(x);
      if (problem)
        throw new KerncapError("E_RESULTS", `${escapeForTerminal(path, { oneLine: true })}, captures[${i}]: ${problem}`, {
          hint: "The document was altered or is not kerncap check's; give the shards' own results files.",
        });
    });
    // a sharded run's own --shard (a shard that held no capture has no record to say it); a document of
    // no --shard says nothing more than its records do (a merge's document: shard null, its records each their shard's)
    const sh = doc?.shard as { index?: unknown; count?: unknown } | null | undefined;
    const shard = typeof sh?.index === "number" && typeof sh.count === "number" ? `${sh.index}/${sh.count}` : undefined;
    // the claim is the run's own (shardAuth, under the results key), never a hand-written document's: an empty one
    // would stand for a failing shard and hide its captures (adversary 31 #2)
    const rs = (doc as { runSubject?: unknown }).runSubject;
    const runSubject = typeof rs === "string" ? rs : undefined;
    if (shard !== undefined) {
      const forged = shardClaimProblem(
        shard,
        r.output.map((x) => x.id),
        (doc as { shardAuth?: unknown }).shardAuth,
        keyForReading(path, MERGE_AUTH_HINT),
        runSubject,
      );
      if (forged)
        throw new KerncapError(
          "E_RECORD_AUTH",
          `${path}: its claim to be shard ${shard} of the run${r.output.length ? "" : ", holding no capture,"} is not authenticated: ${forged}`,
          {
            hint: MERGE_AUTH_HINT,
          },
        );
    }
    return { records: r.output, ...(shard !== undefined ? { shard, runSubject } : {}) };
  }
  const { records, truncated, validBytes } = parseResults(path, text, MERGE_AUTH_HINT);
  if (truncated && validBytes < Buffer.byteLength(text)) log.warn(`${path}: its last line is not a whole record (a shard stopped while writing it): left out`);
  if (!records.length) {
    throw new KerncapError("E_RESULTS", `${escapeForTerminal(path, { oneLine: true })} holds no check record`, {
      hint: "A shard that stopped before its first capture leaves an empty results file, and a file that is not kerncap check's has none: run that shard again (--resume), or leave the file out.",
    });
  }
  return { records };
}

/**
 * The shards of one run that the files of a --merge lack. `seen`: each run's share as the files
 * say it ("K/N"; null: a whole-corpus run; absent from records of kerncap before it, not counted),
 * with the files saying it. Every K of one N must be there; a whole-corpus run's records are not
 * mixed with a sharded run's.
 * @returns the missing shards ("K/N"), in order (none: [])
 * @throws KerncapError E_RESULTS (shards of two counts, whole-corpus records beside sharded ones: the files named)
 */
export function missingShards(seen: Map<string | null, Set<string>>): string[] {
  const names = (k: string | null) => [...seen.get(k)!].join(", ");
  const sharded = [...seen.keys()].filter((k): k is string => k !== null);
  const hint = "Nothing was merged. Give the results files of one run: its shards' (--shard K/N, each K of one N) or the one file of a run without --shard.";
  if (!sharded.length) return [];
  if (seen.has(null))
    throw new KerncapError(
      "E_RESULTS",
      `records of a run without --shard (${names(null)}) and of a sharded run (--shard ${sharded[0]}: ${names(sharded[0]!)}) given together: they are not one run`,
      { hint },
    );
  const parsed = sharded.map((k) => {
    const m = /^(\d+)\/(\d+)$/.exec(k);
    if (!m) throw new KerncapError("E_RESULTS", `${names(k)}: shard ${JSON.stringify(k)} is not K/N`, { hint });
    const index = Number(m[1]);
    const count = Number(m[2]);
    // as --shard takes them (parseShard): a count past it is no run's (adversary 32: 2^32-1 shards listed, 12 GB)
    if (!(count >= 1 && count <= 100_000 && index < count))
      throw new KerncapError("E_RESULTS", `${names(k)}: shard ${JSON.stringify(k)} is no shard a run takes (0 ≤ K < N ≤ 100000)`, { hint });
    return { k, index, count };
  });
  const other = parsed.find((p) => p.count !== parsed[0]!.count);
  if (other)
    throw new KerncapError(
      "E_RESULTS",
      `shards of two counts given together: --shard ${parsed[0]!.k} (${names(parsed[0]!.k)}) and --shard ${other.k} (${names(other.k)})`,
      { hint },
    );
  const count = parsed[0]!.count;
  const have = new Set(parsed.map((p) => p.index));
  return Array.from({ length: count }, (_, i) => i)
    .filter((i) => !have.has(i))
    .map((i) => `${i}/${count}`);
}

/**
 * `kerncap check --merge FILE…`: the shards' records in one report; with `baseline`, every record
 * timed again against it. A capture in two files is refused (the shards of one run are disjoint:
 * a second record of it is another run's, or someone's made up); within one file its later record
 * is kept (a --resume appends a capture's new record after its error). Every file, the baseline
 * and a --write-baseline read as the base, must be the user's own, that no one else can write
 * (refuseNotOwn). seconds: the captures' own, summed. The files must cover every shard of one run
 * (missingShards); `partial`: merge what is there, each missing shard said on stderr, in
 * `missingShards` and as an <error> in the JUnit (the exit code then at least 2). One file given
 * twice (by another name too) is read once, with a warning naming it.
 * @throws KerncapError E_USAGE, E_RESULTS (a damaged file, a capture in two files: both named; a missing shard without `partial`, shards of two runs),
 *   E_UNSAFE_PATH (another user's file), E_BASELINE (no --baseline file, before any is read; one that is not a baseline)
 */
export function mergeResults(
  files: string[],
  o: { baseline?: string; writeBaseline?: string; slowerPct: number; junit?: string; partial?: boolean },
): CheckReport {
  if (o.baseline) requireBaselineFile(resolve(o.baseline));
  if (o.junit) checkOutputFile("junit", o.junit);
  if (o.writeBaseline) checkOutputFile("write-baseline", o.writeBaseline);
  const byId = new Map<string, { r: CheckRecord; file: string }>();
  const given = new Map<string, string>(); // each file's real path: the name it was first given by
  const shards = new Map<string | null, Set<string>>();
  const readFiles: { file: string; records: CheckRecord[]; shard?: string; runSubject?: string }[] = [];
  const inFile = (k: string | null, file: string) => void (shards.get(k) ?? shards.set(k, new Set()).get(k)!).add(file);
  assertMergeSize(files.map((f) => resolve(f)));
  for (const f of files) {
    const file = resolve(f);
    let real = file;
    try {
      real = realpathSync(file);
    } catch {
      /* not there: recordsIn says so */
    }
    const first = given.get(real);
    if (first !== undefined) {
      log.warn(`${file} was given to --merge twice${first === file ? "" : ` (as ${first} too)`}: merged once`);
      continue;
    }
    given.set(real, file);
    warnSharedParent(file, "check --merge");
    const read = recordsIn(file);
    if (read.shard !== undefined) inFile(read.shard, file);
    for (const r of read.records) if (r.shard !== undefined) inFile(r.shard, file);
    readFiles.push({ file, ...read });
  }
  // one run's files first (a whole run's beside a shard's, shards of two counts), then their captures
  const missing = missingShards(shards);
  for (const { file, records } of readFiles) {
    for (const r of records) {
      const earlier = byId.get(r.id);
      if (earlier && earlier.file !== file)
        throw new KerncapError("E_RESULTS", `${r.id} is in two results files, ${earlier.file} and ${file}: one run's shards are disjoint`, {
          hint: "Nothing was merged. Give each shard's own results file once: leave out the one that is not of this run (an earlier run's, or a file you did not write).",
        });
      byId.set(r.id, { r, file });
    }
  }
  assertOneRun(readFiles, byId);
  if (missing.length && !o.partial)
    throw new KerncapError(
      "E_RESULTS",
      `the results files lack ${missing.length === 1 ? "shard" : "shards"} ${missing.join(", ")} of the run: a merge without ${missing.length === 1 ? "it" : "them"} would be a shorter run`,
      {
        hint: "Nothing was merged. Give every shard's results file (a shard that held no capture writes none: give its --json document), or merge what is there with --partial (the missing shards said, and each an <error> in the JUnit).",
      },
    );
  if (missing.length)
    log.warn(
      `merged without ${missing.length === 1 ? "shard" : "shards"} ${missing.join(", ")} (--partial): ${missing.length === 1 ? "its" : "their"} captures are not in this report`,
    );
  const base = o.baseline ? readBaseline(resolve(o.baseline), refuseNotOwn(resolve(o.baseline), "--baseline file")) : undefined;
  // judged again against the baseline: authenticated anew, with the key its records were verified with
  const key: ResultsKey | undefined = base && byId.size ? keyForReading(files[0]!, MERGE_AUTH_HINT) : undefined;
  const records = [...byId.values()].map(({ r }) => (base ? sealRecord(documentId("check-record"), recordOf(r, base, o.slowerPct, r.worker, r.gpu), key) : r));
  if (o.writeBaseline) {
    const over = base ?? readBaseline(resolve(o.writeBaseline), refuseNotOwn(resolve(o.writeBaseline), "--write-baseline file"));
    writeRunBaseline(resolve(o.writeBaseline), over, records, log);
  }
  const report = reportOf(records, {
    results: null,
    baseline: o.baseline ? resolve(o.baseline) : null,
    shard: null,
    workers: 0,
    rebuild: records.some((r) => r.rebuild !== null),
    slowerPct: o.slowerPct,
    seconds: records.reduce((a, r) => a + r.seconds, 0),
  });
  if (missing.length) {
    report.missingShards = missing;
    if (report.exitCode === 0) report.exitCode = 2; // not every capture was checked: never a green run
  }
  if (o.junit)
    writeJunit(
      o.junit,
      report,
      missing.length
        ? {
            ids: missing.map((k) => `shard ${k.replace("/", " of ")}`),
            code: "E_RESULTS",
            why: "not merged: this shard's results file was not given (--merge --partial)",
          }
        : undefined,
      "missingShards",
    );
  return report;
}

/**
 * The shards K/N of one run (adversary 50, 51): records of another run, however genuine, are not
 * its: shards of one count whose records or documents (a shard that held no capture says its run
 * too) name two runSubjects, or two files of unsharded runs that name no run in common (a file
 * --resume continued may name the runs it continued), are refused.
 * @throws KerncapError E_RESULTS naming two of the files
 */
function assertOneRun(
  readFiles: { file: string; records: CheckRecord[]; shard?: string; runSubject?: string }[],
  byId: Map<string, { r: CheckRecord; file: string }>,
): void {
  const runs = new Map<string, Map<string, string>>(); // N → runSubject → a file holding it
  const inRun = (shard: string, runSubject: string | undefined, file: string) => {
    const n = shard.split("/")[1]!;
    const of = runs.get(n) ?? runs.set(n, new Map()).get(n)!;
    if (!of.has(runSubject ?? "none")) of.set(runSubject ?? "none", file);
  };
  const whole = new Map<string, Set<string>>(); // an unsharded run's file → the runs its records name
  for (const { r, file } of byId.values()) {
    if (typeof r.shard === "string") inRun(r.shard, r.runSubject, file);
    else (whole.get(file) ?? whole.set(file, new Set()).get(file)!).add(r.runSubject ?? "none");
  }
  for (const f of readFiles) if (f.shard !== undefined && !f.records.length) inRun(f.shard, f.runSubject, f.file);
  const refuse = (a: string, b: string, what: string) =>
    new KerncapError(
      "E_RESULTS",
      `${escapedForMessage(a)} and ${escapedForMessage(b)} hold ${what} of two different runs (other captures, other content or verdict-changing options): they are not one run's`,
      {
        hint: "Nothing was merged. Merge the results files of the shards of one run (the same captures and options, each run with its --shard K/N); run a shard again where its file holds another run's.",
      },
    );
  for (const [n, of] of runs) if (of.size > 1) throw refuse(...([...of.values()] as [string, string]), `shards K/${n}`);
  const files = [...whole];
  for (let i = 1; i < files.length; i++) if (![...files[0]![1]].some((x) => files[i]![1].has(x))) throw refuse(files[0]![0], files[i]![0], "the records");
}
