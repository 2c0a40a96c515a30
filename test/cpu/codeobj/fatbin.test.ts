import { beforeAll, describe, expect, test } from "bun:test";
import { KerncapError } from "../../../src/errors.ts";
import { cubinArch } from "../../../src/codeobj/cubin.ts";
import { extractFatbinFromElf, FATBIN_MAGIC, fatbinEntries, isFatbin, lz4BlockDecompress, pickCubin } from "../../../src/codeobj/fatbin.ts";
import { buildFixtures, type Fixtures, NO_NVCC_REASON, NVCC } from "../../nvcc-fixtures.ts";

const text = (b: Uint8Array) => new TextDecoder().decode(b);

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    return (e as KerncapError).code;
  }
  return undefined;
}

describe("lz4BlockDecompress", () => {
  test("literals, overlapping matches and extended lengths", () => {
    // token 0x13: 1 literal "a", match 3+4=7 at offset 1 → "aaaaaaaa"; then literals-only "bc".
    expect(text(lz4BlockDecompress(new Uint8Array([0x13, 0x61, 0x01, 0x00, 0x20, 0x62, 0x63]), 10))).toBe("aaaaaaaabc");
    // Literal length 15 + 1 extra byte (=16 literals), then a 4-byte match at offset 4, then "!" alone.
    const lits = [..."abcdefghijklmnop"].map((c) => c.charCodeAt(0));
    const src = new Uint8Array([0xf0, 0x01, ...lits, 0x04, 0x00, 0x10, 0x21]);
    expect(text(lz4BlockDecompress(src, 21))).toBe("abcdefghijklmnopmnop!");
  });
  test("rejects corrupt blocks", () => {
    expect(() => lz4BlockDecompress(new Uint8Array([0x13, 0x61, 0x05, 0x00]), 8)).toThrow(/match offset 5/);
    expect(() => lz4BlockDecompress(new Uint8Array([0x50, 0x61]), 5)).toThrow(/literals overflow/);
    expect(() => lz4BlockDecompress(new Uint8Array([0x10, 0x61]), 5)).toThrow(/expected 5/);
  });
});

describe("fatbinEntries on synthetic input", () => {
  test("rejects a bad magic and a container longer than the bytes", () => {
    expect(isFatbin(new Uint8Array([0x50, 0xed, 0x55, 0xba]))).toBe(true);
    expect(() => fatbinEntries(new Uint8Array(16).fill(1))).toThrow(/magic 0x1010101 at offset 0/);
    const b = new Uint8Array(16);
    const dv = new DataView(b.buffer);
    dv.setUint32(0, FATBIN_MAGIC, true);
    dv.setUint16(4, 1, true);
    dv.setUint16(6, 16, true);
    dv.setBigUint64(8, 100n, true);
    expect(() => fatbinEntries(b)).toThrow(/container at offset 0 \(\+116 bytes\) runs past the end of the 16-byte image/);
    expect(codeOf(() => fatbinEntries(b))).toBe("E_FATBIN");
  });
});

/** A fatbin of one sm_90 cubin entry whose payload is `payload`, stored with `flags` (0x8000 zstd, 0x2000 LZ4), its header saying `rawSize` bytes decompressed. */
function oneEntryFatbin(payload: Uint8Array, flags: number, rawSize: number): Uint8Array {
  const b = new Uint8Array(16 + 64 + payload.length);
  const dv = new DataView(b.buffer);
  dv.setUint32(0, FATBIN_MAGIC, true);
  dv.setUint16(4, 1, true);
  dv.setUint16(6, 16, true);
  dv.setBigUint64(8, BigInt(64 + payload.length), true);
  dv.setUint16(16, 2, true); // an ELF (cubin) entry
  dv.setUint32(16 + 4, 64, true);
  dv.setBigUint64(16 + 8, BigInt(payload.length), true);
  dv.setUint32(16 + 16, payload.length, true);
  dv.setUint32(16 + 28, 90, true);
  dv.setBigUint64(16 + 40, BigInt(flags), true);
  dv.setBigUint64(16 + 56, BigInt(rawSize), true);
  b.set(payload, 80);
  return b;
}

