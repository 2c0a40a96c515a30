/**
 * A small ELF64 little-endian reader over a Uint8Array: header, section headers with names,
 * symbols with names, section bytes. Enough for cubins (EM_CUDA), AMDGPU code objects and host
 * objects; no program headers, no relocation, no big-endian or ELF32.
 *
 * Field offsets follow the System V gABI ELF64 layout (Elf64_Ehdr, Elf64_Shdr, Elf64_Sym).
 * 64-bit fields are returned as JS numbers; a value above 2^53 throws (no code object is that big).
 * Every read is bounds-checked; malformed input throws KerncapError("E_ELF") naming the field and
 * the byte offset.
 */
import { KerncapError } from "../errors.ts";

export const EM_CUDA = 190;
export const EM_AMDGPU = 224;

export const SHT_NULL = 0;
export const SHT_SYMTAB = 2;
export const SHT_STRTAB = 3;
export const SHT_NOBITS = 8;
export const SHT_SYMTAB_SHNDX = 18;

export const STT_NOTYPE = 0;
export const STT_OBJECT = 1;
export const STT_FUNC = 2;
export const STT_SECTION = 3;

export const STB_LOCAL = 0;
export const STB_GLOBAL = 1;
export const STB_WEAK = 2;

/** Special section indices (gABI). */
export const SHN_UNDEF = 0;
export const SHN_LORESERVE = 0xff00;
export const SHN_XINDEX = 0xffff;

export interface ElfHeader {
  /** e_ident[EI_OSABI]. */
  osabi: number;
  /** e_ident[EI_ABIVERSION]. */
  abiVersion: number;
  /** e_type (1 REL, 2 EXEC, 3 DYN). */
  type: number;
  /** e_machine (EM_CUDA 190, EM_AMDGPU 224, EM_X86_64 62, ...). */
  machine: number;
  /** e_flags: processor-specific (the SM or gfx target for GPU code objects). */
  flags: number;
  /** e_shoff: byte offset of the section header table. */
  shoff: number;
  /** Number of section headers (e_shnum, or sh_size of section 0 when e_shnum is 0). */
  shnum: number;
  /** Index of the section-name string table (e_shstrndx, or sh_link of section 0 when SHN_XINDEX). */
  shstrndx: number;
}

export interface ElfSection {
  index: number;
  name: string;
  /** sh_type. */
  type: number;
  /** sh_flags. */
  flags: number;
  /** sh_offset: byte offset in the file. */
  offset: number;
  /** sh_size in bytes (logical size; a SHT_NOBITS section occupies no file bytes). */
  size: number;
  link: number;
  info: number;
  addralign: number;
  entsize: number;
}

export interface ElfSymbol {
  index: number;
  name: string;
  /** st_value: for relocatable-style code objects such as cubins, the offset in its section. */
  value: number;
  /** st_size in bytes. */
  size: number;
  /** ELF64_ST_TYPE(st_info): STT_*. */
  type: number;
  /** ELF64_ST_BIND(st_info): STB_*. */
  binding: number;
  /** st_other: visibility in the low 2 bits, processor-specific bits above. */
  other: number;
  /** Section index (resolved through SHT_SYMTAB_SHNDX when st_shndx is SHN_XINDEX). */
  shndx: number;
  /** Name of the section at shndx, or "" for SHN_UNDEF and reserved indices. */
  section: string;
}

export interface ElfFile {
  bytes: Uint8Array;
  header: ElfHeader;
  sections: ElfSection[];
  /** First section with this name, or undefined. */
  section(name: string): ElfSection | undefined;
  /** Bytes of a section (a view, not a copy); empty for SHT_NOBITS. Throws if the name is absent. */
  sectionBytes(section: string | ElfSection): Uint8Array;
  /** Entries of the first SHT_SYMTAB section (index 0, the null symbol, included), parsed on first use. */
  symbols(): ElfSymbol[];
}

const ELF_MAGIC = [0x7f, 0x45, 0x4c, 0x46];

/** True when the bytes start with the ELF magic (any class or byte order). */
export function isElf(bytes: Uint8Array): boolean {
  return bytes.length >= 4 && ELF_MAGIC.every((b, i) => bytes[i] === b);
}

