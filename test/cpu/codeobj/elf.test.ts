import { beforeAll, describe, expect, test } from "bun:test";
import { KerncapError } from "../../../src/errors.ts";
import { EM_CUDA, isElf, parseElf, SHT_NOBITS, STT_FUNC, STT_OBJECT } from "../../../src/codeobj/elf.ts";
import { buildFixtures, type Fixtures, NO_NVCC_REASON, NVCC } from "../../nvcc-fixtures.ts";

/** A minimal valid ELF64 LE header with no sections. */
function header(): Uint8Array {
  const b = new Uint8Array(64);
  b.set([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1]);
  const dv = new DataView(b.buffer);
  dv.setUint16(0x12, EM_CUDA, true);
  dv.setUint32(0x30, 0x06005a04, true);
  dv.setUint16(0x3a, 64, true);
  return b;
}

function expectElfError(bytes: Uint8Array, pattern: RegExp) {
  let err: unknown;
  try {
    parseElf(bytes).symbols();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(KerncapError);
  expect((err as KerncapError).code).toBe("E_ELF");
  expect((err as KerncapError).message).toMatch(pattern);
}

describe("parseElf on synthetic input", () => {
  test("reads a header without sections", () => {
    const elf = parseElf(header());
    expect(elf.header.machine).toBe(EM_CUDA);
    expect(elf.header.flags).toBe(0x06005a04);
    expect(elf.sections).toEqual([]);
    expect(elf.symbols()).toEqual([]);
  });
  test("rejects truncated, non-ELF, ELF32 and big-endian input with the offset or field", () => {
    expectElfError(header().subarray(0, 20), /truncated at offset 20/);
    expectElfError(new Uint8Array(64), /no ELF magic/);
    const c32 = header();
    c32[4] = 1;
    expectElfError(c32, /ELF64/);
    const be = header();
    be[5] = 2;
    expectElfError(be, /little-endian/);
    expect(isElf(new Uint8Array([0x7f, 0x45, 0x4c, 0x46]))).toBe(true);
    expect(isElf(new Uint8Array([0x7f, 0x45]))).toBe(false);
  });
  test("rejects a section table past the end", () => {
    const b = header();
    const dv = new DataView(b.buffer);
    dv.setBigUint64(0x28, 64n, true); // e_shoff just after the header
    dv.setUint16(0x3c, 3, true); // 3 sections, none present
    expectElfError(b, /section header table \(3 entries\) at offset 64 \(\+192 bytes\) runs past the end of the 64-byte image/);
  });
});

describe.skipIf(!NVCC)(`parseElf on nvcc output${NVCC ? "" : ` (${NO_NVCC_REASON})`}`, () => {
  let fx: Fixtures;
  beforeAll(async () => {
    fx = await buildFixtures();
  }, 60_000);

  test("sections, names and symbols of an sm_90 cubin", () => {
    const elf = parseElf(fx.cubin.sm_90);
    expect(elf.header.machine).toBe(EM_CUDA);
    expect(elf.sections[0]!.name).toBe("");
    expect(elf.section(".shstrtab")).toBeDefined();
    expect(elf.section(".text.structk")!.size).toBeGreaterThan(0);
    expect(elf.section(".nv.global")!.type).toBe(SHT_NOBITS);
    expect(elf.sectionBytes(".nv.global").length).toBe(0);
    // .nv.global.init holds dev_table = {1.0f, 0, ...}: 400 bytes starting with 1.0f.
    const init = elf.sectionBytes(".nv.global.init");
    expect(new DataView(init.buffer, init.byteOffset).getFloat32(0, true)).toBe(1);
    const syms = elf.symbols();
    const structk = syms.find((s) => s.name === "structk")!;
    expect(structk.type).toBe(STT_FUNC);
    expect(structk.section).toBe(".text.structk");
    expect(structk.size).toBe(elf.section(".text.structk")!.size);
    const table = syms.find((s) => s.name === "dev_table")!;
    expect([table.type, table.size, table.section]).toEqual([STT_OBJECT, 400, ".nv.global.init"]);
    expect(() => elf.sectionBytes(".nope")).toThrow(/no section named .nope/);
  });

  test("a real cubin cut short of its section table fails with E_ELF, never a RangeError", () => {
    const full = fx.cubin.sm_90;
    const { shoff, shnum } = parseElf(full).header;
    for (const cut of [10, 63, 64, 1000, shoff + 100, shoff + shnum * 64 - 1]) {
      let err: unknown;
      try {
        const elf = parseElf(full.subarray(0, cut));
        elf.symbols();
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(KerncapError);
    }
  });
});