/** A zstd frame (no content size) of `blocks` run-length blocks of 128 KiB zeros each: 4 bytes a block. */
function zstdRleBomb(blocks: number): Uint8Array {
  const out = [0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x38]; // magic; no content size, no checksum; a 128 KiB window
  for (let i = 0; i < blocks; i++) {
    const h = ((128 << 10) << 3) | (1 << 1) | (i === blocks - 1 ? 1 : 0); // size, RLE, last
    out.push(h & 0xff, (h >> 8) & 0xff, (h >> 16) & 0xff, 0x00);
  }
  return new Uint8Array(out);
}

describe("compressed entries with bounds (adversary 63: 160 KB of zstd made 5 GiB)", () => {
  test("a zstd bomb past 256 MiB is cut, never held whole; past the header's size too; an LZ4 size past the bound is refused before anything is made", () => {
    const t0 = performance.now();
    const bomb = fatbinEntries(oneEntryFatbin(zstdRleBomb(40_000), 0x8000, 0))[0]!; // 40 000 × 128 KiB = 5 GiB in 160 KB
    expect(() => bomb.bytes()).toThrow(/zstd payload of the entry at offset 16: decompresses past 268435456 bytes \(the most an entry may hold\)/);
    expect(codeOf(() => bomb.bytes())).toBe("E_FATBIN");
    expect(performance.now() - t0).toBeLessThan(10_000);
    const small = fatbinEntries(oneEntryFatbin(zstdRleBomb(8), 0x8000, 1 << 20))[0]!; // 1 MiB declared, 1 MiB made: read
    expect(small.bytes().length).toBe(1 << 20);
    const over = fatbinEntries(oneEntryFatbin(zstdRleBomb(16), 0x8000, 1 << 20))[0]!; // 2 MiB made where 1 MiB is declared
    expect(() => over.bytes()).toThrow(/decompresses past 1048576 bytes, the size its header gives/);
    const lz4 = fatbinEntries(oneEntryFatbin(new Uint8Array([0x10, 0x61]), 0x2000, 2 ** 40))[0]!;
    expect(() => lz4.bytes()).toThrow(/its header says 1099511627776 bytes decompressed, more than the 256 MiB an entry may hold/);
  });
});

