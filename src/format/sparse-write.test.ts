/**
 * The capture library's sparse writer (c/kc_sparse.h): every byte of a region reaches the memory
 * image, whatever its size. Regression: a 4-byte __device__ counter (and any tail of fewer than
 * 8 bytes) was taken for zero and left as a hole; seen on the H200 node as a replay mismatch.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const GCC = Bun.which("gcc");
const dir = mkdtempSync(join(tmpdir(), "kerncap-sparse-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test.skipIf(!GCC)("kc_write_sparse keeps the last byte of buffers of 1..40 bytes and page-crossing sizes", () => {
  const exe = join(dir, "sparse_main");
  const cc = Bun.spawnSync([GCC!, "-O2", "-Wall", "-o", exe, resolve(import.meta.dir, "../../c/test/sparse_main.c")], { stderr: "pipe" });
  expect(cc.exitCode, cc.stderr.toString()).toBe(0);
  const r = Bun.spawnSync([exe, join(dir, "img.bin")], { stdout: "pipe" });
  expect(r.stdout.toString().trim()).toBe("ok");
  expect(r.exitCode).toBe(0);
});
