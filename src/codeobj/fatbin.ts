/**
 * Reader for NVIDIA fatbin containers (what `nvcc -fatbin` writes, what a host object's
 * `.nv_fatbin` section holds, and what the driver is handed at module load), and the choice of the
 * cubin to run on a given device.
 *
 * NVIDIA does not document the format. Layout below as observed in nvcc 13.0 output (checked by
 * fatbin.test.ts on files it builds) and agreeing with public decoders (Eiling's
 * fatbin-decompress in cricket; GrigoryEvko/nvopen-tools fatbin/FORMAT_SPECIFICATION.md):
 *
 * Container (16 bytes, then entries back to back; containers may follow one another, as in a
 * linked executable's `.nv_fatbin`):
 *   u32 magic 0xBA55ED50 | u16 version (1) | u16 header size (16) | u64 bytes of entries after the header
 * Entry header (64 bytes, or more: 80 for PTX, 112 for sm_100+ cubins carrying `.nv.compat` data):
 *   +0  u16 kind: 1 PTX, 2 ELF (cubin)
 *   +2  u16 (0x0101)
 *   +4  u32 entry header size in bytes; the payload starts right after it
 *   +8  u64 payload bytes (compressed size rounded up to 8; the next entry follows)
 *   +16 u32 compressed payload bytes (0 when not compressed)
 *   +24 u16 minor, +26 u16 major: code version (PTX ISA version for PTX, e.g. 9.0)
 *   +28 u32 SM number (90 for sm_90 / compute_90)
 *   +40 u64 flags: 0x1 64-bit, 0x2 debug, 0x10 Linux host, 0x2000 LZ4-compressed,
 *       0x8000 zstd-compressed, 0x100000 arch-specific ("a"), 0x200000 family ("f"),
 *       0x1000000 compat data in the extended header (0x2000 and 0x8000 from nvcc 13's
 *       --compress-mode=speed and default/size/balance; the a/f bits from -arch=sm_100a / sm_100f)
 *   +56 u64 uncompressed bytes (0 when not compressed)
 */
import { zstdDecompressSync } from "node:zlib";
import { KerncapError } from "../errors.ts";
import { cubinArch, cubinTarget } from "./cubin.ts";
import { EM_CUDA, isElf, parseElf } from "./elf.ts";

export const FATBIN_MAGIC = 0xba55ed50;

const KIND_PTX = 1;
const KIND_ELF = 2;
const FLAG_LZ4 = 0x2000;
const FLAG_ZSTD = 0x8000;
const FLAG_ARCH_SPECIFIC = 0x100000;
const FLAG_FAMILY = 0x200000;

export interface FatbinEntry {
  kind: "cubin" | "ptx";
  /** nvcc spelling: "sm_90", "sm_90a", "sm_100f" for cubins; "compute_90", "compute_100a" for PTX. */
  arch: string;
  /** SM number (entry header +28). */
  sm: number;
  compressed: boolean;
  /** Payload compression (flags 0x2000 → "lz4", 0x8000 → "zstd"). */
  compression: "none" | "lz4" | "zstd";
  /** Byte offset of the entry header in the bytes given to fatbinEntries. */
  offset: number;
  /** Stored payload bytes (compressed size when compressed). */
  storedBytes: number;
  /** Entry flags (+40), low 53 bits. */
  flags: number;
  /** The cubin image or PTX text (NUL-padded), decompressed on each call. Throws KerncapError("E_FATBIN") on corrupt data. */
  bytes(): Uint8Array;
}

function fatbinError(what: string): KerncapError {
  return new KerncapError("E_FATBIN", `malformed fatbin: ${what}`, {
    hint: "the module image is truncated or not a fatbin; capture it again",
  });
}

/** True when the bytes start with the fatbin container magic 0xBA55ED50 (little-endian). */
export function isFatbin(bytes: Uint8Array): boolean {
  return bytes.length >= 4 && new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0, true) === FATBIN_MAGIC;
}

