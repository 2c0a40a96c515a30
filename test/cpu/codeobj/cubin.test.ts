import { beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KerncapError } from "../../../src/errors.ts";
import {
  cubinArch,
  cubinGlobals,
  cubinKernelParams,
  cubinKernels,
  cubinKernelSpills,
  cubinParamLayout,
  cubinTarget,
  EIATTR_CUDA_API_VERSION,
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

/** Kernels for the spill figures: `spill` keeps 64 floats live (spills under -maxrregcount=24; 64-bit spills too on some archs), `local` indexes a local array at run time (a stack frame, no spill). */
const SPILL_CU = `
extern "C" __global__ void spill(float* o, const float* a, int n) {
  float r[64];
#pragma unroll
  for (int i = 0; i < 64; i++) r[i] = a[threadIdx.x * 64 + i] * a[i];
  float s = 0;
#pragma unroll
  for (int j = 0; j < 8; j++)
#pragma unroll
    for (int i = 0; i < 64; i++) s += r[i] * r[(i * 7 + j) % 64];
  o[threadIdx.x] = s;
}
extern "C" __global__ void local(float* o, const int* idx, int n) {
  float r[64];
  for (int i = 0; i < 64; i++) r[i] = o[i] * 2;
  double d[8];
  for (int i = 0; i < 8; i++) d[i] = o[i + 64];
  o[threadIdx.x] = r[idx[threadIdx.x]] + d[idx[n] & 7];
}
`;

describe.skipIf(!NVCC)(`cubinKernelSpills against ptxas -v${NVCC ? "" : ` (${NO_NVCC_REASON})`}`, () => {
  test("the spill stores and loads read from the cubin are ptxas -v's bytes, on every architecture; a local array is no spill; no stack frame, no spill (nu9 #6)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kerncap-spill-"));
    try {
      writeFileSync(join(dir, "k.cu"), SPILL_CU);
      const runs = ["sm_75", "sm_80", "sm_90", "sm_120"].flatMap((arch) =>
        [["-maxrregcount=24"], []].map(async (flags) => {
          const out = `${arch}${flags.length ? "-capped" : ""}.cubin`;
          const p = Bun.spawn([NVCC!, "-cubin", `-arch=${arch}`, ...flags, "-Xptxas", "-v", "-o", out, "k.cu"], { cwd: dir, stdout: "pipe", stderr: "pipe" });
          const [err, code] = await Promise.all([new Response(p.stderr).text(), p.exited]);
          if (code !== 0) throw new Error(err);
          return { arch, capped: flags.length > 0, err, cubin: new Uint8Array(readFileSync(join(dir, out))) };
        }),
      );
      let spilled = 0;
      for (const { arch, capped, err, cubin } of await Promise.all(runs)) {
        for (const kernel of ["spill", "local"]) {
          // ptxas -v: "Function properties for K\n    F bytes stack frame, S bytes spill stores, L bytes spill loads"
          const m = new RegExp(`Function properties for ${kernel}\\n\\s+(\\d+) bytes stack frame, (\\d+) bytes spill stores, (\\d+) bytes spill loads`).exec(
            err,
          );
          expect(m, `${arch} ${kernel}: ${err}`).not.toBeNull();
          const want = { stores: Number(m![2]), loads: Number(m![3]) };
          expect([arch, capped, kernel, cubinKernelSpills(cubin, kernel)]).toEqual([arch, capped, kernel, want]);
          if (kernel === "local") expect(Number(m![1])).toBeGreaterThan(0); // a frame without a spill
          if (kernel === "spill" && capped && want.stores > 0 && want.loads > 0) spilled++;
        }
      }
      expect(spilled).toBe(4); // the capped build of `spill` spills on every architecture: the count is not a trivial 0
      // a stack frame and no annotation in a cubin of a toolchain before nvcc 13 (its API version below 130): unknown, not 0
      const old = (await runs[5]!).cubin.slice(); // sm_90, uncapped
      const version = parseNvInfo(parseElf(old).sectionBytes(parseElf(old).section(".nv.info.local")!)).find((a) => a.attr === EIATTR_CUDA_API_VERSION)!;
      expect(version.payload[0]).toBe(130);
      version.payload[0] = 120;
      expect(cubinKernelSpills(old, "local")).toBeUndefined();
      expect(cubinKernelSpills(old, "spill")).toEqual({ stores: 0, loads: 0 }); // no frame: no spill whatever the toolchain
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
