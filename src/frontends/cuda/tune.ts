/**
 * `kerncap tune DIR` for a CUDA capture: every config of the space (macros, -maxrregcount, nvcc
 * flags: ./tune-space.ts) built by the reproducer's own build.sh, with the config's words
 * appended to its nvcc command line (EXTRA_FLAGS) and its module written to a folder of its own
 * (DIR/build/tune/cuda-N/kernel.cubin), in parallel; build.sh as it is (no extra flags) is built
 * beside them as a row of its own, so that what a flag changes is told apart from what the
 * rebuild itself changes. Each module is checked as validate checks a rebuild (kernel present,
 * parameter layout), launched with the captured launch configuration on the captured memory,
 * judged against the app's after state, and timed interleaved with the captured module (the
 * app's own build): each config a candidate of kerncap eval's machinery (handed in by
 * src/ops/tune.ts: src/tune/evaluate.ts; eval's build pool and GPU worker, the one compare).
 */
import { existsSync, readFileSync, rmSync } from "node:fs";
import { availableParallelism } from "node:os";
import { dirname, join, resolve } from "node:path";
import { isKerncapError, KerncapError, withDetails } from "../../errors.ts";
import { cubinKernelRegisters } from "../../codeobj/cubin.ts";
import { pickCubin } from "../../codeobj/fatbin.ts";
import { openCapture } from "../../format/capture-dir.ts";
import type { Manifest } from "../../format/manifest.ts";
import { capturePath, readInCapture, treeEntries } from "../../format/paths.ts";
import { buildReproducer } from "../build.ts";
import { kernelCodeSha256 } from "../../codeobj/kernel-code.ts";
import { log } from "../../log.ts";
import { cudaBuildFlags, cudaConfigKey, cudaConfigLabel, parseCudaSpace, type CudaConfig, type CudaSpaceSpec } from "./tune-space.ts";
import { OPTION_NAMES, pickWinner, type TuneDriver, type TuneEvaluate, type TuneResult, type TuneRow, type TuneRunOptions } from "../tune.ts";
import { checkRebuiltModule, rdcLinkError } from "./repro.ts";
import { remakeStaleSlice } from "./slice.ts";

export interface CudaTuneOptions extends TuneRunOptions {
  /** The space as given (--config, --define, --maxrregcount, --nvcc-flag: ./tune-space.ts parseCudaSpace). */
  space: CudaSpaceSpec;
  /** --confine (kerncap mcp): each build is validate --confine's (src/frontends/confine.ts): it reads nothing outside the capture, its source root and the toolchain. */
  confine?: boolean;
  /** The trust gate (src/ops/tune.ts: src/rebuild/gate.ts BuildGate), asked once the space and the reproducer are known good, before any build. */
  gate: () => void;
  /** Eval's machinery (src/frontends/tune.ts TuneEvaluate): each config a flags candidate built by build.sh, judged and timed on eval's GPU worker. */
  evaluate: TuneEvaluate;
}

/** One config's build: its module and the kernel's registers, or why it has none (a line of the compiler's message, or the module check's). */
export type CudaBuilt = { module: string; seconds: number; registers: number | null } | { error: string };

/** Where config `i`'s module is built, under the capture folder. */
export const tuneModulePath = (dir: string, i: number) => join(dir, "build", "tune", `cuda-${i}`, "kernel.cubin");

/** The lines of a build error worth a table row: the compiler's `error` lines (at most 3), else the last 3. */
function shortError(e: unknown): string {
  const msg = e instanceof Error ? e.message : String(e);
  const lines = msg
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
  const errs = lines.slice(1).filter((l) => /\berror\b/i.test(l));
  return (errs.length ? errs.slice(0, 3) : lines.slice(-3)).join(" / ");
}