/**
 * Every entry of every container in `bytes` (a container, or several back to back, optionally
 * padded with zeros between them). Payloads stay views into `bytes` until `bytes()` is called.
 * Throws KerncapError("E_FATBIN") naming the offset where a header or payload runs past the end.
 */
export function fatbinEntries(bytes: Uint8Array): FatbinEntry[] {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const need = (o: number, n: number, what: string) => {
    if (o + n > bytes.length) throw fatbinError(`${what} at offset ${o} (+${n} bytes) runs past the end of the ${bytes.length}-byte image`);
  };
  const u64 = (o: number) => Number(dv.getBigUint64(o, true) & 0x1fffffffffffffn);
  const out: FatbinEntry[] = [];
  let c = 0;
  while (c < bytes.length) {
    // Containers in a .nv_fatbin section are 8-byte aligned; skip the padding between them.
    if (bytes[c] === 0) {
      c++;
      continue;
    }
    need(c, 16, "container header");
    const magic = dv.getUint32(c, true);
    if (magic !== FATBIN_MAGIC) {
      throw fatbinError(`magic 0x${magic.toString(16)} at offset ${c}, expected 0x${FATBIN_MAGIC.toString(16)}`);
    }
    const headerSize = dv.getUint16(c + 6, true);
    const body = u64(c + 8);
    const end = c + headerSize + body;
    need(c, headerSize + body, "container");
    let e = c + headerSize;
    while (e < end) {
      need(e, 64, "entry header");
      const kindId = dv.getUint16(e, true);
      const entryHeader = dv.getUint32(e + 4, true);
      const payload = u64(e + 8);
      const compressedSize = dv.getUint32(e + 16, true);
      const sm = dv.getUint32(e + 28, true);
      const flags = u64(e + 40);
      const rawSize = u64(e + 56);
      if (entryHeader < 64) throw fatbinError(`entry header size ${entryHeader} at offset ${e} (at least 64)`);
      need(e, entryHeader + payload, `entry payload (${payload} bytes)`);
      const start = e + entryHeader;
      const compression = flags & FLAG_ZSTD ? "zstd" : flags & FLAG_LZ4 ? "lz4" : "none";
      const stored = bytes.subarray(start, start + (compression !== "none" && compressedSize ? compressedSize : payload));
      const variant = flags & FLAG_ARCH_SPECIFIC ? "a" : flags & FLAG_FAMILY ? "f" : "";
      if (kindId === KIND_ELF || kindId === KIND_PTX) {
        const entryOffset = e;
        out.push({
          kind: kindId === KIND_ELF ? "cubin" : "ptx",
          arch: `${kindId === KIND_ELF ? "sm" : "compute"}_${sm}${variant}`,
          sm,
          compressed: compression !== "none",
          compression,
          offset: entryOffset,
          storedBytes: stored.length,
          flags,
          bytes: () => decompressEntry(stored, compression, rawSize, entryOffset),
        });
      }
      // Other kinds (none seen from nvcc 13) are skipped, not fatal: the cubins may still be usable.
      e = start + payload;
    }
    c = end;
  }
  return out;
}

/**
 * The most bytes one fatbin entry may decompress to, 256 MiB (one cubin of one architecture: a
 * library's largest are tens of MB): a 160 KB zstd frame of run-length blocks expands to 5 GiB
 * (adversary 63: export and validate of a received capture held 5 GiB, the module never shown by
 * the trust prompt). A frame is cut at the size its entry's header gives, or at this bound.
 */
export const FATBIN_ENTRY_MAX = 256 << 20;

