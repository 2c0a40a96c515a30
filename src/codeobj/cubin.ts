/**
 * Readers for NVIDIA cubins (ELF64, e_machine EM_CUDA = 190): target SM, kernel (entry) symbols,
 * kernel parameter layout from `.nv.info.<kernel>`, and module-scope variables.
 *
 * NVIDIA does not document the cubin format. Each fact below names its source: LLVM's
 * `llvm/include/llvm/BinaryFormat/ELF.h` (EF_CUDA_* constants), the attribute names that
 * `cuobjdump -elf` prints (EIATTR_* / EIFMT_*, numbered as in public decoders such as
 * "Decoding CUDA Binary", Hayes et al. 2019), or what nvcc 13.0 (V13.0.88) writes, observed on
 * cubins built for sm_75 … sm_121a (see cubin.test.ts, which rebuilds and re-checks them).
 */
import { KerncapError } from "../errors.ts";
import { EM_CUDA, type ElfFile, parseElf, STT_FUNC, STT_OBJECT } from "./elf.ts";

/** A cubin given as bytes or already parsed. */
export type CubinInput = Uint8Array | ElfFile;

function asCubin(input: CubinInput): ElfFile {
  const elf = input instanceof Uint8Array ? parseElf(input) : input;
  if (elf.header.machine !== EM_CUDA) {
    throw new KerncapError("E_CUBIN", `not a cubin: ELF e_machine is ${elf.header.machine}, expected EM_CUDA (190)`, {
      hint: "pass the device code object (cubin), not a host object or an AMDGPU code object",
    });
  }
  return elf;
}

// ───────────────────────────── target architecture ─────────────────────────────

/** e_ident[EI_ABIVERSION] values (LLVM ELF.h ELFABIVERSION_CUDA_V1 / _V2). */
const ELFABIVERSION_CUDA_V1 = 7;
const ELFABIVERSION_CUDA_V2 = 8;
/** V1 layout: SM number in e_flags bits 0-7 (LLVM EF_CUDA_SM); sm_XXa flag EF_CUDA_ACCELERATORS_V1. */
const EF_CUDA_SM = 0xff;
const EF_CUDA_ACCELERATORS_V1 = 0x800;
/** V2 layout: SM number in bits 8-15 (LLVM EF_CUDA_SM_MASK / EF_CUDA_SM_OFFSET); EF_CUDA_ACCELERATORS = 0x8. */
const EF_CUDA_SM_MASK = 0xff00;
const EF_CUDA_SM_OFFSET = 8;
const EF_CUDA_ACCELERATORS = 0x8;

/**
 * `.nv.compat` attribute 9: 1 for an arch-specific (`sm_XXa`) cubin, 0 otherwise. Observed with
 * nvcc 13.0: sm_90a and sm_100a cubins differ from sm_90 / sm_100 only there (and in the ptxas
 * command line); their e_flags are identical, EF_CUDA_ACCELERATORS included (clear).
 */
const COMPAT_ATTR_ARCH_SPECIFIC = 9;

/** SM number and variant suffix of a cubin. */
export interface CubinTarget {
  /** major*10 + minor, e.g. 90 for sm_90, 100 for sm_100, 121 for sm_121. */
  sm: number;
  /** "" (plain), "a" (arch-specific, runs only on exactly this SM) or "f" (family-specific). */
  variant: "" | "a" | "f";
  /** The e_flags layout that held the SM: "v1" (CUDA <= 12, EI_ABIVERSION 7) or "v2" (CUDA 13, EI_ABIVERSION 8). */
  layout: "v1" | "v2";
}

