/**
 * A rebuilt kernel's resources beside the captured module's, read from the modules' ELF (no GPU
 * needed): registers per thread and stack frame bytes per thread (.nv.info, src/codeobj/cubin.ts).
 * validate's report, the watch's lines and eval's rows say them.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { cubinKernelFrameBytes, cubinKernelRegisters } from "../codeobj/cubin.ts";
import { pickCubin } from "../codeobj/fatbin.ts";
import type { Manifest } from "../format/manifest.ts";

/** The kernel's registers and stack frame in a module (a cubin, or a fatbin's cubin for the captured arch); nulls where it cannot be read (a Triton capture's, an AMD code object). */
export function moduleFigures(path: string, m: Pick<Manifest, "kernel" | "device">): { registers: number | null; stackFrameBytes: number | null } {
  try {
    const cubin = pickCubin(new Uint8Array(readFileSync(path)), m.device.arch).cubin;
    return { registers: cubinKernelRegisters(cubin, m.kernel.name) ?? null, stackFrameBytes: cubinKernelFrameBytes(cubin, m.kernel.name) ?? null };
  } catch {
    return { registers: null, stackFrameBytes: null };
  }
}

/**
 * The rebuilt kernel's resources beside the captured module's (moduleFigures of each); null where
 * a module does not say.
 */
export interface ModuleResources {
  registers: number | null;
  stackFrameBytes: number | null;
  captured: { registers: number | null; stackFrameBytes: number | null };
}

/** ModuleResources of `module` (the rebuild) and of the capture's own module (DIR/manifest.module.file). */
export function moduleResources(dir: string, m: Manifest, module: string): ModuleResources {
  return { ...moduleFigures(module, m), captured: moduleFigures(join(dir, m.module.file), m) };
}

/** "40 registers, 0-byte stack frame (captured: 38, 0)", or "" when the rebuilt module says neither. */
export function describeResources(r: ModuleResources): string {
  if (r.registers === null && r.stackFrameBytes === null) return "";
  const own = [r.registers !== null ? `${r.registers} registers` : null, r.stackFrameBytes !== null ? `${r.stackFrameBytes}-byte stack frame` : null]
    .filter(Boolean)
    .join(", ");
  const was =
    r.captured.registers !== null || r.captured.stackFrameBytes !== null
      ? ` (captured: ${r.captured.registers ?? "?"}, ${r.captured.stackFrameBytes ?? "?"})`
      : "";
  return `${own}${was}`;
}
