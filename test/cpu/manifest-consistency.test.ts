/**
 * The manifest reader and verifyFiles refuse inconsistent captures (src/format/manifest.ts,
 * src/format/capture-dir.ts): malformed VAs, dimensions other than 3, duplicate files[] entries,
 * module.size against files[], and memory images that are not regular files of the stated size
 * (0 included).
 */
import { describe, expect, test } from "bun:test";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { readManifest, verifyFiles } from "../../src/format/capture-dir.ts";
import { KerncapError } from "../../src/errors.ts";
import { makeCapture, tempDir } from "./fixtures.ts";

async function fresh(): Promise<string> {
  const dir = join(tempDir(), "cap");
  await makeCapture(dir);
  return dir;
}

function edit(dir: string, f: (m: any) => void): void {
  const p = join(dir, "kerncap.json");
  const m = JSON.parse(readFileSync(p, "utf8"));
  f(m);
  writeFileSync(p, JSON.stringify(m));
}

/** The KerncapError fn throws (fails when it throws nothing or something else). */
function failure(fn: () => unknown): KerncapError {
  try {
    fn();
  } catch (e) {
    if (e instanceof KerncapError) return e;
    throw e;
  }
  throw new Error("did not fail");
}

const check = (dir: string) => verifyFiles(dir, readManifest(dir));