/**
 * The target of a cubin, from its ELF header.
 *
 * - SM number: e_flags. CUDA 13 (EI_ABIVERSION 8, EI_OSABI 0x41) keeps it in bits 8-15
 *   (0x06005a04 for sm_90, observed); CUDA <= 12 (EI_ABIVERSION 7, EI_OSABI 0x33) in bits 0-7,
 *   where bits 8-11 are the texture-mode / 64-bit flags (LLVM ELF.h; not re-checked here, no
 *   CUDA 12 toolchain). An unknown ABI version is decoded by value: a low byte in 20..90 (the SM
 *   numbers the old layout assigned) means the old layout.
 * - "a": `.nv.compat` attribute 9 = 1 (observed, nvcc 13), or the e_flags accelerator bit
 *   (EF_CUDA_ACCELERATORS_V1 0x800 in the old layout, EF_CUDA_ACCELERATORS 0x8 in the new; LLVM).
 * - "f": nothing in the ELF marks a family-specific cubin (sm_100f and sm_100 cubins differ only in
 *   the ptxas command line, observed); it is read from `.note.nv.tkinfo`'s recorded `-arch sm_XXXf`
 *   when that names the same SM. The fatbin entry header carries it reliably (see fatbin.ts).
 */
export function cubinTarget(input: CubinInput): CubinTarget {
  const elf = asCubin(input);
  const { flags, abiVersion } = elf.header;
  const low = flags & EF_CUDA_SM;
  const v1 = abiVersion === ELFABIVERSION_CUDA_V1 || (abiVersion !== ELFABIVERSION_CUDA_V2 && low >= 20 && low <= 90);
  const sm = v1 ? low : (flags & EF_CUDA_SM_MASK) >>> EF_CUDA_SM_OFFSET;
  if (sm === 0) throw new KerncapError("E_CUBIN", `cubin e_flags 0x${flags.toString(16)} name no SM (EI_ABIVERSION ${abiVersion})`);
  let variant: CubinTarget["variant"] = "";
  const accelFlag = v1 ? flags & EF_CUDA_ACCELERATORS_V1 : flags & EF_CUDA_ACCELERATORS;
  const compat = elf.section(".nv.compat");
  const compatArch = compat ? parseNvInfo(elf.sectionBytes(compat)).find((a) => a.attr === COMPAT_ATTR_ARCH_SPECIFIC) : undefined;
  if (accelFlag || compatArch?.value === 1) variant = "a";
  else if (toolArch(elf) === `sm_${sm}f`) variant = "f";
  return { sm, variant, layout: v1 ? "v1" : "v2" };
}

/** The cubin's target as nvcc spells it: "sm_90", "sm_90a", "sm_100f". Source: see cubinTarget. */
export function cubinArch(input: CubinInput): string {
  const t = cubinTarget(input);
  return `sm_${t.sm}${t.variant}`;
}

/**
 * What ptxas recorded of itself in `.note.nv.tkinfo`, or undefined. Note layout (observed,
 * matches public decoders): ELF note header, name "NVIDIA Corp", then a descriptor of six u32
 * (note version, then offsets of object file name, tool name, tool version, tool branch, tool
 * arguments) relative to the NUL-separated strings that start 24 bytes into the descriptor.
 */
function toolInfo(elf: ElfFile): { name: string; version: string; args: string } | undefined {
  const sec = elf.section(".note.nv.tkinfo");
  if (!sec) return undefined;
  const b = elf.sectionBytes(sec);
  if (b.length < 12) return undefined;
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const namesz = dv.getUint32(0, true);
  const descsz = dv.getUint32(4, true);
  const desc = 12 + ((namesz + 3) & ~3);
  if (desc + 24 > b.length || desc + descsz > b.length) return undefined;
  const strings = b.subarray(desc + 24, desc + descsz);
  const at = (field: number): string => {
    const off = dv.getUint32(desc + field, true);
    if (off >= strings.length) return "";
    const end = strings.indexOf(0, off);
    return new TextDecoder().decode(strings.subarray(off, end < 0 ? strings.length : end));
  };
  return { name: at(8), version: at(12), args: at(20) };
}

/** The `-arch sm_XX` that ptxas recorded in `.note.nv.tkinfo`, or undefined. */
function toolArch(elf: ElfFile): string | undefined {
  return /-arch[= ]+(sm_\d+[af]?)/.exec(toolInfo(elf)?.args ?? "")?.[1];
}

