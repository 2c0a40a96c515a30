/**
 * Nsight Compute (ncu) and Nsight Systems (nsys) around `kerncap replay`: where the tools are, the
 * command lines kerncap runs, and the key figures read back from a report. Pure functions but
 * findNsightTool (which reads the file system); src/profile/profile.ts runs them.
 *
 * Which launch ncu profiles: the replay process launches kerncap's own kernels (kc_scan for the
 * checksums and the compare, kc_spin before timed launches), memsets, and the captured kernel:
 * with `--runs 1 --iters 0` exactly once, the checked run from the restored before state. ncu's
 * name filter on the mangled name (`--kernel-name-base mangled --kernel-name NAME`, an exact
 * match, so no regex escaping of C++ names) with `--launch-count 1` picks that launch whatever
 * else the replay launches before or after it, and needs nothing of the replay. An NVTX range
 * would need the replay to load libnvToolsExt and ncu's `--nvtx` mode, two more parts to fail.
 * ncu's kernel replay saves and restores the memory the launch may write between its passes; the
 * replay's memory is ordinary cuMemCreate/cuMemMap memory at fixed VAs, which it handles
 * (measured on the H200: ncu on `kerncap replay` of a cuDNN attention kernel, 5.6 s).
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { KerncapError } from "../errors.ts";
import { whichAbsolute } from "../env.ts";

export type NsightTool = "ncu" | "nsys";

/**
 * The tool's executable: PATH, then $CUDA_HOME/bin (/usr/local/cuda/bin when CUDA_HOME is unset).
 * @throws KerncapError E_NO_NCU / E_NO_NSYS naming where it looked
 */
export function findNsightTool(tool: NsightTool, env: Record<string, string | undefined> = process.env): string {
  const onPath = whichAbsolute(tool, env.PATH);
  // CUDA_HOME names the toolkit when set; /usr/local/cuda is the default install otherwise
  const cands = [onPath, join(env.CUDA_HOME || "/usr/local/cuda", "bin", tool)].filter((x): x is string => !!x && existsSync(x));
  if (cands[0]) return cands[0];
  const what = tool === "ncu" ? "Nsight Compute (ncu)" : "Nsight Systems (nsys)";
  throw new KerncapError(
    tool === "ncu" ? "E_NO_NCU" : "E_NO_NSYS",
    `${what} not found (PATH, ${env.CUDA_HOME ? `$CUDA_HOME/bin = ${env.CUDA_HOME}/bin` : "/usr/local/cuda/bin"})`,
    {
      hint:
        `Install ${what} (it ships with the CUDA toolkit and on its own), then put it on PATH or set CUDA_HOME.` +
        // nu15: installing ncu alone would not have done on a machine with no GPU
        (existsSync("/dev/nvidiactl") || existsSync("/dev/nvidia0")
          ? ""
          : " This machine has no NVIDIA GPU either (no /dev/nvidiactl): profile replays the kernel under it on one."),
    },
  );
}

/** The ncu options kerncap sets itself (the launch filter and the report's path): refused among the user's. */
const NCU_OWN = new Map<string, string>([
  ["-k", "the kernel filter (the captured kernel's mangled name)"],
  ["--kernel-name", "the kernel filter (the captured kernel's mangled name)"],
  ["--kernel-id", "the kernel filter (the captured kernel's mangled name)"],
  ["--kernel-name-base", "the kernel filter (the captured kernel's mangled name)"],
  ["-c", "the launch count (one: the captured launch)"],
  ["--launch-count", "the launch count (one: the captured launch)"],
  ["-s", "the launch skip (none: the replay launches the kernel once)"],
  ["--launch-skip", "the launch skip (none: the replay launches the kernel once)"],
  ["--launch-skip-before-match", "the launch skip (none: the replay launches the kernel once)"],
  ["-o", "the report's path (give it to kerncap, before `--`: kerncap profile DIR -o PATH)"],
  ["--export", "the report's path (give it to kerncap, before `--`: kerncap profile DIR -o PATH)"],
  ["-f", "--force-overwrite (give -f to kerncap, before `--`; the report is written to a temp name, then renamed)"],
  ["--force-overwrite", "--force-overwrite (give -f to kerncap, before `--`; the report is written to a temp name, then renamed)"],
  ["--print-summary", "the printed figures (kerncap reads them from the report)"],
  ["--csv", "the printed figures (kerncap reads them from the report)"],
  ["--page", "the printed figures (kerncap reads them from the report)"],
  ["--print-units", "the printed figures (kerncap reads them in base units)"],
]);

