/**
 * Chunked memory snapshots (manifest version 2): a range (region or module global) of `size`
 * bytes is cut into chunks of `memory.chunkBytes`; `before` lists its non-zero chunks and `after`
 * the chunks the launch changed, each as runs stored back to back in memory/before.bin or
 * memory/after.bin (src/format/manifest.ts, Stored). Pure helpers and the CPU verification.
 */
import { KerncapError } from "../errors.ts";
import { FileImage, openImageInCapture } from "./file-image.ts";
import { kc64, kc64Sparse } from "./kc64.ts";
import { dataExtentsOfFd, type DataExtents } from "./sparse-extents.ts";
import type { Global, Manifest, Region, Stored } from "./manifest.ts";

export type Range = Region | Global;

/** One stored run: chunks [first, first + count) of a range, `bytes` long, at `fileOffset`; `vaOffset` = first · chunkBytes. */
export interface Run {
  first: number;
  count: number;
  fileOffset: number;
  vaOffset: number;
  bytes: number;
  /** Index of the run's first chunk in the stored state's hash list. */
  hashIndex: number;
}

/** Chunks of a range of `size` bytes. */
export function chunkCount(size: number, chunkBytes: number): number {
  return Math.ceil(size / chunkBytes);
}

/** Bytes of chunk c of a range of `size` bytes (the last one may be shorter). */
export function chunkLen(size: number, c: number, chunkBytes: number): number {
  return Math.min(chunkBytes, size - c * chunkBytes);
}

/** The runs of one stored state, in order. */
export function runs(r: { size: number }, st: Stored, chunkBytes: number): Run[] {
  let h = 0;
  return st.extents.map(([first, count, fileOffset]) => {
    const vaOffset = first * chunkBytes;
    const run = { first, count, fileOffset, vaOffset, bytes: Math.min(r.size, (first + count) * chunkBytes) - vaOffset, hashIndex: h };
    h += count;
    return run;
  });
}

/** kc64 (hex) of the k-th stored chunk. */
export function storedHash(st: Stored, k: number): string {
  return st.hashes.slice(16 * k, 16 * k + 16);
}

/**
 * What chunk c of a range must hold: `state` after (changed in the app), before (stored non-zero
 * and unchanged) or zero; with its hash and the file offset of its bytes (-1 for zero).
 * Shapes: one entry per chunk, arrays of length chunkCount.
 */
export interface ChunkExpectation {
  state: ("after" | "before" | "zero")[];
  hash: (string | undefined)[];
  fileOffset: number[];
  /** The before state's hash (undefined: zero) of every chunk, to tell "unchanged by the replay". */
  beforeHash: (string | undefined)[];
  /** The before state's file offset of every stored chunk (-1: zero). */
  beforeOffset: number[];
}

export function chunkExpectation(r: Range, chunkBytes: number): ChunkExpectation {
  const n = chunkCount(r.size, chunkBytes);
  const e: ChunkExpectation = {
    state: new Array(n).fill("zero"),
    hash: new Array(n),
    fileOffset: new Array(n).fill(-1),
    beforeHash: new Array(n),
    beforeOffset: new Array(n).fill(-1),
  };
  for (const which of ["before", "after"] as const) {
    for (const run of runs(r, r[which], chunkBytes)) {
      for (let k = 0; k < run.count; k++) {
        const c = run.first + k;
        const h = storedHash(r[which], run.hashIndex + k);
        e.state[c] = which;
        e.hash[c] = h;
        e.fileOffset[c] = run.fileOffset + k * chunkBytes;
        if (which === "before") {
          e.beforeHash[c] = h;
          e.beforeOffset[c] = run.fileOffset + k * chunkBytes;
        }
      }
    }
  }
  return e;
}

/** Bytes each memory file must hold at least: the end of its last stored run. */
export function storedEnd(m: Manifest, which: "before" | "after"): number {
  let end = 0;
  for (const r of [...m.regions, ...m.globals]) for (const run of runs(r, r[which], m.memory.chunkBytes)) end = Math.max(end, run.fileOffset + run.bytes);
  return end;
}

/**
 * The most bytes a memory image can hold, from the manifest's ranges (regions and globals): each
 * range's bytes, whole or as runs of its chunks, starting at most one alignment step (64 KiB) past
 * the previous range's end and padded at most one step after a short last chunk (c/cuda/kc_snapshot.h
 * kc_align_up, KC_ALIGN in c/common/kc_hash.h; c/hsa/kerncap_hsa.c lays whole regions at 65536-aligned
 * offsets). A manifest that gives an image more lays it out as no capture library does.
 */
