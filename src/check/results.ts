/**
 * The results file of `kerncap check` (RESULTS/results.jsonl): JSON Lines, one CheckRecord per
 * finished capture (src/format/check-record.ts), each line `{"schema":"kerncap.check-record/1", …}`,
 * appended and fsync'd as the capture finishes, so that a kill (SIGKILL, a lost node) loses at most
 * the captures in flight. `--resume` reads it back: a last line cut short by the kill (no newline,
 * or not JSON) is dropped and cut off the file before the next append; a whole line (its newline
 * written) that is not a record is an error naming it, never silently skipped. The same file, for
 * other records (`kerncap eval --jsonl`: src/eval/eval.ts), through RecordLog and parseRecords.
 * Each record is written with its authenticator (src/format/record-auth.ts sealRecord) and read
 * back only with a valid one: a record without, or changed after it was written, is refused
 * (E_RECORD_AUTH), whatever its numbers say.
 */
import { escapeForTerminal, jsonText, oneLine } from "../escape.ts";
import {
  closeSync,
  constants,
  existsSync,
  fstatSync,
  fsyncSync,
  ftruncateSync,
  lstatSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  writeSync,
} from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { pidAlive } from "../leftovers.ts";
import * as v from "valibot";
import { documentId } from "../format/documents.ts";
import { KerncapError } from "../errors.ts";
import { INPUT_FILE_MAX_BYTES, readInputFile } from "../format/paths.ts";
import { CheckRecord, recordProblem } from "../format/check-record.ts";
import { openNoFollow, refuseLink } from "../util/write-file.ts";
import { notOwnFile } from "../user-group.ts";
import { keyForReading, keyForWriting, recordAuthHint, recordAuthProblem, sealRecord, spellingProblem, type ResultsKey } from "../format/record-auth.ts";

export const RESULTS_FILE = "results.jsonl";
/** Where a run that does not resume moves the previous run's results. */
export const PREVIOUS_RESULTS_FILE = "results.previous.jsonl";

export interface ReadResults {
  records: CheckRecord[];
  /** Bytes of the file that hold whole records (the rest: a line cut short). */
  validBytes: number;
  /** A last line was cut short (and is not among the records). */
  truncated: boolean;
}

/** What a JSON Lines results file holds: its document id (each line's `schema`), the record's schema, a further check of a parsed record, what the file is (in messages) and what to say of a damaged one. */
export interface RecordKind<R> {
  schema: string;
  record: v.GenericSchema<unknown, R>;
  problem?: (r: R) => string | undefined;
  what: string;
  hint: string;
  /** The hint of a record --resume refuses for its authenticator (recordAuthHint). */
  resumeAuthHint: string;
  /**
   * The schema of the file's shard markers ({shard: "K/N"}, authenticated as records are): the line
   * a sharded run given nothing writes, so that --merge knows that shard ran (eval's); none: no line
   * of another schema is taken.
   */
  marker?: string;
}

export const CHECK_RECORDS: RecordKind<CheckRecord> = {
  schema: documentId("check-record"),
  record: CheckRecord,
  problem: recordProblem,
  what: "the check's results file",
  hint: "The results file was altered or is not kerncap check's; give another --results folder, or remove the file to check everything again.",
  resumeAuthHint: recordAuthHint("resume", "Nothing was checked.", "run without --resume to check everything again, or give another --results folder"),
};

/**
 * The records of a results file (text: its contents). `authHint`: the hint of a record refused for
 * its authenticator (recordAuthHint, in the verb's words).
 * @throws KerncapError E_RESULTS naming the line of a damaged record that is not the last, E_RECORD_AUTH (see parseRecords)
 */
export function parseResults(path: string, text: string, authHint = CHECK_RECORDS.resumeAuthHint): ReadResults {
  return parseRecords(path, text, CHECK_RECORDS, authHint);
}

/**
 * The records of a JSON Lines file of `kind` (check's results, eval's): a last line cut short is
 * dropped (truncated), a whole damaged line an error, and so is a whole line whose authenticator
 * is not valid under this kerncap's results key (src/format/record-auth.ts: checked before the
 * record's schema and numbers), `authHint` its hint.
 * @throws KerncapError E_RESULTS naming the line of a damaged record that is not the last;
 *   E_RECORD_AUTH naming the line of a record without a valid authenticator, or (before the first
 *   record) when there is no results key to verify with; E_USAGE (a weak KERNCAP_RESULTS_KEY)
 */