/**
 * The tool that assembled the cubin, as `.note.nv.tkinfo` records it (e.g. "ptxas Cuda compilation
 * tools, release 13.0, V13.0.48"), or undefined when the note is absent or unreadable.
 */
export function cubinToolVersion(input: CubinInput): string | undefined {
  try {
    const t = toolInfo(asCubin(input));
    const text = [t?.name, t?.version].filter(Boolean).join(" ").trim();
    return text || undefined;
  } catch {
    return undefined;
  }
}

/**
 * The CUDA toolkit release whose ptxas compiled the cubin ("13.0.88"), from `.note.nv.tkinfo`'s
 * tool version ("Cuda compilation tools, release 13.0, V13.0.88", observed), or undefined.
 */
export function cubinToolkit(input: CubinInput): string | undefined {
  return /\bV(\d+(?:\.\d+)+)\b/.exec(toolInfo(asCubin(input))?.version ?? "")?.[1];
}

// ───────────────────────────── .nv.info attributes ─────────────────────────────

/** EIFMT_* record formats (cuobjdump names; numbering as in public decoders). */
export const EIFMT_NVAL = 1;
export const EIFMT_BVAL = 2;
export const EIFMT_HVAL = 3;
export const EIFMT_SVAL = 4;

/** EIATTR_* attribute ids used here (cuobjdump names; numbering as in public decoders, checked against nvcc 13 output). */
export const EIATTR_PARAM_CBANK = 0x0a;
export const EIATTR_KPARAM_INFO = 0x17;
export const EIATTR_CBANK_PARAM_SIZE = 0x19;
/**
 * Observed with nvcc 13.0 in place of KPARAM_INFO when a kernel's parameters exceed 16383 bytes
 * (a 20000-byte struct parameter): same first 8 bytes, then the size as a plain u32. The name is
 * ours (cuobjdump is not available here to print it).
 */
export const EIATTR_KPARAM_INFO_V2 = 0x45;

/** One attribute record of a `.nv.info*` or `.nv.compat` section. */
export interface NvInfoAttr {
  /** EIFMT_*. */
  format: number;
  /** EIATTR_* (or a compat attribute id in `.nv.compat`). */
  attr: number;
  /** NVAL: 0; BVAL/HVAL: the value; SVAL: the payload length in bytes. */
  value: number;
  /** SVAL payload (a view); empty for the other formats. */
  payload: Uint8Array;
}

/**
 * Parse the attribute records of a `.nv.info`, `.nv.info.<kernel>` or `.nv.compat` section.
 * Record encoding (observed, agrees with public decoders): u8 format, u8 attribute, then a u16
 * field: the value for NVAL/BVAL/HVAL (BVAL uses its low byte), or for SVAL the payload length,
 * followed by that many payload bytes. Records are little-endian and packed.
 * Throws KerncapError("E_CUBIN") when a record runs past the section end or has an unknown format.
 */
export function parseNvInfo(section: Uint8Array): NvInfoAttr[] {
  const out: NvInfoAttr[] = [];
  const dv = new DataView(section.buffer, section.byteOffset, section.byteLength);
  let o = 0;
  while (o < section.length) {
    const format = section[o]!;
    // Trailing zero padding (seen at the end of .nv.compat) is not a record.
    if (format === 0) {
      o++;
      continue;
    }
    if (o + 4 > section.length) throw nvInfoError(`record header at offset ${o} truncated`);
    const attr = section[o + 1]!;
    const field = dv.getUint16(o + 2, true);
    o += 4;
    if (format === EIFMT_SVAL) {
      if (o + field > section.length)
        throw nvInfoError(`attribute 0x${attr.toString(16)} payload of ${field} bytes at offset ${o} runs past the section end (${section.length})`);
      out.push({ format, attr, value: field, payload: section.subarray(o, o + field) });
      o += field;
    } else if (format === EIFMT_NVAL || format === EIFMT_BVAL || format === EIFMT_HVAL) {
      out.push({ format, attr, value: format === EIFMT_BVAL ? field & 0xff : format === EIFMT_NVAL ? 0 : field, payload: new Uint8Array(0) });
    } else {
      throw nvInfoError(`unknown record format ${format} at offset ${o - 4}`);
    }
  }
  return out;
}

