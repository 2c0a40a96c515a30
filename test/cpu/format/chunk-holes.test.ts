/**
 * src/format/chunks.ts chunkHasher and src/format/kc64.ts kc64Sparse: a chunk of a sparse memory
 * image is hashed reading only the bytes that touch data, its holes' zeros added from tables (a
 * sparse image of terabytes of listed zero chunks was read byte by byte for hours by unpack's
 * check: adversary 62; 64 MiB chunks of 16 KiB of data each, ~30 min: adversary 65); past the end
 * it is read, and found truncated.
 */
import { expect, test } from "bun:test";
import { closeSync, openSync, ftruncateSync, writeSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { chunkHasher } from "../../../src/format/chunks.ts";
import { FileImage } from "../../../src/format/file-image.ts";
import { dataExtents } from "../../../src/format/sparse-extents.ts";
import { kc64, kc64Sparse } from "../../../src/format/kc64.ts";
import { tempDir } from "../fixtures.ts";

test("a chunk of a sparse image is hashed as kc64 of its whole bytes, reading only what touches data: holes cost no hashing per byte (adversary 62, 65)", () => {
  const path = join(tempDir(), "before.bin");
  const fd = openSync(path, "w");
  writeSync(fd, new Uint8Array(4096).fill(7), 0, 4096, 0);
  ftruncateSync(fd, 64 << 20);
  writeSync(fd, new Uint8Array(4096).fill(9), 0, 4096, (32 << 20) - 4096);
  writeSync(fd, new Uint8Array([1, 2, 3]), 0, 3, (48 << 20) + 5); // a few bytes, unaligned to the words
  closeSync(fd);
  const extents = dataExtents(path);
  const img = new FileImage(path);
  let read = 0;
  const counting = { view: (off: number, n: number) => ((read += n), img.view(off, n)) } as unknown as FileImage;
  const hash = chunkHasher(counting, extents);
  const whole = (off: number, len: number) => kc64(img.view(off, len)).hex;
  // aligned and unaligned chunks, lengths not a multiple of 4, chunks in a hole, across data, at the end
  for (const [off, len] of [
    [0, 1 << 20],
    [1 << 20, 1 << 20],
    [(31 << 20) + 3, (1 << 20) + 2],
    [48 << 20, 4096],
    [(48 << 20) + 6, 7],
    [(48 << 20) + 1, 4099],
    [40 << 20, 16 << 20],
    [(64 << 20) - 4097, 4097],
    [3, (64 << 20) >> 1],
  ] as const) {
    read = 0;
    expect(hash(off, len), `${off}+${len}`).toBe(whole(off, len));
    if (extents.sparse) expect(read, `${off}+${len}`).toBeLessThanOrEqual(2 * 4096 + 8); // the data pages it touches, no hole
  }
  if (!extents.sparse) return; // a file system that tells no holes: every chunk is read whole (as hashed above)
  read = 0;
  expect(hash(1 << 20, 16 << 20)).toBe(kc64(new Uint8Array(16 << 20)).hex); // wholly in a hole: nothing read
  expect(read).toBe(0);
  expect(() => hash((64 << 20) - 4096, 8192)).toThrow(RangeError); // past the end: read, and found truncated
});

test("kc64Sparse is kc64 of the whole bytes for any data ranges and lengths", () => {
  fc.assert(
    fc.property(fc.integer({ min: 0, max: 20_000 }), fc.array(fc.tuple(fc.nat(20_000), fc.nat(300)), { maxLength: 6 }), fc.integer(), (len, spans, seed) => {
      const bytes = new Uint8Array(len);
      const ranges: [number, number][] = [];
      let at = 0;
      for (const [gap, n] of spans) {
        const s = Math.min(len, at + (gap % 5000));
        const e = Math.min(len, s + n);
        if (e > s) ranges.push([s, e]);
        for (let i = s; i < e; i++) bytes[i] = (seed + i * 31) & 0xff; // zeros among them too
        at = e;
      }
      expect(kc64Sparse(len, ranges, (s, e) => bytes.subarray(s, e))).toBe(kc64(bytes).hex);
    }),
    { numRuns: 300 },
  );
});

test("the check unpack makes awaits its signal check between chunks: a stop asked for ends it (adversary 62: unpack hashed on for minutes after SIGTERM)", async () => {
  const { verifyChunksAsync } = await import("../../../src/format/chunks.ts");
  const { readManifest } = await import("../../../src/format/capture-dir.ts");
  const { makeCapture } = await import("../fixtures.ts");
  const dir = join(tempDir(), "cap");
  await makeCapture(dir);
  const m = readManifest(dir);
  let ticks = 0;
  await verifyChunksAsync(dir, m, async () => void ticks++, undefined, 1);
  expect(ticks).toBeGreaterThan(0);
  const stop = Object.assign(new Error("interrupted"), { code: "E_INTERRUPTED" });
  expect(
    verifyChunksAsync(
      dir,
      m,
      async () => {
        throw stop;
      },
      undefined,
      1,
    ),
  ).rejects.toBe(stop);
});

test("an archive asks at most 64 GiB of chunk checking plus 4096 bytes per byte it holds (adversary 62: 1.5 MB listing 12 TiB, ~7 hours of hashing for unpack and every check of its corpus)", async () => {
  const { checkWorkProblem } = await import("../../../src/format/chunks.ts");
  const { readManifest } = await import("../../../src/format/capture-dir.ts");
  const { makeCapture } = await import("../fixtures.ts");
  const dir = join(tempDir(), "cap");
  await makeCapture(dir);
  const m = structuredClone(readManifest(dir));
  expect(checkWorkProblem(m, 1000)).toBeUndefined(); // a real capture
  const C = 64 << 20;
  m.memory.chunkBytes = C;
  const chunks = 3200; // 200 GiB listed
  m.regions.push({
    ...m.regions[0]!,
    va: "0x7f0000000000",
    size: chunks * C,
    before: { extents: [[0, chunks, 0]], hashes: "" },
    after: { extents: [], hashes: "" },
  });
  expect(checkWorkProblem(m, 1_500_000)).toMatch(/lists \d+ bytes of memory chunks to check, more than 64 GiB/);
  expect(checkWorkProblem(m, 50_000_000)).toBeUndefined(); // 64 GiB + 4096 × 50 MB covers 200 GiB
});

test("a capture folder's chunk check is held to the same bound against the data its images hold (adversary 62: the bomb left as a folder in a corpus held check for hours)", async () => {
  const { verifyChunks } = await import("../../../src/format/chunks.ts");
  const { readManifest } = await import("../../../src/format/capture-dir.ts");
  const { makeCapture } = await import("../fixtures.ts");
  const dir = join(tempDir(), "cap");
  await makeCapture(dir);
  const m = structuredClone(readManifest(dir));
  verifyChunks(dir, m); // a real capture
  const C = 64 << 20;
  m.memory.chunkBytes = C;
  m.regions.push({
    ...m.regions[0]!,
    va: "0x7f0000000000",
    size: 3200 * C,
    before: { extents: [[0, 3200, 0]], hashes: "" },
    after: { extents: [], hashes: "" },
  });
  expect(() => verifyChunks(dir, m)).toThrow(
    /lists \d+ bytes of memory chunks to check, more than 64 GiB and 4096 per byte of the \d+ bytes of data its memory images hold/,
  );
});