export function imageBound(m: Manifest): number {
  return [...m.regions, ...m.globals].reduce((a, r) => a + r.size + 2 * IMAGE_ALIGN, 0);
}

/** The alignment of a range's start in a memory image (bytes). */
const IMAGE_ALIGN = 64 << 10;

/**
 * Check the kc64 of every stored chunk of both memory files on the CPU (~1 GB/s). Progress goes
 * to `onBytes` (bytes hashed so far).
 * @throws KerncapError E_CHECKSUM naming the file, the range and the chunk.
 */
export function verifyChunks(dir: string, m: Manifest, onBytes?: (done: number, total: number) => void): void {
  for (const _ of chunkChecks(dir, m, onBytes));
}

/**
 * verifyChunks that awaits `tick` (a signal's check: E_INTERRUPTED) after every 256 MiB hashed: a
 * manifest may list terabytes of chunks, each read whole, and unpack went on for minutes after
 * SIGTERM (adversary 62).
 * @throws KerncapError E_CHECKSUM as verifyChunks; what `tick` throws
 */
export async function verifyChunksAsync(
  dir: string,
  m: Manifest,
  tick: () => Promise<void>,
  onBytes?: (done: number, total: number) => void,
  every = 256 << 20,
): Promise<void> {
  let since = 0;
  for (const len of chunkChecks(dir, m, onBytes)) {
    since += len;
    if (since >= every) {
      since = 0;
      await tick();
    }
  }
}

/** verifyChunks' work, a chunk at a time: yields each chunk's bytes once checked. @throws KerncapError E_CHECKSUM (checkWorkProblem's bound against the images' data) */
function* chunkChecks(dir: string, m: Manifest, onBytes?: (done: number, total: number) => void): Generator<number> {
  // a folder as an archive: listed chunks of one data byte each, terabytes to hash from a small folder (adversary 62: a
  // corpus folder held check for hours); held to the bound unpack applies to an archive, the images' data for its size
  // each image's extents read once: for the bound here and for the holes hashed unread (chunkHasher)
  // each image opened once (no link, no FIFO, the file the check saw) and read from that descriptor only: a name swapped
  // for a FIFO during the check hung it, and a mapped file cut short by its other owner killed kerncap (adversary 66)
  const images = new Map<string, FileImage>();
  try {
    for (const f of [m.memory.before, m.memory.after]) if (!images.has(f)) images.set(f, openImageInCapture(dir, f)); // one name twice: one descriptor
    yield* checkOpened(dir, m, images, onBytes);
  } finally {
    for (const img of images.values()) img.close();
  }
}

/** chunkChecks over the images opened (by name: memory.before, memory.after). */
function* checkOpened(dir: string, m: Manifest, images: Map<string, FileImage>, onBytes?: (done: number, total: number) => void): Generator<number> {
  const extents = new Map<string, Extents | undefined>();
  for (const [f, img] of images) extents.set(f, extentsOf(img));
  const data = [...extents.values()].reduce((a, x) => a + (x?.dataBytes ?? 0), 0); // missing: the check below says it is truncated
  const work = checkWorkProblem(m, data);
  if (work)
    throw new KerncapError("E_CHECKSUM", `${dir}: ${work.replace("-byte archive", " bytes of data its memory images hold")}`, {
      hint: "A capture whose memory images hold this little data lists no such chunks: the manifest was altered. Nothing was read.",
    });
  const C = m.memory.chunkBytes;
  const total = m.memory.storedBeforeBytes + m.memory.storedAfterBytes;
  let done = 0;
  for (const which of ["before", "after"] as const) {
    const file = which === "before" ? m.memory.before : m.memory.after;
    const hash = chunkHasher(images.get(file)!, extents.get(file));
    const all: [Range, string][] = [
      ...m.regions.map((r) => [r, `region ${r.va}`] as [Range, string]),
      ...m.globals.map((g) => [g, `global ${g.name} (${g.va})`] as [Range, string]),
    ];
    for (const [r, what] of all) {
      for (const run of runs(r, r[which], C)) {
        for (let k = 0; k < run.count; k++) {
          const len = chunkLen(r.size, run.first + k, C);
          const off = run.fileOffset + k * C;
          let got: string;
          try {
            got = hash(off, len);
          } catch {
            throw new KerncapError("E_CHECKSUM", `${file} is truncated: ${what} chunk ${run.first + k} (bytes ${off}..${off + len}) is missing`, {
              hint: "Capture again; the file was damaged.",
            });
          }
          if (got !== storedHash(r[which], run.hashIndex + k)) {
            throw new KerncapError(
              "E_CHECKSUM",
              `checksum mismatch in ${file}: ${what}, chunk ${run.first + k} (bytes ${(run.first + k) * C}..${(run.first + k) * C + len} of the range, file offset ${off})`,
              {
                hint: "The memory image was altered after capture: capture again, or restore it from a copy (only `kerncap replay --no-verify` replays it as it is, unchecked).",
              },
            );
          }
          done += len;
          onBytes?.(done, total); // per chunk: one run can be a whole 48 GiB region
          yield len;
        }
      }
    }
  }
}

