/**
 * `kerncap tune`'s inputs, pure: the config space (`--config 'BLOCK_M=64,128 num_warps=4,8'`, or
 * the autotuner's configs recorded at capture), the grid expression (`--grid
 * 'cdiv(M,BLOCK_M)*cdiv(N,BLOCK_N),1,1'`) evaluated by a small parser of its own (no eval), and
 * the result table with its winner.
 */
import { KerncapError } from "../errors.ts";
import type { Manifest } from "../format/manifest.ts";
import type { SetRun } from "../replay/engine.ts";
import { median } from "../replay/compare.ts";
import { compareTimings, MIN_PAIRS, type TimingComparison } from "../replay/stats.ts";

/** Triton's compile options a config may set beside its constexpr kwargs (triton.Config's keyword arguments). */
export const OPTION_NAMES = ["num_warps", "num_stages", "num_ctas", "maxnreg"] as const;
export type OptionName = (typeof OPTION_NAMES)[number];

/** What every tune takes, whichever the frontend: the timing, the tolerance of the check, the parallel builds, trust. */
export interface TuneRunOptions {
  /** Timed rounds (one launch of every config each). */
  iters: number;
  /** Flush L2 before each timed launch (src/replay/engine.ts). */
  flushL2: boolean;
  /** Tolerance of each config's check against the app's after state (another tile shape sums in another order). */
  atol?: number;
  rtol?: number;
  /** Element types of the check (--dtype T, and --dtype REGION=T as dtypes) and the regions compared as multisets (--multiset), as validate judges them. */
  dtype?: string;
  dtypes?: Record<string, string>;
  multiset?: string[];
  /** --allow-version-mismatch: build each config even when the toolchain differs from the capture's (KERNCAP_FORCE=1: another Triton version). */
  force?: boolean;
  /** Parallel builds or compiles (default: the CPU count). */
  jobs?: number;
  /** --trust: tune a received capture (its build runs: src/format/trust.ts). */
  trust?: boolean | string;
  /** Called as each config's build or compile ends, failed ones too: configs done, configs to build (a progress line: src/util/progress.ts). */
  onBuilt?: (done: number, total: number) => void;
  /** --build-only: every config built, none judged or timed (no GPU needed): a row is built (with its registers) or compile-error. */
  buildOnly?: boolean;
}

/**
 * Every option of `kerncap tune`, as the verb and the MCP tool pass them to the capture's
 * frontend (Frontend.tune); a frontend refuses the options it does not take (E_USAGE) before
 * anything runs.
 */
export interface TuneSweepOptions extends TuneRunOptions {
  /** --config specs (Triton: parseConfigSpace; CUDA: src/frontends/cuda/tune-space.ts parseCudaSpace). */
  configs: string[];
  /** --grid (Triton only). */
  grid?: string;
  /** --define NAME=V1,V2 (CUDA only). */
  defines: string[];
  /** --maxrregcount V1,V2 (CUDA only). */
  maxrregcount?: string;
  /** --nvcc-flag alternatives (CUDA only). */
  nvccFlags: string[];
  /** --confine (kerncap mcp): builds confined as validate --confine's; a capture whose build runs its source (Frontend.buildRunsSource) only with trust. */
  confine?: boolean;
  /** The trust gate (src/ops/tune.ts trustGate: src/rebuild/gate.ts BuildGate), which the sweep asks once its usage errors are said, before its first build. */
  gate: () => void;
  /** Eval's machinery (src/ops/tune.ts hands src/tune/evaluate.ts tuneEvaluator): each config built in eval's build pool, judged and timed on its GPU worker against the captured module. */
  evaluate: TuneEvaluate;
}

/**
 * One config as tune hands it to eval's machinery: a config of the frontend's space (a `config`
 * candidate, built by its TuneDriver.candidates), or words appended to build.sh's compiler
 * command line (a `flags` candidate, built in place by the capture's build.sh into `buildDir`).
 */
export type TuneSpec = { kind: "config"; config: TuneConfig } | { kind: "flags"; flags: string[]; buildDir?: string };

/** A config of the sweep: its value (reported), its label (the table's column), what is built. */
export interface TuneItem<C> {
  config: C;
  label: string;
  spec: TuneSpec;
}

