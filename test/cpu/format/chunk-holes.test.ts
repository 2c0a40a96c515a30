/**
 * src/format/chunks.ts zeroChunks: a chunk that lies wholly in a hole of a sparse memory image is
 * zeros without a read (a sparse image of terabytes of listed zero chunks was read byte by byte for
 * hours by unpack's check: adversary 62); a chunk touching data, or past the end, is read.
 */
import { expect, test } from "bun:test";
import { closeSync, openSync, ftruncateSync, writeSync } from "node:fs";
import { join } from "node:path";
import { zeroChunks } from "../../../src/format/chunks.ts";
import { dataExtents } from "../../../src/format/sparse-extents.ts";
import { kc64 } from "../../../src/format/kc64.ts";
import { tempDir } from "../fixtures.ts";

test("a chunk in a hole hashes as zeros unread; one touching data or past the end is read", () => {
  const path = join(tempDir(), "before.bin");
  const fd = openSync(path, "w");
  writeSync(fd, new Uint8Array(4096).fill(7), 0, 4096, 0);
  ftruncateSync(fd, 64 << 20);
  writeSync(fd, new Uint8Array(4096).fill(9), 0, 4096, (32 << 20) - 4096);
  closeSync(fd);
  const zero = zeroChunks(path);
  if (!dataExtents(path).sparse) {
    // a file system that tells no holes: every chunk is read
    expect(zero(1 << 20, 1 << 20)).toBeUndefined();
    return;
  }
  expect(zero(1 << 20, 1 << 20)).toBe(kc64(new Uint8Array(1 << 20)).hex);
  expect(zero(40 << 20, 4096)).toBe(kc64(new Uint8Array(4096)).hex);
  expect(zero(0, 1 << 20)).toBeUndefined(); // the first page is data
  expect(zero(31 << 20, 1 << 20)).toBeUndefined(); // ends in the data page before 32 MiB
  expect(zero((64 << 20) - 4096, 8192)).toBeUndefined(); // past the end: read, and found truncated
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