function nvInfoError(what: string): KerncapError {
  return new KerncapError("E_CUBIN", `malformed .nv.info section: ${what}`, { hint: "the cubin is truncated or from an unsupported toolchain" });
}

// ───────────────────────────── kernels ─────────────────────────────

/** st_other bit that marks a kernel entry (cuobjdump STO_ENTRY; observed: set on every __global__ function, never on device functions). */
const STO_CUDA_ENTRY = 0x10;

/**
 * Mangled names of the kernels (entry functions) in a cubin, in symbol-table order.
 * A kernel is an STT_FUNC symbol whose code is in section `.text.<name>` and that is marked as an
 * entry: st_other bit 0x10, or (older toolchains) a per-kernel parameter bank `.nv.constant0.<name>`.
 * Device functions of a -rdc cubin have their own `.text.<name>` but neither mark.
 */
export function cubinKernels(input: CubinInput): string[] {
  const elf = asCubin(input);
  return elf
    .symbols()
    .filter(
      (s) =>
        s.type === STT_FUNC && s.section === `.text.${s.name}` && ((s.other & STO_CUDA_ENTRY) !== 0 || elf.section(`.nv.constant0.${s.name}`) !== undefined),
    )
    .map((s) => s.name);
}

/** `.nv.info` attribute: a kernel's register count, SVAL payload u32 symbol index, u32 count (cuobjdump's EIATTR_REGCOUNT; observed with nvcc 13). */
export const EIATTR_REGCOUNT = 0x2f;

/**
 * The registers per thread a kernel's code uses (ptxas's "Used N registers", the driver's
 * CU_FUNC_ATTRIBUTE_NUM_REGS): the EIATTR_REGCOUNT record of the cubin's `.nv.info` for the
 * kernel's symbol (nvcc 13: -maxrregcount=24 gives 24 there, observed), else the top byte of its
 * `.text.<kernel>` section's sh_info (older toolchains; 0 in nvcc 13's cubins, which is no count).
 * @returns the count, or undefined when the cubin says none for `kernel`
 * @throws KerncapError E_CUBIN (not a cubin, a malformed .nv.info)
 */
export function cubinKernelRegisters(input: CubinInput, kernel: string): number | undefined {
  const elf = asCubin(input);
  const sym = elf.symbols().find((s) => s.name === kernel && s.type === STT_FUNC);
  const info = elf.section(".nv.info");
  if (sym && info) {
    for (const a of parseNvInfo(elf.sectionBytes(info))) {
      if (a.attr !== EIATTR_REGCOUNT || a.format !== EIFMT_SVAL || a.payload.length < 8) continue;
      const dv = new DataView(a.payload.buffer, a.payload.byteOffset, 8);
      if (dv.getUint32(0, true) === sym.index) return dv.getUint32(4, true);
    }
  }
  const text = elf.section(`.text.${kernel}`);
  const top = text ? text.info >>> 24 : 0;
  return top || undefined;
}

/** `.nv.info` attribute: a kernel's stack frame per thread (bytes), SVAL payload u32 symbol index, u32 size (EIATTR_FRAME_SIZE; ptxas -v's "N bytes stack frame": 400 for a kernel that spilled, observed with nvcc 13). */
export const EIATTR_FRAME_SIZE = 0x11;

/**
 * The bytes of local memory a kernel's thread frame takes (ptxas's "bytes stack frame"), where its
 * spilled registers and local arrays go: the EIATTR_FRAME_SIZE record of `.nv.info` for its symbol.
 * @returns the size, or undefined when the cubin records none for `kernel`
 * @throws KerncapError E_CUBIN (not a cubin, a malformed .nv.info)
 */
