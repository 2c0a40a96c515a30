/**
 * The results file of `kerncap check` (RESULTS/results.jsonl): JSON Lines, one CheckRecord per
 * finished capture (src/format/check-record.ts), each line `{"schema":"kerncap.check-record/1", …}`,
 * appended and fsync'd as the capture finishes, so that a kill (SIGKILL, a lost node) loses at most
 * the captures in flight. `--resume` reads it back: a last line cut short by the kill (no newline,
 * or not JSON) is dropped and cut off the file before the next append; a whole line (its newline
 * written) that is not a record is an error naming it, never silently skipped. The same file, for
 * other records (`kerncap eval --jsonl`: src/eval/eval.ts), through RecordLog and parseRecords.
 */
import { closeSync, constants, existsSync, fstatSync, fsyncSync, ftruncateSync, readFileSync, renameSync, writeSync } from "node:fs";
import * as v from "valibot";
import { documentId } from "../format/documents.ts";
import { KerncapError } from "../errors.ts";
import { INPUT_FILE_MAX_BYTES, readInputFile } from "../format/paths.ts";
import { CheckRecord, recordProblem } from "../format/check-record.ts";
import { openNoFollow, refuseLink } from "../util/write-file.ts";

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
}

export const CHECK_RECORDS: RecordKind<CheckRecord> = {
  schema: documentId("check-record"),
  record: CheckRecord,
  problem: recordProblem,
  what: "the check's results file",
  hint: "The results file was altered or is not kerncap check's; give another --results folder, or remove the file to check everything again.",
};

/**
 * The records of a results file (text: its contents).
 * @throws KerncapError E_RESULTS naming the line of a damaged record that is not the last
 */
export function parseResults(path: string, text: string): ReadResults {
  return parseRecords(path, text, CHECK_RECORDS);
}

/**
 * The records of a JSON Lines file of `kind` (check's results, eval's): a last line cut short is
 * dropped (truncated), a whole damaged line an error.
 * @throws KerncapError E_RESULTS naming the line of a damaged record that is not the last
 */
export function parseRecords<R>(path: string, text: string, kind: RecordKind<R>): { records: R[]; validBytes: number; truncated: boolean } {
  const damaged = (line: number, why: string) => new KerncapError("E_RESULTS", `${path}, line ${line}: ${why}`, { hint: kind.hint });
  const records: R[] = [];
  let pos = 0;
  let line = 0;
  while (pos < text.length) {
    line++;
    const nl = text.indexOf("\n", pos);
    const last = nl < 0;
    const body = text.slice(pos, last ? text.length : nl);
    let rec: R | undefined;
    try {
      const json = JSON.parse(body);
      if (json?.schema !== kind.schema) throw new Error(`schema ${JSON.stringify(json?.schema)} is not ${kind.schema}`);
      const r = v.safeParse(kind.record, json);
      if (!r.success) throw new Error(`${v.getDotPath(r.issues[0]) ?? "(top level)"}: ${r.issues[0].message}`);
      const problem = kind.problem?.(r.output);
      if (problem) throw new Error(problem);
      rec = r.output;
    } catch (e) {
      // the line a kill cut short has no newline after it (each record and its newline are one write); a whole line that is no record is an error, never dropped
      if (last) return { records, validBytes: Buffer.byteLength(text.slice(0, pos)), truncated: true };
      throw damaged(line, (e as Error).message);
    }
    if (last) return { records, validBytes: Buffer.byteLength(text.slice(0, pos)), truncated: true }; // whole JSON, but the newline never came: written again
    records.push(rec as R);
    pos = nl + 1;
  }
  return { records, validBytes: Buffer.byteLength(text), truncated: false };
}

/** parseResults of the file at path. @throws KerncapError E_RESULTS, E_USAGE when it does not exist */
export function readResults(path: string): ReadResults {
  if (!existsSync(path))
    throw new KerncapError("E_USAGE", `no results file ${path}`, { hint: "Give the results.jsonl a `kerncap check` wrote (in its --results folder)." });
  return parseResults(path, readInputFile(path, "results file", "E_RESULTS"));
}

/** A JSON Lines file of records, open for appending (each fsync'd: a kill loses at most the records in flight). */
export class RecordLog<R> {
  protected constructor(
    readonly path: string,
    private fd: number,
    private readonly schema: string,
  ) {}

  /**
   * Open the file at `path` for records of `kind`: resume: keep its whole records (cut a last line
   * short), else start an empty one (a previous one is moved to `o.previous`).
   * @returns the log and the records kept
   */
  static openKind<R>(path: string, kind: RecordKind<R>, o: { resume: boolean; previous: string }): { log: RecordLog<R>; kept: R[]; truncated: boolean } {
    // never through a link (a dangling one would create a file wherever it points): src/util/write-file.ts
    const append = () => openNoFollow(path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT, kind.what);
    if (o.resume && refuseLink(path, kind.what)) {
      const fd = openNoFollow(path, constants.O_RDWR, kind.what);
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
        r = parseRecords(path, readFileSync(fd, "utf8"), kind);
        ftruncateSync(fd, r.validBytes);
      } finally {
        closeSync(fd);
      }
      return { log: new this(path, append(), kind.schema), kept: r.records, truncated: r.truncated };
    }
    if (refuseLink(path, kind.what)) renameSync(path, o.previous);
    return { log: new this(path, append(), kind.schema), kept: [], truncated: false };
  }

  /** Append one record and fsync it. */
  append(rec: R): void {
    writeSync(this.fd, JSON.stringify({ schema: this.schema, ...rec }) + "\n");
    fsyncSync(this.fd);
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
    return ResultsLog.openKind(path, CHECK_RECORDS, o) as { log: ResultsLog; kept: CheckRecord[]; truncated: boolean };
  }
}
