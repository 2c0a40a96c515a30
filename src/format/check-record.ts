/**
 * One capture's outcome in `kerncap check` (src/check/): the shape of each line of the results
 * file (JSON Lines, src/check/results.ts), of the `captures` of the --json document and of what a
 * worker process sends back (less the parent's timing judgement). One valibot schema, read back on
 * --resume and --merge and printed by `kerncap schema check`. Here with the other documents
 * (./documents.ts), below the check that writes it.
 */
import * as v from "valibot";
import { median } from "../util/median.ts";
import { BuildDiagnostic } from "./eval-record.ts";
import { nonFinite } from "./json-position.ts";

const N = v.number();
const Device = v.object({ name: v.string(), arch: v.string() });

/** What the check did to a capture, in the order the summary lists them (regressions first). */
export const STATUSES = ["mismatch", "slower", "error", "skipped", "ok"] as const;
export type Status = (typeof STATUSES)[number];

/**
 * The time ratio (this run's median over the baseline's) and its interval (src/check/timing.ts):
 * slower/faster when the whole interval lies beyond ±slowerPct; same inside; no-baseline: nothing
 * to compare with (the first check records it); not-comparable: the baseline was timed on another
 * GPU, or with L2 in another state (--flush-l2 or warm); too-few-runs: fewer timed launches than an interval needs.
 */