/**
 * Metrics kerncap adds to the user's sections (`--metrics`), so that every key figure is in the
 * report whatever `--set`/`--section` says; the ncu metric names are the ones the
 * SpeedOfLight, LaunchStats and Occupancy sections show (ncu --query-metrics).
 */
export const NCU_METRICS = [
  "gpu__time_duration.sum",
  "sm__throughput.avg.pct_of_peak_sustained_elapsed",
  "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
  "sm__warps_active.avg.pct_of_peak_sustained_active",
  "launch__registers_per_thread",
  "dram__bytes_read.sum",
  "dram__bytes_write.sum",
] as const;

/**
 * The user's ncu options (after `--`), checked, with kerncap's metrics merged into their
 * `--metrics` (ncu takes the option once).
 * @throws KerncapError E_USAGE for an option kerncap sets itself (NCU_OWN)
 */
export function ncuUserOptions(opts: string[]): string[] {
  const out: string[] = [];
  let metrics: string[] = [...NCU_METRICS];
  for (let i = 0; i < opts.length; i++) {
    const a = opts[i]!;
    const name = a.startsWith("-") ? a.split("=")[0]! : "";
    const own = NCU_OWN.get(name);
    if (own) {
      throw new KerncapError("E_USAGE", `${a}: kerncap profile sets ${own} itself`, {
        hint: "Leave it out; other ncu options (--set, --section, --replay-mode, --clock-control, --cache-control…) go after `--`.",
      });
    }
    if (name === "--metrics") {
      const v = a.includes("=") ? a.slice(a.indexOf("=") + 1) : opts[++i];
      if (v === undefined)
        throw new KerncapError("E_USAGE", "--metrics (an ncu option after --) needs a value", { hint: "For example -- --metrics dram__bytes.sum" });
      metrics = [...new Set([...v.split(",").filter(Boolean), ...metrics])];
      continue;
    }
    out.push(a);
  }
  return [...out, "--metrics", metrics.join(",")];
}

/** What the replay under a profiler runs: the capture (or a rebuilt module) replayed once (`iters`: 0) or for a timeline. */
export function replayArgv(self: string[], dir: string, o: { module?: string; iters: number }): string[] {
  return [...self, "replay", dir, "--runs", "1", "--iters", String(o.iters), ...(o.module ? ["--module", o.module] : [])];
}

/**
 * What ncu prints of the profiled launch while it writes the report: its details page as CSV, in
 * base units (ns, bytes; the default scales to the value and rounds: "181.29 Mbyte"). With
 * `--export`, ncu 2025.3 prints the page after the application's own output (measured on the
 * H200), so the figures need no second ncu process (`--import`, 0.5–0.7 s there).
 */
export const NCU_PRINT = ["--csv", "--page", "details", "--print-units", "base"] as const;

/**
 * ncu's command line: the captured launch only (see the file's comment), its report at
 * `reportBase`.ncu-rep (ncu adds the extension), the details page printed (NCU_PRINT), the
 * user's options, then the replay.
 */
