/**
 * Which translation unit of a compile database compiles a kernel whose definition lives in a
 * header, found through the compiler's own view of each TU:
 *
 * 1. includers: the TUs whose dependency listing (`nvcc -M` with the TU's recorded flags, response
 *    files read, device pass for the captured arch) names the definition file, through any chain
 *    of headers (`a.cu` → `umbrella.cuh` → `kernels/k.cuh`). The listings are narrowed first by
 *    text: a TU whose `#include` lines, followed through its own include folders, reach the file
 *    (slice.ts includeLeadingTo) is listed; when no TU reaches it by text (an include spelled
 *    through a macro) every TU is, up to MAX_LISTINGS.
 * 2. instantiation (a template kernel included by several TUs): a TU whose own text spells the
 *    captured instantiation (`k<128, 128, 8>`, or a launcher `launch_k<128, 128, 8>`) when exactly
 *    one does; otherwise the TUs that name the template are compiled to PTX one at a time, the
 *    spelled and then the smallest first (`nvcc -ptx`, the front end and NVVM without ptxas: 0.4 s
 *    for a small TU on 2 cores, 2 s for one with 32 instantiations), until one's PTX has the
 *    captured `.entry` (the mangled name). Only TUs that name the template are compiled
 *    (ggml's explicit-instantiation files spell it through a macro: compiling each of those would
 *    take minutes); without a confirmed one the choice falls back to the TUs that name it, then
 *    to the smallest TU (reported as a guess, with the others).
 *
 * The listings run in parallel (at most LISTING_JOBS at once); compiler runs are cached for the process by
 * a hash of (what is asked, folder, argv): a second capture of the same run reuses them.
 */
import { availableParallelism } from "node:os";
import { readFileSync, realpathSync, rmSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { privateTempFolder } from "../../cache.ts";
import type { CompileCommand } from "./compile-commands.ts";
import { cudaFlagsFromCommand, flagArgv, includeDirs } from "./flags.ts";
import { dependencyArgv, parseDeps } from "./nvcc.ts";
import { includeLeadingTo } from "./slice-directives.ts";
import type { KernelNameParts } from "./kernel-name.ts";

/** Most TUs listed with nvcc -M when the text narrowing found none. */
export const MAX_LISTINGS = 512;
/** Most TUs compiled to PTX to find the instantiation. */
export const MAX_PTX_CHECKS = 16;
const LISTING_JOBS = Math.max(1, Math.min(8, availableParallelism()));
const COMPILER_TIMEOUT_MS = 180_000;

function real(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return resolve(p);
  }
}

/** fn over items, at most `jobs` at once; once stop(result) is true no further item starts. */
async function eachLimited<T, R>(items: T[], jobs: number, fn: (t: T) => Promise<R>, stop?: (r: R) => boolean): Promise<(R | undefined)[]> {
  const out: (R | undefined)[] = new Array(items.length);
  let next = 0;
  let stopped = false;
  const worker = async () => {
    while (!stopped && next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
      if (stop?.(out[i]!)) stopped = true;
    }
  };
  await Promise.all(Array.from({ length: Math.min(jobs, items.length) }, worker));
  return out;
}

/** The first line of a compiler's message that says error (else its last line), at most 300 characters. */
function firstError(stderr: string): string {
  const lines = stderr.trim().split("\n");
  return (lines.find((l) => /\berror\b/i.test(l)) ?? lines[lines.length - 1] ?? "").trim().slice(0, 300) || "(no message)";
}

type RunResult = { ok: true; stdout: string } | { ok: false; error: string };
const runs = new Map<string, Promise<RunResult>>();

