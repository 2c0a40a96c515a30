/**
 * Judging the checked runs (./checked-runs.ts) against the app's after state: each range bit for
 * bit, by the tolerance (src/replay/tolerance.ts), by the run-to-run envelope where the runs
 * differ, by the kernel's own noise where they agree but differ from the app's
 * (src/replay/envelope.ts), or as a multiset of elements (--multiset); and the outcome of a
 * launch that faulted in the app (replayFault).
 */
import { chunkBytesOf, chunkExpectation, chunkLen, type Range } from "../format/chunks.ts";
import type { FileImage } from "../format/file-image.ts";
import { kc64 } from "../format/kc64.ts";
import type { Manifest } from "../format/manifest.ts";
import { log } from "../log.ts";
import { selfName } from "../util/self-exec.ts";
import type { ChunkScan, ReplayBackend } from "./backends/interface.ts";
import { anyVaried, type AppImages, type CheckedRange, type CheckedRuns } from "./checked-runs.ts";
import { diffBytes } from "./compare.ts";
import {
  isFloatType,
  judgeEnvelope,
  judgeHeld,
  judgeMultiset,
  kernelNoise,
  maxSpread,
  mergeEnvelopes,
  type Envelope,
  type MultisetJudgement,
} from "./envelope.ts";
import type { MultisetRegion, RegionMismatch, ReplayResult } from "./result.ts";
import { ELEMENT_BYTES, RegionAccumulator, type ElementType, type RegionNumerics, type Tolerance } from "./tolerance.ts";

/** The judging of every range: its numerics, the mismatching ones, the runs that differed from the first, the --multiset reports. */
export interface Judged {
  numerics: RegionNumerics[];
  mismatches: RegionMismatch[];
  runsDiffering: Set<number>;
  multiset: MultisetRegion[];
  bytesChecked: number;
  /** Indices of the ranges (not judged as multisets) whose checked runs differed among themselves. */
  varied: number[];
  /** The kernel's noise per float element type over those ranges (./envelope.ts kernelNoise: ulp, and which ranges). */
  noise: Map<ElementType, { ulp: number; regions: number[] }>;
}

type Held = { c: number; appBytes: Uint8Array; got: Uint8Array; before: Uint8Array | undefined };
/** One range after the first pass: its accumulator, its envelope where runs varied, and the chunks held for the kernel's noise. */
type RangeWork =
  | { multiset: RegionNumerics }
  | { acc: RegionAccumulator; env?: Envelope; held: Held[]; whole: Parameters<RegionAccumulator["setWholeRegion"]>[0] };

/**
 * Judge every range of the checked runs. Two passes: each range's chunks (every run equal to the
 * app's, varying between runs, or held: the runs agree and differ from the app's), then each
 * range's verdict, the held chunks judged by the kernel's noise of their element type (bit for
 * bit, or by the tolerance, where no range of that type varied).
 */