/** The kernel's registers in a module (a cubin, or a fatbin's cubin for the captured arch), null where it says none or cannot be read. */
export function moduleRegisters(path: string, m: Pick<Manifest, "kernel" | "device">): number | null {
  try {
    return cubinKernelRegisters(pickCubin(new Uint8Array(readFileSync(path)), m.device.arch).cubin, m.kernel.name) ?? null;
  } catch {
    return null;
  }
}

/**
 * Build every config with the capture's build.sh, `jobs` at a time: config i into
 * tuneModulePath(dir, i) (the folder emptied first), with cudaBuildFlags(config) appended to
 * EXTRA_FLAGS; each module then checked as validate checks a rebuild (CUDA's checkRebuiltModule).
 * A config that does not build, or whose module is refused, is its entry's error.
 * @returns one entry per config, in order
 * @throws KerncapError E_INTERRUPTED (a stop signal during a build), E_CONFINED (confine: a build read a file outside)
 */
export async function buildCudaConfigs(
  dirArg: string,
  m: Manifest,
  configs: CudaConfig[],
  o: { jobs?: number; confine?: boolean; onBuilt?: (done: number, total: number) => void },
): Promise<CudaBuilt[]> {
  const dir = resolve(dirArg);
  remakeStaleSlice(dir, m); // a slice made before an edit of the TU is remade once, not by every build
  const out: CudaBuilt[] = new Array(configs.length);
  let next = 0;
  let finished = 0;
  o.onBuilt?.(0, configs.length);
  const worker = async () => {
    for (let i = next++; i < configs.length; i = next++, o.onBuilt?.(++finished, configs.length)) {
      const module = tuneModulePath(dir, i);
      rmSync(dirname(module), { recursive: true, force: true });
      try {
        const b = await buildReproducer(dir, {
          quiet: true,
          force: false,
          out: module,
          extraFlags: cudaBuildFlags(configs[i]!),
          ...(o.confine ? { confine: m, confinedBy: "tune --confine" } : {}),
          explain: rdcLinkError,
        });
        checkRebuiltModule(b.module, m);
        out[i] = { module: b.module, seconds: b.seconds, registers: moduleRegisters(b.module, m) };
      } catch (e) {
        if (isKerncapError(e) && (e.code === "E_INTERRUPTED" || e.code === "E_CONFINED")) throw e;
        out[i] = { error: shortError(e) };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(o.jobs ?? availableParallelism(), configs.length)) }, worker));
  return out;
}

/**
 * Tune a CUDA capture (see the file's comment).
 * @returns the rows: the app's module first (captured), build.sh without extra flags, then every
 *   config of the space; the winner and its flags to paste
 * @throws KerncapError E_FRONTEND (not CUDA), E_USAGE (the space), E_UNTRUSTED (a received
 *   capture without trust), E_NO_REPRODUCER (no build.sh), E_INTERRUPTED, E_CONFINED, E_BUILD (no config built), the workers' errors (E_NO_GPU …)
 */
