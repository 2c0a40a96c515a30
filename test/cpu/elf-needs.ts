/**
 * What a shipped ELF binary asks of the dynamic linker: its DT_NEEDED libraries and its symbol
 * version needs (the `.gnu.version_r` section, SHT_GNU_verneed: per needed file, the versions such
 * as GLIBC_2.17 that must exist there). Read over src/codeobj/elf.ts's section table, so a test
 * can hold every binary of a release to the glibc its wheel's tag promises, without objdump.
 *
 * Layouts (gABI / LSB "Symbol Versioning"): Elf64_Verneed {vn_version u16, vn_cnt u16, vn_file u32,
 * vn_aux u32, vn_next u32}, Elf64_Vernaux {vna_hash u32, vna_flags u16, vna_other u16, vna_name
 * u32, vna_next u32}; Elf64_Dyn {d_tag i64, d_val u64}; names are offsets into the section that
 * sh_link names (.dynstr).
 */
import { parseElf, type ElfFile, type ElfSection } from "../../src/codeobj/elf.ts";

const SHT_DYNAMIC = 6;
const SHT_GNU_VERNEED = 0x6ffffffe;
const DT_NEEDED = 1;

export interface ElfNeeds {
  /** e_machine (62 x86_64, 183 aarch64). */
  machine: number;
  /** DT_NEEDED entries, in order. */
  needed: string[];
  /** needed file → the version names asked of it (GLIBC_2.2.5, GLIBC_2.17, ...). */
  versions: Map<string, string[]>;
}

function cstring(bytes: Uint8Array, strtab: ElfSection, off: number): string {
  const start = strtab.offset + off;
  const end = bytes.indexOf(0, start);
  if (off >= strtab.size || end < 0 || end > strtab.offset + strtab.size) throw new Error(`string offset ${off} runs past ${strtab.name}`);
  return new TextDecoder().decode(bytes.subarray(start, end));
}

export function elfNeeds(bytes: Uint8Array): ElfNeeds {
  const elf: ElfFile = parseElf(bytes);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const needed: string[] = [];
  const dyn = elf.sections.find((s) => s.type === SHT_DYNAMIC);
  if (dyn) {
    const str = elf.sections[dyn.link]!;
    for (let o = dyn.offset; o + 16 <= dyn.offset + dyn.size; o += 16) {
      const tag = Number(view.getBigInt64(o, true));
      if (tag === 0) break; // DT_NULL ends the array
      if (tag === DT_NEEDED) needed.push(cstring(bytes, str, Number(view.getBigUint64(o + 8, true))));
    }
  }
  const versions = new Map<string, string[]>();
  const vr = elf.sections.find((s) => s.type === SHT_GNU_VERNEED);
  if (vr) {
    const str = elf.sections[vr.link]!;
    let o = vr.offset;
    for (let n = 0; n < vr.info; n++) {
      // sh_info is the number of Verneed entries
      const cnt = view.getUint16(o + 2, true);
      const file = cstring(bytes, str, view.getUint32(o + 4, true));
      const names: string[] = versions.get(file) ?? [];
      let a = o + view.getUint32(o + 8, true);
      for (let k = 0; k < cnt; k++) {
        names.push(cstring(bytes, str, view.getUint32(a + 8, true)));
        const next = view.getUint32(a + 12, true);
        if (next === 0) break;
        a += next;
      }
      versions.set(file, names);
      const next = view.getUint32(o + 12, true);
      if (next === 0) break;
      o += next;
    }
  }
  return { machine: elf.header.machine, needed, versions };
}

/** The newest GLIBC_2.N asked of any file, as N (GLIBC_2.2.5 counts as 2); 0 when none. */
export function newestGlibcMinor(needs: ElfNeeds): number {
  let max = 0;
  for (const names of needs.versions.values()) {
    for (const v of names) {
      const m = /^GLIBC_2\.(\d+)/.exec(v);
      if (m) max = Math.max(max, Number(m[1]));
    }
  }
  return max;
}