/** Run a compiler command once per process (cached by a hash of key, folder and argv). */
function runCached(key: string, argv: string[], cwd: string, outFile?: string): Promise<RunResult> {
  const hash = new Bun.CryptoHasher("sha256").update(JSON.stringify([key, cwd, argv])).digest("hex");
  let r = runs.get(hash);
  if (!r) {
    r = (async (): Promise<RunResult> => {
      // a private folder for the output and nvcc's own intermediates (TMPDIR: its tmpxft_<pid>_… names in a shared /tmp)
      const tmp = privateTempFolder("kerncap-tu-");
      try {
        const full = outFile ? [...argv, "-o", join(tmp, outFile)] : argv;
        const p = Bun.spawn(full, { cwd, env: { ...process.env, TMPDIR: tmp }, stdout: "pipe", stderr: "pipe", timeout: COMPILER_TIMEOUT_MS });
        const [stdout, stderr, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
        if (code !== 0) return { ok: false, error: `exit ${code}: ${firstError(stderr)}` };
        return { ok: true, stdout: outFile ? readFileSync(join(tmp, outFile), "utf8") : stdout };
      } catch (e) {
        return { ok: false, error: (e as Error).message };
      } finally {
        rmSync(tmp, { recursive: true, force: true });
      }
    })();
    runs.set(hash, r);
  }
  return r;
}

export interface ToolchainFor {
  nvcc: string;
  /** The captured device's arch (sm_90): the device pass whose includes and instantiations count. */
  arch: string;
}

/** The dependency listing (absolute, real paths) of a TU with its recorded flags. */
export async function tuDependencies(c: CompileCommand, t: ToolchainFor): Promise<{ deps?: Set<string>; error?: string }> {
  const flags = cudaFlagsFromCommand(c.argv, c.directory, c.file);
  const r = await runCached("M", dependencyArgv(t.nvcc, c.file, flags, t.arch), c.directory);
  if (!r.ok) return { error: r.error };
  return { deps: new Set(parseDeps(r.stdout).map((d) => real(resolve(c.directory, d)))) };
}

export interface Includers {
  /** The TUs whose dependency listing names the definition (database order). */
  tus: CompileCommand[];
  /** What was done, one line each, for messages. */
  tried: string[];
}

/** Does the TU's #include chain reach `definition`, following its own include folders (text only)? */
function reachesByText(c: CompileCommand, definition: string): boolean {
  let text: string;
  try {
    text = readFileSync(c.file, "utf8");
  } catch {
    return false;
  }
  const dirs = includeDirs(cudaFlagsFromCommand(c.argv, c.directory, c.file));
  if (dirs.preIncludes.some((p) => real(p) === definition)) return true;
  return includeLeadingTo(text, c.file, definition, dirs.quote) !== undefined;
}

/**
 * The TUs of `commands` that include `definition` (directly or through any chain of headers),
 * by their nvcc -M listings; without nvcc (t undefined) by text alone, saying so.
 */
export async function tusIncluding(definition: string, commands: CompileCommand[], t: ToolchainFor | undefined): Promise<Includers> {
  const def = real(definition);
  const tried: string[] = [];
  const byText = commands.filter((c) => reachesByText(c, def));
  tried.push(`${byText.length} of ${commands.length} TUs reach ${definition} through their #include lines`);
  if (!t) {
    tried.push("nvcc not found: TUs not listed with nvcc -M");
    return { tus: byText, tried };
  }
  const failedByText: CompileCommand[] = [];
  const list = async (cs: CompileCommand[]) => {
    const res = await eachLimited(cs, LISTING_JOBS, (c) => tuDependencies(c, t));
    const failed = cs.map((c, i) => [c, res[i]!] as const).filter(([, r]) => r.error);
    for (const [c] of failed) if (byText.includes(c)) failedByText.push(c);
    tried.push(
      `nvcc -M of ${cs.length} TU${cs.length === 1 ? "" : "s"}${
        failed.length
          ? `; ${failed.length} failed (${failed
              .slice(0, 3)
              .map(([c, r]) => `${c.file}: ${r.error}`)
              .join("; ")}${failed.length > 3 ? "; …" : ""})`
          : ""
      }`,
    );
    return cs.filter((_, i) => res[i]!.deps?.has(def));
  };
  let tus = byText.length ? await list(byText) : [];
  if (!tus.length) {
    const rest = commands.filter((c) => !byText.includes(c));
    if (rest.length > MAX_LISTINGS) tried.push(`the other ${rest.length} TUs not listed (more than ${MAX_LISTINGS})`);
    else if (rest.length) tus = await list(rest);
  }
  if (!tus.length && failedByText.length) {
    // the flags are incomplete (default flags: a define the build gives is missing), the text still says which TU
    tried.push(`kept by their #include lines alone: ${failedByText.map((c) => c.file).join(", ")}`);
    tus = failedByText;
  }
  tried.push(
    `${tus.length} TU${tus.length === 1 ? "" : "s"} include${tus.length === 1 ? "s" : ""} it${
      tus.length
        ? `: ${tus
            .slice(0, 4)
            .map((c) => c.file)
            .join(", ")}${tus.length > 4 ? ", …" : ""}`
        : ""
    }`,
  );
  return { tus, tried };
}

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/**
 * A regex for the captured instantiation spelled in source: the template's name (or a name that
 * ends with it, such as a launcher `launch_k`) then `<` the arguments `>`, any spacing; integer
 * suffixes (`8u`, `4l`) and the demangler's casts of enum/bool values (`(ggml_type)2`) are
 * accepted as written, not understood. Undefined for a non-template.
 */
export function instantiationPattern(names: KernelNameParts): RegExp | undefined {
  if (names.templateArgs === undefined) return undefined;
  const args = splitTopLevel(names.templateArgs).map((a) => a.replace(/\s+/g, ""));
  const body = args.map((a) => `\\s*${escapeRe(a).replace(/^(\d+)$/, "$1[uUlL]*")}\\s*`).join(",");
  return new RegExp(`\\b\\w*${escapeRe(names.base)}\\s*<${body}>`);
}

function splitTopLevel(s: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let cur = "";
  for (const c of s) {
    if (c === "<" || c === "(" || c === "[") depth++;
    else if (c === ">" || c === ")" || c === "]") depth--;
    if (c === "," && depth === 0) {
      out.push(cur);
      cur = "";
    } else cur += c;
  }
  if (cur.trim()) out.push(cur);
  return out;
}

export interface TuChoice {
  tu: CompileCommand;
  /** The other includers (not ruled out). */
  others: CompileCommand[];
  /** Why this TU, for the manifest and messages. */
  reason: string;
  /** True when a fact (a single includer, the spelled instantiation, the PTX entry) singled it out. */
  certain: boolean;
}

/**
 * Among the TUs that include the definition, the one that compiles the captured kernel (see the
 * file comment for the order of evidence).
 * @param kernel the mangled name (the cubin's and the PTX's `.entry` symbol).
 */
export async function instantiatingTu(
  includers: CompileCommand[],
  names: KernelNameParts,
  kernel: string,
  definition: string,
  t: ToolchainFor | undefined,
): Promise<TuChoice> {
  const smallest = (cs: CompileCommand[]) => [...cs].sort((a, b) => statSync(a.file).size - statSync(b.file).size || a.file.localeCompare(b.file));
  const rest = (tu: CompileCommand) => includers.filter((c) => c !== tu);
  if (includers.length === 1) return { tu: includers[0]!, others: [], reason: `the only TU that includes ${definition}`, certain: true };
  const pattern = instantiationPattern(names);
  if (!pattern) {
    const tu = smallest(includers)[0]!;
    return {
      tu,
      others: rest(tu),
      reason: `the smallest of ${includers.length} TUs that include ${definition} (each compiles the non-template kernel)`,
      certain: true,
    };
  }
  const text = new Map(includers.map((c) => [c, readFileSync(c.file, "utf8")]));
  const spelled = includers.filter((c) => pattern.test(text.get(c)!));
  if (spelled.length === 1)
    return {
      tu: spelled[0]!,
      others: rest(spelled[0]!),
      reason: `it spells ${names.base}<${names.templateArgs}> (the others include the template but do not)`,
      certain: true,
    };
  const nameRe = new RegExp(`\\b\\w*${escapeRe(names.base)}\\b`); // the template, or a launcher template named after it
  // the spelled ones first, then the smallest: the first PTX with the entry ends the checks, and a TU is a whole front-end compile
  const naming = [...spelled, ...smallest(includers.filter((c) => !spelled.includes(c) && nameRe.test(text.get(c)!)))];
  if (t && naming.length) {
    const checked = naming.slice(0, MAX_PTX_CHECKS);
    const entry = new RegExp(`\\.entry\\s+${escapeRe(kernel)}\\s*\\(`);
    const res = await eachLimited(
      checked,
      1,
      async (c) => {
        const r = await runCached(
          "ptx",
          [t.nvcc, "-ptx", "-x", "cu", `-arch=${t.arch}`, ...flagArgv(cudaFlagsFromCommand(c.argv, c.directory, c.file)), c.file],
          c.directory,
          "tu.ptx",
        );
        return r.ok && entry.test(r.stdout);
      },
      (hit) => hit,
    );
    const hit = checked.find((_, i) => res[i]);
    const compiled = res.filter((r) => r !== undefined).length;
    if (hit)
      return {
        tu: hit,
        others: rest(hit),
        reason: `its PTX (nvcc -ptx with its flags) has the captured entry ${kernel}; ${compiled} of the ${naming.length} TUs that name ${names.base} compiled`,
        certain: true,
      };
  }
  const guess = naming.length ? naming[0]! : smallest(includers)[0]!;
  return {
    tu: guess,
    others: rest(guess),
    reason: naming.length
      ? `it names ${names.base} (${naming.length} of ${includers.length} includers do${t ? "; none's PTX had the captured entry" : "; nvcc not found, PTX not checked"})`
      : `the smallest of ${includers.length} TUs that include ${definition} (none names ${names.base}: an explicit-instantiation file is the likely one)`,
    certain: false,
  };
}
