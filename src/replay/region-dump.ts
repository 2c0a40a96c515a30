/**
 * The values of one captured region as the launch found them (before) and as the application left
 * them (after), read from the memory images through the manifest's chunk layout (src/format/chunks.ts):
 * what `kerncap inspect DIR --region R` prints. No GPU: the files alone.
 */
import { runs } from "../format/chunks.ts";
import { openImageInCapture, type FileImage } from "../format/file-image.ts";
import type { Manifest } from "../format/manifest.ts";
import { KerncapError } from "../errors.ts";
import { ELEMENT_BYTES, type ElementType } from "./tolerance.ts";

/** The most elements one dump prints. */
export const MAX_DUMP_ELEMENTS = 4096;

/** A value as JSON holds it: a number, or a string for NaN, ±Infinity and 64-bit integers (exact). */
export type DumpValue = number | string;

export interface RegionDump {
  /** The region's index in the manifest (inspect's `[N]`), its VA (hex) and size (bytes). */
  region: number;
  va: string;
  size: number;
  /** Whether the launch wrote the region (manifest `changed`): else after = before. */
  changed: boolean;
  dtype: ElementType;
  /** Where the element type came from: --dtype, the capture's frontend (a Triton signature), or the default (fp32 where the size allows, else u8). */
  dtypeFrom: "option" | "frontend" | "default";
  /** Byte offset of the first element shown, from the region's start: `offsetAsked` rounded down to a whole element. */
  offset: number;
  /** The byte offset asked for (--offset, or the address given in --region). */
  offsetAsked: number;
  /** Elements the region holds from `offset` on (whole elements), and how many are shown. */
  elements: number;
  count: number;
  before: DumpValue[];
  after: DumpValue[];
  /** Indices (into before/after) whose bytes differ. */
  differing: number[];
}

/**
 * Which region `spec` names and the byte offset into it: an index as inspect prints it (`2`), a
 * device address inside one (`0x7f31e7e80010`, as a parameter's value is shown), or `param:N`, where
 * kernel parameter N points (as judge and --multiset name regions; `params`: the parameter buffer).
 * @throws KerncapError E_USAGE for an index past the last region, an address in none, a parameter that is no pointer into one
 */
export function regionAt(m: Pick<Manifest, "regions" | "params">, spec: string, params?: Uint8Array): { index: number; offset: number } {
  const s = spec.trim();
  const param = /^param:(\d+)$/.exec(s);
  if (param) {
    const slot = m.params.layout.find((p) => p.index === Number(param[1]));
    if (!slot || slot.size !== 8 || !params || slot.offset + 8 > params.byteLength)
      throw new KerncapError(
        "E_USAGE",
        `--region ${s}: ${slot ? `parameter ${param[1]} is ${slot.size} bytes, not a pointer` : `the kernel has no parameter ${param[1]}`}`,
        {
          hint: "kerncap inspect DIR lists the parameters; a pointer's line names the region it points into.",
        },
      );
    return regionAt(m, `0x${new DataView(params.buffer, params.byteOffset, params.byteLength).getBigUint64(slot.offset, true).toString(16)}`);
  }
  if (/^\d+$/.test(s)) {
    const index = Number(s);
    if (index >= m.regions.length)
      throw new KerncapError("E_USAGE", `--region ${s}: the capture has ${m.regions.length} regions (0–${m.regions.length - 1})`, {
        hint: "kerncap inspect DIR lists them with their indices.",
      });
    return { index, offset: 0 };
  }
  if (/^0x[0-9a-f]{1,16}$/i.test(s)) {
    const a = BigInt(s);
    const index = m.regions.findIndex((r) => a >= BigInt(r.va) && a < BigInt(r.va) + BigInt(r.size));
    if (index < 0)
      throw new KerncapError("E_USAGE", `--region ${s}: no captured region holds that address`, { hint: "kerncap inspect DIR lists the regions' addresses." });
    return { index, offset: Number(a - BigInt(m.regions[index]!.va)) };
  }
  throw new KerncapError("E_USAGE", `--region ${JSON.stringify(s)}: neither a region's index, a device address (0x…) nor param:N`, {
    hint: "Give the index inspect prints ([2]), an address inside a region (0x7f31e7e80010) or param:N (where kernel parameter N points).",
  });
}

/** The file offset of chunk `c` in the stored runs `st` of a range, or undefined when not stored (zero, or its before state). */
function storedAt(r: { size: number }, st: Manifest["regions"][number]["before"], c: number, C: number): number | undefined {
  for (const run of runs(r, st, C)) if (c >= run.first && c < run.first + run.count) return run.fileOffset + (c - run.first) * C;
  return undefined;
}

/**
 * Bytes [off, off + n) of region `index` in state `which`, assembled from the chunks they lie in
 * (only those: a region of 64 TiB declared by a small manifest was given a table of every chunk,
 * 2.6 GB, adversary 62).
 */
