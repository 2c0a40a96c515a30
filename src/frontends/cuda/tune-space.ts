/**
 * `kerncap tune`'s config space for a CUDA capture, pure: macros (-DNAME=V), nvcc's -maxrregcount
 * and alternatives of extra code-generation flags, each config turned into the words build.sh
 * appends to its nvcc command line (EXTRA_FLAGS).
 *
 * The grammar is the Triton tune's (src/frontends/tune.ts): `--config` specs of NAME=V1,V2 words,
 * expanded as their product, several specs joined. For a CUDA capture `maxrregcount` is nvcc's
 * option and every other NAME a macro. `--define NAME=V1,V2` (repeatable) and `--maxrregcount
 * V1,V2` add the same words to every spec; `--nvcc-flag=FLAGS` (repeatable) gives one more axis
 * whose values are whole alternatives (`--nvcc-flag=-Xptxas=-O1 --nvcc-flag=`: with and without).
 */
import { KerncapError } from "../../errors.ts";
import { assertSpaceSize } from "../tune.ts";
import { PTXAS_WORD } from "../compile-settings.ts";

/** One CUDA config: the macros it defines, the register limit, the extra flags (words). Absent: the reproducer's own. */
export interface CudaConfig {
  defines: Record<string, string>;
  maxrregcount?: number;
  flags: string[];
}

/** What `kerncap tune` takes for a CUDA space (the verb's options, as given). */
export interface CudaSpaceSpec {
  /** --config specs: NAME=V1,V2 words (maxrregcount, or a macro). */
  configs: string[];
  /** --define NAME=V1,V2, one word each. */
  defines: string[];
  /** --maxrregcount V1,V2. */
  maxrregcount?: string;
  /** --nvcc-flag: each one alternative, a space-separated list of flags ("" for none). */
  nvccFlags: string[];
}

/** The option names a CUDA --config word may have besides macros. */
export const CUDA_OPTION_NAMES = ["maxrregcount"] as const;

const HINT =
  "For example --define TILE=16,32 --maxrregcount 32,64, or --config 'TILE=16,32 maxrregcount=32,64' (a macro's values: letters, digits, . _ + -; maxrregcount: whole numbers 1 to 255).";

/** A macro's value: one word that bash leaves alone in EXTRA_FLAGS (no space, quote, glob or $). */
const MACRO_VALUE = /^[A-Za-z0-9_.+-]+$/;

/**
 * Flags a config may add (nvcc's device code generation only: none names a program to run or a
 * file to read): -Xptxas=/--ptxas-options= with ptxas options (PTXAS_OPTION, comma-separated),
 * --use_fast_math, --extra-device-vectorization, --restrict, --lineinfo,
 * --ftz/--prec-div/--prec-sqrt/--fmad=true|false, --dopt=on|off; one dash or two.
 */
const TUNE_FLAG =
  /^(?:--?(?:use_fast_math|extra-device-vectorization|restrict|lineinfo)|--?(?:ftz|prec-div|prec-sqrt|fmad)=(?:true|false)|--?dopt=(?:on|off))$/;

/** The -Xptxas / --ptxas-options spellings, their value the ptxas options (comma-separated). */
const PTXAS_FLAG = /^--?(?:Xptxas|ptxas-options)=(.+)$/;

/** Why a -Xptxas/--ptxas-options word is not one a config may add, or undefined. */
function ptxasProblem(word: string): string | undefined {
  const m = PTXAS_FLAG.exec(word);
  if (!m) return undefined;
  // the options a stock build.sh may hold (src/frontends/compile-settings.ts PTXAS_WORD): settings, nothing that names a file
  // (a trial: `-Xptxas=--options-file=build.sh` had ptxas read the build's own script)
  const bad = m[1]!.split(",").find((o) => !PTXAS_WORD.test(o));
  return bad === undefined
    ? undefined
    : `the ptxas option ${JSON.stringify(bad)} is not one kerncap tune passes (code generation options only: -O0…-O3, -v, --maxrregcount=N, cache operators, the optimizer's switches, warnings; nothing that names a file)`;
}

/**
 * The words of one --nvcc-flag alternative, each checked against the flags a config may add.
 * @returns the flags (empty for "")
 * @throws KerncapError E_USAGE naming the flag that is not one of them (-D and -maxrregcount: use --define, --maxrregcount)
 */
export function nvccTuneFlags(alternative: string): string[] {
  const words = alternative.split(/\s+/).filter(Boolean);
  for (const w of words) {
    if (/^--?(?:D|define-macro)/.test(w))
      throw new KerncapError("E_USAGE", `--nvcc-flag ${JSON.stringify(w)}: macros are swept with --define NAME=V1,V2`, { hint: HINT });
    if (/^--?maxrregcount/.test(w))
      throw new KerncapError("E_USAGE", `--nvcc-flag ${JSON.stringify(w)}: the register limit is swept with --maxrregcount V1,V2`, { hint: HINT });
    const ptxas = ptxasProblem(w);
    if (ptxas) throw new KerncapError("E_USAGE", `--nvcc-flag ${JSON.stringify(w)}: ${ptxas}`, { hint: HINT });
    if (!PTXAS_FLAG.test(w) && !TUNE_FLAG.test(w)) {
      throw new KerncapError("E_USAGE", `--nvcc-flag ${JSON.stringify(w)} is not a flag kerncap tune sweeps`, {
        hint: "Device code generation flags only, as one word each: -Xptxas=-O1 (ptxas options, comma-separated, no paths), --use_fast_math, --extra-device-vectorization, --restrict, --lineinfo, --ftz=true|false, --prec-div=…, --prec-sqrt=…, --fmad=…, --dopt=on|off. Write --nvcc-flag=-Xptxas=-O1 (with '=': a value starting with '-' is read as an option otherwise).",
      });
    }
  }
  return words;
}