/** One config's build: its module and the kernel's registers, or why it has none (the compiler's error lines, or the module check's). */
export type TuneBuilt = { module: string; seconds: number; registers: number | null } | { error: string };

/** What eval's machinery found: a row per item (in order), the captured module's row, each item's build (absent: not built), wall times (s). */
export interface TuneEvaluated<C> {
  rows: TuneRow<C>[];
  /** The captured module's row (the baseline), shown as `config` and `label`. */
  captured: (config: C, label: string) => TuneRow<C>;
  built: (TuneBuilt | undefined)[];
  seconds: { compile: number; replay: number };
}

/**
 * Build, judge and time `items` on the capture `dir` (src/tune/evaluate.ts tuneEvaluator);
 * `onBuild(i, b)` as item i's build ends (tune's lines).
 * @throws KerncapError E_INTERRUPTED, E_CONFINED (a confined build read outside), E_BUILD (no config built), the workers' error when none could be judged on a GPU (E_NO_GPU …)
 */
export type TuneEvaluate = <C>(
  dir: string,
  items: TuneItem<C>[],
  o: TuneRunOptions & { confine?: boolean; grid?: string; onBuild?: (i: number, b: TuneBuilt) => void },
) => Promise<TuneEvaluated<C>>;

/**
 * One config of a frontend's space built on its own, as a candidate of `kerncap eval` (a
 * `NAME=VALUE …` candidate, parsed by parseConfigSpace: src/eval/candidates.ts): Triton's
 * constexprs and compile options compiled by repro.py.
 */
export interface ConfigCandidates {
  /**
   * Why `config` needs a launch grid given (--grid) to run on the capture in `dir`: it changes
   * the tile sizes the captured grid was computed from; undefined when the captured grid holds.
   */
  needsGrid(dir: string, config: TuneConfig): boolean;
  /**
   * Build `config` in `dest` (a private copy of the capture) into dest/build/, with `grid` (an
   * expression of the kernel's integer arguments and the config's values) evaluated to the launch
   * grid it runs with; `force` (--allow-version-mismatch): built even with another toolchain than
   * the capture's (KERNCAP_FORCE=1).
   * @returns the module, the grid ([x, y, z]) when one was given, or the compiler's error (a compile error of the candidate)
   * @throws KerncapError E_USAGE (a bad grid), E_NO_REPRODUCER, E_MANIFEST, E_INTERRUPTED
   */
  build(
    dest: string,
    m: Manifest,
    config: TuneConfig,
    grid?: string,
    force?: boolean,
  ): Promise<{ module: string; grid?: [number, number, number] } | { error: string }>;
}

/** A frontend's `kerncap tune` (Frontend.tune): its space, its builds, its rows. */
export interface TuneDriver {
  /** Its configs as eval's candidates (Triton), one at a time; none: eval takes no config candidate for its captures. */
  readonly candidates?: ConfigCandidates;
  /**
   * Sweep the space `o` gives on the capture in `dir` (its manifest's frontend is this one).
   * @throws KerncapError E_USAGE (an option it does not take, a bad space), E_UNTRUSTED, the builds' and the replay's errors
   */
  run(dir: string, o: TuneSweepOptions): Promise<TuneResult<unknown>>;
  /** A config of its rows by parameter name, for the report's columns and heatmap; undefined for a config that is not of its shape. */
  params(config: unknown): Record<string, string> | undefined;
}

/** One config: constexpr values by name, and the compile options it sets (absent: the captured one). */
export interface TuneConfig {
  kwargs: Record<string, number>;
  options: Partial<Record<OptionName, number>>;
}

/**
 * The most configs a tune space (every spec's product, added) or an eval's candidate list holds.
 * Each config is one build (seconds of nvcc or Triton's compile) and one GPU run, so 10 000 is
 * already days of work; and a space is expanded in memory: a product of short lists grows
 * exponentially (30 names of 2 values each are 2^30 configs), which would exhaust the machine's
 * memory long before a build started. Counted before anything is expanded.
 */
export const MAX_CONFIGS = 10_000;

/**
 * Refuse a space of more than MAX_CONFIGS configs before it is expanded: `counts`, each spec's
 * product of its axes' value counts (added across specs). `what`: the option the user gave.
 * @throws KerncapError E_USAGE (exit 2) naming the count and the limit
 */