export function ncuCommand(o: { ncu: string; kernel: string; reportBase: string; userOptions: string[]; replay: string[] }): string[] {
  // the name is the manifest's (a received capture's): one that starts with - would be read as an option of ncu's,
  // and one with a colon as a filter of its own (`regex:.*` matches every kernel: a trial); a mangled name has neither
  if (!/^[A-Za-z_$.][A-Za-z0-9_$.]*$/.test(o.kernel))
    throw new KerncapError(
      "E_MANIFEST",
      `the kernel name ${JSON.stringify(o.kernel)} is not a symbol's: ncu would read it as one of its options or as a filter (regex:…)`,
      {
        hint: "The manifest's kernel.name is not a kernel's mangled name; the capture was altered.",
      },
    );
  return [
    o.ncu,
    "--kernel-name-base",
    "mangled",
    "--kernel-name",
    o.kernel,
    "--launch-count",
    "1",
    "--export",
    o.reportBase,
    ...NCU_PRINT,
    ...o.userOptions,
    ...o.replay,
  ];
}

/** nsys's command line: a timeline of the whole replay (CUDA API and kernels, NVTX), its report at `reportBase`.nsys-rep. */
export function nsysCommand(o: { nsys: string; reportBase: string; userOptions: string[]; replay: string[] }): string[] {
  return [o.nsys, "profile", "--output", o.reportBase, "--trace", "cuda,nvtx", ...o.userOptions, ...o.replay];
}

/** `ncu --import REP --csv --page details --print-units base`: the report's figures as CSV (the input of parseNcuDetails), where the profiling run printed none. */
export function ncuImportCommand(ncu: string, report: string): string[] {
  return [ncu, "--import", report, ...NCU_PRINT];
}

/** Rows of a CSV text (RFC 4180: quoted fields, "" for a quote inside, CRLF or LF). */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = "";
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') (field += '"'), i++;
      else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ",") row.push(field), (field = "");
    else if (c === "\n" || c === "\r") {
      if (c === "\r" && text[i + 1] === "\n") i++;
      row.push(field);
      rows.push(row);
      row = [];
      field = "";
    } else field += c;
  }
  if (field || row.length) row.push(field), rows.push(row);
  return rows;
}

// powers of ten to µs (a division for ns: 1650 / 1000 is 1.65 exactly, 1650 × 1e-3 is not)
const TIME_US: Record<string, number> = { nsecond: -3, ns: -3, usecond: 0, us: 0, msecond: 3, ms: 3, second: 6, s: 6 };
const BYTES: Record<string, number> = {
  byte: 1,
  Kbyte: 1e3,
  Mbyte: 1e6,
  Gbyte: 1e9,
  Tbyte: 1e12,
  Kibyte: 1024,
  Mibyte: 1024 ** 2,
  Gibyte: 1024 ** 3,
  Tibyte: 1024 ** 4,
  B: 1,
  KB: 1e3,
  MB: 1e6,
  GB: 1e9,
};

/**
 * An ncu metric value in base units: time in µs, sizes in bytes, anything else (%, register/thread)
 * as printed. ncu prints thousands separators ("1,234.56") and scales units to the value
 * (usecond, msecond, Kbyte, Mbyte…). @returns null for "n/a" or a non-number
 */
export function metricValue(value: string, unit: string): number | null {
  const t = value.trim().replace(/,/g, "");
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(t)) return null;
  const x = Number(t);
  const u = unit.trim();
  if (u in TIME_US) return TIME_US[u]! < 0 ? x / 10 ** -TIME_US[u]! : x * 10 ** TIME_US[u]!;
  if (u in BYTES) return x * BYTES[u]!;
  return x;
}

