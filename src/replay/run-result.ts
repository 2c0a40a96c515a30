/**
 * A run's result (ReplayResult) from its parts: the judging (./judging.ts), the timed launches
 * (µs), the session's open, and what the edited module's runs showed beyond the captured kernel's
 * nondeterminism (./reference-noise.ts).
 */
import { JUDGE_FILE } from "../format/file-names.ts";
import type { Manifest } from "../format/manifest.ts";
import type { ClockState, ReplayBackend } from "./backends/interface.ts";
import { median } from "./compare.ts";
import type { Judged } from "./judging.ts";
import type { ReplayResult, RunOptions } from "./result.ts";
import { overallVerdict } from "./tolerance.ts";

/** What a run's result is made of besides the judging and the timed launches (Session.prepare). */
export interface RunFacts {
  dir: string;
  m: Manifest;
  o: RunOptions;
  module: ReplayResult["module"];
  /** Module globals restored and checked. */
  globals: number;
  check: { verifySeconds: number; compareSeconds: number; bytesCopiedBack: number };
  runs: number;
  tol: { atol: number; rtol: number };
  /** The judging settings taken from the capture (kerncap judge), by name. */
  judgedFrom: string[];
  /** A rebuilt module whose runs differed: the captured kernel's, and why the edit's differ beyond them. */
  reference?: ReplayResult["determinism"]["reference"];
  /** The timed launch checked against the checked runs: its round, and where it differed. */
  timedCheck?: ReplayResult["check"]["timedLaunch"];
  /** Where a rebuilt module wrote the memory mapped around the regions (checked-runs.ts paddingWritten). */
  outside?: string;
  /** A rebuilt module's own variables put back before every launch. */
  moduleState?: ReplayResult["determinism"]["moduleState"];
}

/** The result of one run: the judging's verdict, the timed launches' figures (µs), what the session's open and the run cost. */
export function resultOf(
  be: ReplayBackend,
  opened: Pick<ReplayResult, "restore" | "reserve">,
  f: RunFacts,
  j: Judged,
  t: { times: number[]; interleaved: boolean; clocks: ClockState | null; flushed: boolean; method: string; clock: "events" | "cupti"; clockNote?: string },
): ReplayResult {
  const { m, o } = f;
  const { times } = t;
  const determinism = {
    runs: f.runs,
    runsDiffering: j.runsDiffering.size,
    nondeterministic: j.runsDiffering.size > 0,
    ...(o.nondeterministic !== undefined ? { expected: o.nondeterministic ? ("nondeterministic" as const) : ("deterministic" as const) } : {}),
    ...(f.reference ? { reference: f.reference } : {}),
    ...(f.moduleState ? { moduleState: f.moduleState } : {}),
  };
  // a kernel said to be deterministic whose runs differ: a race or an atomic the edit brought in
  // or an edited kernel whose runs differ beyond the captured kernel's (src/replay/reference-noise.ts)
  // or a timed launch that wrote other bytes than the checked runs (a kernel that tells them apart)
  const unexpectedlyVaried =
    (o.nondeterministic === false && j.runsDiffering.size > 0) ||
    f.reference?.beyond !== undefined ||
    f.timedCheck?.differs !== undefined ||
    f.outside !== undefined;
  const sorted = [...times].sort((a, b) => a - b);
  const pct = (q: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! : NaN);
  const appUs = typeof m.timing.app_launch_us === "number" && m.timing.app_launch_us >= 0 ? m.timing.app_launch_us : null;
  return {
    dir: f.dir,
    kernel: m.kernel.demangled || m.kernel.name,
    symbol: m.kernel.name,
    verdict: overallVerdict(j.numerics) === "mismatch" || unexpectedlyVaried ? "mismatch" : "match",
    regionsChecked: m.regions.length + f.globals,
    bytesChecked: j.bytesChecked,
    mismatches: j.mismatches,
    timing: {
      iters: times.length,
      medianUs: times.length ? median(times) : NaN,
      minUs: times.length ? sorted[0]! : NaN,
      p10Us: pct(0.1),
      p90Us: pct(0.9),
      appUs,
      method: t.method + (t.interleaved ? ", interleaved with the other kernel's launches" : ""),
      appMethod: m.appLaunchMethod ?? "events around the launch in the app (launch path included)",
      l2: t.flushed ? "flushed" : "warm",
      clock: t.clock,
      ...(t.clockNote ? { clockNote: t.clockNote } : {}),
      clocks: t.clocks,
      ...(o.keepSamples ? { samplesUs: times } : {}),
    },
    restore: opened.restore,
    reserve: opened.reserve,
    check: {
      ...f.check,
      ...(be.scansOn === "host" ? { scannedOn: "host" as const } : {}),
      ...(f.timedCheck ? { timedLaunch: f.timedCheck } : {}),
      ...(f.outside ? { outsideRegions: f.outside } : {}),
    },
    determinism,
    module: f.module,
    device: { name: be.deviceName(), arch: be.arch() },
    numerics: {
      verdict: overallVerdict(j.numerics),
      atol: f.tol.atol,
      rtol: f.tol.rtol,
      regions: j.numerics.filter((x) => x.verdict !== "bit-exact"),
      ...(f.judgedFrom.length ? { settings: { file: JUDGE_FILE, used: f.judgedFrom } } : {}),
    },
    ...(o.multiset?.length ? { multiset: j.multiset } : {}),
  };
}

/** One line: why a replay mismatched. */
export function mismatchReason(r: ReplayResult): string {
  if (r.fault)
    return `the capture faulted in the app (${r.fault.expected.name}); the replay ${r.fault.observed ? `faulted with ${r.fault.observed.name}` : "did not fault"}`;
  // results read back from a worker or a file may lack what a run today always has
  const d: Partial<ReplayResult["determinism"]> = r.determinism ?? {};
  if (d.reference?.beyond) return d.reference.beyond;
  if (r.check?.outsideRegions) return outsideRegionsReason(r.check.outsideRegions);
  const t = r.check?.timedLaunch;
  if (t?.differs)
    return `timed launch ${t.round + 1} wrote other bytes than the checked runs (${t.differs}): the kernel computes otherwise when timed, and its time is not the time of what was judged`;
  if (d.expected === "deterministic" && d.nondeterministic)
    return `${d.runsDiffering} of ${(d.runs ?? 1) - 1} later checked runs differ from the first where the capture's judging expects a deterministic kernel`;
  const x = r.mismatches[0];
  const more = r.mismatches.length > 1 ? ` (and ${r.mismatches.length - 1} more)` : "";
  return x
    ? `${r.mismatches.length} of ${r.regionsChecked} regions differ from the app's after state: ${x.va} (${x.kind}), ${x.bytesDiffering} bytes from byte ${x.firstDiffOffset}${more}`
    : `numerics ${r.numerics.verdict}`;
}

/** Why a kernel that wrote the memory mapped around the regions (ReplayResult.check.outsideRegions: where) mismatches. */
export function outsideRegionsReason(where: string): string {
  return `the kernel wrote memory outside every region, at ${where}: the app's kernel could not have (it would fault there), and a kernel can keep a result there between launches`;
}
