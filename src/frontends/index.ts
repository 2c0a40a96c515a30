/**
 * The frontend registry (./frontend.ts): the one list of frontends, and the lookups callers use
 * instead of switching on manifest.kernel.frontend. What every frontend adds (`kerncap run`'s
 * options, the capture environment, the enrichment, the frontend names the raw capture may carry)
 * is derived from it here.
 */
import { ENV_VARS, type EnvVarDoc } from "../env.ts";
import { KerncapError } from "../errors.ts";
import { KERNCAP_CONFIG_NAMES } from "../format/file-names.ts";
import { addRunFiles, runFilesLoaded } from "../format/run-files.ts";
import type { Manifest } from "../format/manifest.ts";
import { setBuildScriptReader } from "../format/what-runs.ts";
import type { RegionTypes } from "../replay/tolerance-plan.ts";
import type { DeclaredRegionTypes } from "../replay/dtype-check.ts";
import { cudaFrontend } from "./cuda/index.ts";
import type { CaptureArg, CaptureContext, Enrichment, Frontend } from "./frontend.ts";
import { hipFrontend } from "./hip/index.ts";
import { setGeneratedRemaker } from "./build.ts";
import { setNoteForms } from "./build-notes.ts";
import { readBuildScripts } from "./stock-build.ts";
import { tritonFrontend } from "./triton/index.ts";

export type { CaptureArg, CaptureContext, Enrichment, Frontend } from "./frontend.ts";

/** Every frontend, in the order their capture enrichment runs (Triton first: it claims the cubins it compiled before CUDA renders a C++ reproducer). */
const registry: Frontend[] = [tritonFrontend, cudaFrontend, hipFrontend];

// the trust gate (a lower layer) reads a received capture's build.sh against its frontend's templates through this
setBuildScriptReader((name, files) => readBuildScripts(registry.find((f) => f.name === name)?.templates, files));

// a confined build (a lower module) remakes the files a frontend generates under src/ through this
setGeneratedRemaker((dir, m) => frontendOf(m).remakeGenerated?.(dir, m));
// and tells build.sh's notes from what else its stderr holds through this
setNoteForms((m) => {
  try {
    return frontendOf(m).buildNotes?.(m) ?? [];
  } catch {
    return []; // a frontend this kerncap does not know: no line is a note
  }
});

// what each one's build runs besides build.sh, for the trust gate (src/format/run-files.ts): asked for before this loaded, it refuses
for (const f of registry) if (f.runFiles) addRunFiles(f.runFiles);
runFilesLoaded();

/** The registered frontends, in enrichment order. */
export function frontends(): readonly Frontend[] {
  return registry;
}

/**
 * Add a frontend after the built-in ones (a test's, in-process).
 * @returns the function that removes it again
 * @throws Error for a name already registered, or an option or variable another frontend (or the core) declares (a kerncap bug)
 */
export function registerFrontend<O>(f: Frontend<O>): () => void {
  if (registry.some((x) => x.name === f.name)) throw new Error(`frontend ${f.name} is registered already`);
  const taken = Object.keys(f.captureArgs ?? {}).filter((a) => Object.hasOwn(captureArgs(), a));
  if (taken.length) throw new Error(`frontend ${f.name}: option ${taken.join(", ")} belongs to another frontend`);
  const known = envVars();
  const vars = Object.keys(f.env ?? {}).filter((k) => Object.hasOwn(known, k));
  if (vars.length) throw new Error(`frontend ${f.name}: variable ${vars.join(", ")} is declared already`);
  registry.push(f as Frontend);
  const removeRunFiles = f.runFiles ? addRunFiles(f.runFiles) : () => {};
  return () => {
    const i = registry.indexOf(f as Frontend);
    if (i >= 0) registry.splice(i, 1);
    removeRunFiles();
  };
}

/** Whether `name` is a registered frontend's (the raw capture's and the manifest's kernel.frontend). */
export function isFrontendName(name: string): boolean {
  return registry.some((f) => f.name === name);
}

/** The frontend of a capture (manifest.kernel.frontend). @throws KerncapError E_FRONTEND for a name no frontend has */
export function frontendOf(m: Pick<Manifest, "kernel">): Frontend {
  const f = registry.find((x) => x.name === m.kernel.frontend);
  if (!f)
    throw new KerncapError("E_FRONTEND", `unknown frontend ${JSON.stringify(m.kernel.frontend)}`, {
      hint: `This kerncap knows ${registry.map((x) => x.name).join(", ")}.`,
    });
  return f;
}

/**
 * The element types the capture's frontend knows for its regions (Frontend.regionTypes), bound to
 * the capture: what the replay takes as RunOptions.regionTypes and src/replay/tolerance-plan.ts
 * regionNumericsPlan as `regionTypes`. undefined when its frontend knows none.
 * @throws KerncapError E_FRONTEND for a name no frontend has
 */