export function cubinKernelFrameBytes(input: CubinInput, kernel: string): number | undefined {
  const elf = asCubin(input);
  const sym = elf.symbols().find((s) => s.name === kernel && s.type === STT_FUNC);
  const info = elf.section(".nv.info");
  if (!sym || !info) return undefined;
  for (const a of parseNvInfo(elf.sectionBytes(info))) {
    if (a.attr !== EIATTR_FRAME_SIZE || a.format !== EIFMT_SVAL || a.payload.length < 8) continue;
    const dv = new DataView(a.payload.buffer, a.payload.byteOffset, 8);
    if (dv.getUint32(0, true) === sym.index) return dv.getUint32(4, true);
  }
  return undefined;
}

/**
 * `.nv.info.<kernel>` attribute EIATTR_ANNOTATIONS (0x55, the name in public decoders' tables),
 * SVAL: pairs of u32 (kind, byte offset in `.text.<kernel>`). nvcc 13.0's ptxas writes one of
 * kind 1 at each spill store (STL) and spill load (LDL) it made, and none at a local array's
 * accesses (observed on sm_75 … sm_120: their widths summed give ptxas -v's "bytes spill stores"
 * and "bytes spill loads" exactly; cubin.test.ts checks it against ptxas -v).
 */
export const EIATTR_ANNOTATIONS = 0x55;
const ANNOTATION_SPILL = 1;
/** `.nv.info.<kernel>` attribute: the CUDA API version the kernel was compiled for, SVAL u32 (130 from nvcc 13.0, observed). */
export const EIATTR_CUDA_API_VERSION = 0x37;
/** Volta-and-later SASS (128-bit instructions): opcode in bits 0-11 of the first word (STL 0x387, LDL 0x983), the access width in bits 73-75 (0 u8, 1 s8, 2 u16, 3 s16, 4 32-bit, 5 64-bit, 6 128-bit; observed). */
const OP_STL = 0x387;
const OP_LDL = 0x983;
const WIDTH_BYTES = [1, 1, 2, 2, 4, 8, 16];

/**
 * The bytes of a kernel's spill stores and spill loads (ptxas -v's "N bytes spill stores, M bytes
 * spill loads": the registers ptxas could not keep, stored to the stack frame and read back, each
 * instruction counted once), read from the cubin alone: the widths of the STL/LDL instructions its
 * spill annotations mark (EIATTR_ANNOTATIONS). No spill annotation means no spill where that is
 * certain: a kernel without a stack frame, or a cubin of nvcc 13 or later (EIATTR_CUDA_API_VERSION
 * >= 130), whose ptxas marks every spill.
 * @returns the byte counts, or undefined where the cubin does not say (an older toolchain's cubin
 *   with a stack frame and no annotation; SASS before sm_70; a marked instruction that is no STL/LDL)
 * @throws KerncapError E_CUBIN (not a cubin, a malformed .nv.info)
 */
export function cubinKernelSpills(input: CubinInput, kernel: string): { stores: number; loads: number } | undefined {
  const elf = asCubin(input);
  const text = elf.section(`.text.${kernel}`);
  if (!text || cubinTarget(elf).sm < 70) return undefined;
  const info = elf.section(`.nv.info.${kernel}`);
  const attrs = info ? parseNvInfo(elf.sectionBytes(info)) : [];
  const marked: number[] = [];
  let apiVersion = 0;
  for (const a of attrs) {
    const dv = new DataView(a.payload.buffer, a.payload.byteOffset, a.payload.byteLength);
    if (a.attr === EIATTR_ANNOTATIONS && a.format === EIFMT_SVAL) {
      for (let o = 0; o + 8 <= a.payload.length; o += 8) if (dv.getUint32(o, true) === ANNOTATION_SPILL) marked.push(dv.getUint32(o + 4, true));
    } else if (a.attr === EIATTR_CUDA_API_VERSION && a.format === EIFMT_SVAL && a.payload.length >= 4) apiVersion = dv.getUint32(0, true);
  }
  if (!marked.length) return cubinKernelFrameBytes(elf, kernel) === 0 || apiVersion >= 130 ? { stores: 0, loads: 0 } : undefined;
  const code = elf.sectionBytes(text);
  const dv = new DataView(code.buffer, code.byteOffset, code.byteLength);
  const out = { stores: 0, loads: 0 };
  for (const at of marked) {
    if (at % 16 !== 0 || at + 16 > code.length) return undefined;
    const op = dv.getUint32(at, true) & 0xfff;
    const bytes = WIDTH_BYTES[(dv.getUint32(at + 8, true) >>> 9) & 7];
    if (bytes === undefined || (op !== OP_STL && op !== OP_LDL)) return undefined;
    out[op === OP_STL ? "stores" : "loads"] += bytes;
  }
  return out;
}

