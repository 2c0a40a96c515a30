/**
 * The per-process censuses a capture library leaves in its output folder (docs/raw-capture.md,
 * c/common/kc_process.h): kernels.<pid>.json and error.<pid>.txt of every process of the job that
 * initialized CUDA/HSA, the claim file of the one process that captured, and their merge.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { ProcessIdentity } from "../format/manifest.ts";
import { collectiveLibrary } from "./collective.ts";

export interface KernelSeen {
  name: string;
  demangled: string;
  count: number;
  /** Of `count`, launches made while an autotuner benchmarked configs (Triton shim); absent from older libraries. */
  benchmark?: number;
  /** Of `count`, executions as a kernel node of a CUDA graph launch (c/cuda/kc_graphs.h); absent from older libraries. */
  graph?: number;
  /** Launches recorded into a graph by stream capture: not executions, not in `count`. */
  recorded?: number;
  grid: [number, number, number];
  block: [number, number, number];
  module: string;
  /** Merged censuses only: the count of each process that launched it (pid, rank, count). */
  perProcess?: { pid: number; rank: number | null; count: number }[];
  /** A collective kernel (waits on peers; never captured): its library, from the name (src/capture/collective.ts). */
  collective?: string;
}

/** One application cuptiSubscribe[_v2] call seen by the library's wrappers (c/cuda/kc_cupti.h). */
export interface AppCuptiCall {
  call: string;
  /** The library that made the call (dladdr of the return address). */
  caller: string;
  /** CUptiResult (0 success, 39 CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED); -1: not forwarded. */
  result: number;
  /** kerncap still held CUPTI when the call was made (it was then refused). */
  kerncapHeld: boolean;
  /** kerncap handed CUPTI back for this call (its capture was done). */
  handedBack: boolean;
  /** Seconds since the library's initialization. */
  tS: number;
}

export interface CuptiReport {
  api: string;
  subscribed: boolean;
  holder: string;
  released: boolean;
  releasedWhy?: string;
  releasedAtLaunch?: number;
  appCalls: AppCuptiCall[];
}

/** One executable CUDA graph of a process (c/cuda/kc_graphs.h): id in instantiation order, nodes (child graphs included), kernel nodes, launches. */
export interface GraphSeen {
  id: number;
  nodes: number;
  kernel_nodes: number;
  launches: number;
}
/** The launch --dispatch selected ran as a kernel node of a graph (not captured). */
export interface GraphTarget {
  graph: number;
  kernel_node: number;
  name: string;
  why?: string;
}

/** `list --print-summary per-nvtx`: launches of one kernel under one set of open NVTX ranges ("A/B/", "dom@X/"; "" outside any: c/cuda/kc_nvtx.h). */
export interface RangeCount {
  range: string;
  kernel: string;
  count: number;
}

export interface ProcessCensus {
  /** The census file (kernels.<pid>.json), relative to the folder. */
  file: string;
  /** Written at exit; false: the last periodic write (the process ended with _exit or was killed). */
  final: boolean;
  /** true while the process counted every launch; else why it stopped or never counted. */
  counting: true | string;
  process: ProcessIdentity;
  cupti?: CuptiReport;
  launches: number;
  kernels: KernelSeen[];
  graphs: GraphSeen[];
  graphTarget?: GraphTarget;
  /** --nvtx-include/--nvtx-exclude (c/cuda/kc_nvtx.c): whether the application's NVTX loaded the library's injection, and the launches left out (not in `launches`). */
  nvtx?: { injected: boolean; filteredOut: number; ranges?: RangeCount[]; rangesDropped?: number };
  /** Lines of this process's error.<pid>.txt. */
  errors: string[];
}

export interface Claim {
  pid: number;
  number: number;
  rank: number | null;
}

export interface Census {
  processes: ProcessCensus[];
  /** Every kernel of every process, counts summed by mangled name (grid/block/module of the first process). */
  kernels: KernelSeen[];
  launches: number;
  /** Every process's error lines, prefixed with "pid N: " when more than one process ran. */
  errors: string[];
  /** The process that claimed the capture (claim file), if any did. */
  claim?: Claim;
  /** How many processes numbered themselves (processes/<n> files): also those that left no census. */
  numbered: number;
}