export function parseRecords<R>(
  path: string,
  text: string,
  kind: RecordKind<R>,
  authHint: string,
): { records: R[]; validBytes: number; truncated: boolean; markers: string[]; markerRuns: (string | undefined)[] } {
  // the file's name is whoever named it: one line on the terminal (adversary 47: a newline in it)
  const shown = escapeForTerminal(path, { oneLine: true });
  const damaged = (line: number, why: string) => new KerncapError("E_RESULTS", `${shown}, line ${line}: ${why}`, { hint: kind.hint });
  // no key, no record taken (a file of none needs none)
  const key = text.length ? keyForReading(path, authHint) : undefined;
  const records: R[] = [];
  const markers: string[] = []; // the shards ("K/N") of kind.marker lines
  const markerRuns: (string | undefined)[] = []; // and the run each names (runSubject; absent in older lines)
  let pos = 0;
  let line = 0;
  while (pos < text.length) {
    line++;
    const nl = text.indexOf("\n", pos);
    const last = nl < 0;
    const body = text.slice(pos, last ? text.length : nl);
    let rec: R | undefined;
    let marker: string | undefined;
    let markerRun: string | undefined;
    // the bytes as kerncap wrote them: a key given twice passes the MAC over what JSON.parse kept (adversary 76)
    const asWritten = (json: unknown) => {
      const respelled = spellingProblem(body.endsWith("\r") ? body.slice(0, -1) : body, json);
      if (respelled) throw new KerncapError("E_RECORD_AUTH", `${shown}, line ${line}: ${respelled}`, { hint: authHint });
    };
    try {
      const json = JSON.parse(body);
      if (kind.marker && json?.schema === kind.marker) {
        asWritten(json);
        const forged = recordAuthProblem(kind.marker, json, key!);
        if (forged) throw new KerncapError("E_RECORD_AUTH", `${shown}, line ${line}: ${forged}`, { hint: authHint });
        if (typeof json.shard !== "string" || !/^\d+\/\d+$/.test(json.shard)) throw new Error("a shard marker whose shard is not K/N");
        marker = json.shard;
        markerRun = typeof json.runSubject === "string" ? json.runSubject : undefined;
      } else if (json?.schema !== kind.schema)
        // a line without the field is said so (nu10 #18f: "schema undefined is not …")
        throw new Error(
          json === null || typeof json !== "object" || Array.isArray(json)
            ? `not a JSON object (a ${kind.schema} record is one)`
            : !("schema" in json)
              ? `no "schema" field (a ${kind.schema} record has one)`
              : `schema ${JSON.stringify(json.schema)} is not ${kind.schema}`,
        );
      // who wrote it, before what it says: a made-up record may hold any numbers a run could give
      if (marker === undefined) {
        asWritten(json);
        const forged = recordAuthProblem(kind.schema, json, key!);
        if (forged) throw new KerncapError("E_RECORD_AUTH", `${shown}, line ${line}: ${forged}`, { hint: authHint });
        const r = v.safeParse(kind.record, json, { abortEarly: true });
        if (!r.success) throw new Error(`${oneLine(v.getDotPath(r.issues[0]) ?? "(top level)")}: ${oneLine(r.issues[0].message)}`);
        const problem = kind.problem?.(r.output);
        if (problem) throw new Error(problem);
        rec = r.output;
      }
    } catch (e) {
      // the line a kill cut short has no newline after it (each record and its newline are one write), and begins as every
      // record RecordLog writes does; a whole line that is no record is an error, never dropped, and so is a last line that
      // does not begin so (a one-line file of something else given as --jsonl was taken for a cut record and overwritten)
      if (last && cutRecord(body, kind.schema)) return { records, markers, markerRuns, validBytes: Buffer.byteLength(text.slice(0, pos)), truncated: true };
      if (e instanceof KerncapError) throw e;
      throw damaged(
        line,
        last ? `${(e as Error).message}; and it does not begin as a ${kind.schema} record that a kill cut short would` : (e as Error).message,
      );
    }
    if (last) return { records, markers, markerRuns, validBytes: Buffer.byteLength(text.slice(0, pos)), truncated: true }; // whole JSON, but the newline never came: written again
    if (marker !== undefined) markers.push(marker), markerRuns.push(markerRun);
    else records.push(rec as R);
    pos = nl + 1;
  }
  return { records, markers, markerRuns, validBytes: Buffer.byteLength(text), truncated: false };
}