// ───────────────────────────── parameter layout ─────────────────────────────

/** One kernel parameter's place in the parameter buffer. */
export interface ParamSlot {
  /** Ordinal: position in the kernel's parameter list, from 0. */
  index: number;
  /** Byte offset in the packed parameter buffer (the one cuLaunchKernel's `extra` passes). */
  offset: number;
  /** Bytes. */
  size: number;
}

export interface KernelParams {
  /** Sorted by index. */
  params: ParamSlot[];
  /**
   * Bytes of the parameter buffer: EIATTR_PARAM_CBANK's size (else EIATTR_CBANK_PARAM_SIZE, else
   * the end of the last parameter; 0 for a kernel without parameters). Not rounded up: nvcc 13
   * reports 89 for a buffer whose last parameter is one byte at offset 88.
   */
  totalBytes: number;
  /** Where the parameters start in constant bank 0 (EIATTR_PARAM_CBANK; 0x210 on sm_90), or undefined. */
  cbankOffset?: number;
}

/**
 * Parameter layout of one kernel, from its `.nv.info.<kernel>` section.
 *
 * - EIATTR_KPARAM_INFO (0x17, SVAL, 12 bytes per parameter): u32 index (0 in every cubin seen),
 *   u16 ordinal, u16 offset in bytes, u32 packed: bits 0-7 pointee log2 alignment, 8-11 space,
 *   12-16 cbank, 17 "is not cbank", 18-31 size in bytes. Field names as cuobjdump prints them
 *   (Index, Ordinal, Offset, Size, Pointee's logAlignment, Space, cbank, Parameter Space); the bit
 *   positions of size were checked against nvcc 13 output for 1- to 128-byte parameters.
 * - EIATTR_KPARAM_INFO_V2 (0x45, SVAL, 12 bytes): same first 8 bytes, then u32 size in bytes
 *   (observed for a 20000-byte parameter).
 * - EIATTR_PARAM_CBANK (0x0a, SVAL, 8 bytes): u32 symbol index of `.nv.constant0.<kernel>`,
 *   u16 offset of the parameters in that bank, u16 total parameter bytes.
 * - EIATTR_CBANK_PARAM_SIZE (0x19, HVAL): total parameter bytes.
 *
 * Throws KerncapError("E_KERNEL_NOT_FOUND") naming the kernels present when `kernel` has no
 * `.nv.info.<kernel>` section.
 */
