/**
 * Code object readers: what kind of module image a byte string is, which GPU archs it targets and
 * which kernels it holds. NVIDIA formats in elf.ts / cubin.ts / fatbin.ts; AMDGPU in amdgpu*.ts.
 */
import { KerncapError } from "../errors.ts";
import { cubinArch, cubinKernels } from "./cubin.ts";
import { EM_AMDGPU, EM_CUDA, isElf, parseElf } from "./elf.ts";
import { fatbinEntries, isFatbin } from "./fatbin.ts";

export * from "./cubin.ts";
export * from "./elf.ts";
export * from "./fatbin.ts";

export interface ModuleDescription {
  /**
   * cubin: ELF with e_machine EM_CUDA (190); hsaco: ELF with EM_AMDGPU (224); fatbin: container
   * magic 0xBA55ED50; ptx: text starting with a `//` comment or `.version`; elf: any other ELF
   * (a host object or executable; archs/kernels come from its `.nv_fatbin` section if any).
   */
  kind: "cubin" | "fatbin" | "ptx" | "hsaco" | "elf";
  /**
   * Targets in nvcc spelling: cubin "sm_90a" (e_flags, see cubinArch); fatbin every entry's arch,
   * cubins "sm_XX" and PTX "compute_XX", in entry order, without repeats; ptx the `.target` line.
   * Empty for hsaco (read its metadata with the amdgpu readers).
   */
  archs: string[];
  /** Mangled kernel names: cubin symbols; fatbin those of its first cubin entry; ptx `.entry` names. */
  kernels?: string[];
}

/**
 * Sniff a module image and describe it. Throws KerncapError("E_MODULE_KIND") when the bytes are
 * none of the known kinds, and the readers' errors (E_ELF, E_CUBIN, E_FATBIN) when a known kind
 * is malformed.
 */
export function describeModule(bytes: Uint8Array): ModuleDescription {
  if (isFatbin(bytes)) return describeFatbin(bytes, "fatbin");
  if (isElf(bytes)) {
    const elf = parseElf(bytes);
    if (elf.header.machine === EM_CUDA) return { kind: "cubin", archs: [cubinArch(elf)], kernels: cubinKernels(elf) };
    if (elf.header.machine === EM_AMDGPU) return { kind: "hsaco", archs: [] };
    const nv = elf.section(".nv_fatbin");
    return nv ? describeFatbin(elf.sectionBytes(nv), "elf") : { kind: "elf", archs: [] };
  }
  const head = new TextDecoder()
    .decode(bytes.subarray(0, 4096))
    .replace(/^\uFEFF/, "")
    .trimStart();
  if (head.startsWith("//") || head.startsWith(".version")) return describePtx(new TextDecoder().decode(bytes));
  const magic = [...bytes.subarray(0, 4)].map((b) => b.toString(16).padStart(2, "0")).join(" ");
  throw new KerncapError("E_MODULE_KIND", `unknown module image (first bytes ${magic || "none"})`, {
    hint: "expected a cubin or AMDGPU ELF, a fatbin (magic 50 ed 55 ba) or PTX text",
  });
}

function describeFatbin(bytes: Uint8Array, kind: "fatbin" | "elf"): ModuleDescription {
  const entries = fatbinEntries(bytes);
  const firstCubin = entries.find((e) => e.kind === "cubin");
  const firstPtx = entries.find((e) => e.kind === "ptx");
  const kernels = firstCubin ? cubinKernels(firstCubin.bytes()) : firstPtx ? ptxEntries(new TextDecoder().decode(firstPtx.bytes())) : undefined;
  return { kind, archs: [...new Set(entries.map((e) => e.arch))], kernels };
}

function describePtx(text: string): ModuleDescription {
  // `.target sm_90a, debug` → sm_90a; PTX names the virtual arch with sm_ too.
  const target = /^\s*\.target\s+([A-Za-z0-9_]+)/m.exec(text)?.[1];
  return { kind: "ptx", archs: target ? [target] : [], kernels: ptxEntries(text) };
}

/** Names declared with `.entry` (kernels) in PTX text, in order. */
function ptxEntries(text: string): string[] {
  return [...text.matchAll(/^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([A-Za-z_$%.][\w$%.]*)/gm)].map((m) => m[1]!);
}

/**
 * The PTX the driver JIT-compiles when a module with targets `archs` (describeModule's list:
 * sm_XX machine code, compute_XX PTX) is loaded on a GPU of architecture `arch` (sm_XX): the newest
 * PTX not newer than the GPU, when no machine code is for the GPU's own architecture (sm_90a
 * counts for sm_90); undefined when machine code runs, or no PTX can.
 */
export function jitPtx(archs: string[], arch: string): string | undefined {
  const num = (a: string) => Number(/_(\d+)/.exec(a)?.[1] ?? NaN);
  if (archs.some((a) => a.startsWith("sm_") && num(a) === num(arch))) return undefined;
  return archs.filter((a) => a.startsWith("compute_") && num(a) <= num(arch)).sort((a, b) => num(b) - num(a))[0];
}