export function assertSpaceSize(counts: number[], what: string): void {
  const total = counts.reduce((a, b) => a + b, 0);
  if (total <= MAX_CONFIGS) return;
  const shown = Number.isSafeInteger(total) ? String(total) : total.toExponential(2);
  throw new KerncapError("E_USAGE", `${what} gives ${shown} configs (the product of each name's values); a tune sweeps at most ${MAX_CONFIGS}`, {
    hint: "Fewer names or values per spec (the configs are the product of every name's values): sweep the few that matter, then narrow around the best.",
  });
}

/**
 * The configs of one or more `--config` specs: each a space-separated list of NAME=V1,V2,… (whole
 * numbers), expanded as their cartesian product; several specs are joined, duplicates dropped.
 * NAME is a constexpr parameter of the kernel or one of OPTION_NAMES.
 * @throws KerncapError E_USAGE naming the bad word; more than MAX_CONFIGS configs (counted before they are expanded)
 */
export function parseConfigSpace(specs: string[]): TuneConfig[] {
  const out: TuneConfig[] = [];
  const products: number[] = [];
  const seen = new Set<string>();
  for (const spec of specs) {
    const axes: [string, number[]][] = [];
    for (const word of spec.split(/\s+/).filter(Boolean)) {
      const m = /^([A-Za-z_][A-Za-z0-9_]*)=([-+]?\d+(?:,[-+]?\d+)*)$/.exec(word);
      if (!m)
        throw new KerncapError("E_USAGE", `--config: ${JSON.stringify(word)} is not NAME=V1,V2,…`, {
          hint: "For example --config 'BLOCK_M=64,128 BLOCK_N=64,128 num_warps=4,8' (whole numbers; a constexpr of the kernel or num_warps, num_stages, num_ctas, maxnreg).",
        });
      if (axes.some(([n]) => n === m[1]))
        throw new KerncapError("E_USAGE", `--config: ${m[1]} is given twice in ${JSON.stringify(spec)}`, { hint: "List its values once: NAME=V1,V2." });
      axes.push([m[1]!, [...new Set(m[2]!.split(",").map(Number))]]);
    }
    if (!axes.length) throw new KerncapError("E_USAGE", "--config is empty", { hint: "For example --config 'num_warps=4,8'." });
    products.push(axes.reduce((n, [, values]) => n * values.length, 1));
    assertSpaceSize(products, "--config");
    let configs: TuneConfig[] = [{ kwargs: {}, options: {} }];
    for (const [name, values] of axes) {
      configs = configs.flatMap((c) =>
        values.map((v) =>
          (OPTION_NAMES as readonly string[]).includes(name)
            ? { kwargs: c.kwargs, options: { ...c.options, [name]: v } }
            : { kwargs: { ...c.kwargs, [name]: v }, options: c.options },
        ),
      );
    }
    for (const c of configs) {
      const k = configKey(c);
      if (!seen.has(k)) seen.add(k), out.push(c);
    }
  }
  return out;
}

/** A config's identity (sorted names): equal configs, equal keys. */
export function configKey(c: TuneConfig): string {
  const all = { ...c.kwargs, ...c.options };
  return Object.keys(all)
    .sort()
    .map((k) => `${k}=${all[k as keyof typeof all]}`)
    .join(" ");
}

/** "BLOCK_M=64 BLOCK_N=128 num_warps=4", kwargs first (the table's config column). */
export function configLabel(c: TuneConfig): string {
  return [...Object.entries(c.kwargs), ...Object.entries(c.options)].map(([k, v]) => `${k}=${v}`).join(" ");
}

/** The line to paste into @triton.autotune's configs: `triton.Config({"BLOCK_M": 64}, num_warps=4, num_stages=3)`. */
export function autotuneLine(c: TuneConfig): string {
  const kw = Object.entries(c.kwargs)
    .map(([k, v]) => `${JSON.stringify(k)}: ${v}`)
    .join(", ");
  const opts = OPTION_NAMES.filter((k) => c.options[k] !== undefined)
    .map((k) => `, ${k}=${c.options[k]}`)
    .join("");
  return `triton.Config({${kw}}${opts})`;
}