describe.skipIf(!NVCC)(`fatbin readers on nvcc output${NVCC ? "" : ` (${NO_NVCC_REASON})`}`, () => {
  let fx: Fixtures;
  beforeAll(async () => {
    fx = await buildFixtures();
  }, 60_000);

  test("entries of a default nvcc fatbin: kinds, archs, the 'a' flag, zstd PTX", () => {
    const es = fatbinEntries(fx.fatbin);
    expect(es.map((e) => [e.kind, e.arch])).toEqual([
      ["cubin", "sm_90a"],
      ["cubin", "sm_80"],
      ["cubin", "sm_90"],
      ["ptx", "compute_90"],
    ]);
    for (const e of es.filter((x) => x.kind === "cubin")) expect(cubinArch(e.bytes())).toBe(e.arch);
    const ptx = es.find((e) => e.kind === "ptx")!;
    expect(ptx.compression).toBe("zstd"); // nvcc 13 compresses PTX by default
    expect(text(ptx.bytes())).toContain(".target sm_90");
    expect(text(ptx.bytes())).toContain(".entry structk");
  });

  for (const [name, mode] of [
    ["fatbinLz4", "lz4"],
    ["fatbinZstd", "zstd"],
    ["fatbinPlain", "none"],
  ] as const) {
    test(`${mode} entries decompress to the cubins nvcc -cubin builds, byte for byte`, () => {
      const es = fatbinEntries(fx[name]);
      expect(es.map((e) => `${e.kind}:${e.arch}:${e.compression}`)).toEqual([`cubin:sm_80:${mode}`, `cubin:sm_90:${mode}`, `ptx:compute_90:${mode}`]);
      expect(es.every((e) => e.compressed === (mode !== "none"))).toBe(true);
      expect(Buffer.from(es[0]!.bytes()).equals(Buffer.from(fx.cubin.sm_80))).toBe(true);
      expect(Buffer.from(es[1]!.bytes()).equals(Buffer.from(fx.cubin.sm_90))).toBe(true);
      // The PTX nvcc embeds is reformatted (comments dropped, whitespace squeezed), so it is
      // compared with the uncompressed fatbin's copy rather than with nvcc -ptx output; only the
      // NUL padding differs (an uncompressed payload is padded to 8 bytes).
      const unpadded = (b: Uint8Array) => text(b).replace(/\0+$/, "");
      expect(unpadded(es[2]!.bytes())).toBe(unpadded(fatbinEntries(fx.fatbinPlain)[2]!.bytes()));
      expect(text(es[2]!.bytes())).toContain(".visible .entry gridk(");
    });
  }

  test("a corrupt compressed payload fails with E_FATBIN naming the entry", () => {
    const bad = fx.fatbinLz4.slice();
    const e0 = fatbinEntries(bad)[0]!;
    bad.fill(0xff, e0.offset + 64 + 10, e0.offset + 64 + 40);
    expect(() => fatbinEntries(bad)[0]!.bytes()).toThrow(/lz4 payload of the entry at offset 16/);
  });

  test("extractFatbinFromElf reads a host object's .nv_fatbin", () => {
    const fb = extractFatbinFromElf(fx.hostObject);
    expect(isFatbin(fb)).toBe(true);
    expect(fatbinEntries(fb).map((e) => e.arch)).toEqual(["sm_80", "sm_90", "compute_90"]);
    expect(codeOf(() => extractFatbinFromElf(fx.cubin.sm_90))).toBe("E_FATBIN");
  });

  test("two containers back to back (a linked .nv_fatbin) read as one list", () => {
    const two = new Uint8Array(fx.fatbinPlain.length + fx.fatbinLz4.length);
    two.set(fx.fatbinPlain);
    two.set(fx.fatbinLz4, fx.fatbinPlain.length);
    expect(fatbinEntries(two).length).toBe(6);
  });

  test("pickCubin: exact SM first ('a' preferred), else a lower minor of the same major", () => {
    expect(pickCubin(fx.fatbin, "sm_90")).toMatchObject({ arch: "sm_90a", exact: true });
    expect(pickCubin(fx.fatbinZstd, "sm_90")).toMatchObject({ arch: "sm_90", exact: true });
    expect(cubinArch(pickCubin(fx.fatbinZstd, "sm_90").cubin)).toBe("sm_90");
    expect(pickCubin(fx.fatbin, "sm_86")).toMatchObject({ arch: "sm_80", exact: false });
    expect(pickCubin(fx.hostObject, "sm_89")).toMatchObject({ arch: "sm_80", exact: false });
    expect(pickCubin(fx.cubin.sm_90, "sm_90").cubin).toBe(fx.cubin.sm_90);
    // An arch-specific cubin runs only on its own SM.
    expect(codeOf(() => pickCubin(fx.cubin.sm_100a, "sm_103"))).toBe("E_NO_CUBIN");
    expect(pickCubin(fx.cubin.sm_100a, "sm_100").arch).toBe("sm_100a");
  });

  test("pickCubin says which archs are there when none fits", () => {
    let err: KerncapError | undefined;
    try {
      pickCubin(fx.fatbin, "sm_100");
    } catch (e) {
      err = e as KerncapError;
    }
    expect(err?.code).toBe("E_NO_CUBIN");
    expect(err?.message).toContain("sm_90a, sm_80, sm_90, compute_90");
    expect(err?.hint).toMatch(/PTX/);
    expect(() => pickCubin(fx.fatbin, "hopper")).toThrow(/cannot read the GPU architecture/);
  });
});
