/**
 * Human-readable formatting shared by the verbs (replay results, kernel and process tables), so
 * that no verb imports another (sizes and counts: src/util/format.ts). Plain strings: the verbs write them to stdout.
 */
import { processLabel, type KernelSeen, type ProcessCensus } from "../capture/census.ts";
import type { ReplayResult } from "../replay/engine.ts";
import type { TimingComparison } from "../replay/stats.ts";
import { mismatchReason, outsideRegionsReason } from "../replay/run-result.ts";
import type { ClockState } from "../replay/engine.ts";

import { formatBytes, plural } from "../util/format.ts";
import { escapeForTerminal, listForTerminal } from "../escape.ts";
import { stderrProgress, type ProgressLine } from "../util/progress.ts";
import type { ArchiveProgress } from "../format/archive.ts";

/**
 * The progress line of pack and unpack (src/util/progress.ts): one line whose label follows the
 * archive's phases (checking NAME's memory chunks, packing NAME, unpacking NAME), in bytes.
 * `update` goes to packCapture/unpackArchive's onProgress; `end` erases the line.
 */
export function archiveProgress(name: string, json: boolean): { update: ArchiveProgress; end: () => void } {
  let line: ProgressLine | undefined;
  let phase = "";
  const label = (p: string) => (p === "checking" ? `checking ${name}'s memory chunks` : `${p} ${name}`);
  return {
    update: (p, done, total) => {
      if (!line) line = stderrProgress(label(p), total, "bytes", json);
      else if (p !== phase) line.phase(label(p), total);
      phase = p;
      line.update(done);
    },
    end: () => line?.end(),
  };
}

/** Human lines for a replay result. */
export function describeReplay(r: ReplayResult): string {
  if (r.fault) {
    const f = r.fault;
    return [
      `${f.reproduced ? "MATCH (fault reproduced)" : "MISMATCH (fault not reproduced)"}  ${r.kernel}`,
      `  the launch faulted in the app: ${f.expected.name} (${f.expected.message})`,
      `  on replay: ${f.observed ? f.observed.name : "no fault: the kernel completed"}`,
      `  under memcheck: ${f.sanitizer}`,
      `  device ${r.device.name} ${r.device.arch}`,
    ]
      .map(oneLine)
      .join("\n"); // each line one line, whatever the manifest's names hold
  }
  const d = r.determinism;
  const spread = r.numerics.verdict === "within-spread";
  const asSets = r.numerics.verdict === "multiset-equal";
  const kernelLevel = r.numerics.regions.some((x) => x.kernelNoise && x.kernelNoise.elementsDiffering > 0);
  const L = [
    `${r.verdict === "match" ? (spread ? (kernelLevel ? "MATCH within the kernel's nondeterminism" : "MATCH within the run-to-run spread") : asSets ? "MATCH as multisets (same elements, another order)" : "MATCH") : "MISMATCH"}  ${r.kernel}`,
    ...r.numerics.regions.flatMap((x) => (x.kernelNoise && x.kernelNoise.elementsDiffering > 0 ? [`  ${describeKernelNoise(x)}`] : [])),
    `  checked ${plural(r.regionsChecked, "region")}, ${formatBytes(r.bytesChecked)} (kc64 per chunk ${r.check.scannedOn === "host" ? "read back to the host" : "on the GPU"}, ${formatBytes(r.check.bytesCopiedBack)} copied back); ${r.mismatches.length} differ`,
    `  ${d.runs} checked runs from the before state: ${d.nondeterministic ? `nondeterministic: ${d.runsDiffering} of ${d.runs - 1} later runs differ from the first` : "deterministic (every run bit-identical)"}`,
    ...(d.reference ? [`  ${describeReference(d.reference)}`] : []),
    ...(r.check.outsideRegions ? [`  ${outsideRegionsReason(r.check.outsideRegions)}`] : []),
    ...(r.check.timedLaunch?.differs
      ? [`  timed launch ${r.check.timedLaunch.round + 1} wrote other bytes than the checked runs (${r.check.timedLaunch.differs})`]
      : []),
    ...(d.moduleState
      ? [
          `  the rebuilt module's own variables put back as loaded before every launch: ${listForTerminal(d.moduleState.names.slice(0, 4), 4)}${d.moduleState.variables > 4 ? ", …" : ""} (${formatBytes(d.moduleState.bytes)})`,
        ]
      : []),
  ];
  for (const x of r.multiset ?? []) {
    const what = x.unmatched
      ? `${x.unmatched} elements without a partner (run ${x.firstBadRun + 1} of ${x.runs}): not the app's elements`
      : x.runsReordered
        ? `the app's elements in every run (${x.runsReordered} of ${plural(x.runs, "run")} in another order)`
        : x.runs === 1
          ? "bit-identical to the app in its 1 run"
          : `bit-identical to the app in all ${x.runs} runs`;
    L.push(`  region ${x.index} ${x.va} compared as a multiset of ${x.elements} ${x.dtype} elements: ${what}`);
  }
  for (const x of r.mismatches.slice(0, 20)) {
    L.push(
      `  region ${x.va} (${x.kind}, ${formatBytes(x.size)}, ${x.changedInApp ? "written by the kernel in the app" : "not written in the app"}): first difference at byte ${x.firstDiffOffset}, ${x.bytesDiffering} bytes differ`,
    );
  }
  if (r.timing.iters) {
    const t = r.timing;
    L.push(
      `  kernel time: median ${t.medianUs.toFixed(2)} µs (p10 ${t.p10Us.toFixed(2)}, p90 ${t.p90Us.toFixed(2)}, min ${t.minUs.toFixed(2)}) over ${plural(t.iters, "launch", "launches")}` +
        (t.appUs !== null ? `; in the app ${t.appUs.toFixed(2)} µs` : ""),
    );
    L.push(`    measured by ${t.method}; in the app by ${t.appMethod}`);
    if (t.clocks) L.push(`    ${describeClocks(t.clocks)}`);
  }
  L.push(
    `  restore ${formatBytes(r.restore.storedBytes)} stored of ${formatBytes(r.restore.bytes)} live in ${(r.restore.seconds * 1000).toFixed(1)} ms (${r.restore.gbPerS.toFixed(1)} GB/s${r.restore.hostRegistered ? ", pinned file mapping" : ", staged"}); ${r.reserve.spans} VA spans reserved at the captured addresses`,
  );
  L.push(...describeNumerics(r));
  L.push(`  device ${r.device.name} ${r.device.arch}`);
  return L.map(oneLine).join("\n"); // each line one line, whatever the manifest's names hold
}

