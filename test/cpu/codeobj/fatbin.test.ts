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
