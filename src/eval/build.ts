/**
 * One candidate's build in `kerncap eval`: its private copy of the reproducer made
 * (./candidates.ts materialise), then built as `kerncap validate --confine` builds (the one
 * rebuild policy, src/rebuild/rebuilder.ts, build.sh alone; confined where the reproducer's
 * compiler writes a dependency list: src/frontends/confine.ts), or, for a Triton config, compiled
 * by repro.py as `kerncap tune` compiles one (src/frontends/triton/tune.ts), or, for kerncap tune's CUDA
 * config (a flags candidate), built in place by the capture's build.sh with the config's words
 * appended to its nvcc command line (no copy: the sources are the capture's); the rebuilt module checked by
 * the frontend before anything launches it. The outcome is the module with the kernel's registers
 * and stack frame, or the candidate's verdict when it never reaches a GPU: compile-error (the
 * compiler's message), layout-change (the kernel's parameters are not the captured ones), error
 * (a candidate that does not fit src/: E_PATCH, E_CANDIDATE; or kerncap's own failure).
 */
import { rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { isKerncapError } from "../errors.ts";
import { escapeForTerminal } from "../escape.ts";
import type { Manifest } from "../format/manifest.ts";
import { buildReproducer, pastTimeLimit } from "../frontends/build.ts";
import { frontendOf } from "../frontends/index.ts";
import { Rebuilder } from "../rebuild/rebuilder.ts";
import { moduleFigures } from "../rebuild/resources.ts";
import { materialise, type Candidate } from "./candidates.ts";
import type { EvalVerdict } from "../format/eval-record.ts";
import type { Diagnostic } from "../frontends/confine.ts";
import type { PrunedCandidates } from "./pruned.ts";

/** A candidate's build that gave a module to run. */
/**
 * The most compiler diagnostics a candidate's record carries (the first ones: the error the edit
 * made comes first): each record is also an MCP progress notification, and 1024 candidates of a
 * call each with the build's 1000 (DIAGNOSTICS_MAX) of 2000 characters would be gigabytes (adversary 65 06).
 */
export const RECORD_DIAGNOSTICS_MAX = 50;

export interface BuiltModule {
  module: string;
  /** Wall time of the copy and the build (s). */
  seconds: number;
  registers: number | null;
  stackFrameBytes: number | null;
  /** Bytes of spill stores and loads (moduleFigures); null where the module does not say. */
  spillStoreBytes?: number | null;
  spillLoadBytes?: number | null;
  /** The launch grid of a Triton config that changes the tile sizes (--grid); undefined: the captured grid. */
  grid?: [number, number, number];
  /** Which build made a source candidate's module (EvalRecord.build.builder); undefined for a config's or a flags candidate's. */
  builder?: "build.sh" | "pruned";
}

/** A build's kernel figures as its record keeps them (EvalRecord.build): registers, stack frame, spill stores and loads. */
export function builtFigures(
  b: BuiltModule,
): Pick<BuiltModule, "registers" | "stackFrameBytes"> & { spillStoreBytes: number | null; spillLoadBytes: number | null } {
  return { registers: b.registers, stackFrameBytes: b.stackFrameBytes, spillStoreBytes: b.spillStoreBytes ?? null, spillLoadBytes: b.spillLoadBytes ?? null };
}

/** A candidate that never reaches a GPU: its verdict, the error's code and its message (the compiler's, once). */
export interface BuildFailure {
  verdict: Extract<EvalVerdict, "compile-error" | "layout-change" | "error">;
  code: string;
  reason: string;
  seconds: number;
  /** A compile-error's compiler diagnostics (E_BUILD's error.details.diagnostics: files as src/…, relative to the candidate's copy), for its record. */
  diagnostics?: Diagnostic[];
  /** The build ran past its limit and was killed (E_BUILD's details.timedOut). */
  timedOut?: true;
}

export type BuildOutcome = { built: BuiltModule } | { failed: BuildFailure };

/** The error codes of a candidate that does not build (its own fault, not kerncap's). */
const COMPILE_ERRORS = new Set(["E_BUILD", "E_RDC", "E_KERNEL_NOT_FOUND"]);

/**
 * The verdict of a build's error: compile-error (the compiler's), layout-change, else error; a
 * candidate that does not fit src/ (E_PATCH, E_CANDIDATE: ./candidates.ts materialise) was never
 * compiled, and a build the confinement refused (E_CONFINED: it read outside, or its sources name
 * a path outside) is not the compiler's failure, so each is an error with its code, not a
 * compile-error (a script reading the verdict would think the kernel failed to compile).
 */
export function buildVerdict(e: unknown): BuildFailure["verdict"] {
  if (!isKerncapError(e)) return "error";
  if (e.code === "E_PARAM_LAYOUT") return "layout-change";
  return COMPILE_ERRORS.has(e.code) ? "compile-error" : "error";
}

/** The trust gate of a candidate's private copy (src/ops/eval.ts: src/format/trust.ts requireTrustedCopy), asked once the copy is made, before its build. @throws KerncapError E_UNTRUSTED */
export type CopyGate = (copy: string, c: Candidate) => void;

/** A gate's refusal: it ends the evaluation (exit 2), it is no verdict of the candidate. */
const GATE_ERRORS = new Set(["E_UNTRUSTED", "E_TRUST_CHANGED"]);

export interface BuildSettings {
  /** Build even when the toolchain differs from the capture's (KERNCAP_FORCE=1). */
  force: boolean;
  /** A Triton config's launch grid expression (src/frontends/tune.ts evalGrid). */
  grid?: string;
  /** kerncap mcp's evaluate (eval --confine) and tune --confine: every build whose frontend's build does not run the source is confined, recorded source root or not (a flags candidate, kerncap tune's CUDA config: only then). */
  confine?: boolean;
  /** What confines the builds, for a refusal's message (BuildOptions.confinedBy); default "kerncap eval". */
  confinedBy?: string;
  /** The trust gate of the candidate's private copy (CopyGate), asked once it is made, before its build. */
  gate?: CopyGate;
  /** build.sh alone for every candidate (--full-build; the default unless `pruned`): no pruned build, no check. */
  fullBuild?: boolean;
  /**
   * The candidates' device code from the pruned TU once a check of the capture's own source found
   * it gives the kernel build.sh's machine code (--pruned): checked once per eval, not for each
   * candidate's source, which can hold what the pruned TU drops (adversary 45: a structured
   * binding's std::tuple_size specialization in a header), so off unless asked for.
   */
  fromPruned?: boolean;
  /** The candidates' confined builds from the pruned TU, where the check found them fit (./pruned.ts); else build.sh alone. */
  pruned?: PrunedCandidates;
}

/**
 * Whether the reproducer's build can be confined: its compiler writes the dependency list that
 * confinement reads (a CUDA reproducer's nvcc, whose source root the manifest records). A Triton
 * reproducer's compile writes none: it runs unconfined, on the capture's own Python sources.
 */
export function confinable(m: Manifest): boolean {
  return m.source?.cuda !== undefined;
}

/**
 * Build one candidate into `dest` (its private copy, made here from the capture folder `dir`).
 * Never throws for the candidate's own faults: they are its BuildFailure.
 * @throws KerncapError E_INTERRUPTED (a stop signal during the build), the copy's gate's (E_UNTRUSTED, E_TRUST_CHANGED: nothing of it ran)
 */
export async function buildCandidate(dir: string, m: Manifest, c: Candidate, dest: string, s: BuildSettings): Promise<BuildOutcome> {
  const t0 = performance.now();
  const seconds = () => (performance.now() - t0) / 1000;
  const fe = frontendOf(m);
  try {
    let module: string;
    let grid: [number, number, number] | undefined;
    if (c.kind === "flags") {
      // the capture's own sources, build.sh with the words appended (src/frontends/build.ts extraFlags), the module into `dest` (emptied first)
      rmSync(dest, { recursive: true, force: true });
      const b = await buildReproducer(dir, {
        quiet: true,
        force: s.force,
        out: join(dest, "kernel.cubin"),
        extraFlags: c.flags!,
        ...(s.confine ? { confine: m, confinedBy: s.confinedBy ?? "kerncap eval" } : {}),
        ...(fe.explainBuildFailure ? { explain: fe.explainBuildFailure } : {}),
      });
      fe.checkRebuiltModule?.(b.module, m);
      return { built: { module: b.module, seconds: seconds(), ...moduleFigures(b.module, m) } };
    }
    await materialise(dir, c, dest);
    s.gate?.(dest, c); // what the copy's build runs is what the user trusted (a received capture's): before anything of it runs
    if (c.kind === "config") {
      // one config of the frontend's tune space, built its way (Triton: compiled by repro.py; eval.ts refused a frontend without)
      const b = await fe.tune!.candidates!.build(dest, m, c.config!, s.grid, s.force);
      if ("error" in b)
        return { failed: { verdict: "compile-error", code: "E_BUILD", reason: b.error.split(`${resolve(dest)}/`).join(""), seconds: seconds() } };
      module = b.module;
      grid = b.grid;
      fe.checkRebuiltModule?.(module, m);
    } else {
      // the pruned TU's confined build where the check found it fit (./pruned.ts), else (and where it fails) build.sh's
      const p = s.pruned ? await s.pruned.build(dest) : undefined;
      if (p && "timedOut" in p) throw pastTimeLimit(p.timedOut, true, false);
      if (p) return { built: { module: p.module, seconds: seconds(), ...moduleFigures(p.module, m), builder: "pruned" } };
      const r = new Rebuilder(dest, m, fe, {
        quiet: true,
        force: s.force,
        fullBuild: true,
        ...(confinable(m) || (s.confine && !fe.buildRunsSource) ? { confine: m, confinedBy: s.confinedBy ?? "kerncap eval" } : {}),
        // the user's own eval (not kerncap mcp's --confine): a build stopped in the preprocessor says the compiler's error
        ...(s.confine ? {} : { userReadsMessages: true }),
        noteFor: `candidate ${escapeForTerminal(c.label, { oneLine: true })}`,
      });
      module = (await r.rebuildOnce()).module;
      return { built: { module, seconds: seconds(), ...moduleFigures(module, m), builder: "build.sh" } };
    }
    return { built: { module, seconds: seconds(), ...moduleFigures(module, m), ...(grid ? { grid } : {}) } };
  } catch (e) {
    if (isKerncapError(e) && (e.code === "E_INTERRUPTED" || GATE_ERRORS.has(e.code))) throw e;
    // the private copy's path says nothing to the user: the compiler's messages name src/… as in the capture
    let message = (e instanceof Error ? e.message : String(e)).split(`${resolve(dest)}/`).join("");
    // what the rebuilt module defines instead (its hint, which validate prints): the feedback a generator needs (nu7 #11)
    const defines = isKerncapError(e) && e.code === "E_KERNEL_NOT_FOUND" ? /the rebuilt module defines: (.*?)\.?$/.exec(e.hint ?? "") : null;
    if (defines) message += `; it defines ${defines[1]} (keep the kernel's name, template arguments and parameter list)`;
    // the compiler's diagnostics, structured (nu10 #2): file src/…, as the build read them in the copy
    const diagnostics =
      isKerncapError(e) && e.code === "E_BUILD" && Array.isArray(e.details?.diagnostics)
        ? (e.details.diagnostics as Diagnostic[]).slice(0, RECORD_DIAGNOSTICS_MAX)
        : undefined;
    // the kernel under another parameter list is E_PARAM_LAYOUT from the module check itself (src/frontends/cuda/repro.ts checkRebuiltModule): layout-change
    return {
      failed: {
        verdict: buildVerdict(e),
        code: isKerncapError(e) ? e.code : "E_INTERNAL",
        reason: message,
        seconds: seconds(),
        ...(diagnostics ? { diagnostics } : {}),
        ...(isKerncapError(e) && e.details?.timedOut === true ? { timedOut: true as const } : {}),
      },
    };
  }
}

/**
 * The build pool: `build(item, i)` for every item, at most `jobs` at once, in order of the list;
 * no item is started once `stopped()` says so. Used by kerncap eval (each candidate) and kerncap
 * tune's configs (src/tune/evaluate.ts, through eval's loop).
 * @throws the first error a build throws (the others still running finish first)
 */
export async function buildPool<T>(
  items: readonly T[],
  jobs: number,
  build: (item: T, i: number) => Promise<void>,
  stopped: () => boolean = () => false,
): Promise<void> {
  let next = 0;
  const builder = async () => {
    for (let i = next++; i < items.length && !stopped(); i = next++) await build(items[i]!, i);
  };
  const all = await Promise.allSettled(Array.from({ length: Math.max(1, Math.min(jobs, items.length)) }, builder));
  const failed = all.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed) throw failed.reason;
}