/* ---- raw (snake_case, as the C libraries write it) ---- */
interface RawIdentity {
  pid: number;
  ppid?: number;
  number?: number;
  hostname?: string;
  cmdline?: string[];
  job_env?: Record<string, string>;
  rank?: number | null;
  rank_variable?: string | null;
  selection?: { by: "any" | "rank" | "process"; value?: number; admitted: boolean };
  visible_devices?: Record<string, string>;
  device_uuid?: string;
  pci_bus_id?: string;
}
interface RawCupti {
  api?: string;
  subscribed?: boolean;
  holder?: string;
  released?: boolean;
  released_why?: string;
  released_at_launch?: number;
  app_calls?: { call: string; caller: string; result: number; kerncap_held: boolean; handed_back: boolean; t_s: number }[];
}
interface RawCensus {
  final?: boolean;
  counting?: true | string;
  process?: RawIdentity;
  cupti?: RawCupti;
  launches?: number;
  kernels?: KernelSeen[];
  graphs?: GraphSeen[];
  graph_target?: GraphTarget;
  nvtx?: { injected?: boolean; filtered_out?: number; ranges?: RangeCount[]; ranges_dropped?: number };
}

/** The identity object of raw.json / kernels.<pid>.json in the manifest's terms (camelCase). */
export function identityFromRaw(r: RawIdentity): ProcessIdentity {
  return {
    pid: r.pid,
    ppid: r.ppid ?? 0,
    number: r.number ?? -1,
    hostname: r.hostname ?? "",
    cmdline: r.cmdline ?? [],
    jobEnv: r.job_env ?? {},
    rank: r.rank ?? null,
    rankVariable: r.rank_variable ?? null,
    selection: r.selection
      ? { by: r.selection.by, ...(r.selection.value !== undefined ? { value: r.selection.value } : {}), admitted: r.selection.admitted }
      : { by: "any", admitted: true },
    visibleDevices: r.visible_devices ?? {},
    ...(r.device_uuid ? { deviceUuid: r.device_uuid } : {}),
    ...(r.pci_bus_id ? { pciBusId: r.pci_bus_id } : {}),
  };
}

function cuptiFromRaw(c: RawCupti): CuptiReport {
  return {
    api: c.api ?? "",
    subscribed: !!c.subscribed,
    holder: c.holder ?? "",
    released: !!c.released,
    ...(c.released_why ? { releasedWhy: c.released_why } : {}),
    ...(c.released_at_launch !== undefined ? { releasedAtLaunch: c.released_at_launch } : {}),
    appCalls: (c.app_calls ?? []).map((a) => ({
      call: a.call,
      caller: a.caller,
      result: a.result,
      kerncapHeld: a.kerncap_held,
      handedBack: a.handed_back,
      tS: a.t_s,
    })),
  };
}

function readJson<T>(path: string): T | undefined {
  try {
    return JSON.parse(readFileSync(path, "utf8")) as T;
  } catch {
    return undefined; // a census being renamed into place, or cut short by a kill: skipped
  }
}

function lines(path: string): string[] {
  return existsSync(path) ? readFileSync(path, "utf8").split("\n").filter(Boolean) : [];
}

/** A short label for a process: "pid 123 (rank 1)". */
export function processLabel(p: Pick<ProcessIdentity, "pid" | "rank">): string {
  return `pid ${p.pid}${p.rank !== null && p.rank !== undefined ? ` (rank ${p.rank})` : ""}`;
}

/**
 * Read every census in dir. Also accepts the single-process names of older libraries
 * (kernels.json, error.txt; pid 0). Processes are sorted by their number (initialization order).
 */