export const TimeJudgement = v.object({
  /** slower/faster: the interval lies wholly beyond ±slowerPct; same: it does not; no-baseline, not-comparable, too-few-runs: no claim (`reason` says why). */
  verdict: v.picklist(["slower", "faster", "same", "no-baseline", "not-comparable", "too-few-runs"]),
  /** This run's time over the baseline's (Hodges–Lehmann over ln-times): above 1, slower (the inverse of eval's speedup); null where there was no comparison. */
  ratio: v.nullable(N),
  /** The ratio's 99% interval (Mann–Whitney), null with it. */
  low: v.nullable(N),
  high: v.nullable(N),
  /** The baseline's median kernel time (µs), null where there is none for this capture. */
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
  /** The kernel's symbol (its mangled name, the manifest's kernel.name), as every document gives it beside `kernel`; absent where the manifest did not read, and in records of kerncap before it. */
  symbol: v.optional(v.string()),
  /** done: replayed, or built (verdict says how); skipped: refused by name (reason); error: could not be checked (code, reason). */
  outcome: v.picklist(["done", "skipped", "error"]),
  /** The replay's verdict against the captured after state (src/replay/engine.ts), run-to-run envelope included; built: `check --rebuild --build-only` rebuilt it and replayed nothing (its `rebuild` says how; status ok). */
  verdict: v.nullable(v.picklist(["match", "mismatch", "built"])),
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
  /**
   * The rebuild (--rebuild): builder (build.sh or pruned), seconds, the architecture built for when
   * not the captured one, and the rebuilt kernel's registers per thread, stack frame and spill
   * stores and loads (bytes; the cubin's, src/rebuild/resources.ts; null where it does not say,
   * absent in records written before they were recorded).
   */
  rebuild: v.nullable(
    v.object({
      builder: v.string(),
      seconds: N,
      targetArch: v.nullable(v.string()),
      registers: v.optional(v.nullable(N)),
      stackFrameBytes: v.optional(v.nullable(N)),
      spillStoreBytes: v.optional(v.nullable(N)),
      spillLoadBytes: v.optional(v.nullable(N)),
      /** The CUDA toolkit version the rebuilt module names ("13.0.88"; null where it names none). Absent in records of kerncap before it. */
      toolkit: v.optional(v.nullable(v.string())),
      /** The compiler the build ran (a CUDA build.sh's nvcc: NVCC or PATH's), as validate's rebuild.nvcc. Absent where the frontend says none. */
      nvcc: v.optional(v.string()),
    }),
  ),
  /** A build error's compiler diagnostics (E_BUILD's error.details.diagnostics, files relative to the capture: src/k.cu); absent elsewhere. */
  diagnostics: v.optional(v.array(BuildDiagnostic)),
  /** Kernel time per timed launch (µs, CUDA events; src/replay/engine.ts timing), and their median; l2: "flushed" when L2 was flushed before each (--flush-l2), absent when warm. */
  timing: v.nullable(v.object({ medianUs: N, samplesUs: v.array(N), l2: v.optional(v.literal("flushed")) })),
  /** Wall time of the capture's whole check in the worker (s). */
  seconds: N,
  /** Wall time of its replay call alone (s). */
  replaySeconds: N,
  /** When it finished (ISO 8601). */
  at: v.string(),
};
export const Outcome = v.object(OutcomeFields);
export type Outcome = v.InferOutput<typeof Outcome>;

export const CheckRecord = v.object({
  ...OutcomeFields,
  /** What the check did to the capture: mismatch, slower (than the baseline), error, skipped (not replayed here, `code` says why), ok. */
  status: v.picklist(STATUSES),
  /** Its time judged against the baseline's (null: no timed match). */
  time: v.nullable(TimeJudgement),
  /** Worker slot (0-based). */
  worker: v.pipe(v.number(), v.integer(), v.minValue(0)),
  /** The worker's CUDA_VISIBLE_DEVICES (null: inherited). */
  gpu: v.nullable(v.string()),
  /** The run's --shard ("K/N"), null for a whole-corpus run; absent in records of kerncap before it (--resume checks it). */
  shard: v.optional(v.nullable(v.string())),
  /**
   * The SHA-256 (hex) of what the verdict was judged on (src/format/subject.ts): the capture's
   * manifest (an archive's bytes), its judging settings file, with --rebuild its build.sh and src/,
   * and the run's verdict-changing options. --resume takes a record only when the capture's subject
   * is this one now; absent in records of kerncap before it (--resume checks those again).
   */
  subject: v.optional(v.pipe(v.string(), v.regex(/^[0-9a-f]{64}$/))),
  /**
   * The SHA-256 (hex) of the run it belongs to (src/format/subject.ts checkRunSubject: the whole
   * corpus's capture ids, before --shard, and the run's verdict-changing options): one value in every
   * shard of one run; `--merge` refuses shards K/N naming two. Absent in records of kerncap before it.
   */
  runSubject: v.optional(v.pipe(v.string(), v.regex(/^[0-9a-f]{64}$/))),
  /**
   * Its authenticator, "hmac-sha256:KEYID:MAC": HMAC-SHA256 under the results key
   * (KERNCAP_RESULTS_KEY, else the user's key in kerncap's state folder) of the record without it,
   * as canonical JSON with its document id as `schema` (src/format/record-auth.ts). --merge and
   * --resume take a record only with a valid one; absent where no key could be had.
   */
  auth: v.optional(v.string()),
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
 * and the baseline's median; the others no ratio), which the report and JUnit print; and its numbers: none
 * non-finite (nonFinite), no negative time, timing.medianUs the median of its samples, a ratio inside its
 * interval, on the side of 1 its verdict says, and within RATIO_FACTOR (times its samples' spread) of timing.medianUs / time.baselineMedianUs.
 * A results file is read back by --resume and --merge: a crafted record is refused
 * here, naming its line, rather than failing later in the report (a trial's record said ratio 1.00 beside
 * medians of 100 µs and 10 µs, another low -1e999).
 */
export function recordProblem(r: CheckRecord): string | undefined {
  const t = r.time;
  // numbers: JSON's 1e999 reads as Infinity, which the schema's number takes
  const inf = nonFinite(r);
  if (inf) return inf;
  for (const [k, x] of [
    ["seconds", r.seconds],
    ["replaySeconds", r.replaySeconds],
    ["rebuild.seconds", r.rebuild?.seconds ?? 0],
  ] as const)
    if (x < 0) return `${k} is ${x}: a time is not negative`;
  if (r.timing) {
    const { medianUs, samplesUs } = r.timing;
    if (medianUs < 0 || samplesUs.some((x) => x < 0)) return "timing holds a negative time";
    // the worker's median is the median of these samples (src/replay/run-result.ts): --baseline judges the samples, the report prints the median
    if (samplesUs.length && !near(medianUs, median(samplesUs), 1e-9))
      return `timing.medianUs ${medianUs} is not the median of timing.samplesUs (${median(samplesUs)})`;
  }
  // the status is the outcome's and the time judgement's (statusOf, as check writes it): a "slower" without its comparison is no judgement
  const status = statusOf(r, t);
  if (r.status !== status) {
    return r.status === "slower"
      ? `status is "slower" but ${t ? `time.verdict is "${t.verdict}"` : "time is null"}: a slower judgement carries its time comparison (time.verdict "slower", its ratio and interval)`
      : `status is "${r.status}", but its outcome, verdict and time judgement make it "${status}"`;
  }
  if (t) {
    // a time judgement is made only of a matching capture's times (src/check/check.ts judge)
    if (!r.timing) return `time.verdict is "${t.verdict}" but timing is null: a time judgement is made of this run's times`;
    const judged = t.verdict === "slower" || t.verdict === "faster" || t.verdict === "same";
    const nums = { ratio: t.ratio, low: t.low, high: t.high, baselineMedianUs: t.baselineMedianUs };
    for (const [k, x] of Object.entries(nums)) {
      if (judged && x === null) return `time.${k} is null, but a "${t.verdict}" judgement has one`;
      if (!judged && x !== null && k !== "baselineMedianUs") return `time.${k} is ${x}, but a "${t.verdict}" judgement has none`;
    }
    if (!(t.slowerPct >= 0)) return `time.slowerPct is ${t.slowerPct}: a threshold is not negative`;
    if (t.baselineMedianUs !== null && t.baselineMedianUs < 0) return `time.baselineMedianUs is ${t.baselineMedianUs}: a time is not negative`;
    if (judged) {
      const [ratio, low, high, base] = [t.ratio!, t.low!, t.high!, t.baselineMedianUs!];
      if (!(low > 0)) return `time.low is ${low}: a ratio of times is positive`;
      if (!(low <= ratio && ratio <= high)) return `time.ratio ${ratio} lies outside its interval [${low}, ${high}]`;
      // slower: the whole interval above 1 + slowerPct/100; faster: below 1 − slowerPct/100 (src/check/timing.ts)
      if (t.verdict === "slower" && !(low > 1)) return `time.verdict is "slower" but its interval [${low}, ${high}] does not lie above 1`;
      if (t.verdict === "faster" && !(high < 1)) return `time.verdict is "faster" but its interval [${low}, ${high}] does not lie below 1`;
      const { medianUs, samplesUs } = r.timing!;
      const medians = medianUs / base;
      const spread = samplesUs.length ? samplesUs.reduce((a, x) => Math.max(a, x), 0) / samplesUs.reduce((a, x) => Math.min(a, x), Infinity) : 1; // the ratio is of every sample, the median of the middle ones
      if (medianUs > 0 && base > 0 && Number.isFinite(spread) && !withinFactor(ratio, medians, RATIO_FACTOR * spread))
        return `time.ratio ${ratio} is not near timing.medianUs / time.baselineMedianUs (${medianUs} / ${base} = ${+medians.toPrecision(4)}): the ratio is of these times`;
    }
  }
  return undefined;
}

/**
 * How far a ratio of times (check's time.ratio, eval's speedup) may lie from the ratio of the two
 * medians beside it before a record is refused as made up: a factor, either way (check's times
 * by the spread of its samples too, max/min). Not 1%: the ratio is a Hodges–Lehmann estimate over
 * the times (src/replay/stats.ts), not the medians' ratio. Simulated genuine timings (noise up to
 * 20%, outliers at 3×, two clock states) put them up to 1.95× apart for eval (no samples in its
 * record), and up to 1.13× past check's sample spread; 1% refused genuine records with 1% noise.
 * A factor of 3 refuses what no measurement gives (a ratio of 1.00 beside medians of 100 µs and 10 µs).
 */
export const RATIO_FACTOR = 3;

/** Whether a and b (both positive) lie within a factor `f` of each other. */
export const withinFactor = (a: number, b: number, f: number): boolean => a <= b * f && b <= a * f;

/** Whether a and b agree within the relative tolerance `rel`. */
const near = (a: number, b: number, rel: number): boolean => Math.abs(a - b) <= rel * Math.max(Math.abs(a), Math.abs(b));