// ---- grid expressions ----

type Tok = { t: "num"; v: number } | { t: "id"; v: string } | { t: "op"; v: string };

function tokenize(src: string): Tok[] {
  const out: Tok[] = [];
  const re = /\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(\/\/|[-+*/%(),]))/y;
  let at = 0;
  while (at < src.length) {
    if (/^\s*$/.test(src.slice(at))) break;
    re.lastIndex = at;
    const m = re.exec(src);
    if (!m) throw gridError(src, `unexpected ${JSON.stringify(src.slice(at).trim()[0])} at column ${at + 1}`);
    at = re.lastIndex;
    out.push(m[1] !== undefined ? { t: "num", v: Number(m[1]) } : m[2] !== undefined ? { t: "id", v: m[2] } : { t: "op", v: m[3]! });
  }
  return out;
}

/** The longest --grid expression (characters) and the deepest nesting of parentheses, calls and signs it takes: a bound, so that no expression can exhaust the stack. */
export const GRID_MAX_CHARS = 4096;
export const GRID_MAX_DEPTH = 64;

function gridError(src: string, why: string): KerncapError {
  const shown = src.length > 80 ? `${src.slice(0, 60)}… (${src.length} characters)` : src;
  return new KerncapError("E_USAGE", `--grid ${JSON.stringify(shown)}: ${why}`, {
    hint: "Up to three comma-separated integer expressions of the kernel's scalar arguments and the config's values: + - * // (or /: floor division) %, parentheses, cdiv(a, b), min(a, b), max(a, b); e.g. --grid 'cdiv(M, BLOCK_M), cdiv(N, BLOCK_N)'.",
  });
}

const FUNCS: Record<string, (a: number, b: number) => number> = { cdiv: (a, b) => Math.floor((a + b - 1) / b), min: Math.min, max: Math.max };

/**
 * Evaluate a grid expression: up to three comma-separated integer expressions (missing ones are
 * 1), over `vars` (the kernel's scalar arguments and the config's values by name). Integer
 * arithmetic: `/` and `//` are floor division, as Triton's grid lambdas compute with `//` and
 * triton.cdiv.
 * @returns [x, y, z], each a whole number ≥ 1
 * At most GRID_MAX_CHARS characters and GRID_MAX_DEPTH levels of nesting (parentheses, calls, signs).
 * @throws KerncapError E_USAGE naming the fault (syntax, an unknown name, division by zero, a dimension < 1, too long or too deep)
 */
export function evalGrid(src: string, vars: Record<string, number>): [number, number, number] {
  if (src.length > GRID_MAX_CHARS) throw gridError(src, `longer than ${GRID_MAX_CHARS} characters`);
  const toks = tokenize(src);
  let i = 0;
  let depth = 0;
  const peek = () => toks[i];
  const take = (v?: string) => {
    const t = toks[i];
    if (!t || (v !== undefined && t.v !== v))
      throw gridError(src, t ? `expected ${v}, found ${JSON.stringify(String(t.v))}` : `expected ${v ?? "more"} at the end`);
    i++;
    return t;
  };
  const atom = (): number => {
    if (++depth > GRID_MAX_DEPTH) throw gridError(src, `nested deeper than ${GRID_MAX_DEPTH} levels (parentheses, calls and signs)`);
    try {
      return atomAt();
    } finally {
      depth--;
    }
  };
  const atomAt = (): number => {
    const t = take();
    if (t.t === "num") return t.v;
    if (t.t === "op" && t.v === "(") {
      const v = sum();
      take(")");
      return v;
    }
    if (t.t === "op" && t.v === "-") return -atom();
    if (t.t === "id") {
      if (peek()?.v === "(") {
        const f = Object.hasOwn(FUNCS, t.v) ? FUNCS[t.v] : undefined; // a name such as constructor is no function here
        if (!f) throw gridError(src, `unknown function ${t.v} (cdiv, min, max)`);
        take("(");
        const a = sum();
        take(",");
        const b = sum();
        take(")");
        if (t.v === "cdiv" && b === 0) throw gridError(src, "cdiv by zero");
        return f(a, b);
      }
      if (!Object.hasOwn(vars, t.v)) throw gridError(src, `unknown name ${t.v} (known: ${Object.keys(vars).join(", ") || "none"})`);
      return vars[t.v]!;
    }
    throw gridError(src, `unexpected ${JSON.stringify(String(t.v))}`);
  };
  const product = (): number => {
    let v = atom();
    while (peek()?.t === "op" && ["*", "/", "//", "%"].includes(String(peek()!.v))) {
      const op = take().v;
      const r = atom();
      if (op !== "*" && r === 0) throw gridError(src, "division by zero");
      v = op === "*" ? v * r : op === "%" ? v - Math.floor(v / r) * r : Math.floor(v / r);
    }
    return v;
  };
  const sum = (): number => {
    let v = product();
    while (peek()?.t === "op" && (peek()!.v === "+" || peek()!.v === "-")) v = take().v === "+" ? v + product() : v - product();
    return v;
  };
  const dims: number[] = [sum()];
  while (peek()) {
    take(",");
    dims.push(sum());
  }
  if (dims.length > 3) throw gridError(src, `${dims.length} dimensions (at most 3)`);
  while (dims.length < 3) dims.push(1);
  for (const [k, d] of dims.entries())
    if (!Number.isSafeInteger(d) || d < 1 || d > 2 ** 31 - 1) throw gridError(src, `dimension ${"xyz"[k]} is ${d} (a whole number from 1 to 2^31-1)`);
  return dims as [number, number, number];
}

