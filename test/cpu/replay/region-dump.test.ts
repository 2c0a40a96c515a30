/**
 * src/replay/region-dump.ts: a region's bytes assembled from the memory images through the chunk
 * layout (zero chunks not stored, the after image holding only changed chunks), across chunk
 * boundaries, against the bytes the fixture wrote.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { readManifest } from "../../../src/format/capture-dir.ts";
import { join } from "node:path";
import { finalizeCapture } from "../../../src/capture/finalize.ts";
import { regionAt, regionDump } from "../../../src/replay/region-dump.ts";
import { chunkedRanges } from "../../raw-fixture.ts";
import { tempDir, writeRawCapture } from "../fixtures.ts";

/** A capture whose one 32 KiB region is stored in 4 KiB chunks (the smallest a manifest allows): chunk 2 all zeros (not stored), only chunk 5 changed by the launch. */
async function chunkedCapture() {
  const root = tempDir();
  const tmp = join(root, `cap.tmp-${process.pid}`);
  const raw = writeRawCapture(tmp);
  const before = new Uint8Array(32768);
  for (let i = 0; i < 32768; i++) before[i] = i >= 8192 && i < 12288 ? 0 : ((i * 7) % 251) + 1;
  const after = before.slice();
  for (let i = 20480; i < 24576; i++) after[i] = (i * 3) & 0xff;
  writeFileSync(join(tmp, "memory/before.bin"), before);
  writeFileSync(join(tmp, "memory/after.bin"), after);
  const ranges = chunkedRanges(tmp, [{ va: "0x7f0000000000", size: 32768, kind: "device", offset: 0, changed: true }], [], 4096);
  const m = await finalizeCapture({ ...raw, ...ranges }, { tmpDir: tmp, finalDir: join(root, "cap"), force: false, command: ["./app"], match: "scale" });
  return { dir: join(root, "cap"), m, before, after };
}

describe("region dump", () => {
  test("bytes across chunk boundaries, a zero chunk that is not stored and the one changed chunk: as written, before and after", async () => {
    const { dir, m, before, after } = await chunkedCapture();
    expect(m.regions[0]!.before.extents.length).toBe(2); // chunks 0-1 and 3-7: chunk 2 is zeros
    const d = regionDump(dir, m, 0, { dtype: "u32", offset: 4000, count: 4096 }); // chunks 0 to 4 (bytes 4000-20383)
    const u32 = (b: Uint8Array, at: number) => new DataView(b.buffer, b.byteOffset).getUint32(at, true);
    expect(d.before).toEqual([...Array(4096).keys()].map((i) => u32(before, 4000 + 4 * i)));
    expect(d.after).toEqual(d.before);
    expect(d.before.slice(1048, 2072).every((x) => x === 0)).toBe(true); // the zero chunk
    expect(d.differing).toEqual([]);
    const w = regionDump(dir, m, 0, { dtype: "u16", offset: 20000, count: 4096 }); // to the end: 6384 elements from there
    expect([w.offset, w.elements, w.count]).toEqual([20000, 6384, 4096]);
    const u16 = (b: Uint8Array, at: number) => b[at]! | (b[at + 1]! << 8);
    expect(w.before).toEqual([...Array(4096).keys()].map((i) => u16(before, 20000 + 2 * i)));
    expect(w.after).toEqual([...Array(4096).keys()].map((i) => u16(after, 20000 + 2 * i)));
    const changed = [...Array(4096).keys()].filter((i) => u16(before, 20000 + 2 * i) !== u16(after, 20000 + 2 * i));
    expect(w.differing).toEqual(changed);
    expect(changed.length).toBeGreaterThan(1500);
    // an odd offset rounds down to a whole element
    expect(regionDump(dir, m, 0, { dtype: "u32", offset: 7, count: 1 }).offset).toBe(4);
    expect(regionAt(m, "0x7f0000001003")).toEqual({ index: 0, offset: 4099 });
  });

  test("the images read from one descriptor each: a FIFO renamed over after.bin is never opened; an image cut short is E_CHECKSUM, not an internal error (adversary 67)", async () => {
    const { dir } = await chunkedCapture();
    const after = join(dir, "memory/after.bin");
    const kept = readFileSync(after);
    rmSync(after);
    expect(Bun.spawnSync(["mkfifo", after]).exitCode).toBe(0);
    // the path rule refuses the FIFO at the open (O_NONBLOCK, then fstat): no wait for a writer
    expect(() => regionDump(dir, readManifest(dir), 0, {})).toThrow(/FIFO|not a regular file|E_UNSAFE_PATH|regular file/);
    rmSync(after);
    writeFileSync(after, kept.subarray(0, 100)); // cut short
    let e: unknown;
    try {
      regionDump(dir, readManifest(dir), 0, { offset: 20480 });
    } catch (x) {
      e = x;
    }
    expect((e as { code?: string }).code).toBe("E_CHECKSUM");
  });
});