describe("manifest consistency", () => {
  test("the fixture capture (lowercase VAs from finalizeCapture) passes", async () => {
    const dir = await fresh();
    expect(readManifest(dir).regions.map((r) => r.va)).toEqual(["0x7f0000000000", "0x7f0000010000"]);
    check(dir);
  });

  for (const [va, why] of [
    ["0X7f0000000000", "uppercase X"],
    ["0x7F0000000000", "uppercase digits"],
    ["0x10000000000000000", "17 digits: wider than 64 bits"],
    ["0x", "no digits"],
  ] as const) {
    test(`a VA ${va} (${why}) is refused naming the field`, async () => {
      const dir = await fresh();
      edit(dir, (m) => (m.regions[1].va = va));
      const e = failure(() => readManifest(dir));
      expect(e.code).toBe("E_MANIFEST");
      expect(e.message).toContain("regions.1.va");
    });
  }

  test("a range that wraps past the end of the 64-bit address space is refused", async () => {
    const dir = await fresh();
    edit(dir, (m) => (m.regions[1].va = "0xfffffffffffff000"));
    const e = failure(() => readManifest(dir));
    expect(e.code).toBe("E_MANIFEST");
    expect(e.message).toContain("runs past the end of the 64-bit address space");
  });

  test("a region size past 2^53 - 1 (not read back as the integer written) is refused naming the field", async () => {
    const dir = await fresh();
    edit(dir, (m) => (m.regions[0].size = 2 ** 60));
    const e = failure(() => readManifest(dir));
    expect(e.code).toBe("E_MANIFEST");
    expect(e.message).toContain("regions.0.size");
  });

  test("a 4-number extent is refused naming the field, as a 4-element grid is", async () => {
    const dir = await fresh();
    edit(dir, (m) => (m.regions[0].before.extents = [[...m.regions[0].before.extents[0], 5]]));
    const e = failure(() => readManifest(dir));
    expect(e.code).toBe("E_MANIFEST");
    expect(e.message).toContain("regions.0.before.extents.0");
  });

  test("kerncap.json that is a folder: E_UNSAFE_PATH naming the file", async () => {
    const dir = await fresh();
    rmSync(join(dir, "kerncap.json"));
    mkdirSync(join(dir, "kerncap.json"));
    const e = failure(() => readManifest(dir));
    expect(e.code).toBe("E_UNSAFE_PATH");
    expect(e.message).toBe(`kerncap.json in ${dir} is a folder; a capture's files must be regular files inside it`);
  });

  test("a 4-element grid or block is refused naming the field", async () => {
    const dir = await fresh();
    edit(dir, (m) => (m.launch.grid = [4, 1, 1, 1]));
    let e = failure(() => readManifest(dir));
    expect(e.code).toBe("E_MANIFEST");
    expect(e.message).toContain("launch.grid");
    edit(dir, (m) => {
      m.launch.grid = [4, 1, 1];
      m.launch.block = [256, 1, 1, 2];
    });
    e = failure(() => readManifest(dir));
    expect(e.message).toContain("launch.block");
  });

  test("module.size other than the module file's size in files[] is refused", async () => {
    const dir = await fresh();
    edit(dir, (m) => (m.module.size = 9));
    const e = failure(() => readManifest(dir));
    expect(e.code).toBe("E_MANIFEST");
    expect(e.message).toContain("module.size is 9 but kernel/module.cubin has 8 bytes");
  });

  test("a file listed twice in files[] is refused", async () => {
    const dir = await fresh();
    edit(dir, (m) => m.files.push({ ...m.files[0], path: `./${m.files[0].path}` }));
    const e = failure(() => readManifest(dir));
    expect(e.code).toBe("E_MANIFEST");
    expect(e.message).toContain("twice");
    expect(e.message).toContain("kernel/params.bin");
  });

  test("a files[] entry that is a directory is refused, named", async () => {
    const dir = await fresh();
    rmSync(join(dir, "kernel/module.cubin"));
    mkdirSync(join(dir, "kernel/module.cubin"));
    const e = failure(() => check(dir));
    expect(e.code).toBe("E_UNSAFE_PATH");
    expect(e.message).toContain("kernel/module.cubin");
    expect(e.message).toContain("a folder");
  });

  describe("a memory image recorded as 0 bytes", () => {
    /** The fixture with no changed chunk: memory/after.bin recorded as 0 bytes. */
    async function noAfter(): Promise<string> {
      const dir = await fresh();
      edit(dir, (m) => {
        for (const r of m.regions) Object.assign(r, { changed: false, changedChunks: 0, changedBytes: 0, after: { extents: [], hashes: "" } });
        Object.assign(m.memory, { afterBytes: 0, storedAfterBytes: 0, afterFileBytes: 0 });
      });
      rmSync(join(dir, "memory/after.bin"));
      return dir;
    }
    test("absent or empty: passes", async () => {
      const dir = await noAfter();
      check(dir);
      writeFileSync(join(dir, "memory/after.bin"), "");
      check(dir);
    });
    test("holding bytes: refused", async () => {
      const dir = await noAfter();
      writeFileSync(join(dir, "memory/after.bin"), "garbage");
      const e = failure(() => check(dir));
      expect(e.code).toBe("E_CHECKSUM");
      expect(e.message).toMatch(/memory\/after.bin in .* has 7 bytes, the manifest says 0/);
    });
    test("a directory or a FIFO: refused, named", async () => {
      const dir = await noAfter();
      mkdirSync(join(dir, "memory/after.bin"));
      let e = failure(() => check(dir));
      expect(e.message).toContain("memory/after.bin");
      expect(e.message).toContain("a folder");
      rmSync(join(dir, "memory/after.bin"), { recursive: true });
      expect(Bun.spawnSync(["mkfifo", join(dir, "memory/after.bin")]).exitCode).toBe(0);
      e = failure(() => check(dir));
      expect(e.message).toContain("a FIFO");
    });
  });

  test("ranges past 2^24 chunks (a 64 TiB all-zero region, no stored byte) are refused; at the bound they are read", async () => {
    const dir = await fresh();
    const zeroRegion = (size: number) => ({
      va: "0x100000000000",
      size,
      kind: "device",
      changed: false,
      changedChunks: 0,
      changedBytes: 0,
      hashedOn: "cpu",
      before: { extents: [], hashes: "" },
      after: { extents: [], hashes: "" },
    });
    let C = 0;
    let used = 0;
    edit(dir, (m) => {
      C = m.memory.chunkBytes;
      used = [...m.regions, ...m.globals].reduce((a: number, r: any) => a + Math.ceil(r.size / C), 0);
      m.regions.push(zeroRegion(2 ** 46));
      m.memory.beforeBytes += 2 ** 46;
    });
    const e = failure(() => readManifest(dir));
    expect(e.code).toBe("E_MANIFEST");
    expect(e.message).toMatch(/the ranges span \d+ chunks of \d+ bytes; a capture spans at most 16777216/);
    edit(dir, (m) => {
      m.memory.beforeBytes -= 2 ** 46;
      m.regions[2] = zeroRegion(((1 << 24) - used) * C);
      m.memory.beforeBytes += m.regions[2].size;
    });
    expect(readManifest(dir).regions[2]!.size).toBe(((1 << 24) - used) * C);
    edit(dir, (m) => {
      m.regions[2].size += 1;
      m.memory.beforeBytes += 1;
    });
    expect(failure(() => readManifest(dir)).message).toContain(`span ${(1 << 24) + 1} chunks`);
  });
});