function decompressEntry(stored: Uint8Array, compression: "none" | "lz4" | "zstd", rawSize: number, at: number): Uint8Array {
  try {
    if (compression === "none") return stored;
    if (rawSize > FATBIN_ENTRY_MAX)
      throw new Error(`its header says ${rawSize} bytes decompressed, more than the ${FATBIN_ENTRY_MAX >> 20} MiB an entry may hold`);
    // the zstd frame stops at the size the header gives (or the bound): a bomb is cut, never held whole
    const limit = rawSize || FATBIN_ENTRY_MAX;
    const out = compression === "zstd" ? zstd(stored, limit) : lz4BlockDecompress(stored, rawSize);
    if (rawSize && out.length !== rawSize) throw new Error(`decompressed to ${out.length} bytes, header says ${rawSize}`);
    return out;
  } catch (e) {
    if (e instanceof KerncapError) throw e;
    throw fatbinError(`${compression} payload of the entry at offset ${at}: ${(e as Error).message}`);
  }
}

/** A zstd payload decompressed to at most `limit` bytes. @throws Error past it */
function zstd(stored: Uint8Array, limit: number): Uint8Array {
  try {
    return new Uint8Array(zstdDecompressSync(stored, { maxOutputLength: limit }));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ERR_BUFFER_TOO_LARGE")
      throw new Error(`decompresses past ${limit} bytes${limit === FATBIN_ENTRY_MAX ? " (the most an entry may hold)" : ", the size its header gives"}`);
    throw e;
  }
}

/**
 * Decompress one LZ4 *block* (no frame header), the scheme of nvcc's `--compress-mode=speed`
 * entries (flag 0x2000; also CUDA 12's default). Block format per the LZ4 block specification
 * (github.com/lz4/lz4 doc/lz4_Block_format.md): sequences of token (literal length high nibble,
 * match length - 4 low nibble, 15 = more length bytes follow), literals, u16 little-endian match
 * offset; the last sequence has literals only.
 * `size`: the decompressed size in bytes (the fatbin entry header gives it).
 */
export function lz4BlockDecompress(src: Uint8Array, size: number): Uint8Array {
  const dst = new Uint8Array(size);
  let s = 0;
  let d = 0;
  const bad = (what: string) => new Error(`corrupt LZ4 block: ${what} (input offset ${s}, output offset ${d})`);
  const length = (base: number): number => {
    let n = base;
    if (base === 15) {
      let b: number;
      do {
        if (s >= src.length) throw bad("length runs past the input");
        b = src[s++]!;
        n += b;
      } while (b === 255);
    }
    return n;
  };
  while (s < src.length) {
    const token = src[s++]!;
    const lit = length(token >> 4);
    if (s + lit > src.length || d + lit > size) throw bad(`${lit} literals overflow`);
    dst.set(src.subarray(s, s + lit), d);
    s += lit;
    d += lit;
    if (s >= src.length) break; // last sequence: literals only
    if (s + 2 > src.length) throw bad("match offset truncated");
    const off = src[s]! | (src[s + 1]! << 8);
    s += 2;
    if (off === 0 || off > d) throw bad(`match offset ${off}`);
    const len = length(token & 15) + 4;
    if (d + len > size) throw bad(`match of ${len} bytes overflows the ${size}-byte output`);
    // Byte by byte: an overlapping match (off < len) repeats the bytes it is writing.
    for (let i = 0; i < len; i++, d++) dst[d] = dst[d - off]!;
  }
  if (d !== size) throw bad(`output is ${d} bytes, expected ${size}`);
  return dst;
}

/**
 * The fatbin inside a host ELF object or executable: the bytes of its `.nv_fatbin` section
 * (one or more containers; nvcc -c and the host linker put them there).
 * Throws KerncapError("E_FATBIN") when the ELF has no such section.
 */
export function extractFatbinFromElf(bytes: Uint8Array): Uint8Array {
  const elf = parseElf(bytes);
  const sec = elf.section(".nv_fatbin");
  if (!sec) {
    throw new KerncapError("E_FATBIN", "the ELF file has no .nv_fatbin section", {
      hint: "it holds no CUDA device code (or keeps it in a shared library it loads)",
    });
  }
  return elf.sectionBytes(sec);
}

