/**
 * `kerncap tune DIR` for a Triton capture: every config of the space compiled by the reproducer's
 * repro.py (kerncap's own copy, run on DIR, with KERNCAP_TUNE_CONFIG: one pinned config each, in
 * parallel), each launched on the captured memory with its grid (the --grid expression, or the
 * captured grid when the config leaves the tile sizes alone), block (num_warps × 32) and shared
 * memory (the compiled kernel's), judged against the app's after state, and timed interleaved
 * with the captured module (the app's own choice): each config a candidate of kerncap eval's
 * machinery (handed in by src/ops/tune.ts: eval's build pool, GPU worker and compare), compiled
 * in eval's private copy by this frontend's candidates.build.
 */
import { existsSync, mkdirSync, readFileSync, realpathSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { KerncapError } from "../../errors.ts";
import { openCapture } from "../../format/capture-dir.ts";
import { MANIFEST_MAX_BYTES, readCaptureBytes, readInCapture } from "../../format/paths.ts";
import type { Manifest, ParamSlot } from "../../format/manifest.ts";
import { parsePinned, type Pinned } from "./pinned.ts";
import { runBuildCommand } from "../build.ts";
import { templatesFolder } from "../templates.ts";
import { tritonParamTypes } from "./numerics.ts";
import { TRITON_TEMPLATES } from "./templates.ts";
import { buildChildEnv, reproducerBuildEnv } from "../../env.ts";
import { tritonReproducerEnv } from "./env.ts";
import { log } from "../../log.ts";
import { inferGrid } from "./grid.ts";
import {
  autotuneLine,
  configKey,
  configLabel,
  evalGrid,
  OPTION_NAMES,
  parseConfigSpace,
  pickWinner,
  type TuneConfig,
  type TuneDriver,
  type TuneEvaluate,
  type TuneResult,
  type TuneRow,
  type TuneRunOptions,
} from "../tune.ts";

export interface TuneOptions extends TuneRunOptions {
  /** --config specs (src/frontends/tune.ts parseConfigSpace); none: the autotuner's configs recorded at capture. */
  configs: string[];
  /** --grid expression (src/frontends/tune.ts evalGrid); none: the captured grid. */
  grid?: string;
  /** The trust gate (src/ops/tune.ts: src/rebuild/gate.ts BuildGate), asked before any config's compile runs. */
  gate: () => void;
  /** Eval's machinery (src/frontends/tune.ts TuneEvaluate): each config a config candidate, compiled in its private copy, judged and timed on eval's GPU worker. */
  evaluate: TuneEvaluate;
  /** --confine (kerncap mcp): refused without trust before (tritonTune.run); eval's builds as eval --confine's. */
  confine?: boolean;
}

export type { TuneResult } from "../tune.ts";

/**
 * The Triton frontend's tune (Frontend.tune): CUDA's options refused, a confined tune (kerncap
 * mcp) only with trust (each config's compile imports the kernel's source), then tuneTriton.
 */
export const tritonTune: TuneDriver = {
  async run(dir, o) {
    const cudaOnly = [o.defines.length ? "--define" : "", o.maxrregcount !== undefined ? "--maxrregcount" : "", o.nvccFlags.length ? "--nvcc-flag" : ""].filter(
      Boolean,
    );
    if (cudaOnly.length)
      throw new KerncapError("E_USAGE", `${cudaOnly.join(", ")}: options of a CUDA capture's tune; ${dir} is a Triton capture`, {
        hint: "A Triton config sets its constexprs and num_warps, num_stages, maxnreg in --config, e.g. --config 'BLOCK_M=64,128 maxnreg=128'.",
      });
    if (o.confine && !o.trust) {
      throw new KerncapError(
        "E_UNTRUSTED",
        `${dir} is a Triton capture: each config's compile imports the kernel's source under src/, which runs as code with your rights, so a confined tune (kerncap mcp) runs it only with --trust`,
        {
          hint: "Start the MCP server with kerncap mcp --trust-builds to let the agent's Triton tunes run, or tune on the command line.",
        },
      );
    }
    return tuneTriton(dir, o);
  },
  candidates: {
    needsGrid(dir, config) {
      const captured = capturedConfig(readPinned(dir));
      return Object.entries(config.kwargs).some(([k, v]) => captured.kwargs[k] !== v);
    },
    async build(dest, m, c, gridExpr, force) {
      const pin = readPinned(dest);
      const base = capturedConfig(pin);
      const config = { kwargs: { ...base.kwargs, ...c.kwargs }, options: { ...base.options, ...c.options } };
      let grid: [number, number, number] | undefined;
      if (gridExpr) {
        const params = new Uint8Array(readCaptureBytes(dest, m.params.file, m.params.size));
        grid = evalGrid(gridExpr, { ...tritonScalarArgs(pin.signature, params, m.params.layout), ...config.kwargs });
      }
      const b = await tritonConfigCompiler(dest, pin, { force: force ?? false })(config, join(dest, "build", "kernel.cubin"));
      return "error" in b ? { error: b.error } : { module: b.cubin, ...(grid ? { grid } : {}) };
    },
  },
  params: (c) => {
    if (!c || typeof c !== "object" || !("kwargs" in c)) return undefined;
    const t = c as TuneConfig;
    return Object.fromEntries([...Object.entries(t.kwargs), ...Object.entries(t.options)].map(([k, v]) => [k, String(v)]));
  },
};

/**
 * The kernel's scalar arguments by name, from the parameter bytes: the signature's non-constexpr
 * entries are the launched parameters in order (Triton drops constexprs), the layout gives each
 * one's offset; integer types only (i1…i64, u8…u64), the grid's inputs.
 */
export function tritonScalarArgs(signature: Record<string, unknown>, params: Uint8Array, layout: ParamSlot[]): Record<string, number> {
  const names = Object.keys(signature).filter((k) => signature[k] !== "constexpr");
  const types = tritonParamTypes(signature);
  const dv = new DataView(params.buffer, params.byteOffset, params.byteLength);
  const out: Record<string, number> = {};
  for (const [i, name] of names.entries()) {
    const slot = layout.find((p) => p.index === i);
    const m = /^([iu])(1|8|16|32|64)$/.exec(types[i] ?? "");
    if (!slot || !m || slot.offset + slot.size > params.byteLength) continue;
    const bits = Number(m[2]);
    const signed = m[1] === "i" && bits > 1;
    const v =
      bits === 64
        ? signed
          ? dv.getBigInt64(slot.offset, true)
          : dv.getBigUint64(slot.offset, true)
        : bits === 32
          ? signed
            ? dv.getInt32(slot.offset, true)
            : dv.getUint32(slot.offset, true)
          : bits === 16
            ? signed
              ? dv.getInt16(slot.offset, true)
              : dv.getUint16(slot.offset, true)
            : signed
              ? dv.getInt8(slot.offset)
              : dv.getUint8(slot.offset);
    out[name] = Number(v);
  }
  return out;
}

export type { Pinned }; // the schema's type (src/frontends/triton/pinned.ts), as the tune and eval code names it

/** The app's own config: the pinned constexprs that are whole numbers and the compile options. */
export function capturedConfig(pin: Pinned): TuneConfig {
  const kwargs: Record<string, number> = {};
  for (const c of pin.constexprs) if (c.expr !== undefined && /^-?\d+$/.test(c.expr)) kwargs[c.name] = Number(c.expr);
  const options: TuneConfig["options"] = {};
  for (const k of OPTION_NAMES) if (typeof pin.options[k] === "number") options[k] = pin.options[k] as number;
  return { kwargs, options };
}

/**
 * The constexprs a config sets: those of the autotuner's configs recorded at capture and those
 * --config sweeps; none recorded or swept: every whole-number constexpr. Triton also makes an
 * integer argument equal to 1 a constexpr (its specialization: stride_ak=1 in pinned.json), which
 * is no config of @triton.autotune and must not reach the line to paste.
 */
export function tunableNames(pin: Pinned, swept: TuneConfig[]): Set<string> | null {
  const names = new Set<string>([...(pin.autotune?.configList ?? []).flatMap((c) => Object.keys(c.kwargs)), ...swept.flatMap((c) => Object.keys(c.kwargs))]);
  return names.size ? names : null;
}

/** A config as reported (table, JSON, the triton.Config line): its kwargs cut to `names` (null: all). */
export function tunedConfig(names: Set<string> | null): (c: TuneConfig) => TuneConfig {
  return (c) => (names ? { kwargs: Object.fromEntries(Object.entries(c.kwargs).filter(([k]) => names.has(k))), options: c.options } : c);
}

/** The space: --config, else the autotuner's configs recorded at capture. @throws KerncapError E_USAGE when there is neither */
export function tuneSpace(pin: Pinned, specs: string[]): TuneConfig[] {
  if (specs.length) return parseConfigSpace(specs);
  const list = pin.autotune?.configList;
  if (!list?.length) {
    throw new KerncapError("E_USAGE", `no config space: the capture recorded no autotuner configs for ${pin.fnName}`, {
      hint: "Give one: --config 'BLOCK_M=64,128 num_warps=4,8' (constexprs of the kernel and num_warps, num_stages, maxnreg); captures made with this kerncap record @triton.autotune's configs.",
    });
  }
  return list.map((c) => ({
    kwargs: Object.fromEntries(Object.entries(c.kwargs).filter(([, v]) => typeof v === "number")) as Record<string, number>,
    options: Object.fromEntries(OPTION_NAMES.filter((k) => typeof c[k] === "number").map((k) => [k, c[k] as number])),
  }));
}

/** One config compiled by repro.py: the cubin (its metadata beside it, `<cubin>.json`), the kernel's shared memory (bytes) and num_warps; or the compiler's last lines. */
export type TritonBuilt = { cubin: string; shared: number; numWarps: number } | { error: string };

/**
 * A compiler of pinned configs for the Triton reproducer in `dir` (kerncap's own repro.py, run in
 * `o.from` with pinned.json's interpreter and a Triton cache under FROM/build/triton-cache):
 * compile(config, out) writes `out` and `out.json`. `o.from`: where repro.py reads pinned.json and
 * the kernel file (a private copy of a trusted capture's: src/format/staged-build.ts stageTrustedBuild;
 * default `dir`), and `o.unstage` reads that copy's path in messages as DIR. `signal`: an abort
 * kills the compile. Used by tune and by eval.
 * @throws KerncapError E_INTERRUPTED (a stop signal during a compile)
 */
export function tritonConfigCompiler(
  dir: string,
  pin: Pick<Pinned, "python">,
  o: { from?: string; unstage?: (text: string) => string; force?: boolean } = {},
): (config: TuneConfig, out: string, signal?: AbortSignal) => Promise<TritonBuilt> {
  const from = o.from ?? dir;
  // the Triton cache in `from`'s build/ (a private copy's own: nothing written through a link of the capture's build/);
  // force (--allow-version-mismatch): KERNCAP_FORCE=1, repro.py compiles with another Triton version than the capture's
  const { python: py, env: reproEnv } = tritonReproducerEnv(pin.python, join(from, "build", "triton-cache"), reproducerBuildEnv({ force: o.force ?? false }));
  // no loader or Python path entry that is empty, relative or inside the capture; PYTHONSAFEPATH (src/env.ts buildChildEnv)
  const env = buildChildEnv(reproEnv, [dir, realpathSync(dir)]);
  const script = join(templatesFolder("triton", TRITON_TEMPLATES), "repro.py");
  const unstage = o.unstage ?? ((t: string) => t);
  return async (config, out, signal) => {
    mkdirSync(dirname(out), { recursive: true });
    // working folder `from` (a private copy: nothing of the capture's top level there)
    const r = await runBuildCommand([py, script, "--dir", from, "--config", JSON.stringify(config), "--out", out], from, env, signal);
    if (r.code !== 0 || !existsSync(out + ".json")) return { error: unstage((r.err || r.out).trim().split("\n").slice(-3).join(" / ")) || `exit ${r.code}` };
    const md = JSON.parse(readFileSync(out + ".json", "utf8")) as { shared: number; num_warps: number };
    return { cubin: out, shared: md.shared, numWarps: md.num_warps };
  };
}

/**
 * A Triton capture's pinned.json (the Triton shim's record, templates/triton/repro.py reads it),
 * read from `from` (the capture folder, or a private copy of it); `dir` names the capture in the error.
 * @throws KerncapError E_NO_REPRODUCER when there is none, E_MANIFEST when it breaks its schema (src/frontends/triton/pinned.ts), naming the field
 */
export function readPinned(from: string, dir = from): Pinned {
  const pinned = readInCapture(from, "pinned.json", MANIFEST_MAX_BYTES);
  if (!pinned)
    throw new KerncapError("E_NO_REPRODUCER", `${dir} has no pinned.json: no Triton reproducer was generated for this capture`, {
      hint: "Capture again with the kernel's source readable (the Triton shim records it).",
    });
  return parsePinned(dir, pinned); // anyone's bytes in a received capture: E_MANIFEST naming the field
}

/**
 * Tune a Triton capture (see the file's comment).
 * @throws KerncapError E_FRONTEND (not Triton), E_NO_REPRODUCER (no pinned.json), E_USAGE (no
 *   space, a config that changes the tile sizes without --grid when no grid formula fits the
 *   capture (src/frontends/triton/grid.ts), a bad --grid, num_ctas), E_UNTRUSTED (a received
 *   capture without trust), E_BUILD (no config compiled), the workers' errors (E_NO_GPU …)
 */
export async function tuneTriton(dirArg: string, o: TuneOptions): Promise<TuneResult> {
  const dir = resolve(dirArg);
  const m: Manifest = openCapture(dir).manifest;
  if (m.kernel.frontend !== "triton")
    throw new KerncapError("E_FRONTEND", `${dir} is a ${m.kernel.frontend} capture; kerncap tune sweeps Triton configs so far`, {
      hint: "For a CUDA kernel, edit the reproducer and compare builds with `kerncap replay DIR --against BUILT.cubin`.",
    });
  // each config's compile imports the capture's Python under src/ with pinned.json's interpreter: code, as validate's build is
  o.gate();
  const pin = readPinned(dir);
  const base = capturedConfig(pin);
  const swept = tuneSpace(pin, o.configs);
  const space = swept.map((c) => ({ kwargs: { ...base.kwargs, ...c.kwargs }, options: { ...base.options, ...c.options } }));
  const grid = tuneGrid(dir, m, pin, base, space, o.grid);
  // each config once; the app's own is the captured module (the baseline), not compiled again
  const unique = space.filter((c, i) => configKey(c) !== configKey(base) && space.findIndex((d) => configKey(d) === configKey(c)) === i);
  // each a config candidate of eval's machinery (compiled in its private copy by this frontend's candidates.build)
  const shown = tunedConfig(tunableNames(pin, swept));
  const items = unique.map((config) => ({ config: shown(config), label: configLabel(shown(config)), spec: { kind: "config" as const, config } }));
  let failed = 0;
  let ended = 0;
  const t0 = performance.now();
  const e = await o.evaluate(dir, items, {
    ...o,
    ...(grid ? { grid } : {}),
    onBuild: (_i, b) => {
      if ("error" in b) failed++;
      if (++ended === items.length) log.info(`${items.length} configs compiled in ${((performance.now() - t0) / 1000).toFixed(1)} s (${failed} failed)`);
    },
  });
  const rows: TuneRow[] = [e.captured(shown(base), configLabel(shown(base))), ...e.rows];
  const winner = pickWinner(rows) ?? null;
  return {
    dir,
    frontend: "triton",
    kernel: m.kernel.name,
    symbol: m.kernel.name,
    grid: grid ?? null,
    ...(grid && !o.grid ? { gridInferred: true } : {}),
    rows,
    winner,
    paste: winner ? autotuneLine(winner.config) : null,
    seconds: e.seconds,
    ...(o.buildOnly ? { buildOnly: true as const } : {}),
  };
}

/**
 * The launch grid expression of the sweep: --grid, else, when the space changes tile sizes, the
 * formula inferred from the capture (./grid.ts inferGrid); undefined: the captured grid holds.
 * @throws KerncapError E_USAGE (no formula fits, a bad --grid, one that misses the app's grid, num_ctas)
 */
function tuneGrid(dir: string, m: Manifest, pin: Pinned, base: TuneConfig, space: TuneConfig[], given: string | undefined): string | undefined {
  const params = new Uint8Array(readCaptureBytes(dir, m.params.file, m.params.size));
  const scalars = tritonScalarArgs(pin.signature, params, m.params.layout);
  const tiles = (c: TuneConfig) => Object.keys(c.kwargs).some((k) => c.kwargs[k] !== base.kwargs[k]);
  let grid = given;
  if (!grid && space.some(tiles)) {
    const g = inferGrid(
      m.launch.grid,
      scalars,
      base.kwargs,
      space.map((c) => c.kwargs),
    );
    if (g.grid === null) {
      throw new KerncapError(
        "E_USAGE",
        `the space changes constexprs (tile sizes), so the launch grid changes with them, and no formula of the capture's values fits: ${g.why}; give --grid`,
        {
          hint: `Tried, per axis: ${g.tried.join("; ")}. Give an expression of the kernel's integer arguments (${Object.keys(scalars).join(", ") || "none"}) and the config's values, as the app's grid lambda computes it, e.g. --grid 'cdiv(M, BLOCK_M), cdiv(N, BLOCK_N)'.`,
        },
      );
    }
    grid = g.grid;
    log.info(`launch grid inferred from the capture: ${grid} (${m.launch.grid.join("x")} for the app's config, as captured); --grid overrides it`);
  }
  if (space.some((c) => (c.options.num_ctas ?? 1) !== (base.options.num_ctas ?? 1)))
    throw new KerncapError("E_USAGE", "num_ctas other than the captured one is not tuned (it changes the cluster launch)", {
      hint: "Leave num_ctas out of --config.",
    });
  const gridOf = (c: TuneConfig): [number, number, number] => (grid ? evalGrid(grid, { ...scalars, ...c.kwargs }) : m.launch.grid);
  for (const c of space) gridOf(c); // a bad --grid is a usage error before anything compiles
  if (grid) {
    const g = gridOf(base);
    if (g.join() !== m.launch.grid.join())
      throw new KerncapError("E_USAGE", `--grid gives ${g.join("x")} for the app's own config, the app launched ${m.launch.grid.join("x")}`, {
        hint: "Write the expression as the app's grid lambda computes it.",
      });
  }
  return grid;
}