type Axis = { name: string; values: string[] };

/** The axes of one spec's words (NAME=V1,V2), checked. @throws KerncapError E_USAGE */
function axesOf(words: string[], where: string): Axis[] {
  const axes: Axis[] = [];
  for (const word of words) {
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.+)$/.exec(word);
    if (!m) throw new KerncapError("E_USAGE", `${where}: ${JSON.stringify(word)} is not NAME=V1,V2,…`, { hint: HINT });
    const [, name, list] = m as unknown as [string, string, string];
    if (axes.some((a) => a.name === name))
      throw new KerncapError("E_USAGE", `${where}: ${name} is given twice`, { hint: "List its values once: NAME=V1,V2 (in --config or --define, not both)." });
    const values = [...new Set(list.split(","))];
    for (const v of values) {
      if (name === "maxrregcount") {
        if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > 255)
          throw new KerncapError("E_USAGE", `${where}: maxrregcount ${JSON.stringify(v)} is not a whole number from 1 to 255`, { hint: HINT });
      } else if (!MACRO_VALUE.test(v)) {
        throw new KerncapError("E_USAGE", `${where}: ${JSON.stringify(v)} is not a value for macro ${name}`, { hint: HINT });
      }
    }
    axes.push({ name, values: name === "maxrregcount" ? values.map((v) => String(Number(v))) : values });
  }
  return axes;
}

/**
 * The configs of a CUDA space: each --config spec with the --define and --maxrregcount words
 * added (none: those words alone), expanded as the product of its axes and of the --nvcc-flag
 * alternatives; several specs joined, duplicates dropped.
 * @returns the configs, in the order of the axes' values (the first axis slowest)
 * @throws KerncapError E_USAGE: a bad word or value, a name given twice, a flag not swept, no axis at all, or more than MAX_CONFIGS configs (src/frontends/tune.ts: counted before they are expanded)
 */
export function parseCudaSpace(s: CudaSpaceSpec): CudaConfig[] {
  const extra = [...s.defines.map((d) => d.trim()), ...(s.maxrregcount !== undefined ? [`maxrregcount=${s.maxrregcount.trim()}`] : [])];
  const flagAlts = s.nvccFlags.map(nvccTuneFlags);
  const specs = s.configs.length ? s.configs : [""];
  const out: CudaConfig[] = [];
  const products: number[] = [];
  const seen = new Set<string>();
  for (const spec of specs) {
    const where = spec.trim() ? `--config ${JSON.stringify(spec)}` : "--define/--maxrregcount";
    const axes = axesOf([...spec.split(/\s+/).filter(Boolean), ...extra], where);
    if (!axes.length && !flagAlts.length) {
      throw new KerncapError(
        "E_USAGE",
        s.configs.length ? "--config is empty" : "no config space: a CUDA capture is tuned over macros, -maxrregcount and nvcc flags",
        { hint: HINT },
      );
    }
    products.push(axes.reduce((n, a) => n * a.values.length, 1) * Math.max(1, flagAlts.length));
    assertSpaceSize(products, "the space of --config, --define, --maxrregcount and --nvcc-flag");
    let configs: CudaConfig[] = [{ defines: {}, flags: [] }];
    for (const a of axes) {
      configs = configs.flatMap((c) =>
        a.values.map((v) => (a.name === "maxrregcount" ? { ...c, maxrregcount: Number(v) } : { ...c, defines: { ...c.defines, [a.name]: v } })),
      );
    }
    if (flagAlts.length) configs = configs.flatMap((c) => flagAlts.map((f) => ({ ...c, flags: f })));
    for (const c of configs) {
      const k = cudaConfigKey(c);
      if (!seen.has(k)) seen.add(k), out.push(c);
    }
  }
  return out;
}

/** The nvcc words of a config, in this order: -DNAME=V (names sorted), -maxrregcount=N, the extra flags. */
export function cudaBuildFlags(c: CudaConfig): string[] {
  return [
    ...Object.keys(c.defines)
      .sort()
      .map((k) => `-D${k}=${c.defines[k]}`),
    ...(c.maxrregcount !== undefined ? [`-maxrregcount=${c.maxrregcount}`] : []),
    ...c.flags,
  ];
}

/** A config's identity: equal configs, equal keys. */
export function cudaConfigKey(c: CudaConfig): string {
  return cudaBuildFlags(c).join(" ");
}

/** The table's config column: "TILE=16 maxrregcount=32 -Xptxas=-O1", macros in the order given; "" for no change. */
export function cudaConfigLabel(c: CudaConfig): string {
  return [
    ...Object.entries(c.defines).map(([k, v]) => `${k}=${v}`),
    ...(c.maxrregcount !== undefined ? [`maxrregcount=${c.maxrregcount}`] : []),
    ...c.flags,
  ].join(" ");
}