// ---- the table ----

/** One config's outcome: compile error, mismatch, or a match with its median time (µs). `C`: the frontend's config (Triton's TuneConfig, src/frontends/cuda/tune-space.ts CudaConfig). */
export interface TuneRow<C = TuneConfig> {
  config: C;
  /** The table's config column (Triton: configLabel; CUDA: the flags, or what the row's module is). */
  label?: string;
  /** "captured": the app's own choice (the baseline). */
  captured: boolean;
  /** built: --build-only's row of a module that built (the captured module's too), nothing judged or timed. */
  verdict: "match" | "mismatch" | "compile-error" | "launch-error" | "built";
  medianUs: number | null;
  /** captured median / this median: above 1, faster than the app's choice. */
  speedup: number | null;
  /** This config against the app's, from the interleaved rounds (src/replay/stats.ts compareTimings): faster or slower only beyond the noise; absent with too few rounds. */
  vsApp?: { verdict: TimingComparison["verdict"]; decided?: boolean; text: string };
  /** Registers per thread of the kernel in the row's module (CUDA; null where the cubin says none). */
  registers?: number | null;
  error?: string;
  /** Something to know about the row beside its verdict (CUDA: flags that leave the kernel's machine code as build.sh's). */
  note?: string;
}

/** What `kerncap tune` found (its --json document, kerncap.tune/1). */
export interface TuneResult<C = TuneConfig> {
  dir: string;
  /** The capture's frontend: what a config is (Triton: constexprs and compile options; CUDA: macros, -maxrregcount, nvcc flags). */
  frontend: string;
  kernel: string;
  /** The kernel's symbol (its mangled name, the manifest's kernel.name): the same in every document. */
  symbol: string;
  /** --grid (Triton), or the formula inferred from the capture (gridInferred), null when the captured grid was kept. */
  grid: string | null;
  /** The grid is the formula tune inferred (src/frontends/triton/grid.ts), not a --grid given. */
  gridInferred?: boolean;
  rows: TuneRow<C>[];
  /** The fastest config that matches (the app's own when none beats it), null when none matched. */
  winner: TuneRow<C> | null;
  /** The winner as a line to paste: Triton's `triton.Config(…)` for @triton.autotune; CUDA's nvcc flags (null when the app's own build won, "" for build.sh's flags unchanged); null when none matched. */
  paste: string | null;
  /** Wall time (s): the compiles, the replay (restore, checks, timing). */
  seconds: { compile: number; replay: number };
  /** What tune warned of on stderr before the configs ran (a swept macro no source names …); absent when nothing. */
  warnings?: string[];
  /** --build-only: every config built, none judged or timed (rows built or compile-error, no winner); absent otherwise. */
  buildOnly?: true;
}