export function judgeRuns(
  ranges: CheckedRange[],
  expect: ReturnType<typeof chunkExpectation>[],
  runs: CheckedRuns,
  asMultiset: Set<number>,
  tol: Tolerance,
  C: number,
  images: AppImages,
): Judged {
  const out: Judged = { numerics: [], mismatches: [], runsDiffering: new Set<number>(), multiset: [], bytesChecked: 0, varied: [], noise: new Map() };
  // the kernel's runs varied somewhere: a written float region whose runs all agree but differ
  // from the app's is judged against the kernel's own noise (src/replay/envelope.ts kernelNoise)
  const kernelVaried = anyVaried(runs.scans);
  const regionWork: RangeWork[] = [];
  const varyingRegions: { index: number; dtype: ElementType; env: Envelope }[] = [];
  for (const [i, x] of ranges.entries()) {
    if (asMultiset.has(i)) {
      // order-independent: the whole region's elements, the app's against each run's (no envelope, no tolerance)
      const j = multisetRange(x, expect[i]!, i, runs.scans, runs.copies, C, images.before, images.after);
      j.runsDiffering.forEach((run) => out.runsDiffering.add(run));
      out.multiset.push(j.report);
      regionWork.push({ multiset: j.numerics });
      continue;
    }
    const w = rangeChunks(x, i, expect[i]!, runs, kernelVaried, tol, C, images, out.runsDiffering);
    if (w.env) varyingRegions.push({ index: i, dtype: x.dtype, env: w.env });
    regionWork.push(w);
  }
  const noise = kernelNoise(varyingRegions);
  out.noise = noise;
  const s0 = runs.scans[0];
  if (s0)
    out.varied = ranges.flatMap((_, i) =>
      !asMultiset.has(i) && runs.scans.slice(1).some((sr) => sr[i]!.hash.some((h, c) => h !== s0[i]!.hash[c])) ? [i] : [],
    );
  for (const [i, x] of ranges.entries()) {
    const j = regionWork[i]!;
    const res = "multiset" in j ? j.multiset : rangeVerdict(j, i, noise.get(x.dtype), x.dtype, runs.runs, C);
    out.bytesChecked += x.r.size;
    out.numerics.push(res);
    if (res.verdict === "mismatch") {
      const firstDiff = res.firstDiffOffset >= 0 ? res.firstDiffOffset : res.firstOverOffset;
      out.mismatches.push({
        va: x.r.va,
        kind: x.kind,
        size: x.r.size,
        changedInApp: x.r.changed,
        firstDiffOffset: firstDiff,
        bytesDiffering: res.bytesDiffering,
      });
    }
  }
  return out;
}

/**
 * Whether every checked run, judged on its own (one run: no envelope, the tolerance only),
 * matches the app's after state: how an edited kernel whose runs differ beyond the captured
 * kernel's nondeterminism is judged when a tolerance is given (./reference-noise.ts).
 */
export function judgeEachRun(
  ranges: CheckedRange[],
  expect: ReturnType<typeof chunkExpectation>[],
  runs: CheckedRuns,
  asMultiset: Set<number>,
  tol: Tolerance,
  C: number,
  images: AppImages,
): boolean {
  for (let run = 0; run < runs.runs; run++) {
    const copies = new Map<string, Uint8Array[]>();
    for (const [k, v] of runs.copies) if (v[run]) copies.set(k, [v[run]!]);
    const one: CheckedRuns = { scans: [runs.scans[run]!], copies, runs: 1, bytesCopiedBack: 0 };
    const j = judgeRuns(ranges, expect, one, asMultiset, tol, C, images);
    if (j.numerics.some((x) => x.verdict === "mismatch")) return false;
  }
  return true;
}

/** The first pass over one range: every chunk a run copied back, into the accumulator, the envelope (varying between runs) or the held list. */
function rangeChunks(
  x: CheckedRange,
  i: number,
  e: ReturnType<typeof chunkExpectation>,
  { scans, copies, runs: nRuns }: CheckedRuns,
  kernelVaried: boolean,
  tol: Tolerance,
  C: number,
  { before, after }: AppImages,
  runsDiffering: Set<number>,
): Exclude<RangeWork, { multiset: RegionNumerics }> {
  const s0 = scans[0]![i]!;
  const acc = new RegionAccumulator({ va: x.r.va, kind: x.kind, size: x.r.size, changedInApp: x.r.changed }, x.dtype, x.source, tol);
  const varying: { c: number; appBytes: Uint8Array; perRun: Uint8Array[] }[] = [];
  const held: Held[] = [];
  let gotAllZero = true;
  let expAllZero = true;
  let gotEqualsBefore = true;
  for (let c = 0; c < s0.hash.length; c++) {
    const len = chunkLen(x.r.size, c, C);
    if (s0.nonzero[c]) gotAllZero = false;
    const want = e.state[c] === "zero" ? undefined : e.hash[c];
    if (want !== undefined && want !== zeroHash(len)) expAllZero = false;
    const bh = e.beforeHash[c];
    if (bh === undefined ? s0.nonzero[c] !== 0 : s0.hash[c] !== bh) gotEqualsBefore = false;
    let varies = false;
    for (let run = 1; run < nRuns; run++) {
      if (scans[run]![i]!.hash[c] !== s0.hash[c]) {
        varies = true;
        runsDiffering.add(run);
      }
    }
    const got = copies.get(`${i}:${c}`);
    if (!got) continue; // every run equals the app's bytes
    const appBytes = chunkBytesOf(e, c, len, "after", before, after);
    const perRun = Array.from({ length: nRuns }, (_, run) => got[run] ?? appBytes);
    const beforeBytes = x.r.changed ? chunkBytesOf(e, c, len, "before", before, after) : undefined;
    if (varies) varying.push({ c, appBytes, perRun });
    else if (kernelVaried && x.r.changed && isFloatType(x.dtype)) held.push({ c, appBytes, got: perRun[0]!, before: beforeBytes });
    else acc.add(c * C, perRun[0]!, appBytes, beforeBytes);
  }
  const whole = { bytes: x.r.size, gotAllZero, expAllZero: expAllZero && x.r.changed, gotEqualsBefore };
  // the region's noise floor first, then each varying chunk against it (src/replay/envelope.ts)
  const floor = varying.reduce((a, v) => Math.max(a, maxSpread(x.dtype, v.perRun)), 0);
  const env = varying.length ? mergeEnvelopes(varying.map((v) => ({ offset: v.c * C, env: judgeEnvelope(x.dtype, v.appBytes, v.perRun, floor) }))) : undefined;
  return { acc, env, held, whole };
}

