/**
 * Join the Triton shim's records ($KERNCAP_OUT/triton.jsonl, written by sitecustomize.py) with the
 * driver-level capture: the compile record whose cubin SHA-256 equals the captured module's is the
 * kernel that ran. Functions over parsed records (the --kernel pattern through libc's regcomp, as the
 * capture library matches it); no Triton, no GPU.
 */
import { compileEre, type PosixRegex } from "../../util/posix-regex.ts";

/** One `{"event":"compile"}` line of triton.jsonl (fields the join and the reproducer use). */
export interface TritonCompileRecord {
  event: "compile";
  pid: number;
  triton_version: string;
  python: string;
  cache_hit: boolean;
  during_autotune: boolean;
  during_benchmark: boolean;
  name: string;
  metadata: Record<string, unknown>;
  cubin_path: string | null;
  cubin_sha256: string | null;
  fn?: { name: string; qualname: string; module: string | null; arg_names: string[] };
  source_file?: string | null;
  source_line?: number;
  source_copy?: string | null;
  source_error?: string;
  signature?: Record<string, unknown>;
  constexprs?: { path: number[]; name: string; expr?: string; error?: string; value: unknown }[];
  attrs?: { path: number[]; attrs: unknown }[];
  kernel_module?: string;
  kernel_module_error?: string;
  unresolved_globals?: string[];
  ir_source?: { path: string | null; ext: string | null };
}

export interface TritonAutotuneRecord {
  event: "autotune";
  pid: number;
  fn: string | null;
  key_names: string[];
  key: unknown[];
  config: { kwargs: Record<string, unknown>; num_warps: number | null; num_stages: number | null; num_ctas: number | null; maxnreg: number | null };
  configs: number;
  /** Every config the autotuner chose among (shims before kerncap tune did not record it). */
  config_list?: TritonAutotuneRecord["config"][];
}

export interface TritonLaunchRecord {
  event: "launch";
  pid: number;
  seq: number;
  name: string | null;
  bench: boolean;
}

export type TritonRecord =
  | TritonCompileRecord
  | TritonAutotuneRecord
  | TritonLaunchRecord
  | { event: "hello" | "unsupported"; pid: number; triton_version: string; python?: string; why?: string };

/** Parse triton.jsonl text; a torn or foreign line is skipped (a process may die mid-run). */
export function parseTritonJsonl(text: string): TritonRecord[] {
  const out: TritonRecord[] = [];
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    try {
      const r = JSON.parse(line);
      if (r && typeof r.event === "string") out.push(r as TritonRecord);
    } catch {
      /* torn line */
    }
  }
  return out;
}

/** How the captured launch relates to the application's own launches of that kernel. */
export interface LaunchAccount {
  /** "app": the application's own call; "autotune-benchmark": the autotuner timing a config. */
  kind: "app" | "autotune-benchmark" | "unknown";
  /** 0-based index among the application's own launches of this kernel (benchmarks not counted). */
  appLaunchIndex: number | null;
  /** Launches of this kernel seen through Triton's launcher up to the captured one, by kind. */
  appLaunchesBefore: number;
  benchmarkLaunchesBefore: number;
  note?: string;
}

/** manifest.source for a Triton kernel. */
export interface TritonSource {
  frontend: "triton";
  tritonVersion: string;
  python: string;
  kernelName: string;
  fnName: string;
  qualname: string;
  module: string | null;
  sourceFile: string | null;
  sourceLine: number | null;
  /** File name under the capture's src/original/ (copy of the source file at capture time). */
  sourceCopy: string | null;
  signature: Record<string, unknown>;
  constexprs: { path: number[]; name: string; expr?: string; error?: string; value: unknown }[];
  attrs: { path: number[]; attrs: unknown }[];
  /** Compile options and results as Triton's metadata holds them (num_warps, num_stages, num_ctas, maxnreg, shared, …). */
  options: Record<string, unknown>;
  target: { backend: string; arch: number | string; warp_size: number } | null;
  cubinSha256: string;
  cacheHit: boolean;
  kernelModule: string | null;
  unresolvedGlobals: string[];
  autotune: {
    key: unknown[];
    keyNames: string[];
    config: TritonAutotuneRecord["config"];
    configs: number;
    configList?: TritonAutotuneRecord["config"][];
  } | null;
  launch: LaunchAccount;
}

/** Keys of Triton's metadata that are compile results or bookkeeping, not compile options. */
const NOT_OPTIONS = new Set(["hash", "target", "name", "ctime"]);

/**
 * Does an autotune choice describe this compile? Every tuned kwarg must equal the constexpr of
 * that name, and num_warps/num_stages/num_ctas/maxnreg must equal the compile options.
 */
export function configMatches(c: TritonAutotuneRecord["config"], rec: TritonCompileRecord): boolean {
  const consts = new Map((rec.constexprs ?? []).map((x) => [x.name, x.value]));
  for (const [k, v] of Object.entries(c.kwargs)) {
    if (!consts.has(k) || JSON.stringify(consts.get(k)) !== JSON.stringify(v)) return false;
  }
  for (const k of ["num_warps", "num_stages", "num_ctas", "maxnreg"] as const) {
    const want = c[k];
    if (want === null || want === undefined) continue;
    if (rec.metadata[k] !== undefined && rec.metadata[k] !== want) return false;
  }
  return true;
}

