/**
 * The results file of `kerncap check` (RESULTS/results.jsonl): JSON Lines, one CheckRecord per
 * finished capture (src/format/check-record.ts), each line `{"schema":"kerncap.check-record/1", …}`,
 * appended and fsync'd as the capture finishes, so that a kill (SIGKILL, a lost node) loses at most
 * the captures in flight. `--resume` reads it back: a last line cut short by the kill (no newline,
 * or not JSON) is dropped and cut off the file before the next append; a whole line (its newline
 * written) that is not a record is an error naming it, never silently skipped.
 */
import { closeSync, constants, existsSync, fsyncSync, ftruncateSync, readFileSync, renameSync, writeSync } from "node:fs";
import * as v from "valibot";
import { documentId } from "../format/documents.ts";
import { KerncapError } from "../errors.ts";
import { CheckRecord, recordProblem } from "../format/check-record.ts";
import { openNoFollow, refuseLink } from "../util/write-file.ts";

export const RESULTS_FILE = "results.jsonl";
/** Where a run that does not resume moves the previous run's results. */
export const PREVIOUS_RESULTS_FILE = "results.previous.jsonl";
const WHAT = "the check's results file";

export interface ReadResults {
  records: CheckRecord[];
  /** Bytes of the file that hold whole records (the rest: a line cut short). */
  validBytes: number;
  /** A last line was cut short (and is not among the records). */
  truncated: boolean;
}

const damaged = (path: string, line: number, why: string) =>
  new KerncapError("E_RESULTS", `${path}, line ${line}: ${why}`, { hint: "The results file was altered or is not kerncap check's; give another --results folder, or remove the file to check everything again." });

/**
 * The records of a results file (text: its contents).
 * @throws KerncapError E_RESULTS naming the line of a damaged record that is not the last
 */
export function parseResults(path: string, text: string): ReadResults {
  const records: CheckRecord[] = [];
  let pos = 0;
  let line = 0;
  while (pos < text.length) {
    line++;
    const nl = text.indexOf("\n", pos);
    const last = nl < 0;
    const body = text.slice(pos, last ? text.length : nl);
    let rec: CheckRecord | undefined;
    try {
      const json = JSON.parse(body);
      if (json?.schema !== documentId("check-record")) throw new Error(`schema ${JSON.stringify(json?.schema)} is not ${documentId("check-record")}`);
      const r = v.safeParse(CheckRecord, json);
      if (!r.success) throw new Error(`${v.getDotPath(r.issues[0]) ?? "(top level)"}: ${r.issues[0].message}`);
      const problem = recordProblem(r.output);
      if (problem) throw new Error(problem);
      rec = r.output;
    } catch (e) {
      // the line a kill cut short has no newline after it (each record and its newline are one write); a whole line that is no record is an error, never dropped
      if (last) return { records, validBytes: Buffer.byteLength(text.slice(0, pos)), truncated: true };
      throw damaged(path, line, (e as Error).message);
    }
    if (last) return { records, validBytes: Buffer.byteLength(text.slice(0, pos)), truncated: true }; // whole JSON, but the newline never came: written again
    records.push(rec);
    pos = nl + 1;
  }
  return { records, validBytes: Buffer.byteLength(text), truncated: false };
}

/** parseResults of the file at path. @throws KerncapError E_RESULTS, E_USAGE when it does not exist */
export function readResults(path: string): ReadResults {
  if (!existsSync(path)) throw new KerncapError("E_USAGE", `no results file ${path}`, { hint: "Give the results.jsonl a `kerncap check` wrote (in its --results folder)." });
  return parseResults(path, readFileSync(path, "utf8"));
}

/** The results file, open for appending. */
export class ResultsLog {
  private constructor(
    readonly path: string,
    private fd: number,
  ) {}

  /**
   * Open RESULTS_FILE at `path`: resume: keep its whole records (cut a last line short), else start
   * an empty one (a previous one is moved to PREVIOUS_RESULTS_FILE beside it).
   * @returns the log and the records kept
   */
  static open(path: string, o: { resume: boolean; previous: string }): { log: ResultsLog; kept: CheckRecord[]; truncated: boolean } {
    // never through a link (a dangling one would create a file wherever it points): src/util/write-file.ts
    const append = () => openNoFollow(path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT, WHAT);
    if (o.resume && refuseLink(path, WHAT)) {
      const fd = openNoFollow(path, constants.O_RDWR, WHAT);
      let r: ReadResults;
      try {
        r = parseResults(path, readFileSync(fd, "utf8"));
        ftruncateSync(fd, r.validBytes);
      } finally {
        closeSync(fd);
      }
      return { log: new ResultsLog(path, append()), kept: r.records, truncated: r.truncated };
    }
    if (refuseLink(path, WHAT)) renameSync(path, o.previous);
    return { log: new ResultsLog(path, append()), kept: [], truncated: false };
  }

  /** Append one record and fsync it. */
  append(rec: CheckRecord): void {
    writeSync(this.fd, JSON.stringify({ schema: documentId("check-record"), ...rec }) + "\n");
    fsyncSync(this.fd);
  }

  close(): void {
    closeSync(this.fd);
  }
}