/** The second pass over one range: its held chunks judged by the kernel's noise `k` (or added as they are without one), the envelope's and the noise's outliers folded into the verdict. */
function rangeVerdict(
  j: Exclude<RangeWork, { multiset: RegionNumerics }>,
  i: number,
  k: { ulp: number; regions: number[] } | undefined,
  dtype: ElementType,
  nRuns: number,
  C: number,
): RegionNumerics {
  const held = { differing: 0, appUlp: 0, outside: 0, first: -1 };
  for (const h of j.held) {
    if (!k) {
      j.acc.add(h.c * C, h.got, h.appBytes, h.before);
      continue;
    }
    const r = judgeHeld(dtype, h.appBytes, h.got, k.ulp);
    held.differing += r.differing;
    held.appUlp = Math.max(held.appUlp, r.maxUlp);
    held.outside += r.outside;
    if (held.first < 0 && r.firstOutsideOffset >= 0) held.first = h.c * C + r.firstOutsideOffset;
    j.acc.add(h.c * C, h.got, h.appBytes, h.before, { judgedElsewhere: true });
  }
  j.acc.setWholeRegion(j.whole);
  const res = j.acc.result();
  for (const [bad, first, add] of [
    [j.env?.outside ?? 0, j.env?.firstOutsideOffset ?? -1, j.env !== undefined],
    [held.outside, held.first, k !== undefined && j.held.length > 0],
  ] as const) {
    if (!add) continue;
    if (bad) {
      res.verdict = "mismatch";
      res.overTolerance += bad;
      if (res.firstOverOffset < 0) res.firstOverOffset = first;
    } else if (res.verdict === "bit-exact") res.verdict = "within-spread";
  }
  if (j.env) res.spread = j.env;
  if (k && j.held.length)
    res.kernelNoise = { region: i, ulp: k.ulp, regions: k.regions, appUlp: held.appUlp, elementsDiffering: held.differing, outside: held.outside, runs: nRuns };
  return res;
}

/**
 * --multiset for one region (ranges[i] of the checked runs): the app's whole after state and each
 * run's whole bytes (the chunks copied back where a run's kc64 differed from the app's, the app's
 * bytes elsewhere: equal hashes, equal bytes), judged by judgeMultiset. Holds 1 + runs copies of
 * the region on the host, only when some run differs from the app.
 */