/** An edited kernel's runs that differ, against the captured kernel's nondeterminism (src/replay/reference-noise.ts). */
function describeReference(x: NonNullable<ReplayResult["determinism"]["reference"]>): string {
  const theirs = `the captured kernel's ${x.runs} runs here ${x.nondeterministic ? "differ too" : "are bit-identical"}`;
  if (x.beyond) return `${x.beyond}; a tolerance (--rtol, --atol) judges each of the edited kernel's runs on its own against the app's`;
  if (x.eachRunWithinTolerance)
    return `the edited kernel's runs differ beyond the captured kernel's (${theirs}): each run judged on its own, every one within the tolerance`;
  return `the edited kernel's runs differ within the captured kernel's nondeterminism (${theirs})`;
}

/**
 * The other kernel of `replay --against` (or validate's rebuilt one against the captured module):
 * its verdict and its time against the baseline's, measured interleaved.
 */
export function describeAgainst(what: string, r: ReplayResult, c: TimingComparison | null): string {
  const verdict = r.verdict === "match" ? "MATCH" : "MISMATCH";
  return [
    `  against ${what}: ${verdict}${r.verdict === "match" ? "" : r.mismatches.length ? ` (${plural(r.mismatches.length, "region")} not as the app left them: its time says little)` : ` (${mismatchReason(r)})`}`,
    `    ${describeComparison(c)}`,
  ].join("\n");
}

/** One line: "kernel time 48.10 → 44.90 µs: 1.07× faster (1.05–1.09), 50 interleaved launch pairs". */
export function describeComparison(c: TimingComparison | null): string {
  if (!c) return "kernel time: not compared (fewer than 5 timed launch pairs, or a launch that faults)";
  return `kernel time ${c.baselineMedianUs.toFixed(2)} → ${c.candidateMedianUs.toFixed(2)} µs: ${c.text}, ${c.pairs} interleaved launch pairs`;
}

/**
 * A region judged by the kernel's noise (src/replay/envelope.ts judgeHeld): "region 3 never
 * varied in 32 runs; the app differs by 1 ulp, within the 2 ulp seen in regions 1, 4, 5" (region
 * numbers as inspect lists them), or "… by 6 ulp in 1 element, beyond the 2 ulp …".
 */
export function describeKernelNoise(x: ReplayResult["numerics"]["regions"][number]): string {
  const k = x.kernelNoise!;
  const name = `region ${k.region}`;
  const seen = k.regions.length === 1 ? `region ${k.regions[0]}` : `regions ${k.regions.join(", ")}`;
  const ulps = (u: number) => `${+u.toFixed(u < 10 ? 1 : 0)} ulp`;
  return k.outside
    ? `${name} never varied in ${k.runs} runs; the app differs by up to ${ulps(k.appUlp)} in ${k.outside} of ${k.elementsDiffering} differing elements, beyond the ${ulps(k.ulp)} seen in ${seen}`
    : `${name} never varied in ${k.runs} runs; the app differs by ${ulps(k.appUlp)} (${k.elementsDiffering} ${k.elementsDiffering === 1 ? "element" : "elements"}), within the ${ulps(k.ulp)} seen in ${seen}`;
}