function elfError(what: string, hint?: string): KerncapError {
  return new KerncapError("E_ELF", `malformed ELF: ${what}`, {
    hint: hint ?? "the code object is truncated or not what it claims to be; capture it again",
  });
}

/** Bounds-checked little-endian reads over one buffer; `what` names the field in errors. */
class Reader {
  readonly view: DataView;
  constructor(readonly bytes: Uint8Array) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }
  check(offset: number, len: number, what: string): void {
    if (offset < 0 || len < 0 || offset + len > this.bytes.length) {
      throw elfError(`${what} at offset ${offset} (+${len} bytes) runs past the end of the ${this.bytes.length}-byte image`);
    }
  }
  u8(o: number, what: string): number {
    this.check(o, 1, what);
    return this.bytes[o]!;
  }
  u16(o: number, what: string): number {
    this.check(o, 2, what);
    return this.view.getUint16(o, true);
  }
  u32(o: number, what: string): number {
    this.check(o, 4, what);
    return this.view.getUint32(o, true);
  }
  u64(o: number, what: string): number {
    this.check(o, 8, what);
    const v = this.view.getBigUint64(o, true);
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw elfError(`${what} at offset ${o} is too large (${v})`);
    return Number(v);
  }
  cstring(o: number, end: number, what: string): string {
    if (o < 0 || o >= end) throw elfError(`${what}: string offset ${o} outside its table`);
    let e = o;
    while (e < end && this.bytes[e] !== 0) e++;
    if (e >= end) throw elfError(`${what}: string at offset ${o} has no terminating NUL`);
    return new TextDecoder().decode(this.bytes.subarray(o, e));
  }
}

/**
 * Parse the ELF64 little-endian header and section table. Throws KerncapError("E_ELF") for a
 * missing magic, ELF32, big-endian, or any table that runs past the end of `bytes`.
 */
export function parseElf(bytes: Uint8Array): ElfFile {
  const r = new Reader(bytes);
  if (bytes.length < 64) throw elfError(`truncated at offset ${bytes.length}: the ELF64 header needs 64 bytes`);
  if (!isElf(bytes)) throw elfError("no ELF magic (7f 45 4c 46) at offset 0", "expected a cubin, an AMDGPU code object or a host object");
  if (bytes[4] !== 2) throw elfError(`EI_CLASS is ${bytes[4]}, only ELF64 (2) is supported`);
  if (bytes[5] !== 1) throw elfError(`EI_DATA is ${bytes[5]}, only little-endian (1) is supported`);

  const shoff = r.u64(0x28, "e_shoff");
  const shentsize = r.u16(0x3a, "e_shentsize");
  let shnum = r.u16(0x3c, "e_shnum");
  let shstrndx = r.u16(0x3e, "e_shstrndx");
  const header: ElfHeader = {
    osabi: bytes[7]!,
    abiVersion: bytes[8]!,
    type: r.u16(0x10, "e_type"),
    machine: r.u16(0x12, "e_machine"),
    flags: r.u32(0x30, "e_flags"),
    shoff,
    shnum,
    shstrndx,
  };
  if (shoff === 0) return makeFile(r, header, []);
  if (shentsize !== 64) throw elfError(`e_shentsize is ${shentsize}, expected 64 for ELF64`);
  // gABI extended numbering: the real counts live in section 0 when they do not fit 16 bits.
  if (shnum === 0) shnum = r.u64(shoff + 0x20, "section 0 sh_size (extended e_shnum)");
  if (shstrndx === SHN_XINDEX) shstrndx = r.u32(shoff + 0x28, "section 0 sh_link (extended e_shstrndx)");
  header.shnum = shnum;
  header.shstrndx = shstrndx;
  r.check(shoff, shnum * 64, `section header table (${shnum} entries)`);

  const sections: ElfSection[] = [];
  for (let i = 0; i < shnum; i++) {
    const o = shoff + i * 64;
    const s: ElfSection = {
      index: i,
      name: "",
      type: r.u32(o + 4, `section ${i} sh_type`),
      flags: r.u64(o + 8, `section ${i} sh_flags`),
      offset: r.u64(o + 0x18, `section ${i} sh_offset`),
      size: r.u64(o + 0x20, `section ${i} sh_size`),
      link: r.u32(o + 0x28, `section ${i} sh_link`),
      info: r.u32(o + 0x2c, `section ${i} sh_info`),
      addralign: r.u64(o + 0x30, `section ${i} sh_addralign`),
      entsize: r.u64(o + 0x38, `section ${i} sh_entsize`),
    };
    if (s.type !== SHT_NOBITS && s.type !== SHT_NULL) r.check(s.offset, s.size, `section ${i} contents`);
    sections.push(s);
  }
  if (shstrndx !== 0) {
    const strtab = sections[shstrndx];
    if (!strtab) throw elfError(`e_shstrndx ${shstrndx} is not a section (there are ${shnum})`);
    const end = strtab.offset + strtab.size;
    for (let i = 0; i < shnum; i++) {
      const nameOff = r.u32(shoff + i * 64, `section ${i} sh_name`);
      sections[i]!.name = r.cstring(strtab.offset + nameOff, end, `section ${i} name`);
    }
  }
  return makeFile(r, header, sections);
}

