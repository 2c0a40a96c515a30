import { beforeAll, describe, expect, test } from "bun:test";
import { KerncapError } from "../../../src/errors.ts";
import {
  cubinArch,
  cubinGlobals,
  cubinKernelParams,
  cubinKernels,
  cubinParamLayout,
  cubinTarget,
  EIATTR_KPARAM_INFO,
  parseNvInfo,
} from "../../../src/codeobj/cubin.ts";
import { parseElf } from "../../../src/codeobj/elf.ts";
import { buildFixtures, type Fixtures, NO_NVCC_REASON, NVCC } from "../../nvcc-fixtures.ts";

/** Copy of `bytes` with EI_ABIVERSION and e_flags replaced (to exercise the CUDA <= 12 layout). */
function withFlags(bytes: Uint8Array, abiVersion: number, flags: number): Uint8Array {
  const b = bytes.slice();
  b[8] = abiVersion;
  new DataView(b.buffer).setUint32(0x30, flags, true);
  return b;
}

describe("parseNvInfo", () => {
  test("decodes NVAL/BVAL/HVAL/SVAL records and skips trailing zero padding", () => {
    // Bytes as nvcc 13 writes them: .nv.compat of an sm_90a cubin, then a KPARAM_INFO record.
    const sec = new Uint8Array([
      0x02, 0x09, 0x01, 0x00, 0x03, 0x07, 0x01, 0x01, 0x01, 0x50, 0x00, 0x00, 0x04, 0x17, 0x0c, 0x00, 0, 0, 0, 0, 0x04, 0x00, 0x30, 0x00, 0x00, 0xf0, 0x21,
      0x00, 0, 0,
    ]);
    const attrs = parseNvInfo(sec);
    expect(attrs.map((a) => [a.format, a.attr, a.value])).toEqual([
      [2, 9, 1],
      [3, 7, 0x0101],
      [1, 0x50, 0],
      [4, EIATTR_KPARAM_INFO, 12],
    ]);
    expect([...attrs[3]!.payload.subarray(4, 8)]).toEqual([0x04, 0x00, 0x30, 0x00]);
  });
  test("rejects a payload that runs past the section", () => {
    expect(() => parseNvInfo(new Uint8Array([0x04, 0x17, 0x0c, 0x00, 1, 2]))).toThrow(/payload of 12 bytes at offset 4 runs past the section end \(6\)/);
    expect(() => parseNvInfo(new Uint8Array([0x07, 0x17, 0, 0]))).toThrow(/unknown record format 7/);
  });
});

