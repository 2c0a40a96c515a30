/**
 * One capture's outcome in `kerncap check` (src/check/): the shape of each line of the results
 * file (JSON Lines, src/check/results.ts), of the `captures` of the --json document and of what a
 * worker process sends back (less the parent's timing judgement). One valibot schema, read back on
 * --resume and --merge and printed by `kerncap schema check`. Here with the other documents
 * (./documents.ts), below the check that writes it.
 */
import * as v from "valibot";

const N = v.number();
const Device = v.object({ name: v.string(), arch: v.string() });

/** What the check did to a capture, in the order the summary lists them (regressions first). */
export const STATUSES = ["mismatch", "slower", "error", "skipped", "ok"] as const;
export type Status = (typeof STATUSES)[number];

/**
 * The time ratio (this run's median over the baseline's) and its interval (src/check/timing.ts):
 * slower/faster when the whole interval lies beyond ±slowerPct; same inside; no-baseline: nothing
 * to compare with (the first check records it); not-comparable: the baseline was timed on another
 * GPU; too-few-runs: fewer timed launches than an interval needs.
 */
export const TimeJudgement = v.object({
  verdict: v.picklist(["slower", "faster", "same", "no-baseline", "not-comparable", "too-few-runs"]),
  ratio: v.nullable(N),
  low: v.nullable(N),
  high: v.nullable(N),
  baselineMedianUs: v.nullable(N),
  /** The threshold of slower/faster (percent). */
  slowerPct: N,
  reason: v.nullable(v.string()),
});
export type TimeJudgement = v.InferOutput<typeof TimeJudgement>;

/** What a worker measures of one capture (src/ops/check.ts checkCapture). */
const OutcomeFields = {
  /** The capture's identity (src/check/discover.ts): the shard and baseline key. */
  id: v.string(),
  /** The folder or archive checked. */
  path: v.string(),
  kernel: v.nullable(v.string()),
  /** done: replayed (verdict says how); skipped: refused by name (reason); error: could not be checked (code, reason). */
  outcome: v.picklist(["done", "skipped", "error"]),
  /** The replay's verdict against the captured after state (src/replay/engine.ts), run-to-run envelope included. */
  verdict: v.nullable(v.picklist(["match", "mismatch"])),
  /** bit-exact, within-tolerance, within-spread, multiset-equal or mismatch. */
  numerics: v.nullable(v.string()),
  /** Why it mismatched, was skipped or failed (one line). */
  reason: v.nullable(v.string()),
  /** The error's code (E_ARCH, E_BUILD, E_CHECKSUM…) for skipped and error. */
  code: v.nullable(v.string()),
  /** Something worth knowing that did not change the outcome (rebuilt for another architecture, no reproducer to rebuild). */
  note: v.nullable(v.string()),
  /** Where it was captured and where it replayed (manifest device; the replay's device). */
  captured: v.nullable(Device),
  device: v.nullable(Device),
  /** The rebuild (--rebuild): builder (build.sh or pruned), seconds, and the architecture built for when not the captured one. */
  rebuild: v.nullable(v.object({ builder: v.string(), seconds: N, targetArch: v.nullable(v.string()) })),
  /** Kernel time per timed launch (µs, CUDA events; src/replay/engine.ts timing), and their median. */
  timing: v.nullable(v.object({ medianUs: N, samplesUs: v.array(N) })),
  /** Wall time of the capture's whole check in the worker, and of its replay call alone (s). */
  seconds: N,
  replaySeconds: N,
  /** When it finished (ISO 8601). */
  at: v.string(),
};
export const Outcome = v.object(OutcomeFields);
export type Outcome = v.InferOutput<typeof Outcome>;

export const CheckRecord = v.object({
  ...OutcomeFields,
  status: v.picklist(STATUSES),
  time: v.nullable(TimeJudgement),
  /** Worker slot (0-based) and its CUDA_VISIBLE_DEVICES (null: inherited). */
  worker: v.pipe(v.number(), v.integer(), v.minValue(0)),
  gpu: v.nullable(v.string()),
  /** The run's --shard ("K/N"), null for a whole-corpus run; absent in records of kerncap before it (--resume checks it). */
  shard: v.optional(v.nullable(v.string())),
});
export type CheckRecord = v.InferOutput<typeof CheckRecord>;

/** A record's status from its outcome and timing judgement. */
export function statusOf(o: Outcome, time: TimeJudgement | null): Status {
  if (o.outcome === "error") return "error";
  if (o.outcome === "skipped") return "skipped";
  if (o.verdict === "mismatch") return "mismatch";
  return time?.verdict === "slower" ? "slower" : "ok";
}

/**
 * Why a record that matches the schema still cannot be one kerncap check wrote, or undefined: its
 * status against its outcome and time judgement (statusOf: "slower" only with a slower time
 * comparison), its time judgement's numbers against its verdict (slower, faster and same carry a ratio, its interval
 * and the baseline's median; the others no ratio), which the report and JUnit print. A results file is read back by --resume and --merge: a crafted record is refused
 * here, naming its line, rather than failing later in the report.
 */
export function recordProblem(r: CheckRecord): string | undefined {
  const t = r.time;
  // the status is the outcome's and the time judgement's (statusOf, as check writes it): a "slower" without its comparison is no judgement
  const status = statusOf(r, t);
  if (r.status !== status) {
    return r.status === "slower"
      ? `status is "slower" but ${t ? `time.verdict is "${t.verdict}"` : "time is null"}: a slower judgement carries its time comparison (time.verdict "slower", its ratio and interval)`
      : `status is "${r.status}", but its outcome, verdict and time judgement make it "${status}"`;
  }
  if (t) {
    const judged = t.verdict === "slower" || t.verdict === "faster" || t.verdict === "same";
    const nums = { ratio: t.ratio, low: t.low, high: t.high, baselineMedianUs: t.baselineMedianUs };
    for (const [k, x] of Object.entries(nums)) {
      if (judged && x === null) return `time.${k} is null, but a "${t.verdict}" judgement has one`;
      if (!judged && x !== null && k !== "baselineMedianUs") return `time.${k} is ${x}, but a "${t.verdict}" judgement has none`;
    }
    if (judged && !(t.low! <= t.ratio! && t.ratio! <= t.high!)) return `time.ratio ${t.ratio} lies outside its interval [${t.low}, ${t.high}]`;
  }
  return undefined;
}