/** Whether `body` (a last line without its newline) is the start of a line RecordLog writes for `schema`: `{"schema":"<schema>",…` or any beginning of it. */
function cutRecord(body: string, schema: string): boolean {
  const head = `${JSON.stringify({ schema }).slice(0, -1)},`;
  return body.length <= head.length ? head.startsWith(body) : body.startsWith(head);
}

/** parseResults of the file at path. @throws KerncapError E_RESULTS, E_USAGE when it does not exist */
export function readResults(path: string): ReadResults {
  if (!existsSync(path))
    throw new KerncapError("E_USAGE", `no results file ${path}`, { hint: "Give the results.jsonl a `kerncap check` wrote (in its --results folder)." });
  return parseResults(path, readInputFile(path, "results file", "E_RESULTS"));
}

/**
 * The results file `fd` as opened: a regular file this user owns that no one else may write (the
 * fd's fstat, src/user-group.ts notOwnFile), else closed and refused. The name was checked before
 * (refuseSharedRecords, refuseSharedResults), but in a folder others may write a file of theirs
 * can be linked under that name between that check and the open, and the records appended to it
 * would be theirs to read (adversary 73).
 * @returns fd
 * @throws KerncapError E_RESULTS (not a regular file: a FIFO, a device), E_UNSAFE_PATH naming the file, its owner or mode
 */
function ownedByUser(path: string, fd: number, kind: { what: string }): number {
  const st = fstatSync(fd);
  if (!st.isFile()) {
    closeSync(fd);
    throw new KerncapError("E_RESULTS", `${path} is not a regular file, as ${kind.what} is`, {
      hint: "Nothing was written to it. Give a results file (a regular file), or a new name.",
    });
  }
  const why = notOwnFile(st, path);
  if (!why) return fd;
  closeSync(fd);
  throw new KerncapError("E_UNSAFE_PATH", `${path} ${why}: ${kind.what} is written only to a file of your own`, {
    hint: "Nothing was written to it. Give a results file in a folder no one else can write (--jsonl FILE, --results DIR).",
  });
}

/** A JSON Lines file of records, open for appending (each fsync'd: a kill loses at most the records in flight), each with its authenticator. */
export class RecordLog<R extends object> {
  protected constructor(
    readonly path: string,
    private fd: number,
    private readonly schema: string,
    /** The key its records are written with (keyForWriting: none, said once, when there is none). */
    private readonly key: ResultsKey | undefined,
  ) {}

  /**
   * Open the file at `path` for records of `kind`: resume: keep its whole records (cut a last line
   * short; each record's authenticator verified: parseRecords); else, with `o.previous`, start an
   * empty one (a previous one is moved to `o.previous`: check's); without it (eval's), append to
   * it, its records read as for resume (a file of other records refused, a last line cut short
   * dropped) but not kept: `earlier` counts them.
   * @returns the log, the records kept (resume), whether a last line was cut, the records of earlier runs left in the file
   * @throws KerncapError E_RESULTS, E_RECORD_AUTH (a kept record without a valid authenticator), E_USAGE (a weak KERNCAP_RESULTS_KEY: before the file is touched), E_UNSAFE_PATH
   */
  static openKind<R extends object>(
    path: string,
    kind: RecordKind<R>,
    o: { resume: boolean; previous?: string },
  ): { log: RecordLog<R>; kept: R[]; truncated: boolean; earlier: number } {
    const key = keyForWriting();
    // never through a link (a dangling one would create a file wherever it points): src/util/write-file.ts
    const append = () => ownedByUser(path, openNoFollow(path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT, kind.what), kind);
    if ((o.resume || o.previous === undefined) && refuseLink(path, kind.what)) {
      const fd = ownedByUser(path, openNoFollow(path, constants.O_RDWR, kind.what), kind);
      let r: { records: R[]; validBytes: number; truncated: boolean };
      try {
        // a FIFO opened for reading and writing never blocks the open, but its read would: a regular file of bounded size only
        const st = fstatSync(fd);
        if (!st.isFile() || st.size > INPUT_FILE_MAX_BYTES)
          throw new KerncapError(
            "E_RESULTS",
            `${path} is not a regular file of at most ${INPUT_FILE_MAX_BYTES >> 20} MiB, as ${kind.what} is: nothing to resume from`,
            { hint: kind.hint },
          );
        r = parseRecords(path, readFileSync(fd, "utf8"), kind, kind.resumeAuthHint);
        ftruncateSync(fd, r.validBytes);
      } finally {
        closeSync(fd);
      }
      return { log: new this(path, append(), kind.schema, key), kept: o.resume ? r.records : [], truncated: r.truncated, earlier: r.records.length };
    }
    if (o.previous !== undefined && refuseLink(path, kind.what)) renameSync(path, o.previous);
    return { log: new this(path, append(), kind.schema, key), kept: [], truncated: false, earlier: 0 };
  }