type Extents = DataExtents;

/** The data extents of an opened image, or undefined where there is none (missing: the checks say it is truncated). */
function extentsOf(img: FileImage): Extents | undefined {
  return img.fd === undefined ? undefined : dataExtentsOfFd(img.fd);
}

/**
 * For a memory image `img` whose data extents are `data` (dataExtents; undefined: none told): the
 * kc64 of its bytes [off, off + len), reading only the parts that touch data and adding the holes'
 * zeros from tables (kc64Sparse): a chunk costs about the data it holds, not its length. A listed
 * chunk of 64 MiB holding 16 KiB of data was hashed whole, ~30 min for a 257 MB folder that listed
 * 1 TiB (adversary 65). Without extents, or past the file's end (the read says it is truncated), the
 * bytes are read whole.
 * @throws RangeError from the read when the bytes lie past the file's end
 */
export function chunkHasher(img: FileImage, data: Extents | undefined): (off: number, len: number) => string {
  return (off, len) => {
    if (!data || off + len > data.size) return kc64(img.view(off, len)).hex;
    // the first extent ending after off, then each that starts before the chunk's end, clipped to it
    let lo = 0;
    let hi = data.extents.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      const [s, l] = data.extents[mid]!;
      if (s + l <= off) lo = mid + 1;
      else hi = mid;
    }
    const ranges: [number, number][] = [];
    for (let i = lo; i < data.extents.length && data.extents[i]![0] < off + len; i++) {
      const [s, l] = data.extents[i]!;
      ranges.push([Math.max(s, off) - off, Math.min(s + l, off + len) - off]);
    }
    return kc64Sparse(len, ranges, (a, b) => img.view(off + a, b - a));
  };
}

/**
 * Bytes chunk c of a range must hold in state `which` ("before": what the launch found; "after":
 * what the app left): a view of the memory file, or zeros. Shapes: `len` = chunkLen bytes.
 */
export function chunkBytesOf(e: ChunkExpectation, c: number, len: number, which: "before" | "after", before: FileImage, after: FileImage): Uint8Array {
  if (which === "after" && e.state[c] === "after") return after.view(e.fileOffset[c]!, len);
  if (e.beforeHash[c] === undefined) return new Uint8Array(len);
  // the before file offset: the after state replaced fileOffset for changed chunks
  return before.view(e.beforeOffset[c]!, len);
}

/** The work an archive's chunk check may ask for per archive byte, past CHECK_FREE_BYTES (a chunk's zeros are hashed too). */
const CHECK_BYTES_PER_ARCHIVE_BYTE = 4096;
/** What unpack checks of any archive, however small (bytes): a minute at ~1 GB/s. */
const CHECK_FREE_BYTES = 64 * 2 ** 30;

/**
 * Why an archive of `archiveBytes` whose manifest is `m` asks too much of unpack's chunk check, or
 * undefined: more listed chunk bytes than CHECK_FREE_BYTES plus CHECK_BYTES_PER_ARCHIVE_BYTE per
 * byte of the archive. A 1.5 MB archive listed 12 TiB of chunks of one data byte each, ~7 hours
 * of hashing for unpack and for every `check` of a corpus it was dropped into (adversary 62). A
 * real capture's listed chunks are its non-zero data, which the archive holds; a mostly-zero
 * buffer with a few bytes in every chunk is within the ratio.
 */
export function checkWorkProblem(m: Manifest, archiveBytes: number): string | undefined {
  let listed = 0;
  for (const r of [...m.regions, ...m.globals])
    for (const which of ["before", "after"] as const) for (const run of runs(r, r[which], m.memory.chunkBytes)) listed += run.bytes;
  const bound = CHECK_FREE_BYTES + CHECK_BYTES_PER_ARCHIVE_BYTE * archiveBytes;
  return listed > bound
    ? `its manifest lists ${listed} bytes of memory chunks to check, more than 64 GiB and ${CHECK_BYTES_PER_ARCHIVE_BYTE} per byte of the ${archiveBytes}-byte archive (${bound} bytes): hours of hashing for a file this small`
    : undefined;
}