export function cubinKernelParams(input: CubinInput, kernel: string): KernelParams {
  const elf = asCubin(input);
  const sec = elf.section(`.nv.info.${kernel}`);
  if (!sec) {
    const kernels = cubinKernels(elf);
    throw new KerncapError("E_KERNEL_NOT_FOUND", `kernel ${kernel} is not in this cubin (no .nv.info.${kernel} section)`, {
      hint: kernels.length ? `kernels present: ${kernels.join(", ")}` : "the cubin has no kernels",
    });
  }
  const byIndex = new Map<number, ParamSlot>();
  let cbankSize: number | undefined;
  let cbankOffset: number | undefined;
  let paramSizeAttr: number | undefined;
  for (const a of parseNvInfo(elf.sectionBytes(sec))) {
    const p = a.payload;
    const dv = new DataView(p.buffer, p.byteOffset, p.byteLength);
    if ((a.attr === EIATTR_KPARAM_INFO || a.attr === EIATTR_KPARAM_INFO_V2) && a.format === EIFMT_SVAL) {
      if (p.length < 12) throw nvInfoError(`parameter record of ${p.length} bytes in .nv.info.${kernel} (expected 12)`);
      const index = dv.getUint16(4, true);
      const offset = dv.getUint16(6, true);
      const word = dv.getUint32(8, true);
      const size = a.attr === EIATTR_KPARAM_INFO ? word >>> 18 : word;
      byIndex.set(index, { index, offset, size });
    } else if (a.attr === EIATTR_PARAM_CBANK && a.format === EIFMT_SVAL && p.length >= 8) {
      cbankOffset = dv.getUint16(4, true);
      cbankSize = dv.getUint16(6, true);
    } else if (a.attr === EIATTR_CBANK_PARAM_SIZE && a.format === EIFMT_HVAL) {
      paramSizeAttr = a.value;
    }
  }
  const params = [...byIndex.values()].sort((x, y) => x.index - y.index);
  const end = params.reduce((m, q) => Math.max(m, q.offset + q.size), 0);
  return { params, totalBytes: cbankSize ?? paramSizeAttr ?? end, cbankOffset };
}

/** `[{index, offset, size}]` (bytes) of a kernel's parameters, sorted by index. See cubinKernelParams for the source. */
export function cubinParamLayout(input: CubinInput, kernel: string): ParamSlot[] {
  return cubinKernelParams(input, kernel).params;
}

// ───────────────────────────── module-scope variables ─────────────────────────────

/** STT_LOPROC + 0: the symbol type that -rdc cubins give variables (readelf prints "<processor specific>: 13"). */
const STT_CUDA_OBJECT = 13;
/** st_other bit set on `__managed__` variables (observed in whole-program and -rdc cubins, nvcc 13). */
const STO_CUDA_MANAGED = 0x4;

export interface CubinGlobal {
  /** Symbol name (mangled for C++ variables at namespace scope). */
  name: string;
  /** Bytes (st_size). */
  size: number;
  /** Section: `.nv.global` (zero-initialised __device__/__managed__), `.nv.global.init` (initialised), `.nv.constantN` (__constant__, N != 0). */
  section: string;
  /** Byte offset in that section (st_value). */
  offset: number;
  /** `__managed__` (st_other bit 0x4, observed). */
  managed: boolean;
  /** True when the symbol is visible to other modules (STB_GLOBAL or STB_WEAK; whole-program cubins make variables STB_LOCAL). */
  external: boolean;
}

/**
 * Module-scope variables (`__device__`, `__constant__`, `__managed__`), from the symbol table:
 * STT_OBJECT (or STT_CUDA_OBJECT, -rdc) symbols defined in `.nv.global*` or `.nv.constantN`
 * sections. Constant bank 0 (`.nv.constant0.<kernel>`: kernel parameters and driver data) and
 * compiler-internal symbols (names starting with ".", "__nv" or "$") are excluded, and so are
 * `__shared__` variables (per block, not module memory).
 */
export function cubinGlobals(input: CubinInput): CubinGlobal[] {
  const elf = asCubin(input);
  const out: CubinGlobal[] = [];
  for (const s of elf.symbols()) {
    if (s.type !== STT_OBJECT && s.type !== STT_CUDA_OBJECT) continue;
    if (!s.section || s.name === "" || /^(\.|__nv|\$)/.test(s.name)) continue;
    const isGlobal = s.section === ".nv.global" || s.section.startsWith(".nv.global.");
    const isConst = /^\.nv\.constant\d+$/.test(s.section) && !s.section.startsWith(".nv.constant0");
    if (!isGlobal && !isConst) continue;
    out.push({
      name: s.name,
      size: s.size,
      section: s.section,
      offset: s.value,
      managed: (s.other & STO_CUDA_MANAGED) !== 0,
      external: s.binding !== 0,
    });
  }
  return out;
}