export function regionTypesOf(m: Manifest): RegionTypes | undefined {
  const f = frontendOf(m);
  return f.regionTypes ? (params, written) => f.regionTypes!(m, params, written) : undefined;
}

/**
 * The element types the kernel's declaration gives the capture's regions, bound to it
 * (src/replay/dtype-check.ts DeclaredRegionTypes): the frontend's declaredRegionTypes, else its
 * regionTypes (the signature's, Triton's); undefined when it knows none.
 * @throws KerncapError E_FRONTEND for a name no frontend has
 */
export function declaredRegionTypesOf(m: Manifest): DeclaredRegionTypes | undefined {
  const f = frontendOf(m);
  if (f.declaredRegionTypes) return (params) => f.declaredRegionTypes!(m, params);
  if (!f.regionTypes) return undefined;
  return (params) => f.regionTypes!(m, params).map((type) => (type ? { type, why: "the kernel's signature" } : undefined));
}

/**
 * Every `KERNCAP_*` variable: the core's (src/env.ts ENV_VARS), then each frontend's
 * (Frontend.env), by name: what docs/environment.md lists.
 * @throws Error for a name two of them declare (a kerncap bug)
 */
export function envVars(): Record<string, EnvVarDoc> {
  const all: Record<string, EnvVarDoc> = { ...ENV_VARS };
  for (const f of registry) {
    for (const [k, v] of Object.entries(f.env ?? {})) {
      if (Object.hasOwn(all, k)) throw new Error(`frontend ${f.name}: variable ${k} is declared already`);
      all[k] = v;
    }
  }
  return all;
}

/** `kerncap run`'s options of every frontend, by option name. */
export function captureArgs(): Record<string, CaptureArg> {
  return Object.assign({}, ...registry.map((f) => f.captureArgs ?? {}));
}

/**
 * Every frontend's options parsed from the verb's values of captureArgs(), by frontend name.
 * @throws KerncapError E_USAGE from a frontend's check
 */
export function captureOptions(args: Readonly<Record<string, unknown>>): Record<string, unknown> {
  return Object.fromEntries(registry.filter((f) => f.captureOptions).map((f) => [f.name, f.captureOptions!(args)]));
}

/** The files every frontend's capture-time code writes beside the captures (Frontend.captureFiles), for each capture's enrichment. */
export function captureFiles(): string[] {
  return registry.flatMap((f) => f.captureFiles ?? []);
}

/** The capture-time environment of every frontend, merged. */
export async function captureEnv(): Promise<Record<string, string>> {
  const env: Record<string, string> = {};
  for (const f of registry) Object.assign(env, (await f.captureEnv?.()) ?? {});
  return env;
}

/**
 * Every frontend's enrichment of one capture, in registry order, each with its options (by
 * frontend name, from captureOptions): the first manifest.source, and a beforeRename hook that
 * runs each frontend's in order with the final folder's name.
 */
export function captureEnrichment(
  ctx: CaptureContext,
  options: Readonly<Record<string, unknown>>,
): { source?: Record<string, unknown>; beforeRename: (dir: string, m: Manifest, finalDir: string) => Promise<void> } {
  const parts = registry.map((f) => f.enrich?.(ctx, options[f.name]) ?? ({} as Enrichment));
  const source = parts.find((p) => p.source)?.source;
  return {
    ...(source ? { source } : {}),
    beforeRename: async (dir, m, finalDir) => {
      for (const p of parts) await p.beforeRename?.(dir, m, finalDir);
    },
  };
}

/**
 * Why an MCP agent may not write `rel` (a path relative to the capture folder, under src/) in a
 * capture of `m`'s frontend, or undefined when it may: only the frontend's sources
 * (Frontend.sourceSuffixes), never a file kerncap reads as configuration or runs
 * (KERNCAP_CONFIG_NAMES, any `*.sh`, a `kerncap*.json`), at any depth. A phrase to end "… because".
 */
export function notAnEditableSource(m: Pick<Manifest, "kernel">, rel: string): string | undefined {
  const name = rel.split("/").pop() ?? "";
  const lower = name.toLowerCase();
  if (KERNCAP_CONFIG_NAMES.includes(lower) || (lower.startsWith("kerncap") && lower.endsWith(".json")))
    return `${name} is a file kerncap reads as configuration or runs, which no agent may write (at any depth)`;
  if (lower.endsWith(".sh")) return `${name} is a shell script, which no agent may write`;
  const f = registry.find((x) => x.name === m.kernel.frontend);
  const suffixes = f?.sourceSuffixes ?? [];
  if (!suffixes.length) return `a ${m.kernel.frontend} capture has no source files an agent may edit`;
  if (!suffixes.some((s) => name.endsWith(s)) || suffixes.includes(name)) return `${name} is not a ${f!.name} source file (${suffixes.join(" ")})`;
  return undefined;
}