/** An SM target as parsed from "sm_90", "sm_90a", "compute_90", "90" or "9.0". */
function parseArch(arch: string): { sm: number; variant: string } {
  const m = /^(?:sm_|compute_)?(\d+)(?:\.(\d))?([af]?)$/.exec(arch.trim());
  if (!m) throw new KerncapError("E_ARCH", `cannot read the GPU architecture "${arch}"`, { hint: 'write it as nvcc does, e.g. "sm_90"' });
  return { sm: m[2] !== undefined ? Number(m[1]) * 10 + Number(m[2]) : Number(m[1]), variant: m[3]! };
}

export interface PickedCubin {
  /** The cubin image (decompressed). */
  cubin: Uint8Array;
  /** Its target, e.g. "sm_90a". */
  arch: string;
  /** True when its SM number equals the device's. */
  exact: boolean;
}

/**
 * The cubin to load on a device of architecture `arch` ("sm_90"), from a raw cubin, a fatbin,
 * or a host ELF with a `.nv_fatbin` section.
 *
 * Choice, following CUDA's binary compatibility rule (a cubin for sm_XY runs on sm_XZ for Z >= Y,
 * same major; an "a" cubin only on exactly its SM): a cubin for the device's own SM first
 * (preferring "a", then "f", then plain: the most specialised code a toolchain built for it),
 * else the highest lower minor of the same major, never an "a" one. PTX entries are not JIT-compiled
 * here. Throws KerncapError("E_NO_CUBIN") listing the archs present when none fits.
 */
export function pickCubin(bytes: Uint8Array, arch: string): PickedCubin {
  const want = parseArch(arch);
  const major = (sm: number) => Math.floor(sm / 10);
  const fits = (sm: number, variant: string) => sm === want.sm || (variant !== "a" && major(sm) === major(want.sm) && sm < want.sm);
  const rank = (sm: number, variant: string) => sm * 4 + (variant === "a" ? 3 : variant === "f" ? 2 : 1);

  if (isElf(bytes) && parseElf(bytes).header.machine === EM_CUDA) {
    const t = cubinTarget(bytes);
    if (!fits(t.sm, t.variant)) {
      throw new KerncapError("E_NO_CUBIN", `the cubin is for ${cubinArch(bytes)}, which cannot run on ${arch}`, {
        hint: `rebuild for ${arch} (nvcc -arch=${arch}) or replay on a ${cubinArch(bytes)} device`,
      });
    }
    return { cubin: bytes, arch: cubinArch(bytes), exact: t.sm === want.sm };
  }
  const fatbin = isFatbin(bytes) ? bytes : isElf(bytes) ? extractFatbinFromElf(bytes) : undefined;
  if (!fatbin) {
    throw new KerncapError("E_NO_CUBIN", "the module image is neither a cubin, a fatbin nor an ELF with .nv_fatbin", {
      hint: "PTX modules must be compiled (ptxas) before replay",
    });
  }
  const entries = fatbinEntries(fatbin);
  const variantOf = (e: FatbinEntry) => e.arch.slice(`sm_${e.sm}`.length);
  const best = entries.filter((e) => e.kind === "cubin" && fits(e.sm, variantOf(e))).sort((a, b) => rank(b.sm, variantOf(b)) - rank(a.sm, variantOf(a)))[0];
  if (!best) {
    const present = [...new Set(entries.map((e) => e.arch))];
    throw new KerncapError("E_NO_CUBIN", `no cubin in the fatbin runs on ${arch}; it holds ${present.join(", ") || "nothing"}`, {
      // PTX JIT-compiles for its own SM or any later one (arch-/family-specific PTX only for its own).
      hint: entries.some((e) => e.kind === "ptx" && (e.sm === want.sm || (e.sm < want.sm && !/[af]$/.test(e.arch))))
        ? "only PTX fits: the driver would JIT-compile it; build a cubin for this device instead"
        : `rebuild for ${arch} or replay on a device of one of these archs`,
    });
  }
  return { cubin: best.bytes(), arch: best.arch, exact: best.sm === want.sm };
}
