/** Restorer and restoreBefore (src/replay/restore.ts) against a host-memory fake of DeviceMemory: the pinned-mapping path, the staging path of a file that cannot be mapped or that another user may write, a FIFO refused. */
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runs, type Range } from "../../../src/format/chunks.ts";
import { FileImage } from "../../../src/format/file-image.ts";
import type { Manifest } from "../../../src/format/manifest.ts";
import type { DeviceMemory, ReplayBackend } from "../../../src/replay/backends/interface.ts";
import { Restorer } from "../../../src/replay/engine.ts";
import { restoreBefore } from "../../../src/replay/restore.ts";
import { makeCapture } from "../fixtures.ts";

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
    const r = new Restorer(d.cu, new FileImage(file, undefined, true));
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
      const r = new Restorer(d.cu, new FileImage(file, undefined, true));
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

describe("restoreBefore: memory/before.bin opened once by the capture path rule", () => {
  /** Device memory as one host array per captured region (at its VA); counts pinned windows. */
  function regionDevice(m: Manifest) {
    const regions = m.regions.map((r) => ({ va: BigInt(r.va), mem: new Uint8Array(r.size).fill(0xee) }));
    const find = (p: bigint) => {
      const r = regions.find((g) => p >= g.va && p < g.va + BigInt(g.mem.length));
      if (!r) throw new Error(`0x${p.toString(16)} is in no region`);
      return { mem: r.mem, at: Number(p - r.va) };
    };
    const d = fakeDevice(0);
    d.cu.memset = (dst, v, n) => {
      const { mem, at } = find(dst);
      mem.fill(v, at, at + n);
    };
    d.cu.htod = (dst, src) => {
      const { mem, at } = find(dst);
      mem.set(src, at);
    };
    d.cu.htodAsync = d.cu.htod;
    return { ...d, regions };
  }

  test("a before.bin another user may write is read with pread and staged, never mapped and pinned; the bytes are the capture's", async () => {
    const cap = join(dir, "shared-cap");
    const m = await makeCapture(cap);
    chmodSync(join(cap, m.memory.before), 0o666);
    const d = regionDevice(m);
    const { restorer } = restoreBefore(d.cu as unknown as ReplayBackend, cap, m);
    try {
      expect(restorer.registered).toBe(0); // a mapping another user can cut short would die of SIGBUS
      expect(restorer.staged).toBeGreaterThan(0);
      const img = new FileImage(join(cap, m.memory.before));
      expect(m.regions.some((r) => runs(r, r.before, m.memory.chunkBytes).length > 0)).toBe(true);
      for (const [i, r] of m.regions.entries())
        for (const run of runs(r, r.before, m.memory.chunkBytes))
          expect(Buffer.from(d.regions[i]!.mem.subarray(run.vaOffset, run.vaOffset + run.bytes)).equals(Buffer.from(img.view(run.fileOffset, run.bytes)))).toBe(
            true,
          );
    } finally {
      restorer.dispose();
    }
  });

  test("a FIFO named before.bin is refused (E_UNSAFE_PATH), never opened by name: no wait for a writer", async () => {
    const cap = join(dir, "fifo-cap");
    const m = await makeCapture(cap);
    const path = join(cap, m.memory.before);
    rmSync(path);
    expect(Bun.spawnSync(["mkfifo", path]).exitCode).toBe(0);
    const d = regionDevice(m);
    let err: unknown;
    try {
      restoreBefore(d.cu as unknown as ReplayBackend, cap, m).restorer.dispose();
    } catch (e) {
      err = e;
    }
    expect((err as { code?: string }).code).toBe("E_UNSAFE_PATH");
  });
});
