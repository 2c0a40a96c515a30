/**
 * Where `kerncap eval`'s records go as they finish (./eval.ts): the results file, the caller's
 * onRecord (--json, kerncap mcp's progress), and the progress line.
 */
import { CheckProgress } from "../check/progress.ts";
import type { RecordLog } from "../check/results.ts";
import { keyForWriting, sealRecord, type ResultsKey } from "../format/record-auth.ts";
import type { EvalOutcome, EvalRecord } from "../format/eval-record.ts";
import type { Candidate } from "./candidates.ts";
import type { EvalInput } from "./inputs.ts";
import { BUILD_INPUT, EVAL_RECORDS, recordLine } from "./report.ts";

/** What is left to evaluate: a candidate and the inputs it has no record of yet. */
export interface Pending {
  c: Candidate;
  inputs: EvalInput[];
  /** --resume: its build as an earlier record of it names it (a run not made: E_NO_GPU …), whose kept module is judged where it is still the same (copies.ts keptBuild). */
  built?: EvalRecord["build"];
}

/** A candidate's build as its records carry it (EvalRecord.build): seconds, registers, stack frame bytes. */
type BuiltFacts = EvalRecord["build"];

/**
 * Where the records of this run go as they finish: the results file, `o.onRecord`, and the
 * progress line (a candidate counts as finished once every input of it has its record).
 */
export class Recorder {
  readonly fresh: EvalRecord[] = [];
  readonly progress: CheckProgress;
  /** Each candidate's build, once it ended. */
  readonly builds = new Map<string, BuiltFacts>();
  /** Each candidate's kept private copy (EvalRecord.copy), once its build ended; null where none is kept. */
  readonly copies = new Map<string, string | null>();
  finished = 0;
  /** Called once a candidate's last record is written (its kept module may go: candidateFolders' judged). */
  onJudged?: (id: string) => void;
  private readonly byId: Map<string, Candidate>;
  private readonly left: Map<string, number>;

  constructor(
    private readonly o: { live: boolean; onRecord?: (r: EvalRecord) => void; buildLines?: boolean },
    mine: Candidate[],
    private readonly pending: Pending[],
    private readonly results: RecordLog<EvalRecord> | undefined,
    /** The run's --shard ("K/N" or null) and each input's subject (openResults) that its records carry. */
    private readonly run: { shard: string | null; subjects: Map<string, string>; runSubject?: string },
  ) {
    this.progress = new CheckProgress(pending.length, { live: o.live, write: (s) => void process.stderr.write(s) });
    this.byId = new Map(mine.map((c) => [c.id, c]));
    this.left = new Map(pending.map((p) => [p.c.id, p.inputs.length]));
    this.key = !results && o.onRecord ? keyForWriting() : undefined;
  }

  /** The label a candidate is shown by (its id when unknown). */
  label(id: string): string {
    return this.byId.get(id)?.label ?? id;
  }

  /** The key of the records said on `o.onRecord` (--json) when there is no results file to write them (keyForWriting). */
  private readonly key: ResultsKey | undefined;

  /** Record `x` (its authenticator added where it leaves the process: the results file, `o.onRecord`). */
  emit(x: EvalRecord): void {
    const r = this.results ? this.results.append(x) : this.o.onRecord ? sealRecord(EVAL_RECORDS.schema, x, this.key) : x;
    this.fresh.push(r);
    this.o.onRecord?.(r);
    const n = r.input === BUILD_INPUT ? 0 : (this.left.get(r.candidate) ?? 1) - 1;
    this.left.set(r.candidate, n);
    if (n === 0) {
      this.finished++;
      this.onJudged?.(r.candidate);
    }
    // a build's record (never reached a GPU) is said by the verb that says each build itself (tune: buildLines false), not twice
    if (r.input === BUILD_INPUT && this.o.buildLines === false) return;
    const w = String(this.pending.length).length;
    this.progress.line(`[${String(this.finished).padStart(w)}/${this.pending.length}] ${recordLine(r)}`);
  }

  /** The record of an outcome: the candidate's label, kind and build, where it ran. */
  recordOf(x: EvalOutcome, worker: number | null, gpu: string | null): EvalRecord {
    const c = this.byId.get(x.candidate)!;
    const b = this.builds.get(c.id) ?? { seconds: 0, registers: null, stackFrameBytes: null };
    return {
      ...x,
      label: c.label,
      kind: c.kind,
      build: b,
      copy: this.copies.get(c.id) ?? null,
      worker,
      gpu,
      ...{ shard: this.run.shard, at: new Date().toISOString(), subject: this.run.subjects.get(x.input), runSubject: this.run.runSubject },
    };
  }
}