export function readCensus(dir: string): Census {
  const names = existsSync(dir) ? readdirSync(dir) : [];
  const processes: ProcessCensus[] = [];
  const pids = new Set<number>();
  for (const f of names) {
    const m = /^kernels\.(\d+)\.json$/.exec(f) ?? (f === "kernels.json" ? ["", "0"] : null);
    if (!m) continue;
    const raw = readJson<RawCensus>(join(dir, f));
    if (!raw) continue;
    const pid = Number(m[1]);
    pids.add(pid);
    processes.push({
      file: f,
      final: raw.final ?? true,
      counting: raw.counting ?? true,
      process: identityFromRaw(raw.process ?? { pid }),
      ...(raw.cupti ? { cupti: cuptiFromRaw(raw.cupti) } : {}),
      launches: raw.launches ?? (raw.kernels ?? []).reduce((s, k) => s + k.count, 0),
      kernels: raw.kernels ?? [],
      graphs: raw.graphs ?? [],
      ...(raw.graph_target ? { graphTarget: raw.graph_target } : {}),
      ...(raw.nvtx
        ? {
            nvtx: {
              injected: raw.nvtx.injected === true,
              filteredOut: raw.nvtx.filtered_out ?? 0,
              ...(raw.nvtx.ranges ? { ranges: raw.nvtx.ranges, rangesDropped: raw.nvtx.ranges_dropped ?? 0 } : {}),
            },
          }
        : {}),
      errors: lines(join(dir, pid ? `error.${pid}.txt` : "error.txt")),
    });
  }
  // a process that failed before writing any census still has its error file
  for (const f of names) {
    const m = /^error\.(\d+)\.txt$/.exec(f);
    if (!m || pids.has(Number(m[1]))) continue;
    const pid = Number(m[1]);
    processes.push({
      file: f,
      final: false,
      counting: "failed before counting",
      process: identityFromRaw({ pid }),
      launches: 0,
      kernels: [],
      graphs: [],
      errors: lines(join(dir, f)),
    });
  }
  processes.sort((a, b) => (a.process.number < 0 ? 1e9 : a.process.number) - (b.process.number < 0 ? 1e9 : b.process.number) || a.process.pid - b.process.pid);
  const claim = readJson<Claim>(join(dir, "claim"));
  const numbered = existsSync(join(dir, "processes")) ? readdirSync(join(dir, "processes")).filter((n) => /^\d+$/.test(n)).length : processes.length;
  const many = processes.length > 1;
  return {
    processes,
    kernels: mergeKernels(processes),
    launches: processes.reduce((s, p) => s + p.launches, 0),
    errors: processes.flatMap((p) => p.errors.map((e) => (many ? `${processLabel(p.process)}: ${e}` : e))),
    ...(claim && typeof claim.pid === "number"
      ? { claim: { pid: claim.pid, number: claim.number, rank: typeof claim.rank === "number" && claim.rank >= 0 ? claim.rank : null } }
      : {}),
    numbered,
  };
}

/** One process of the job for `list --json`: identity, its launches, its kernels' counts. */
export function processSummary(p: ProcessCensus) {
  return {
    pid: p.process.pid,
    rank: p.process.rank,
    rankVariable: p.process.rankVariable,
    number: p.process.number,
    hostname: p.process.hostname,
    command: p.process.cmdline,
    visibleDevices: p.process.visibleDevices,
    launches: p.launches,
    complete: p.final && p.counting === true,
    ...(p.counting !== true ? { stoppedCounting: p.counting } : {}),
    kernels: p.kernels.map((k) => ({ name: k.name, count: k.count, ...(k.graph ? { graph: k.graph } : {}) })),
    graphs: p.graphs,
    ...(p.nvtx ? { nvtx: p.nvtx } : {}),
    errors: p.errors,
  };
}

/** Sum the processes' kernels by mangled name; each merged kernel lists its per-process counts. */
export function mergeKernels(processes: ProcessCensus[]): KernelSeen[] {
  const by = new Map<string, KernelSeen>();
  for (const p of processes) {
    for (const k of p.kernels) {
      const e = by.get(k.name);
      const mine = { pid: p.process.pid, rank: p.process.rank, count: k.count };
      if (!e) {
        by.set(k.name, { ...k, perProcess: [mine] });
        continue;
      }
      e.count += k.count;
      if (k.benchmark !== undefined) e.benchmark = (e.benchmark ?? 0) + k.benchmark;
      if (k.graph !== undefined) e.graph = (e.graph ?? 0) + k.graph;
      if (k.recorded !== undefined) e.recorded = (e.recorded ?? 0) + k.recorded;
      e.perProcess!.push(mine);
    }
  }
  for (const k of by.values()) {
    const lib = collectiveLibrary(k.name, k.demangled);
    if (lib) k.collective = lib;
  }
  return [...by.values()];
}