/**
 * A config's row from its entry of ReplaySession.runSet: its compile error (when `error` is
 * given), its launch error (no entry: it was not run), else its verdict and median time (µs) with
 * the speedup against the app's run `app` (its times, µs, in the same rounds; null: not timed),
 * and the shared compare's verdict against it (src/replay/stats.ts: a difference claimed only
 * beyond the noise).
 */
export function tuneRow<C>(config: C, captured: boolean, r: SetRun | undefined, app: SetRun | null, error?: string): TuneRow<C> {
  if (error !== undefined) return { config, captured, verdict: "compile-error", medianUs: null, speedup: null, error };
  if (!r || "error" in r)
    return { config, captured, verdict: "launch-error", medianUs: null, speedup: null, error: r && "error" in r ? r.error.message : "not run" };
  const us = r.times.length ? r.result.timing.medianUs : null;
  const appTimes = app && !("error" in app) ? app.times : [];
  const appUs = appTimes.length ? median([...appTimes]) : null;
  const row: TuneRow<C> = { config, captured, verdict: r.result.verdict, medianUs: us, speedup: us && appUs ? appUs / us : null };
  if (!captured && appTimes.length >= MIN_PAIRS && appTimes.length === r.times.length) {
    const c = compareTimings(appTimes, r.times);
    row.vsApp = { verdict: c.verdict, decided: c.decided, text: c.text };
  }
  return row;
}

/**
 * The config to paste: the fastest that matches the app's after state and is faster than the
 * app's beyond the noise (vsApp "faster"); the app's own when none is (or the fastest match when
 * the app's own did not match, or no row was compared). @returns undefined when none matched
 */
export function pickWinner<C>(rows: TuneRow<C>[]): TuneRow<C> | undefined {
  const matched = rows
    .filter((r) => r.verdict === "match" && r.medianUs !== null)
    .sort((a, b) => a.medianUs! - b.medianUs! || Number(b.captured) - Number(a.captured));
  const own = matched.find((r) => r.captured);
  if (!own || !matched.some((r) => r.vsApp)) return matched[0];
  return matched.find((r) => r.vsApp?.verdict === "faster") ?? own;
}

/**
 * The table: config, verdict, µs, speedup against the app's choice (and registers, when some row
 * has them); fastest first, the failures last. A row's label, else configLabel of its config.
 */
export function tuneTable<C>(rows: TuneRow<C>[]): string {
  const sorted = [...rows].sort((a, b) => (a.medianUs ?? Infinity) - (b.medianUs ?? Infinity));
  const regs = rows.some((r) => r.registers !== undefined);
  const head = ["config", "verdict", "µs", "vs app", ...(regs ? ["regs"] : [])];
  const body = sorted.map((r) => [
    (r.label ?? configLabel(r.config as TuneConfig)) + (r.captured ? " (app)" : ""),
    // --build-only: the app's module is the capture's, never built (a new user's finding: "built", and not among the "N of N configs built")
    r.captured && r.verdict === "built" ? "captured" : r.verdict,
    r.medianUs === null ? "-" : r.medianUs.toFixed(2),
    r.speedup === null ? "-" : `${r.speedup.toFixed(2)}×${r.vsApp && r.vsApp.verdict === "same" && r.vsApp.decided !== false ? " (same)" : ""}`,
    ...(regs ? [r.registers == null ? "-" : String(r.registers)] : []),
  ]);
  const w = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length)));
  return [head, ...body]
    .map((r) =>
      r
        .map((c, i) => (i === 0 ? c.padEnd(w[i]!) : c.padStart(w[i]!)))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

/**
 * The lines under the table: the rows' errors (a config that did not build or launch) and notes,
 * each text once with the labels of the rows that gave it ("  a, b: error: …").
 */
export function tuneNotes<C>(rows: TuneRow<C>[]): string[] {
  const by = new Map<string, string[]>();
  for (const r of rows) {
    if (r.error === undefined && r.note === undefined) continue;
    const text = r.error !== undefined ? `${r.verdict}: ${r.error}` : r.note!;
    by.set(text, [...(by.get(text) ?? []), r.label ?? configLabel(r.config as TuneConfig)]);
  }
  return [...by].map(([text, labels]) => `  ${labels.join(", ")}: ${text}`);
}