export async function tuneCuda(dirArg: string, o: CudaTuneOptions): Promise<TuneResult<CudaConfig>> {
  const dir = resolve(dirArg);
  const m = openCapture(dir).manifest;
  if (m.kernel.frontend !== "cuda")
    throw new KerncapError("E_FRONTEND", `${dir} is a ${m.kernel.frontend} capture, not a CUDA one`, { hint: "kerncap tune sweeps CUDA and Triton captures." });
  const swept = parseCudaSpace(o.space); // usage errors before anything runs
  const tritonWords = [...new Set(swept.flatMap((c) => Object.keys(c.defines)))].filter((n) => (OPTION_NAMES as readonly string[]).includes(n));
  // what is said on stderr is in the document too (`warnings`; an error's details.warnings)
  const warnings: string[] = [];
  const warn = (text: string) => {
    warnings.push(text);
    log.warn(text);
  };
  if (tritonWords.length)
    warn(
      `${tritonWords.join(", ")}: Triton's compile option${tritonWords.length > 1 ? "s" : ""}, but this is a CUDA capture: swept as the macro${tritonWords.length > 1 ? "s" : ""} ${tritonWords.map((n) => `-D${n}`).join(", ")}`,
    );
  const unused = unusedMacros(dir, [...new Set(swept.flatMap((c) => Object.keys(c.defines)))]);
  if (unused.length)
    warn(
      `${unused.map((n) => `-D${n}`).join(", ")}: no source under src/ names ${unused.length > 1 ? "them" : "it"}; every value builds the same kernel (a macro to sweep is one the source reads, defined under #ifndef)`,
    );
  if (!existsSync(join(dir, "build.sh"))) {
    throw new KerncapError(
      "E_NO_REPRODUCER",
      `${dir} has no build.sh: no reproducer project was generated for this capture, so there is nothing to rebuild with other flags`,
      {
        hint: "Capture with the kernel's source available (--source-root, --compile-commands).",
      },
    );
  }
  o.gate();
  if (m.fault && !o.buildOnly)
    throw new KerncapError("E_USAGE", `${dir}: the captured launch faulted in the app; there is nothing to time`, {
      hint: "Replay it (kerncap replay) to reproduce the fault.",
    });
  const plain: CudaConfig = { defines: {}, flags: [] };
  const configs = [plain, ...swept.filter((c) => cudaConfigKey(c) !== cudaConfigKey(plain))];
  // config i: build.sh with cudaBuildFlags(config) appended (a flags candidate of eval's machinery), into tuneModulePath(dir, i)
  const items = configs.map((config, i) => ({
    config,
    label: i === 0 ? "build.sh" : cudaConfigLabel(config),
    spec: { kind: "flags" as const, flags: cudaBuildFlags(config), buildDir: dirname(tuneModulePath(dir, i)) },
  }));
  remakeStaleSlice(dir, m); // a slice made before an edit of the TU is remade once, not by every build

  // each build's outcome said as it ends, before the GPU judges it: a machine without one still learns which configs compile
  let failed = 0;
  let ended = 0;
  const t0 = performance.now();
  // each built module's kernel code digest, taken as it is built: under --confine (kerncap mcp) a config's build folder
  // is removed once it is judged (src/eval/copies.ts: the disk a tune takes is bounded by the builds at once)
  const codes: (string | null)[] = [];
  // ptxas's own word where a -maxrregcount was below its floor for the architecture (it built with the floor)
  const floors: (string | undefined)[] = [];
  const e = await o
    .evaluate(dir, items, {
      ...o,
      onBuild: (i, x) => {
        const label = items[i]!.label;
        if ("error" in x) {
          failed++;
          log.warn(`${label}: does not build: ${x.error.split("\n").slice(0, 6).join("\n  ")}`);
        } else {
          codes[i] = kernelCodeSha256(x.module, m);
          floors[i] = registerFloor(x.module);
          log.info(`${label}: built (${x.registers ?? "?"} registers/thread, ${x.seconds.toFixed(1)} s)`);
        }
        if (++ended === configs.length) log.info(`${configs.length} builds in ${((performance.now() - t0) / 1000).toFixed(1)} s (${failed} failed)`);
      },
    })
    .catch((err: unknown) => {
      throw warnings.length ? withDetails(err, { warnings }) : err;
    });
  const plainBuilt = e.built[0];
  const rows: TuneRow<CudaConfig>[] = [{ ...e.captured(plain, "captured module"), registers: moduleRegisters(capturePath(dir, m.module.file), m) }];
  for (const [i, c] of configs.entries()) {
    const b = e.built[i];
    const row: TuneRow<CudaConfig> = { ...e.rows[i]!, registers: b && !("error" in b) ? b.registers : null };
    // a macro the source defines without #ifndef (or never reads) leaves the kernel as it was: said, so that an equal time is not read as a finding
    if (i > 0 && b && !("error" in b) && plainBuilt && !("error" in plainBuilt) && codes[i] && codes[i] === codes[0])
      row.note = "the kernel's machine code is build.sh's: the flags change nothing in it";
    if (floors[i]) row.note = row.note ? `${floors[i]}; ${row.note}` : floors[i]; // nu16 #16: -maxrregcount 8 built quietly with 24
    rows.push(row);
  }
  const winner = pickWinner(rows) ?? null;
  return {
    dir,
    frontend: "cuda",
    kernel: m.kernel.name,
    symbol: m.kernel.name,
    grid: null,
    rows,
    winner,
    paste: winner && !winner.captured ? cudaBuildFlags(winner.config).join(" ") : null,
    seconds: e.seconds,
    ...(warnings.length ? { warnings } : {}),
    ...(o.buildOnly ? { buildOnly: true as const } : {}),
  };
}

