/**
 * AMDGPU code object reader: the ELF that the HSA loader takes (`.hsaco`), and the clang offload
 * bundle that hipcc wraps it in.
 *
 * Facts and their sources (LLVM AMDGPUUsage, "ELF Code Object" and "Code Object V3+ Metadata"):
 * - e_machine 224 (EM_AMDGPU); EI_OSABI 64 (ELFOSABI_AMDGPU_HSA); EI_ABIVERSION 1..4 = code object
 *   v3..v6.
 * - e_flags: EF_AMDGPU_MACH (low byte) names the processor; bits 8-11 carry xnack/sramecc
 *   (v3: one on/off bit each; v4+: two-bit fields unsupported/any/off/on).
 * - The note NT_AMDGPU_METADATA (type 32, owner "AMDGPU") holds msgpack: `amdhsa.version`
 *   ([1,0] = v3, [1,1] = v4, [1,2] = v5, [1,3] = v6), `amdhsa.target`, `amdhsa.kernels` with the
 *   kernarg layout (`.args`: offset and size in bytes, value kind, address space) and resources.
 * - Clang offload bundle: magic `__CLANG_OFFLOAD_BUNDLE__`, u64 entry count, then per entry u64
 *   offset, u64 size, u64 id length and the id (`hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-`).
 *
 * Pure functions over bytes; no native library involved.
 */
import { decode } from "@msgpack/msgpack";
import { KerncapError } from "../errors.ts";

export const EM_AMDGPU = 224;
export const NT_AMDGPU_METADATA = 32;
export const OFFLOAD_BUNDLE_MAGIC = "__CLANG_OFFLOAD_BUNDLE__";

/** EF_AMDGPU_MACH values (LLVM BinaryFormat/ELF.h). */
const MACH: Record<number, string> = {
  0x20: "gfx600",
  0x21: "gfx601",
  0x22: "gfx700",
  0x23: "gfx701",
  0x24: "gfx702",
  0x25: "gfx703",
  0x26: "gfx704",
  0x28: "gfx801",
  0x29: "gfx802",
  0x2a: "gfx803",
  0x2b: "gfx810",
  0x2c: "gfx900",
  0x2d: "gfx902",
  0x2e: "gfx904",
  0x2f: "gfx906",
  0x30: "gfx908",
  0x31: "gfx909",
  0x32: "gfx90c",
  0x33: "gfx1010",
  0x34: "gfx1011",
  0x35: "gfx1012",
  0x36: "gfx1030",
  0x37: "gfx1031",
  0x38: "gfx1032",
  0x39: "gfx1033",
  0x3a: "gfx602",
  0x3b: "gfx705",
  0x3c: "gfx805",
  0x3d: "gfx1035",
  0x3e: "gfx1034",
  0x3f: "gfx90a",
  0x40: "gfx940",
  0x41: "gfx1100",
  0x42: "gfx1013",
  0x43: "gfx1150",
  0x44: "gfx1103",
  0x45: "gfx1036",
  0x46: "gfx1101",
  0x47: "gfx1102",
  0x48: "gfx1200",
  0x4a: "gfx1151",
  0x4b: "gfx941",
  0x4c: "gfx942",
  0x4e: "gfx1201",
  0x4f: "gfx950",
};

export type FeatureSetting = "unsupported" | "any" | "off" | "on";

export interface AmdgpuKernelArg {
  /** Byte offset in the kernarg segment. */
  offset: number;
  /** Bytes. */
  size: number;
  /** `.value_kind`: by_value, global_buffer, dynamic_shared_pointer, hidden_block_count_x, ... */
  valueKind: string;
  /** `.address_space` for pointers: global, constant, local, private, generic, region. */
  addressSpace?: string;
  name?: string;
  typeName?: string;
  /** True for the `hidden_*` kinds the runtime fills (implicit kernel arguments). */
  hidden: boolean;
}