  /** Append a shard marker (RecordKind.marker's schema `schema`: this run, of `runSubject`, was shard "K/N") with its authenticator, and fsync it. */
  mark(schema: string, shard: string, runSubject?: string): void {
    const body = { shard, at: new Date().toISOString(), ...(runSubject ? { runSubject } : {}) };
    writeSync(this.fd, jsonText({ schema, ...sealRecord(schema, body, this.key) }) + "\n");
    fsyncSync(this.fd);
  }

  /** Append one record with its authenticator (sealRecord) and fsync it. @returns the record as written (with `auth`, where there is a key) */
  append(rec: R): R {
    const sealed = sealRecord(this.schema, rec, this.key);
    writeSync(this.fd, jsonText({ schema: this.schema, ...sealed }) + "\n");
    fsyncSync(this.fd);
    return sealed;
  }

  close(): void {
    closeSync(this.fd);
  }
}

/** The results file, open for appending. */
export class ResultsLog extends RecordLog<CheckRecord> {
  /**
   * Open RESULTS_FILE at `path`: resume: keep its whole records (cut a last line short), else start
   * an empty one (a previous one is moved to PREVIOUS_RESULTS_FILE beside it).
   * @returns the log and the records kept
   */
  static open(path: string, o: { resume: boolean; previous: string }): { log: ResultsLog; kept: CheckRecord[]; truncated: boolean } {
    return ResultsLog.openKind(path, CHECK_RECORDS, o) as { log: ResultsLog; kept: CheckRecord[]; truncated: boolean; earlier: number };
  }
}

/** The lock file of a results folder: `PID HOST` of the check running in it. */
export const RESULTS_LOCK = ".kerncap-check.lock";

/**
 * Lock the results folder `dir` for this process (one check at a time: two runs would interleave
 * their records in one results file and write one baseline): RESULTS_LOCK created O_EXCL (no link
 * followed) holding `PID HOST`. A lock of this host whose process is gone (killed) is taken over;
 * a live one, or one of another host (a shared file system: its process cannot be asked), refuses.
 * @returns the release (removes this process's lock only; safe to call more than once)
 * @throws KerncapError E_RESULTS naming the pid (and host) of the run holding it, and another --results
 */
export function lockResultsFolder(dir: string): () => void {
  const lock = join(dir, RESULTS_LOCK);
  const me = `${process.pid} ${hostname()}`;
  const release = () => {
    if (holderOf(lock)?.text === me) rmSync(lock, { force: true });
  };
  for (let tries = 0; tries < 3; tries++) {
    try {
      const fd = openSync(lock, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
      writeSync(fd, `${me}\n`);
      closeSync(fd);
      return release;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    }
    const holder = holderOf(lock);
    if (holder && (holder.host !== hostname() || pidAlive(holder.pid))) {
      const where = holder.host === hostname() ? `process ${holder.pid}` : `process ${holder.pid} on ${holder.host}`;
      throw new KerncapError("E_RESULTS", `another kerncap check (${where}) is running in ${dir}: two runs in one results folder would mix their records`, {
        hint:
          holder.host === hostname()
            ? "Nothing was checked. Give this run another --results DIR, or wait for that one to end."
            : `Nothing was checked. Give this run another --results DIR; if that run is gone (its node lost), remove ${lock}.`,
      });
    }
    rmSync(lock, { force: true }); // its check is gone (killed), or the file is not a lock of ours: taken over
  }
  throw new KerncapError("E_RESULTS", `${lock} could not be taken: another kerncap check keeps taking it`, {
    hint: "Nothing was checked. Give this run another --results DIR.",
  });
}

/** The pid and host a lock file names, and its text, or undefined (unreadable, a link, not `PID HOST`). */
function holderOf(lock: string): { pid: number; host: string; text: string } | undefined {
  try {
    if (!lstatSync(lock).isFile()) return undefined;
    const text = readFileSync(lock, "utf8").trim();
    const m = /^(\d{1,9}) (\S{1,255})$/.exec(text);
    return m ? { pid: Number(m[1]), host: m[2]!, text } : undefined;
  } catch {
    return undefined;
  }
}