function makeFile(r: Reader, header: ElfHeader, sections: ElfSection[]): ElfFile {
  let symbols: ElfSymbol[] | undefined;
  const byName = new Map<string, ElfSection>();
  for (const s of sections) if (!byName.has(s.name)) byName.set(s.name, s);
  const sectionBytes = (sec: string | ElfSection): Uint8Array => {
    const s = typeof sec === "string" ? byName.get(sec) : sec;
    if (!s) throw new KerncapError("E_ELF", `no section named ${sec} in the code object`);
    if (s.type === SHT_NOBITS) return new Uint8Array(0);
    return r.bytes.subarray(s.offset, s.offset + s.size);
  };
  return {
    bytes: r.bytes,
    header,
    sections,
    section: (name) => byName.get(name),
    sectionBytes,
    symbols: () => (symbols ??= readSymbols(r, sections)),
  };
}

function readSymbols(r: Reader, sections: ElfSection[]): ElfSymbol[] {
  const symtab = sections.find((s) => s.type === SHT_SYMTAB);
  if (!symtab) return [];
  if (symtab.entsize !== 24) throw elfError(`symbol table entsize is ${symtab.entsize}, expected 24`);
  const strtab = sections[symtab.link];
  if (!strtab) throw elfError(`symbol table sh_link ${symtab.link} is not a section`);
  const shndxTab = sections.find((s) => s.type === SHT_SYMTAB_SHNDX && s.link === symtab.index);
  const strEnd = strtab.offset + strtab.size;
  const out: ElfSymbol[] = [];
  const count = Math.floor(symtab.size / 24);
  for (let i = 0; i < count; i++) {
    const o = symtab.offset + i * 24;
    const info = r.u8(o + 4, `symbol ${i} st_info`);
    const rawShndx = r.u16(o + 6, `symbol ${i} st_shndx`);
    let shndx = rawShndx;
    if (rawShndx === SHN_XINDEX && shndxTab) shndx = r.u32(shndxTab.offset + i * 4, `symbol ${i} extended section index`);
    // SHN_ABS, SHN_COMMON and other reserved indices name no section.
    const reserved = rawShndx === SHN_UNDEF || (rawShndx >= SHN_LORESERVE && shndx === rawShndx);
    const nameOff = r.u32(o, `symbol ${i} st_name`);
    out.push({
      index: i,
      name: nameOff === 0 ? "" : r.cstring(strtab.offset + nameOff, strEnd, `symbol ${i} name`),
      value: r.u64(o + 8, `symbol ${i} st_value`),
      size: r.u64(o + 16, `symbol ${i} st_size`),
      type: info & 0xf,
      binding: info >> 4,
      other: r.u8(o + 5, `symbol ${i} st_other`),
      shndx,
      section: reserved ? "" : (sections[shndx]?.name ?? ""),
    });
  }
  return out;
}