export interface AmdgpuKernel {
  /** `.name`: the kernel's source-level (mangled) name. */
  name: string;
  /** `.symbol`: the kernel descriptor symbol, `<name>.kd`. */
  symbol: string;
  kernargSegmentSize: number;
  kernargSegmentAlign: number;
  groupSegmentFixedSize: number;
  privateSegmentFixedSize: number;
  wavefrontSize: number;
  sgprCount: number;
  vgprCount: number;
  agprCount?: number;
  maxFlatWorkgroupSize?: number;
  args: AmdgpuKernelArg[];
  /** Every field of the metadata map, for facts this interface does not name. */
  raw: Record<string, unknown>;
}

export interface AmdgpuCodeObject {
  /** Processor from e_flags, e.g. gfx90a. */
  arch: string;
  /** Target id with feature settings that are not "any"/"unsupported", e.g. gfx90a:xnack-. */
  targetId: string;
  xnack: FeatureSetting;
  sramecc: FeatureSetting;
  eFlags: number;
  /** Code object version, from amdhsa.version (else from EI_ABIVERSION). */
  codeObjectVersion: number;
  /** `amdhsa.target` when present (v4+), e.g. amdgcn-amd-amdhsa--gfx90a:xnack-. */
  metadataTarget?: string;
  kernels: AmdgpuKernel[];
  /** Names of the dynamic symbols (STT_FUNC kernels and `.kd` descriptors, globals). */
  symbols: { name: string; type: number; value: bigint; size: bigint }[];
}

export interface BundleEntry {
  /** Full bundle entry id, e.g. hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-. */
  id: string;
  /** Offload kind before the triple: host, hip, hipv4, openmp. */
  kind: string;
  /** Target id after `--` (empty for the host entry), e.g. gfx90a:xnack-. */
  target: string;
  bytes: Uint8Array;
}

function fail(msg: string): never {
  throw new KerncapError("E_CODEOBJ", msg, { hint: "Is this an AMDGPU code object (.hsaco) or a clang offload bundle?" });
}

export function isOffloadBundle(buf: Uint8Array): boolean {
  return buf.length >= 24 && new TextDecoder().decode(buf.subarray(0, 24)) === OFFLOAD_BUNDLE_MAGIC;
}

export function isAmdgpuElf(buf: Uint8Array): boolean {
  return (
    buf.length >= 64 &&
    buf[0] === 0x7f &&
    buf[1] === 0x45 &&
    buf[2] === 0x4c &&
    buf[3] === 0x46 &&
    new DataView(buf.buffer, buf.byteOffset, buf.byteLength).getUint16(18, true) === EM_AMDGPU
  );
}

/** Split a clang offload bundle (uncompressed format) into its entries. */
export function unbundle(buf: Uint8Array): BundleEntry[] {
  if (!isOffloadBundle(buf)) {
    if (buf.length >= 4 && new TextDecoder().decode(buf.subarray(0, 4)) === "CCOB") {
      fail("compressed clang offload bundles (CCOB) are not supported; rebuild without --offload-compress");
    }
    fail("not a clang offload bundle (no __CLANG_OFFLOAD_BUNDLE__ magic)");
  }
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const n = Number(dv.getBigUint64(24, true));
  const out: BundleEntry[] = [];
  let p = 32;
  for (let i = 0; i < n; i++) {
    if (p + 24 > buf.length) fail("truncated offload bundle header");
    const off = Number(dv.getBigUint64(p, true));
    const size = Number(dv.getBigUint64(p + 8, true));
    const idLen = Number(dv.getBigUint64(p + 16, true));
    const id = new TextDecoder().decode(buf.subarray(p + 24, p + 24 + idLen));
    p += 24 + idLen;
    if (off + size > buf.length) fail(`offload bundle entry ${id} lies past the end of the file`);
    const dash = id.indexOf("-");
    const kind = dash < 0 ? id : id.slice(0, dash);
    const dd = id.indexOf("--");
    out.push({ id, kind, target: dd < 0 ? "" : id.slice(dd + 2), bytes: buf.subarray(off, off + size) });
  }
  return out;
}

/**
 * The AMDGPU code objects in `buf`: the ELF itself, or every device entry of an offload bundle.
 * @param arch keep only entries whose processor (target id before any `:`) equals this.
 */
