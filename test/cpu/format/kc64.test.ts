/**
 * kc64 in TypeScript (src/format/kc64.ts) equals the C reference (c/common/kc_hash.h) that the capture
 * libraries and the GPU scan kernel implement, on lengths that exercise the u32 tail, unaligned
 * views, zero data and single-bit changes.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { kc64 } from "../../../src/format/kc64.ts";

const GCC = Bun.which("gcc");
const dir = mkdtempSync(join(tmpdir(), "kerncap-kc64-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function rand(n: number, seed: number): Uint8Array {
  const b = new Uint8Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    b[i] = x & 0xff;
  }
  return b;
}

test.skipIf(!GCC)("TypeScript kc64 equals the C reference", () => {
  const exe = join(dir, "hash_main");
  const cc = Bun.spawnSync([GCC!, "-O2", "-Wall", "-o", exe, resolve(import.meta.dir, "../../../c/test/hash_main.c")], { stderr: "pipe" });
  expect(cc.exitCode, cc.stderr.toString()).toBe(0);
  const data = rand(1 << 20, 7);
  data.fill(0, 300_000, 400_000);
  const file = join(dir, "data.bin");
  writeFileSync(file, data);
  for (const [off, len] of [
    [0, 0],
    [0, 1],
    [0, 3],
    [0, 4],
    [1, 7],
    [3, 64],
    [300_000, 100_000],
    [0, 1 << 20],
    [5, 65_537],
  ] as const) {
    const c = Bun.spawnSync([exe, file, String(off), String(len)], { stdout: "pipe" })
      .stdout.toString()
      .trim();
    const t = kc64(data.subarray(off, off + len));
    expect(`${t.hex} ${t.nonzero ? 1 : 0}`).toBe(c);
  }
});

test("kc64 tells zero chunks, and a one-bit change anywhere changes the hash", () => {
  const z = new Uint8Array(4096);
  expect(kc64(z).nonzero).toBe(false);
  const base = rand(4099, 3);
  const h0 = kc64(base).hex;
  for (const at of [0, 1, 2047, 4095, 4098]) {
    const b = base.slice();
    b[at]! ^= 1 << (at % 8);
    expect(kc64(b).hex).not.toBe(h0);
  }
  // position matters: swapping two different words changes it
  const s = base.slice();
  s.set(base.subarray(0, 4), 8);
  s.set(base.subarray(8, 12), 0);
  expect(kc64(s).hex).not.toBe(h0);
});
