/**
 * HIP reproducer project: renders templates/hip/ into a capture folder (or any folder).
 *
 * Output: `src/<copy of the kernel's source file and given headers>`, `build.sh` (rebuilds the
 * kernel's code object with hipcc and the captured flags, through a clang VFS overlay that maps each
 * original path to its copy in src/, so the original tree is never touched), `README.md`.
 *
 * Templates: `*.hbs` rendered with an isolated Handlebars (strict, noEscape); other files copied
 * with their mode bits.
 */
import { copyFileSync, existsSync, mkdirSync } from "node:fs";
import { basename, isAbsolute, join, resolve } from "node:path";
import { renderTemplateDir, templatesFolder } from "../templates.ts";
import { HIP_TEMPLATES } from "./templates.ts";
import { shellQuote as shq } from "../../util/shell-quote.ts";
import { KerncapError } from "../../errors.ts";
import { withoutOthersWrite } from "../../format/paths.ts";

export interface HipReproducerOptions {
  /** Folder to render into (created if missing). */
  outDir: string;
  /** Mangled kernel name (the code object's `.name`; the symbol is `<name>.kd`). */
  kernelName: string;
  /** Demangled name for the README; defaults to kernelName. */
  demangledName?: string;
  /** Absolute path of the translation unit that defines the kernel, as the application compiled it. */
  originalSource: string;
  /**
   * Captured compile flags without the source, output, offload arch and -c/-o, e.g.
   * ["-O3", "-I/proj/include", "-DNDEBUG", "-std=c++17"]. Relative -I paths must already be
   * absolute or relative to the original source's folder.
   */
  compileFlags: string[];
  /** Processor or target id, e.g. gfx90a or gfx90a:xnack-. */
  arch: string;
  /** Further files (headers) to copy into src/ and overlay, as absolute original paths. */
  extraSources?: string[];
  /** Template folder; defaults to templates/hip beside this source tree. */
  templateDir?: string;
}

export interface HipReproducer {
  outDir: string;
  /** Absolute path of the rendered build.sh. */
  buildScript: string;
  /** Paths written, relative to outDir. */
  files: string[];
  /** The overlay mapping: original absolute path → path relative to src/. */
  overlay: { original: string; copy: string }[];
}

/**
 * Render the HIP reproducer into opts.outDir.
 * @throws KerncapError E_REPRO when the original source is missing, not absolute, or the template
 *   folder is absent.
 */
export function renderHipReproducer(opts: HipReproducerOptions): HipReproducer {
  const templateDir = opts.templateDir ?? templatesFolder("hip", HIP_TEMPLATES);
  if (!existsSync(templateDir)) {
    throw new KerncapError("E_REPRO", `HIP template folder not found: ${templateDir}`);
  }
  for (const p of [opts.originalSource, ...(opts.extraSources ?? [])]) {
    if (!isAbsolute(p)) throw new KerncapError("E_REPRO", `source path must be absolute: ${p}`);
    if (!existsSync(p)) {
      throw new KerncapError("E_REPRO", `kernel source not found: ${p}`, {
        hint: "Pass --source-root or run kerncap on the machine that built the application.",
      });
    }
  }
  const outDir = resolve(opts.outDir);
  mkdirSync(join(outDir, "src"), { recursive: true });

  const overlay: HipReproducer["overlay"] = [];
  const taken = new Set<string>();
  for (const original of [opts.originalSource, ...(opts.extraSources ?? [])]) {
    let copy = basename(original);
    for (let i = 1; taken.has(copy); i++) copy = `${i}-${basename(original)}`;
    taken.add(copy);
    copyFileSync(original, join(outDir, "src", copy));
    overlay.push({ original, copy });
  }
  withoutOthersWrite(join(outDir, "src")); // a project's 0664 sources: no group write in the capture (else it counts as received)
  const files = overlay.map((o) => `src/${o.copy}`);

  const ctx = {
    kernelName: opts.kernelName,
    kernelDisplayName: opts.demangledName ?? opts.kernelName,
    originalSource: opts.originalSource,
    sourceCopy: overlay[0]!.copy,
    arch: opts.arch,
    flags: opts.compileFlags.map(shq).join(" "),
    files: overlay,
  };
  files.push(...renderTemplateDir(templateDir, outDir, ctx));
  return { outDir, buildScript: join(outDir, "build.sh"), files, overlay };
}