/** The key figures of one profiled launch (units in the names; null where the report lacks the metric). */
export interface NcuFigures {
  /** ncu's launch ID, the kernel name as ncu shows it, its grid and block ("(4, 1, 1)"), the device. */
  id: string;
  kernel: string;
  grid: string;
  block: string;
  device: string;
  /** gpu__time_duration.sum (SpeedOfLight "Duration"), µs. */
  durationUs: number | null;
  /** Compute (SM) throughput, % of peak (sm__throughput…pct_of_peak_sustained_elapsed). */
  smThroughputPct: number | null;
  /** Memory throughput, % of peak (gpu__compute_memory_throughput…pct_of_peak_sustained_elapsed). */
  memoryThroughputPct: number | null;
  /** Achieved occupancy, % of the maximum active warps (sm__warps_active…pct_of_peak_sustained_active). */
  achievedOccupancyPct: number | null;
  /** launch__registers_per_thread. */
  registersPerThread: number | null;
  /** dram__bytes_read.sum + dram__bytes_write.sum (or dram__bytes.sum), bytes. */
  dramBytes: number | null;
  /**
   * What limits the kernel: `bound` from the throughputs (compute or memory when the higher of
   * the two is ≥ 60% of peak, the threshold of ncu's SpeedOfLight rule; latency below), the
   * sections ncu's SpeedOfLight rule points to, and that rule's text (source "ncu rule"), or the
   * sections to read for that bound (source "throughputs") when the report has no rule result.
   */
  limiter: { bound: "compute" | "memory" | "latency"; sections: string[]; source: "ncu rule" | "throughputs"; text: string } | null;
}