/** --repeat: "20 comparisons: 0 faster, 0 slower, 20 same; a comparison took 0.41 s (median), 1200 launch pairs (median)". */
export function describeRepeats(rs: { compare: TimingComparison | null; seconds: number }[]): string {
  const n = (v: string) => rs.filter((r) => r.compare?.verdict === v).length;
  const mid = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
  const pairs = rs.flatMap((r) => (r.compare ? [r.compare.pairs] : []));
  return `    ${rs.length} comparisons: ${n("faster")} faster, ${n("slower")} slower, ${n("same")} same${rs.some((r) => !r.compare) ? `, ${rs.filter((r) => !r.compare).length} not compared` : ""}; a comparison took ${mid(rs.map((r) => r.seconds)).toFixed(2)} s, ${pairs.length ? mid(pairs) : 0} launch pairs (medians)`;
}

/** "clocks while timed: SM 1980 MHz (application 1785, max 1980), memory 3201 MHz". */
export function describeClocks(c: ClockState): string {
  const mhz = (x: number | null) => (x === null ? "?" : String(x));
  return `clocks while timed: SM ${mhz(c.smMHz)} MHz (application ${mhz(c.applicationsSmMHz)}, max ${mhz(c.maxSmMHz)}), memory ${mhz(c.memMHz)} MHz`;
}

/** The tolerance report: overall verdict, then each region that is not bit-exact. */
export function describeNumerics(r: ReplayResult): string[] {
  const n = r.numerics;
  const L = [
    `  numerics: ${n.verdict.toUpperCase()} (atol ${n.atol}, rtol ${n.rtol}${n.settings ? `; the capture's judging settings: ${n.settings.used.join(", ")}, from ${n.settings.file}` : ""})`,
  ];
  for (const x of n.regions.filter((x) => !x.multiset).slice(0, 20)) {
    L.push(
      `  region ${x.va} as ${x.dtype} (${x.dtypeSource}): ${x.verdict}; ${x.overTolerance} of ${x.elements} elements over tolerance, max abs ${x.maxAbsError.toPrecision(4)}, max rel ${x.maxRelError.toPrecision(4)}` +
        (x.firstOverOffset >= 0 ? `, first at byte ${x.firstOverOffset}` : "") +
        (x.trivial === "unchanged"
          ? "; the replay left it unchanged where the app wrote it"
          : x.trivial === "all-zeros"
            ? "; the replay left it all zeros where the app wrote data"
            : "") +
        (x.spread
          ? `; run-to-run spread: ${x.spread.elementsVarying} elements vary, max abs ${x.spread.maxAbsSpread.toPrecision(3)}, max rel ${x.spread.maxRelSpread.toPrecision(3)}, ${Math.round(x.spread.maxUlpSpread)} ulp; ${x.spread.outside} app elements outside the envelope`
          : ""),
    );
  }
  return L;
}

/**
 * The `list` table: count, bench (only when some kernel has autotuner benchmark launches, which
 * --dispatch does not count), graph (only when some kernel ran from CUDA graphs: of count, the
 * executions as a graph's kernel node), pid:count (`perProcess`: each process's count, for a job of several
 * processes), grid, block, module, note (only when some kernel is a collective: "collective (NCCL)",
 * never captured), kernel (demangled); numbers right-aligned. Grid, block and module are those
 * of an eager launch: "-" for a kernel that ran only as a CUDA graph's kernel node.
 */
export function kernelTable(kernels: KernelSeen[], perProcess = false): string {
  const bench = kernels.some((k) => k.benchmark);
  const graph = kernels.some((k) => k.graph || k.recorded);
  const note = kernels.some((k) => k.collective);
  const per = (k: KernelSeen) => (k.perProcess ?? []).map((p) => `${p.pid}:${p.count}`).join(" ");
  // grid, block and module come from an eager launch (c/cuda/kerncap_cuda.c on_launch): a kernel that ran only as a graph's node has none (the library writes 0x0x0, 0x0)
  const dims = (d: [number, number, number]) => (d.every((x) => x === 0) ? "-" : d.join("x"));
  const mod = (m: string) => (m === "0x0" || m === "" ? "-" : m);
  const rows = kernels.map((k) => [
    String(k.count),
    ...(bench ? [String(k.benchmark ?? 0)] : []),
    ...(graph ? [String(k.graph ?? 0)] : []),
    ...(perProcess ? [per(k)] : []),
    dims(k.grid),
    dims(k.block),
    mod(k.module),
    ...(note ? [k.collective ? `collective (${k.collective})` : ""] : []),
    oneLine(k.demangled || k.name),
  ]);
  const head = [
    "count",
    ...(bench ? ["bench"] : []),
    ...(graph ? ["graph"] : []),
    ...(perProcess ? ["pid:count"] : []),
    "grid",
    "block",
    "module",
    ...(note ? ["note"] : []),
    "kernel",
  ];
  return table(head, rows);
}

