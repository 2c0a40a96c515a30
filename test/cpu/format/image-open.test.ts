/**
 * src/format/file-image.ts openImageInCapture: a capture's memory image is opened once by the
 * capture path rule and read from that descriptor only (adversary 66): a FIFO renamed over its
 * name after the open is never opened (it hung `check` for ever), and an image another user may
 * write is read with pread, never mapped (a mapped file cut short killed kerncap with SIGBUS);
 * cut short, the check says it is truncated.
 */
import { expect, test } from "bun:test";
import { chmodSync, readFileSync, renameSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { openImageInCapture } from "../../../src/format/file-image.ts";
import { readManifest } from "../../../src/format/capture-dir.ts";
import { verifyChunks } from "../../../src/format/chunks.ts";
import { makeCapture, tempDir } from "../fixtures.ts";

test("an image is read from the descriptor opened: a FIFO renamed over its name afterwards is never opened", async () => {
  const dir = join(tempDir(), "cap");
  const m = await makeCapture(dir);
  const path = join(dir, m.memory.before);
  const want = new Uint8Array(readFileSync(path)).slice(0, 4096);
  const img = openImageInCapture(dir, m.memory.before);
  try {
    const fifo = join(dir, "memory", "fifo");
    expect(Bun.spawnSync(["mkfifo", fifo]).exitCode).toBe(0);
    renameSync(fifo, path); // the name is a FIFO now: an open of it by name would wait for a writer
    expect(img.view(0, 4096)).toEqual(want);
  } finally {
    img.close();
  }
});

test("an image others may write is read with pread, never mapped; cut short during the check, it is truncated (E_CHECKSUM), not a crash", async () => {
  const dir = join(tempDir(), "cap");
  const m = await makeCapture(dir);
  const path = join(dir, m.memory.before);
  const own = openImageInCapture(dir, m.memory.before);
  own.view(0, 16);
  expect(own.mapped).toBe(true); // yours alone: mapped
  own.close();
  chmodSync(path, 0o666);
  const shared = openImageInCapture(dir, m.memory.before);
  expect(shared.mapped).toBe(false);
  truncateSync(path, 100); // another user cuts it short while it is open
  expect(() => shared.view(4096, 4096)).toThrow(RangeError); // a short read said, where a mapping would have died of SIGBUS
  shared.close();
  expect(() => verifyChunks(dir, readManifest(dir))).toThrow(/is truncated/);
  writeFileSync(path, ""); // emptied: truncated too, said as such
  expect(() => verifyChunks(dir, readManifest(dir))).toThrow(/is truncated/);
});

test("sameFile: two opens of one image are one file; a file renamed over the name between them is another (the replay then refuses: restored from one, compared with another)", async () => {
  const dir = join(tempDir(), "cap");
  const m = await makeCapture(dir);
  const path = join(dir, m.memory.before);
  const a = openImageInCapture(dir, m.memory.before);
  const b = openImageInCapture(dir, m.memory.before);
  expect(a.sameFile(b)).toBe(true);
  writeFileSync(`${path}.new`, readFileSync(path)); // the same bytes, another file
  renameSync(`${path}.new`, path);
  const c = openImageInCapture(dir, m.memory.before);
  expect(a.sameFile(c)).toBe(false);
  for (const img of [a, b, c]) img.close();
  expect(a.sameFile(b)).toBe(false); // closed: no descriptor to compare
});
