/**
 * Triton reproducer project: renders templates/triton/ (embedded in the executable) into a capture
 * folder from manifest.source (./join.ts).
 *
 * Output: `src/<fn>.py` (the kernel and its @triton.jit helpers as a standalone module: the file to
 * edit), `src/original/<file>` (the captured source file, reference), `pinned.json` (signature,
 * constexprs, attrs, compile options, target, Triton version, Python), `repro.py` (compiles exactly
 * that with triton.compile; prints the cubin path last), `build.sh`, `README.md`.
 */
import { jsonText } from "../../escape.ts";
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { TritonSource } from "./join.ts";
import { KerncapError } from "../../errors.ts";
import { withoutOthersWrite } from "../../format/paths.ts";
import { renderTemplateDir, templatesFolder } from "../templates.ts";
import { TRITON_TEMPLATES } from "./templates.ts";

export interface TritonReproducerOptions {
  outDir: string;
  source: TritonSource;
  /** Folder holding the shim's copies of source files (capture's triton-src/), if any. */
  sourceCopies?: string;
  command: string[];
  match: string;
  matchIndex: number;
  device: string;
  /** Dynamic shared memory bytes of the captured launch (repro.py warns when the edit needs more). */
  sharedMemBytes: number;
}

export interface TritonReproducer {
  outDir: string;
  buildScript: string;
  kernelFile: string;
  files: string[];
}

/** The options worth showing: what a Triton user tunes. */
export function pinnedSummary(s: TritonSource): string {
  const consts = s.constexprs.map((c) => `${c.name}=${c.expr ?? "?"}`).join(", ");
  const o = s.options;
  const opts = ["num_warps", "num_stages", "num_ctas", "maxnreg"].filter((k) => o[k] !== undefined && o[k] !== null).map((k) => `${k}=${o[k]}`);
  return [consts, opts.join(", ")].filter(Boolean).join("; ");
}

function autotuneSummary(s: TritonSource): string {
  if (!s.autotune) return "";
  const c = s.autotune.config;
  const kw = Object.entries(c.kwargs).map(([k, v]) => `${k}=${JSON.stringify(v)}`);
  const o = (["num_warps", "num_stages", "num_ctas", "maxnreg"] as const).filter((k) => c[k] !== null && c[k] !== undefined).map((k) => `${k}=${c[k]}`);
  return `${[...kw, ...o].join(", ")} (key ${JSON.stringify(s.autotune.key)}, ${s.autotune.configs} configs)`;
}

/**
 * Render the reproducer.
 * @throws KerncapError E_REPRO when the shim could not rebuild the kernel's source.
 */
export function renderTritonReproducer(o: TritonReproducerOptions): TritonReproducer {
  const s = o.source;
  if (!s.kernelModule) {
    throw new KerncapError("E_REPRO", `the Triton source of ${s.fnName} was not recorded${s.sourceFile ? ` (${s.sourceFile})` : ""}`, {
      hint: "The kernel was compiled from IR or its source was not readable; the capture itself replays with `kerncap replay`.",
    });
  }
  const outDir = resolve(o.outDir);
  mkdirSync(join(outDir, "src"), { recursive: true });
  const kernelFile = `${s.fnName}.py`;
  const header = `# Kernel ${s.qualname} as captured by kerncap from ${s.sourceFile ?? "?"}:${s.sourceLine ?? "?"}\n# (Triton ${s.tritonVersion}). Edit freely; keep the name and the parameters of ${s.fnName}.\n`;
  const unresolved = s.unresolvedGlobals.length
    ? `# Globals that could not be recreated here (define them if the kernel needs them): ${s.unresolvedGlobals.join(", ")}\n`
    : "";
  writeFileSync(join(outDir, "src", kernelFile), header + unresolved + s.kernelModule);
  const files = [`src/${kernelFile}`];
  let originalCopy = "";
  if (s.sourceCopy && o.sourceCopies && existsSync(join(o.sourceCopies, s.sourceCopy))) {
    originalCopy = s.sourceCopy.replace(/^[0-9a-f]{16}-/, "");
    mkdirSync(join(outDir, "src", "original"), { recursive: true });
    copyFileSync(join(o.sourceCopies, s.sourceCopy), join(outDir, "src", "original", originalCopy));
    files.push(`src/original/${originalCopy}`);
  }
  withoutOthersWrite(join(outDir, "src")); // the project's mode kept by a copy, a folder made under run's umask: no group write (else the capture counts as received)
  const pinned = {
    kernelName: s.kernelName,
    fnName: s.fnName,
    kernelFile,
    tritonVersion: s.tritonVersion,
    python: s.python,
    signature: s.signature,
    constexprs: s.constexprs.map(({ path, name, expr, error }) => ({ path, name, ...(expr !== undefined ? { expr } : { error: error ?? "unknown" }) })),
    attrs: s.attrs,
    options: s.options,
    target: s.target,
    capturedSharedBytes: o.sharedMemBytes,
    autotune: s.autotune,
  };
  writeFileSync(join(outDir, "pinned.json"), jsonText(pinned, 2) + "\n");
  files.push("pinned.json");

  const ctx = {
    kernelName: s.kernelName,
    kernelFile,
    tritonVersion: s.tritonVersion,
    python: s.python,
    sourceFile: s.sourceFile ?? "(unknown)",
    originalCopy,
    command: o.command.join(" "),
    match: o.match || ".",
    matchIndex: o.matchIndex,
    device: o.device,
    pinnedSummary: pinnedSummary(s),
    autotuneSummary: autotuneSummary(s),
    numWarps: s.options.num_warps ?? "?",
  };
  files.push(...renderTemplateDir(templatesFolder("triton", TRITON_TEMPLATES), outDir, ctx));
  return { outDir, buildScript: join(outDir, "build.sh"), kernelFile, files };
}