export function amdgpuCodeObjects(buf: Uint8Array, arch?: string): BundleEntry[] {
  const all: BundleEntry[] = isOffloadBundle(buf)
    ? unbundle(buf).filter((e) => isAmdgpuElf(e.bytes))
    : isAmdgpuElf(buf)
      ? [{ id: "", kind: "elf", target: parseElfHeader(buf).targetId, bytes: buf }]
      : fail("neither an AMDGPU ELF nor a clang offload bundle");
  return arch ? all.filter((e) => e.target.split(":")[0] === arch) : all;
}

function feature(flags: number, abi: number, which: "xnack" | "sramecc"): FeatureSetting {
  if (abi <= 1) {
    // v2/v3: a single "on" bit (v2: xnack 0x01 only).
    if (abi === 0) return which === "xnack" && flags & 0x01 ? "on" : "any";
    return flags & (which === "xnack" ? 0x100 : 0x200) ? "on" : "any";
  }
  const v = which === "xnack" ? (flags & 0x300) >> 8 : (flags & 0xc00) >> 10;
  return (["unsupported", "any", "off", "on"] as const)[v]!;
}

interface ElfHeader {
  arch: string;
  targetId: string;
  xnack: FeatureSetting;
  sramecc: FeatureSetting;
  eFlags: number;
  abiVersion: number;
}

function parseElfHeader(buf: Uint8Array): ElfHeader {
  if (!isAmdgpuElf(buf)) fail("not an AMDGPU ELF (e_machine != 224)");
  if (buf[4] !== 2 || buf[5] !== 1) fail("AMDGPU ELF must be 64-bit little-endian");
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const eFlags = dv.getUint32(48, true);
  const abiVersion = buf[8]!;
  const mach = eFlags & 0xff;
  const arch = MACH[mach] ?? `gfx-unknown-0x${mach.toString(16)}`;
  const xnack = feature(eFlags, abiVersion, "xnack");
  const sramecc = feature(eFlags, abiVersion, "sramecc");
  // Target id order follows LLVM: sramecc before xnack.
  let targetId = arch;
  if (sramecc === "on" || sramecc === "off") targetId += `:sramecc${sramecc === "on" ? "+" : "-"}`;
  if (xnack === "on" || xnack === "off") targetId += `:xnack${xnack === "on" ? "+" : "-"}`;
  return { arch, targetId, xnack, sramecc, eFlags, abiVersion };
}

const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
const num = (v: unknown, d = 0): number => (typeof v === "number" ? v : typeof v === "bigint" ? Number(v) : d);

