import { afterAll, describe, expect, test } from "bun:test";
import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FileImage, readRange, sha256Range } from "../../../src/format/file-image.ts";

const dir = mkdtempSync(join(tmpdir(), "kerncap-file-image-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("FileImage (mmap windows)", () => {
  test("a sparse 5 GiB file (beyond Bun.mmap's 4 GiB): bytes past 4 GiB read back, windows move", () => {
    const p = join(dir, "big.bin");
    const fd = openSync(p, "w");
    const at = 4 * 2 ** 30 + 12345;
    writeSync(fd, Buffer.from("kerncap"), 0, 7, at);
    writeSync(fd, Buffer.from("end"), 0, 3, 5 * 2 ** 30 - 3);
    closeSync(fd);
    const img = new FileImage(p, 64 << 20);
    expect(img.size).toBe(5 * 2 ** 30);
    expect(Buffer.from(img.view(at, 7)).toString()).toBe("kerncap");
    expect(Buffer.from(img.view(0, 4))).toEqual(Buffer.alloc(4));
    expect(Buffer.from(img.view(5 * 2 ** 30 - 3, 3)).toString()).toBe("end");
    // a view across a window boundary (windows of 64 MiB here)
    expect(
      Buffer.from(img.view(at - (64 << 20) + 4, 64 << 20))
        .subarray(-4)
        .toString(),
    ).toBe("kern");
    expect(() => img.view(5 * 2 ** 30 - 2, 3)).toThrow(RangeError);
  });

  test("sha256Range equals the hash of the same bytes in one piece", () => {
    const p = join(dir, "small.bin");
    const bytes = new Uint8Array(3 * 1024 + 7).map((_, i) => (i * 31) & 255);
    writeFileSync(p, bytes);
    const img = new FileImage(p, 4096);
    expect(sha256Range(img, 5, 3000)).toBe(new Bun.CryptoHasher("sha256").update(bytes.subarray(5, 3005)).digest("hex"));
    expect(new FileImage(join(dir, "absent.bin")).size).toBe(0);
  });

  test("readRange (the fallback reader): the bytes of a range, a short file is a RangeError", () => {
    const p = join(dir, "range.bin");
    const bytes = new Uint8Array(10000).map((_, i) => (i * 13) & 255);
    writeFileSync(p, bytes);
    expect(Buffer.from(readRange(p, 4097, 5000))).toEqual(Buffer.from(bytes.subarray(4097, 9097)));
    expect(() => readRange(p, 9000, 2000)).toThrow(RangeError);
  });

  test("when Bun.mmap throws (no write access to the file), views are read with pread: same bytes, no window to pin", () => {
    const p = join(dir, "nomap.bin");
    const bytes = new Uint8Array(300 * 1024 + 5).map((_, i) => (i * 29 + 3) & 255);
    writeFileSync(p, bytes);
    const mmap = Bun.mmap;
    // as root every file maps (root may open any file read-write): make Bun.mmap fail the way it does
    // for a user without write access
    (Bun as { mmap: unknown }).mmap = () => {
      throw new Error(`EACCES: permission denied, open '${p}'`);
    };
    try {
      const img = new FileImage(p, 64 * 1024, true);
      const fallbacks: string[] = [];
      let windows = 0;
      img.onReadFallback = (e) => fallbacks.push(e.message);
      img.onWindow = () => windows++;
      expect(Buffer.from(img.view(70000, 100000))).toEqual(Buffer.from(bytes.subarray(70000, 170000)));
      expect(Buffer.from(img.view(5, 10))).toEqual(Buffer.from(bytes.subarray(5, 15)));
      expect(Buffer.from(img.view(bytes.length - 7, 7))).toEqual(Buffer.from(bytes.subarray(-7)));
      expect(sha256Range(img, 0, img.size)).toBe(new Bun.CryptoHasher("sha256").update(bytes).digest("hex"));
      expect(img.mapped).toBe(false);
      expect(fallbacks).toEqual([`EACCES: permission denied, open '${p}'`]);
      expect(windows).toBe(0);
    } finally {
      (Bun as { mmap: unknown }).mmap = mmap;
    }
  });
});