/** The per-process table of `list`: process number, pid, rank, launches, kernels, command. */
export function processTable(procs: ProcessCensus[]): string {
  const head = ["process", "pid", "rank", "launches", "kernels", "command"];
  const rows = procs.map((p) => [
    p.process.number >= 0 ? String(p.process.number) : "?",
    String(p.process.pid),
    p.process.rank === null ? "-" : `${p.process.rank}${p.process.rankVariable && p.process.rankVariable !== "RANK" ? ` (${p.process.rankVariable})` : ""}`,
    `${p.launches}${p.final ? "" : "+"}`, // "+": the process ended without exit handlers; counts up to its last periodic write
    String(p.kernels.length),
    oneLine(p.process.cmdline.join(" ").slice(0, 100) || processLabel(p.process)),
  ]);
  return table(head, rows);
}

/** `list --print-summary` (ncu's option): the per-kernel table (the default), per GPU, per set of open NVTX ranges, or none (the count line only). */
export const LIST_SUMMARIES = ["per-kernel", "per-gpu", "per-nvtx", "none"] as const;

/**
 * `list --print-summary per-nvtx`: launches per set of NVTX ranges open in the launching thread
 * (outermost first, "A/B/"; a named domain's "dom@X/"; "(no range)") and kernel, summed over the
 * processes; by range, then most launches first. Kernel names demangled from `kernels`.
 */
export function nvtxTable(procs: ProcessCensus[], kernels: KernelSeen[]): string {
  const by = new Map<string, { range: string; kernel: string; count: number }>();
  for (const p of procs)
    for (const r of p.nvtx?.ranges ?? []) {
      const key = `${r.range}\0${r.kernel}`;
      const e = by.get(key) ?? by.set(key, { range: r.range, kernel: r.kernel, count: 0 }).get(key)!;
      e.count += r.count;
    }
  const names = new Map(kernels.map((k) => [k.name, k.demangled || k.name]));
  const rows = [...by.values()]
    .sort((a, b) => (a.range < b.range ? -1 : a.range > b.range ? 1 : b.count - a.count))
    .map((e) => [oneLine(e.range || "(no range)"), String(e.count), oneLine(names.get(e.kernel) ?? e.kernel)]);
  return table(["NVTX ranges", "count", "kernel"], rows);
}

/**
 * `list --print-summary per-gpu`: one row per set of GPUs a process could see (its
 * CUDA_VISIBLE_DEVICES, else NVIDIA_VISIBLE_DEVICES, else "all": the census records what each
 * process was given, not which device its contexts used): processes, launches, distinct kernels.
 */
export function gpuTable(procs: ProcessCensus[]): string {
  const groups = new Map<string, ProcessCensus[]>();
  for (const p of procs) {
    const v = p.process.visibleDevices;
    const k = v.CUDA_VISIBLE_DEVICES ?? v.NVIDIA_VISIBLE_DEVICES ?? v.HIP_VISIBLE_DEVICES ?? v.ROCR_VISIBLE_DEVICES ?? "all";
    groups.set(k, [...(groups.get(k) ?? []), p]);
  }
  const rows = [...groups].map(([k, ps]) => [
    oneLine(k),
    String(ps.length),
    String(ps.reduce((n, p) => n + p.launches, 0)),
    String(new Set(ps.flatMap((p) => p.kernels.map((x) => x.name))).size),
  ]);
  return table(["visible GPUs", "processes", "launches", "kernels"], rows);
}

/** Columns padded to their widest cell, right-aligned but the last. */
function table(head: string[], rows: string[][]): string {
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) => r.map((c, i) => (i < head.length - 1 ? c.padStart(w[i]!) : c)).join("  ");
  return [line(head), ...rows.map(line)].join("\n");
}

/**
 * Text safe to print on a terminal (src/escape.ts escapeForTerminal, newlines and tabs kept):
 * control characters, bidi controls and line separators shown as \xNN / \uNNNN.
 */
export function printable(text: string): string {
  return escapeForTerminal(text);
}

/**
 * A message as the log shows it: consola's fancy reporter turns \`code\` into coloured code and
 * " _word_ " into an underline, dropping the marks (consola characterFormat). The --json error
 * document carries this text, so that it reads as the terminal's.
 */
export function asShown(text: string): string {
  return text.replace(/`([^`]+)`/gm, "$1").replace(/\s+_([^_]+)_\s+/gm, " $1 ");
}

/** One field of a line (a kernel name, a pattern): printable, and its own tabs and newlines as \t \n too. */
export function oneLine(text: string): string {
  return escapeForTerminal(text, { oneLine: true });
}