/** Parse one AMDGPU ELF code object (v3+ metadata; v2 YAML metadata is refused). */
export function parseAmdgpuCodeObject(buf: Uint8Array): AmdgpuCodeObject {
  const h = parseElfHeader(buf);
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const shoff = Number(dv.getBigUint64(40, true));
  const shentsize = dv.getUint16(58, true);
  const shnum = dv.getUint16(60, true);
  const sections = Array.from({ length: shnum }, (_, i) => {
    const b = shoff + i * shentsize;
    return {
      type: dv.getUint32(b + 4, true),
      offset: Number(dv.getBigUint64(b + 24, true)),
      size: Number(dv.getBigUint64(b + 32, true)),
      link: dv.getUint32(b + 40, true),
      entsize: Number(dv.getBigUint64(b + 56, true)),
    };
  });
  const td = new TextDecoder();
  let meta: Record<string, unknown> | undefined;
  for (const s of sections.filter((s) => s.type === 7 /* SHT_NOTE */)) {
    let p = s.offset;
    const end = s.offset + s.size;
    while (p + 12 <= end) {
      const namesz = dv.getUint32(p, true);
      const descsz = dv.getUint32(p + 4, true);
      const type = dv.getUint32(p + 8, true);
      const name = td.decode(buf.subarray(p + 12, p + 12 + namesz)).replace(/\0+$/, "");
      const desc = p + 12 + ((namesz + 3) & ~3);
      if (name === "AMDGPU" && type === NT_AMDGPU_METADATA) {
        meta = decode(buf.subarray(desc, desc + descsz), { useBigInt64: false }) as Record<string, unknown>;
      }
      p = desc + ((descsz + 3) & ~3);
    }
  }
  if (!meta) fail(`no NT_AMDGPU_METADATA note (code object v2 or stripped?); EI_ABIVERSION=${h.abiVersion}`);

  const symbols: AmdgpuCodeObject["symbols"] = [];
  for (const s of sections.filter((s) => s.type === 11 /* SHT_DYNSYM */ || s.type === 2 /* SHT_SYMTAB */)) {
    const strtab = sections[s.link]!;
    for (let p = s.offset + 24; p + 24 <= s.offset + s.size; p += s.entsize || 24) {
      const nameOff = dv.getUint32(p, true);
      const nul = buf.indexOf(0, strtab.offset + nameOff);
      const name = td.decode(buf.subarray(strtab.offset + nameOff, nul));
      if (!name || symbols.some((x) => x.name === name)) continue;
      symbols.push({ name, type: buf[p + 4]! & 0xf, value: dv.getBigUint64(p + 8, true), size: dv.getBigUint64(p + 16, true) });
    }
  }

  const version = meta["amdhsa.version"];
  const codeObjectVersion = Array.isArray(version) && version.length >= 2 ? num(version[1]) + 3 : h.abiVersion + 2;
  const kernels = ((meta["amdhsa.kernels"] as Record<string, unknown>[] | undefined) ?? []).map((k): AmdgpuKernel => {
    const args = ((k[".args"] as Record<string, unknown>[] | undefined) ?? []).map((a): AmdgpuKernelArg => {
      const valueKind = str(a[".value_kind"]) ?? "unknown";
      return {
        offset: num(a[".offset"]),
        size: num(a[".size"]),
        valueKind,
        addressSpace: str(a[".address_space"]),
        name: str(a[".name"]),
        typeName: str(a[".type_name"]),
        hidden: valueKind.startsWith("hidden_"),
      };
    });
    return {
      name: str(k[".name"]) ?? "",
      symbol: str(k[".symbol"]) ?? "",
      kernargSegmentSize: num(k[".kernarg_segment_size"]),
      kernargSegmentAlign: num(k[".kernarg_segment_align"]),
      groupSegmentFixedSize: num(k[".group_segment_fixed_size"]),
      privateSegmentFixedSize: num(k[".private_segment_fixed_size"]),
      wavefrontSize: num(k[".wavefront_size"]),
      sgprCount: num(k[".sgpr_count"]),
      vgprCount: num(k[".vgpr_count"]),
      agprCount: k[".agpr_count"] === undefined ? undefined : num(k[".agpr_count"]),
      maxFlatWorkgroupSize: k[".max_flat_workgroup_size"] === undefined ? undefined : num(k[".max_flat_workgroup_size"]),
      args,
      raw: k,
    };
  });
  return {
    arch: h.arch,
    targetId: h.targetId,
    xnack: h.xnack,
    sramecc: h.sramecc,
    eFlags: h.eFlags,
    codeObjectVersion,
    metadataTarget: str(meta["amdhsa.target"]),
    kernels,
    symbols,
  };
}

/**
 * Find a kernel by mangled name (`.name`) or descriptor symbol (`.symbol`, with or without `.kd`).
 * @throws KerncapError E_CODEOBJ listing the kernels present when none matches.
 */
export function findKernel(co: AmdgpuCodeObject, name: string): AmdgpuKernel {
  const bare = name.endsWith(".kd") ? name.slice(0, -3) : name;
  const k = co.kernels.find((k) => k.name === bare || k.symbol === name || k.symbol === `${bare}.kd`);
  if (!k) {
    throw new KerncapError("E_CODEOBJ", `kernel ${name} not found in the ${co.targetId} code object`, {
      hint: `kernels present: ${co.kernels.map((k) => k.name).join(", ") || "(none)"}`,
    });
  }
  return k;
}

/**
 * The explicit (non-hidden) kernel arguments as manifest parameter slots: index, offset, size.
 * The hidden arguments that follow are still part of the kernarg segment bytes (params.bin).
 */
export function kernargLayout(k: AmdgpuKernel): { index: number; offset: number; size: number }[] {
  return k.args.filter((a) => !a.hidden).map((a, index) => ({ index, offset: a.offset, size: a.size }));
}