/**
 * Account for the captured launch among the Triton launches of the same kernel name: the
 * matchIndex-th launch whose name matches `pattern` (the capture library's count), and whether the
 * autotuner was benchmarking at that moment. Launch events of every process are in one file; only
 * those of the capturing process (the one whose events reach matchIndex) are used.
 * @param countsBenchmarks false when the library's count skipped the launches the shim marked as
 *   autotuner benchmarks (raw.json kernel.counts_benchmarks; libraries before it counted all).
 */
export function accountLaunch(records: TritonRecord[], kernelName: string, pattern: string, matchIndex: number, countsBenchmarks = true): LaunchAccount {
  const none: LaunchAccount = { kind: "unknown", appLaunchIndex: null, appLaunchesBefore: 0, benchmarkLaunchesBefore: 0 };
  // matched as the capture library matches it (POSIX ERE), or the counts would not line up
  let re: PosixRegex;
  try {
    re = compileEre(pattern || ".");
  } catch {
    return { ...none, note: "the --kernel pattern is not a POSIX extended regex" };
  }
  let launches: TritonLaunchRecord[];
  try {
    launches = records.filter((r): r is TritonLaunchRecord => r.event === "launch" && typeof r.name === "string" && re.test(r.name));
  } finally {
    re.free();
  }
  const byPid = new Map<number, TritonLaunchRecord[]>();
  for (const l of launches) byPid.set(l.pid, [...(byPid.get(l.pid) ?? []), l]);
  for (const all of byPid.values()) {
    all.sort((a, b) => a.seq - b.seq);
    const counted = countsBenchmarks ? all : all.filter((l) => !l.bench);
    const hit = counted[matchIndex];
    if (!hit || hit.name !== kernelName) continue;
    const before = all.slice(0, all.indexOf(hit)).filter((l) => l.name === kernelName);
    const bench = before.filter((l) => l.bench).length;
    return {
      kind: hit.bench ? "autotune-benchmark" : "app",
      appLaunchIndex: hit.bench ? null : before.length - bench,
      appLaunchesBefore: before.length - bench,
      benchmarkLaunchesBefore: bench,
    };
  }
  return {
    ...none,
    note: launches.length
      ? "the matching launches seen by Triton's launcher do not line up with the capture library's count (other kernels, e.g. non-Triton ones, match the pattern too)"
      : "no launch went through Triton's launcher (e.g. Inductor's static launcher); launch kind unknown",
  };
}

/**
 * Find the compile record of the captured cubin and build manifest.source.
 * @returns undefined when no record has that cubin hash (not a Triton kernel, or the shim was off).
 */
export function joinTriton(
  records: TritonRecord[],
  cubinSha256: string,
  kernelName: string,
  pattern: string,
  matchIndex: number,
  countsBenchmarks = true,
): TritonSource | undefined {
  const compiles = records.filter((r): r is TritonCompileRecord => r.event === "compile" && r.cubin_sha256 === cubinSha256);
  // Prefer a record that carries the source (an IRSource compile or a failed extraction has less).
  const rec = compiles.find((r) => r.kernel_module) ?? compiles.find((r) => r.fn) ?? compiles[0];
  if (!rec) return undefined;
  const tunes = records.filter((r): r is TritonAutotuneRecord => r.event === "autotune" && r.fn === (rec.fn?.name ?? rec.name));
  const tune = [...tunes].reverse().find((t) => configMatches(t.config, rec)) ?? null;
  const options: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(rec.metadata)) if (!NOT_OPTIONS.has(k)) options[k] = v;
  const t = rec.metadata.target as TritonSource["target"] | undefined;
  return {
    frontend: "triton",
    tritonVersion: rec.triton_version,
    python: rec.python,
    kernelName: rec.name ?? kernelName,
    fnName: rec.fn?.name ?? rec.name,
    qualname: rec.fn?.qualname ?? rec.name,
    module: rec.fn?.module ?? null,
    sourceFile: rec.source_file ?? null,
    sourceLine: rec.source_line ?? null,
    sourceCopy: rec.source_copy ?? null,
    signature: rec.signature ?? {},
    constexprs: rec.constexprs ?? [],
    attrs: rec.attrs ?? [],
    options,
    target: t && typeof t === "object" && "backend" in t ? { backend: String(t.backend), arch: t.arch, warp_size: Number(t.warp_size) } : null,
    cubinSha256,
    cacheHit: rec.cache_hit,
    kernelModule: rec.kernel_module ?? null,
    unresolvedGlobals: rec.unresolved_globals ?? [],
    autotune: tune
      ? { key: tune.key, keyNames: tune.key_names, config: tune.config, configs: tune.configs, ...(tune.config_list ? { configList: tune.config_list } : {}) }
      : null,
    launch: accountLaunch(records, kernelName, pattern, matchIndex, countsBenchmarks),
  };
}

/**
 * Element type of each pointer parameter from the Triton signature, in launch order of the
 * non-constexpr parameters: "*fp32" → "fp32". Used for the tolerance compare.
 */
export function pointerElementTypes(signature: Record<string, unknown>): Map<string, string> {
  const out = new Map<string, string>();
  for (const [name, ty] of Object.entries(signature)) {
    if (typeof ty === "string" && ty.startsWith("*")) out.set(name, ty.replace(/^\*k?/, ""));
  }
  return out;
}