function regionBytes(m: Manifest, index: number, off: number, n: number, which: "before" | "after", before: FileImage, after: FileImage): Uint8Array {
  const r = m.regions[index]!;
  const C = m.memory.chunkBytes;
  const out = new Uint8Array(n);
  for (let c = Math.floor(off / C); c * C < off + n; c++) {
    const start = c * C;
    const len = Math.min(C, r.size - start);
    const changed = which === "after" ? storedAt(r, r.after, c, C) : undefined;
    const kept = changed === undefined ? storedAt(r, r.before, c, C) : undefined;
    const bytes = changed !== undefined ? after.view(changed, len) : kept !== undefined ? before.view(kept, len) : new Uint8Array(len);
    const from = Math.max(off, start);
    const to = Math.min(off + n, start + len);
    out.set(bytes.subarray(from - start, to - start), from - off);
  }
  return out;
}

function values(b: Uint8Array, t: ElementType): DumpValue[] {
  const eb = ELEMENT_BYTES[t];
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const out: DumpValue[] = [];
  const num = (x: number): DumpValue => (Number.isFinite(x) ? x : String(x));
  for (let i = 0; i + eb <= b.byteLength; i += eb) {
    switch (t) {
      case "fp64":
        out.push(num(dv.getFloat64(i, true)));
        break;
      case "fp32":
        out.push(num(dv.getFloat32(i, true)));
        break;
      case "fp16":
        out.push(num(half(dv.getUint16(i, true))));
        break;
      case "bf16":
        out.push(num(new Float32Array(new Uint32Array([dv.getUint16(i, true) << 16]).buffer)[0]!));
        break;
      case "i64":
        out.push(dv.getBigInt64(i, true).toString());
        break;
      case "u64":
        out.push(dv.getBigUint64(i, true).toString());
        break;
      case "i32":
        out.push(dv.getInt32(i, true));
        break;
      case "u32":
        out.push(dv.getUint32(i, true));
        break;
      case "i16":
        out.push(dv.getInt16(i, true));
        break;
      case "u16":
        out.push(dv.getUint16(i, true));
        break;
      case "i8":
        out.push(dv.getInt8(i));
        break;
      case "u8":
        out.push(dv.getUint8(i));
        break;
    }
  }
  return out;
}

/** IEEE 754 binary16 bits as a number. */
function half(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const f = h & 0x3ff;
  if (e === 0) return s * f * 2 ** -24;
  if (e === 31) return f ? Number.NaN : s * Number.POSITIVE_INFINITY;
  return s * (1 + f / 1024) * 2 ** (e - 15);
}

/**
 * Dump `count` elements (default 16, at most MAX_DUMP_ELEMENTS) of region `index` of the capture in
 * `dir` from byte `offset` (rounded down to a whole element), before and after the launch.
 * `dtype`: the element type (default: `frontendType`, the type the capture's frontend knows for the
 * region, else fp32 where the region's size is a multiple of 4, else u8).
 * @throws KerncapError E_USAGE for an offset past the region's end or a count out of range
 */
export function regionDump(
  dir: string,
  m: Manifest,
  index: number,
  o: { offset?: number; count?: number; dtype?: ElementType; frontendType?: ElementType } = {},
): RegionDump {
  const r = m.regions[index]!;
  const dtype = o.dtype ?? o.frontendType ?? (r.size % 4 === 0 ? "fp32" : "u8");
  const dtypeFrom = o.dtype ? "option" : o.frontendType ? "frontend" : "default";
  const eb = ELEMENT_BYTES[dtype];
  const offset = Math.floor((o.offset ?? 0) / eb) * eb;
  if (offset >= r.size)
    throw new KerncapError("E_USAGE", `offset ${o.offset} B is past region [${index}]'s end (${r.size} B)`, {
      hint: "Give an offset below the region's size.",
    });
  const want = o.count ?? 16;
  if (!Number.isInteger(want) || want < 1 || want > MAX_DUMP_ELEMENTS)
    throw new KerncapError("E_USAGE", `--count ${want}: from 1 to ${MAX_DUMP_ELEMENTS} elements`, {
      hint: "Dump a window of the region: --offset B --count N.",
    });
  const elements = Math.floor((r.size - offset) / eb);
  const count = Math.min(want, elements);
  // each image opened once by the capture path rule and read from that descriptor (adversary 67: a FIFO renamed over
  // after.bin hung inspect --region; a mapped file cut short by its other owner killed it; a short read was E_INTERNAL)
  const before = openImageInCapture(dir, m.memory.before);
  let after: FileImage | undefined;
  let b: Uint8Array;
  let a: Uint8Array;
  try {
    after = openImageInCapture(dir, m.memory.after);
    b = regionBytes(m, index, offset, count * eb, "before", before, after);
    a = r.changed ? regionBytes(m, index, offset, count * eb, "after", before, after) : b;
  } catch (e) {
    if (e instanceof RangeError)
      throw new KerncapError("E_CHECKSUM", `a memory image of ${dir} is shorter than its manifest says (cut short while it was read?): ${e.message}`, {
        hint: "kerncap inspect --verify checks every chunk; capture again, or restore the images from a copy.",
      });
    throw e;
  } finally {
    before.close();
    after?.close();
  }
  const differing: number[] = [];
  for (let i = 0; i < count; i++) {
    for (let k = 0; k < eb; k++)
      if (a[i * eb + k] !== b[i * eb + k]) {
        differing.push(i);
        break;
      }
  }
  return {
    region: index,
    va: r.va,
    size: r.size,
    changed: r.changed,
    dtype,
    dtypeFrom,
    offset,
    offsetAsked: o.offset ?? 0,
    elements,
    count,
    before: values(b, dtype),
    after: values(a, dtype),
    differing,
  };
}
