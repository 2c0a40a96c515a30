/** Restorer (src/replay/engine.ts) against a host-memory fake of DeviceMemory: the pinned-mapping path and the staging path of a file that cannot be mapped. */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Range } from "../../../src/format/chunks.ts";
import type { DeviceMemory } from "../../../src/replay/backends/interface.ts";
import { Restorer } from "../../../src/replay/engine.ts";

const dir = mkdtempSync(join(tmpdir(), "kerncap-restorer-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const BASE = 0x10000n;

/** Device memory as one host array at BASE; counts registrations and asynchronous copies. */
function fakeDevice(bytes: number) {
  const mem = new Uint8Array(bytes).fill(0xee);
  const calls = { register: 0, unregister: 0, async: 0, sync: 0, hostAlloc: [] as Uint8Array[], hostFree: [] as Uint8Array[] };
  const at = (p: bigint) => Number(p - BASE);
  const cu: DeviceMemory = {
    memAlloc: () => BASE,
    memFree: () => {},
    hostAlloc: (n) => {
      const b = new Uint8Array(n);
      calls.hostAlloc.push(b);
      return b;
    },
    hostFree: (b) => void calls.hostFree.push(b),
    hostRegister: () => (calls.register++, true),
    hostUnregister: () => void calls.unregister++,
    htod: (dst, src) => mem.set(src, at(dst)),
    htodAsync: (dst, src) => (calls.async++, mem.set(src, at(dst))),
    dtoh: () => {},
    dtod: () => {},
    memset: (dst, v, n) => mem.fill(v, at(dst), at(dst) + n),
    sync: () => void calls.sync++,
  };
  return { cu, mem, calls };
}

describe("Restorer", () => {
  const C = 65536;
  const size = 4 << 20; // 64 chunks; chunks 2..33 stored at file offset 0
  const file = join(dir, "before.bin");
  const stored = new Uint8Array(32 * C).map((_, i) => (i * 7 + 1) & 255);
  writeFileSync(file, stored);
  const range = { size, before: { extents: [[2, 32, 0]], hashes: "" } } as unknown as Range;
  const want = new Uint8Array(size);
  want.set(stored, 2 * C);

  test("a file that maps: copied from pinned windows", () => {
    const d = fakeDevice(size);
    const r = new Restorer(d.cu, file);
    r.restore(BASE, range, C);
    r.finish();
    expect(Buffer.from(d.mem).equals(Buffer.from(want))).toBe(true);
    expect(d.calls.register).toBeGreaterThan(0);
    expect(r.registered).toBeGreaterThan(0);
    expect(r.staged).toBe(0);
    // the last pinned window is unpinned at dispose, nothing staged to free
    const unpinned = d.calls.unregister;
    r.dispose();
    expect(d.calls.unregister).toBe(unpinned);
    expect(d.calls.hostFree.length).toBe(0);
  });

  test("a file that cannot be mapped (Bun.mmap throws: a read-only capture folder): staged, nothing pinned, same bytes", () => {
    const mmap = Bun.mmap;
    (Bun as { mmap: unknown }).mmap = () => {
      throw new Error(`EACCES: permission denied, open '${file}'`);
    };
    try {
      const d = fakeDevice(size);
      const r = new Restorer(d.cu, file);
      r.restore(BASE, range, C);
      r.finish();
      expect(Buffer.from(d.mem).equals(Buffer.from(want))).toBe(true);
      expect(d.calls.register).toBe(0);
      expect(r.registered).toBe(0);
      expect(r.staged).toBeGreaterThan(0);
      // the next capture of a `kerncap check` worker must not inherit 64 MiB of page-locked staging
      r.dispose();
      expect(d.calls.hostAlloc.length).toBe(1);
      expect(d.calls.hostFree).toEqual(d.calls.hostAlloc);
    } finally {
      (Bun as { mmap: unknown }).mmap = mmap;
    }
  });
});