/** Each figure's metric: ncu's metric names and the names the sections show (their Metric Name column), in the section where it belongs. */
const FIGURES: { key: keyof NcuFigures; names: string[]; section?: RegExp; unit?: RegExp }[] = [
  { key: "durationUs", names: ["gpu__time_duration.sum", "Duration"], section: /speed ?of ?light|command line/i },
  { key: "smThroughputPct", names: ["sm__throughput.avg.pct_of_peak_sustained_elapsed", "Compute (SM) Throughput", "SM [%]"], unit: /%/ },
  { key: "memoryThroughputPct", names: ["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "Memory Throughput", "Memory [%]"], unit: /%/ },
  { key: "achievedOccupancyPct", names: ["sm__warps_active.avg.pct_of_peak_sustained_active", "Achieved Occupancy"], unit: /%/ },
  { key: "registersPerThread", names: ["launch__registers_per_thread", "Registers Per Thread"] },
];

/** Sections ncu's rules send the reader to (ncu's section names, as in its details page). */
const SECTION_NAMES = [
  "Memory Workload Analysis",
  "Compute Workload Analysis",
  "Scheduler Statistics",
  "Warp State Statistics",
  "Launch Statistics",
  "Occupancy",
  "Source Counters",
  "Instruction Statistics",
];

/**
 * The key figures of each profiled launch in `ncu --import REP --csv --page details` output.
 * Columns are found by their header names ("ID", "Kernel Name", "Section Name", "Metric Name",
 * "Metric Unit", "Metric Value", and the rule columns "Rule Name"/"Rule Description" of ncu
 * 2023.2+ when present), so added or reordered columns do not matter; text before the header row
 * (ncu's ==PROF== lines) is skipped.
 * @throws KerncapError E_NCU_REPORT when there is no header row or it lacks the metric columns
 */
export function parseNcuDetails(csv: string): NcuFigures[] {
  // from the header line on: the replay's own output before it (mixed into ncu's stdout) may hold a stray quote
  const at = csv.search(/^(?=.*"Metric Name")(?=.*"Metric Value")/m);
  const rows = at < 0 ? [] : parseCsv(csv.slice(at));
  const h = rows.findIndex((r) => r.includes("Metric Name") && r.includes("Metric Value"));
  if (h < 0)
    throw new KerncapError("E_NCU_REPORT", 'ncu\'s CSV has no header row with "Metric Name" and "Metric Value"', {
      hint: "Check the ncu version (`ncu --version`); open the report in the Nsight Compute UI meanwhile.",
    });
  const head = rows[h]!;
  const col = (...names: string[]) => head.findIndex((x) => names.some((n) => x.trim().toLowerCase() === n.toLowerCase()));
  const c = {
    id: col("ID"),
    kernel: col("Kernel Name"),
    grid: col("Grid Size"),
    block: col("Block Size"),
    device: col("Device"),
    section: col("Section Name"),
    name: col("Metric Name"),
    unit: col("Metric Unit"),
    value: col("Metric Value"),
    rule: col("Rule Name", "Rule Identifier"),
    ruleText: col("Rule Description", "Rule Message"),
  };
  const get = (r: string[], i: number) => (i >= 0 ? (r[i] ?? "").trim() : "");
  const launches = new Map<string, string[][]>();
  for (const r of rows.slice(h + 1)) {
    if (r.length < 2 || (r.length === 1 && r[0] === "")) continue;
    const id = get(r, c.id) || "0";
    if (!launches.has(id)) launches.set(id, []);
    launches.get(id)!.push(r);
  }
  return [...launches.entries()].map(([id, rs]) => {
    const first = rs[0]!;
    const fig: NcuFigures = {
      id,
      kernel: get(first, c.kernel),
      grid: get(first, c.grid),
      block: get(first, c.block),
      device: get(first, c.device),
      durationUs: null,
      smThroughputPct: null,
      memoryThroughputPct: null,
      achievedOccupancyPct: null,
      registersPerThread: null,
      dramBytes: null,
      limiter: null,
    };
    const metric = (names: string[], section?: RegExp, unit?: RegExp): number | null => {
      // the ncu metric name first (unambiguous), then the section's display name
      for (const n of names) {
        for (const r of rs) {
          if (get(r, c.name) !== n) continue;
          if (section && !n.includes("__") && !section.test(get(r, c.section))) continue;
          if (unit && !n.includes("__") && !unit.test(get(r, c.unit))) continue;
          const v = metricValue(get(r, c.value), get(r, c.unit));
          if (v !== null) return v;
        }
      }
      return null;
    };
    for (const f of FIGURES) (fig as unknown as Record<string, number | null>)[f.key] = metric(f.names, f.section, f.unit);
    const read = metric(["dram__bytes_read.sum"]);
    const write = metric(["dram__bytes_write.sum"]);
    fig.dramBytes = read !== null && write !== null ? read + write : metric(["dram__bytes.sum"]);
    fig.limiter = limiterOf(
      fig,
      rs.map((r) => ({ section: get(r, c.section), rule: get(r, c.rule), text: get(r, c.ruleText) || (get(r, c.name) ? "" : get(r, c.value)) })),
    );
    return fig;
  });
}

function limiterOf(f: NcuFigures, rules: { section: string; rule: string; text: string }[]): NcuFigures["limiter"] {
  if (f.smThroughputPct === null || f.memoryThroughputPct === null) return null;
  const top = Math.max(f.smThroughputPct, f.memoryThroughputPct);
  const bound = top < 60 ? "latency" : f.smThroughputPct >= f.memoryThroughputPct ? "compute" : "memory";
  // SpeedOfLight's bottleneck rule (SOLBottleneck) names the section to read next
  const sol =
    rules.find((r) => /bottleneck/i.test(r.rule) && r.text) ?? rules.find((r) => /speed ?of ?light/i.test(r.section) && /\blook at\b|section/i.test(r.text));
  if (sol) {
    const named = SECTION_NAMES.map((s) => ({ s, at: sol.text.indexOf(s) }))
      .filter((x) => x.at >= 0)
      .sort((a, b) => a.at - b.at)
      .map((x) => x.s);
    return { bound, sections: named, source: "ncu rule", text: sol.text };
  }
  const sections =
    bound === "compute" ? ["Compute Workload Analysis"] : bound === "memory" ? ["Memory Workload Analysis"] : ["Scheduler Statistics", "Warp State Statistics"];
  const text =
    bound === "latency"
      ? `compute ${f.smThroughputPct.toFixed(1)}% and memory ${f.memoryThroughputPct.toFixed(1)}% of peak: below 60%, latency-bound`
      : `${bound} is the more utilized (${top.toFixed(1)}% of peak)`;
  return { bound, sections, source: "throughputs", text };
}