function multisetRange(
  x: { r: Range; kind: string; dtype: ElementType; source: RegionNumerics["dtypeSource"] },
  e: ReturnType<typeof chunkExpectation>,
  i: number,
  scans: ChunkScan[][],
  copies: Map<string, Uint8Array[]>,
  C: number,
  before: FileImage,
  after: FileImage,
): { report: MultisetRegion; numerics: RegionNumerics; runsDiffering: number[] } {
  const nRuns = scans.length;
  const nChunks = scans[0]![i]!.hash.length;
  const runsDiffering = scans.flatMap((sr, run) => (run > 0 && sr[i]!.hash.some((h, c) => h !== scans[0]![i]!.hash[c]) ? [run] : []));
  const copied = Array.from({ length: nChunks }, (_, c) => copies.get(`${i}:${c}`))
    .map((g, c) => ({ c, g }))
    .filter((x) => x.g);
  let j: MultisetJudgement = { elements: Math.floor(x.r.size / ELEMENT_BYTES[x.dtype]), runs: nRuns, runsReordered: 0, unmatched: 0, firstBadRun: -1 };
  let diff = { first: -1, count: 0 };
  if (copied.length) {
    const app = new Uint8Array(x.r.size);
    for (let c = 0; c < nChunks; c++) app.set(chunkBytesOf(e, c, chunkLen(x.r.size, c, C), "after", before, after), c * C);
    const perRun = Array.from({ length: nRuns }, (_, run) => {
      const b = app.slice();
      for (const { c, g } of copied) if (g![run]) b.set(g![run]!, c * C);
      return b;
    });
    j = judgeMultiset(x.dtype, app, perRun);
    diff = diffBytes(perRun[j.firstBadRun >= 0 ? j.firstBadRun : 0]!, app);
  }
  const verdict: MultisetRegion["verdict"] = j.unmatched ? "mismatch" : j.runsReordered ? "multiset-equal" : "bit-exact";
  return {
    runsDiffering,
    report: { index: i, va: x.r.va, dtype: x.dtype, verdict, ...j },
    numerics: {
      va: x.r.va,
      kind: x.kind,
      size: x.r.size,
      changedInApp: x.r.changed,
      dtype: x.dtype,
      dtypeSource: x.source,
      verdict,
      elements: j.elements,
      bytesDiffering: diff.count,
      overTolerance: j.unmatched,
      maxAbsError: 0,
      maxRelError: 0,
      firstOverOffset: -1,
      firstDiffOffset: diff.first,
      multiset: j,
    },
  };
}

const zeroHashes = new Map<number, string>();
function zeroHash(len: number): string {
  let h = zeroHashes.get(len);
  if (!h) zeroHashes.set(len, (h = kc64(new Uint8Array(len)).hex));
  return h;
}

/** The command line that runs this replay under compute-sanitizer's memcheck. */
export function sanitizerCommand(dir: string): string {
  return `compute-sanitizer --tool memcheck ${selfName()} replay ${dir} --runs 1 --iters 0`;
}

/**
 * A launch that faulted in the app, replayed: the expected outcome is the same fault (the
 * backend's launchFault names it); nothing is compared or timed.
 * @throws what the launch threw when it is not a launch fault
 */
export function replayFault(
  dir: string,
  m: Manifest,
  be: ReplayBackend,
  launch: () => void,
  module: ReplayResult["module"],
  restore: ReplayResult["restore"],
  reserve: ReplayResult["reserve"],
  verifySeconds: number,
): ReplayResult {
  let observed: { code: number; name: string } | null = null;
  try {
    launch();
    be.sync();
  } catch (e) {
    observed = be.launchFault(e);
    if (!observed) throw e;
  }
  const reproduced = observed?.code === m.fault!.code;
  log.debug(`fault expected ${m.fault!.name}, observed ${observed ? observed.name : "none"}`);
  return {
    dir,
    kernel: m.kernel.demangled || m.kernel.name,
    symbol: m.kernel.name,
    verdict: reproduced ? "match" : "mismatch",
    regionsChecked: 0,
    bytesChecked: 0,
    mismatches: [],
    timing: { iters: 0, medianUs: NaN, minUs: NaN, p10Us: NaN, p90Us: NaN, appUs: null, method: "none (the launch faults)", appMethod: "none" },
    restore,
    reserve,
    check: { verifySeconds, compareSeconds: 0, bytesCopiedBack: 0 },
    determinism: { runs: 1, runsDiffering: 0, nondeterministic: false },
    module,
    device: { name: be.deviceName(), arch: be.arch() },
    numerics: { verdict: reproduced ? "bit-exact" : "mismatch", atol: 0, rtol: 0, regions: [] },
    fault: { expected: m.fault!, observed, reproduced, sanitizer: sanitizerCommand(dir) },
  };
}