describe.skipIf(!NVCC)(`cubin readers on nvcc output${NVCC ? "" : ` (${NO_NVCC_REASON})`}`, () => {
  let fx: Fixtures;
  beforeAll(async () => {
    fx = await buildFixtures();
  }, 60_000);

  test("cubinArch reads the CUDA 13 e_flags layout and the .nv.compat 'a' marker", () => {
    expect(cubinArch(fx.cubin.sm_80)).toBe("sm_80");
    expect(cubinArch(fx.cubin.sm_90)).toBe("sm_90");
    expect(cubinArch(fx.cubin.sm_90a)).toBe("sm_90a");
    expect(cubinArch(fx.cubin.sm_100a)).toBe("sm_100a");
    expect(cubinArch(fx.cubin.sm_120)).toBe("sm_120");
    expect(cubinTarget(fx.cubin.sm_90).layout).toBe("v2");
    // Observed: e_flags do not tell sm_90 from sm_90a in CUDA 13 (the test documents it).
    expect(parseElf(fx.cubin.sm_90).header.flags).toBe(parseElf(fx.cubin.sm_90a).header.flags);
    expect(parseElf(fx.cubin.sm_90).header.abiVersion).toBe(8);
  });

  test("cubinArch reads the CUDA <= 12 layout (synthetic e_flags per LLVM ELF.h)", () => {
    // EF_CUDA_SM90 | EF_CUDA_TEXMODE_UNIFIED | EF_CUDA_64BIT_ADDRESS | EF_CUDA_VIRTUAL_SM(90)
    const old = 0x5a | 0x100 | 0x400 | (0x5a << 16);
    const sm90 = withFlags(fx.cubin.sm_80, 7, old); // sm_80's .nv.compat has no 'a' marker
    expect(cubinTarget(sm90)).toEqual({ sm: 90, variant: "", layout: "v1" });
    expect(cubinArch(withFlags(fx.cubin.sm_80, 7, old | 0x800))).toBe("sm_90a");
    expect(cubinArch(withFlags(fx.cubin.sm_80, 7, 0x46 | 0x500))).toBe("sm_70");
  });

  test("cubinArch rejects non-CUDA ELF", () => {
    const amd = fx.cubin.sm_90.slice();
    new DataView(amd.buffer).setUint16(0x12, 224, true);
    expect(() => cubinArch(amd)).toThrow(KerncapError);
    expect(() => cubinArch(amd)).toThrow(/e_machine is 224/);
  });

  test("cubinKernels lists __global__ functions (mangled), not device functions", () => {
    const ks = cubinKernels(fx.cubin.sm_90);
    expect(ks.sort()).toEqual(["_Z2tkIdLi3EEvPT_PKS0_i", "_Z2tkIfLi2EEvPT_PKS0_i", "emptyk", "gridk", "hugek", "structk", "typesk"].sort());
    expect(ks).not.toContain("_Z6helperf");
    expect(cubinKernels(fx.cubin.sm_100a).sort()).toEqual(ks.sort());
  });

  test("cubinParamLayout matches the C layout computed by hand", () => {
    const c = fx.cubin.sm_90;
    // structk(char c, S s, short h, double* p, int64_t q): S aligns to 8 and is 24 bytes.
    expect(cubinParamLayout(c, "structk")).toEqual([
      { index: 0, offset: 0, size: 1 },
      { index: 1, offset: 8, size: 24 },
      { index: 2, offset: 32, size: 2 },
      { index: 3, offset: 40, size: 8 },
      { index: 4, offset: 48, size: 8 },
    ]);
    expect(cubinKernelParams(c, "structk").totalBytes).toBe(56);
    // __grid_constant__ 128-byte struct, then a pointer.
    expect(cubinKernelParams(c, "gridk")).toEqual({
      params: [
        { index: 0, offset: 0, size: 128 },
        { index: 1, offset: 128, size: 8 },
      ],
      totalBytes: 136,
      cbankOffset: 0x210,
    });
    // Templated kernels: (T*, const T*, int).
    for (const k of ["_Z2tkIfLi2EEvPT_PKS0_i", "_Z2tkIdLi3EEvPT_PKS0_i"]) {
      expect(cubinKernelParams(c, k)).toMatchObject({
        params: [
          { index: 0, offset: 0, size: 8 },
          { index: 1, offset: 8, size: 8 },
          { index: 2, offset: 16, size: 4 },
        ],
        totalBytes: 20,
      });
    }
    // bool, char, short, int, long long, float, double, float4, A16, double2, void*, unsigned char
    const sizes = [1, 1, 2, 4, 8, 4, 8, 16, 16, 16, 8, 1];
    const aligns = [1, 1, 2, 4, 8, 4, 8, 16, 16, 16, 8, 1];
    let off = 0;
    const expected = sizes.map((size, index) => {
      off = Math.ceil(off / aligns[index]!) * aligns[index]!;
      const slot = { index, offset: off, size };
      off += size;
      return slot;
    });
    expect(cubinParamLayout(c, "typesk")).toEqual(expected);
    expect(cubinKernelParams(c, "typesk").totalBytes).toBe(89);
    // A 20000-byte parameter (encoded with the 0x45 attribute, size as a u32).
    expect(cubinKernelParams(c, "hugek")).toMatchObject({
      params: [
        { index: 0, offset: 0, size: 20000 },
        { index: 1, offset: 20000, size: 1 },
        { index: 2, offset: 20008, size: 8 },
      ],
      totalBytes: 20016,
    });
    expect(cubinKernelParams(c, "emptyk")).toEqual({ params: [], totalBytes: 0, cbankOffset: undefined });
    // Same layout on Blackwell; only the bank offset moves.
    expect(cubinParamLayout(fx.cubin.sm_100a, "structk")).toEqual(cubinParamLayout(c, "structk"));
  });

  test("cubinParamLayout names the kernels present when the name is wrong", () => {
    let err: KerncapError | undefined;
    try {
      cubinParamLayout(fx.cubin.sm_90, "nokernel");
    } catch (e) {
      err = e as KerncapError;
    }
    expect(err?.code).toBe("E_KERNEL_NOT_FOUND");
    expect(err?.hint).toContain("structk");
  });

  test("cubinGlobals lists __device__, __constant__ and __managed__ variables, not parameter banks", () => {
    const byName = Object.fromEntries(cubinGlobals(fx.cubin.sm_90).map((g) => [g.name, g]));
    expect(Object.keys(byName).sort()).toEqual(["const_coef", "const_init", "dev_counter", "dev_table", "man_val"]);
    expect(byName.dev_counter).toMatchObject({ size: 4, section: ".nv.global", managed: false });
    expect(byName.dev_table).toMatchObject({ size: 400, section: ".nv.global.init" });
    expect(byName.const_coef).toMatchObject({ size: 64, section: ".nv.constant3", offset: 0 });
    expect(byName.const_init).toMatchObject({ size: 16, section: ".nv.constant3", offset: 64 });
    expect(byName.man_val).toMatchObject({ size: 32, section: ".nv.global", managed: true });
  });
});
