/**
 * A rebuilt kernel's resources beside the captured module's, read from the modules' ELF (no GPU
 * needed, no cuobjdump): registers per thread and stack frame bytes per thread (.nv.info), the
 * bytes of its spill stores and loads (its spill annotations: src/codeobj/cubin.ts
 * cubinKernelSpills) and the CUDA toolkit whose ptxas compiled it (.note.nv.tkinfo).
 * validate's report, the watch's lines and eval's rows say them.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { cubinKernelFrameBytes, cubinKernelRegisters, cubinKernelSpills, cubinToolkit } from "../codeobj/cubin.ts";
import { pickCubin } from "../codeobj/fatbin.ts";
import type { Manifest } from "../format/manifest.ts";

/**
 * One module's figures for the kernel: registers per thread, stack frame bytes per thread, bytes
 * of spill stores and spill loads (ptxas -v's), the toolkit release ("13.0.88"); null where the
 * module does not say.
 */
export interface ModuleFigures {
  registers: number | null;
  stackFrameBytes: number | null;
  spillStoreBytes: number | null;
  spillLoadBytes: number | null;
  toolkit: string | null;
}

const NONE: ModuleFigures = { registers: null, stackFrameBytes: null, spillStoreBytes: null, spillLoadBytes: null, toolkit: null };

/** The kernel's ModuleFigures in a module (a cubin, or a fatbin's cubin for the captured arch); nulls where it cannot be read (a Triton capture's PTX, an AMD code object). */
export function moduleFigures(path: string, m: Pick<Manifest, "kernel" | "device">): ModuleFigures {
  let cubin: Uint8Array;
  try {
    cubin = pickCubin(new Uint8Array(readFileSync(path)), m.device.arch).cubin;
  } catch {
    return NONE;
  }
  // each figure on its own: a toolchain that writes one attribute differently loses that one only
  const read = <T>(f: () => T | undefined): T | null => {
    try {
      return f() ?? null;
    } catch {
      return null;
    }
  };
  const spills = read(() => cubinKernelSpills(cubin, m.kernel.name));
  return {
    registers: read(() => cubinKernelRegisters(cubin, m.kernel.name)),
    stackFrameBytes: read(() => cubinKernelFrameBytes(cubin, m.kernel.name)),
    spillStoreBytes: spills?.stores ?? null,
    spillLoadBytes: spills?.loads ?? null,
    toolkit: read(() => cubinToolkit(cubin)),
  };
}

/**
 * The rebuilt kernel's resources beside the captured module's (moduleFigures of each); null where
 * a module does not say.
 */
export interface ModuleResources extends ModuleFigures {
  captured: ModuleFigures;
}

/** ModuleResources of `module` (the rebuild) and of the capture's own module (DIR/manifest.module.file). */
export function moduleResources(dir: string, m: Manifest, module: string): ModuleResources {
  return { ...moduleFigures(module, m), captured: moduleFigures(join(dir, m.module.file), m) };
}

/** "no spill", "1024 bytes spill stores, 1028 bytes spill loads" (ptxas -v's words), or null when unknown. */
function spillText(f: Pick<ModuleFigures, "spillStoreBytes" | "spillLoadBytes">): string | null {
  if (f.spillStoreBytes === null || f.spillLoadBytes === null) return null;
  return f.spillStoreBytes || f.spillLoadBytes ? `${f.spillStoreBytes} bytes spill stores, ${f.spillLoadBytes} bytes spill loads` : "no spill";
}

/** A module's figures in words: "40 registers, 0-byte stack frame, no spill" ("?" for an unknown register count or frame, the spills left out when unknown). */
function figuresText(f: ModuleFigures): string {
  return [`${f.registers ?? "?"} registers`, `${f.stackFrameBytes ?? "?"}-byte stack frame`, spillText(f)].filter(Boolean).join(", ");
}

/**
 * "40 registers, 0-byte stack frame, no spill (captured: 38 registers, 0-byte stack frame, no
 * spill)", the captured module's toolkit added when it is not the rebuild's; "" when the rebuilt
 * module says neither registers nor frame.
 */
export function describeResources(r: ModuleResources): string {
  if (r.registers === null && r.stackFrameBytes === null) return "";
  const c = r.captured;
  const known = c.registers !== null || c.stackFrameBytes !== null;
  const otherToolkit = c.toolkit !== null && r.toolkit !== null && c.toolkit !== r.toolkit ? `, CUDA ${c.toolkit}` : "";
  return `${figuresText(r)}${known ? ` (captured: ${figuresText(c)}${otherToolkit})` : ""}`;
}