/**
 * What ptxas said of a -maxrregcount below its floor in the build that made `module` (its log,
 * slice-build.log beside it: "ptxas warning : For profile sm_90 adjusting per thread register count
 * of 8 to lower bound of 24"), as a row's note, or undefined (no such line, no log, a log past 1 MiB).
 */
export function registerFloor(module: string): string | undefined {
  let text: string;
  try {
    text = readInCapture(dirname(module), "slice-build.log", 1 << 20)?.toString("utf8") ?? "";
  } catch {
    return undefined;
  }
  const w = /adjusting per thread register count of (\d+) to lower bound of (\d+)/.exec(text);
  return w ? `ptxas raised -maxrregcount ${w[1]} to its floor of ${w[2]} registers for this architecture` : undefined;
}

/**
 * The macro names of `names` that no file under DIR/src/ holds as a word (read through the capture
 * path rule: no link followed; at most 64 MiB of sources read): a --define of one of those changes
 * nothing the compiler sees (a new user swept one and got identical kernels without a word).
 */
export function unusedMacros(dir: string, names: string[]): string[] {
  if (!names.length) return [];
  const left = new Set(names);
  let budget = 64 << 20;
  for (const { rel, st } of treeEntries(dir, "src")) {
    if (!left.size || budget <= 0) break;
    if (!st.isFile() || st.size > budget) continue;
    budget -= st.size;
    const text = readInCapture(dir, rel, st.size)?.toString("latin1") ?? "";
    for (const name of [...left]) if (new RegExp(`\\b${name}\\b`).test(text)) left.delete(name);
  }
  return budget > 0 ? names.filter((n) => left.has(n)) : []; // sources past the budget: nothing said
}

/** The CUDA frontend's tune (Frontend.tune): Triton's --grid refused (its configs keep the captured launch), then tuneCuda. */
export const cudaTune: TuneDriver = {
  run(dir, o) {
    if (o.grid !== undefined)
      throw new KerncapError("E_USAGE", `--grid is a Triton tune's option; ${dir} is a CUDA capture, whose configs keep the captured launch`, {
        hint: "Sweep macros and flags with --define, --maxrregcount, --nvcc-flag or --config.",
      });
    return tuneCuda(dir, {
      space: { configs: o.configs, defines: o.defines, maxrregcount: o.maxrregcount, nvccFlags: o.nvccFlags },
      iters: o.iters,
      flushL2: o.flushL2,
      atol: o.atol,
      rtol: o.rtol,
      dtype: o.dtype,
      dtypes: o.dtypes,
      multiset: o.multiset,
      force: o.force,
      jobs: o.jobs,
      trust: o.trust,
      confine: o.confine,
      onBuilt: o.onBuilt,
      ...(o.buildOnly ? { buildOnly: true } : {}),
      gate: o.gate,
      evaluate: o.evaluate,
    });
  },
  params: (c) => {
    if (!c || typeof c !== "object" || !("defines" in c)) return undefined;
    const k = c as CudaConfig;
    return {
      ...Object.fromEntries(Object.entries(k.defines).map(([n, v]) => [n, String(v)])),
      ...(k.maxrregcount !== undefined ? { maxrregcount: String(k.maxrregcount) } : {}),
      ...(k.flags.length ? { flags: k.flags.join(" ") } : {}),
    };
  },
};
