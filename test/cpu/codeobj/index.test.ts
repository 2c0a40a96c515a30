import { beforeAll, describe, expect, test } from "bun:test";
import { describeModule, jitPtx } from "../../../src/codeobj/index.ts";
import { buildFixtures, type Fixtures, NO_NVCC_REASON, NVCC } from "../../nvcc-fixtures.ts";

const KERNELS = ["_Z2tkIdLi3EEvPT_PKS0_i", "_Z2tkIfLi2EEvPT_PKS0_i", "emptyk", "gridk", "hugek", "structk", "typesk"];

describe("describeModule on synthetic input", () => {
  test("an AMDGPU ELF header is hsaco; unknown bytes throw E_MODULE_KIND", () => {
    const b = new Uint8Array(64);
    b.set([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1]);
    new DataView(b.buffer).setUint16(0x12, 224, true);
    expect(describeModule(b)).toEqual({ kind: "hsaco", archs: [] });
    expect(() => describeModule(new Uint8Array([1, 2, 3, 4]))).toThrow(/unknown module image \(first bytes 01 02 03 04\)/);
  });
  test("PTX text: .target and .entry names", () => {
    const ptx =
      "//\n// Generated\n.version 9.0\n.target sm_90a\n.address_size 64\n.visible .entry _Z1kPf(\n.param .u64 p\n)\n{ ret; }\n.entry other()\n{ ret; }\n";
    expect(describeModule(new TextEncoder().encode(ptx))).toEqual({ kind: "ptx", archs: ["sm_90a"], kernels: ["_Z1kPf", "other"] });
  });
});

describe.skipIf(!NVCC)(`describeModule on nvcc output${NVCC ? "" : ` (${NO_NVCC_REASON})`}`, () => {
  let fx: Fixtures;
  beforeAll(async () => {
    fx = await buildFixtures();
  }, 60_000);

  test("cubin, fatbin, host object and PTX", () => {
    const sorted = (d: { kernels?: string[] }) => [...(d.kernels ?? [])].sort();
    const cubin = describeModule(fx.cubin.sm_90a);
    expect([cubin.kind, cubin.archs]).toEqual(["cubin", ["sm_90a"]]);
    expect(sorted(cubin)).toEqual(KERNELS);
    const fatbin = describeModule(fx.fatbinLz4);
    expect([fatbin.kind, fatbin.archs]).toEqual(["fatbin", ["sm_80", "sm_90", "compute_90"]]);
    expect(sorted(fatbin)).toEqual(KERNELS);
    const host = describeModule(fx.hostObject);
    expect([host.kind, host.archs]).toEqual(["elf", ["sm_80", "sm_90", "compute_90"]]);
    const ptx = describeModule(fx.ptx);
    expect([ptx.kind, ptx.archs]).toEqual(["ptx", ["sm_90"]]);
    expect(sorted(ptx)).toEqual(KERNELS);
  });
});

describe("jitPtx", () => {
  test("machine code for the GPU: no JIT; none: the newest PTX not newer than the GPU; no usable PTX: none", () => {
    expect(jitPtx(["sm_90", "compute_90"], "sm_90")).toBeUndefined();
    expect(jitPtx(["sm_90a", "compute_90"], "sm_90")).toBeUndefined();
    expect(jitPtx(["sm_90", "compute_80", "compute_75"], "sm_86")).toBe("compute_80");
    expect(jitPtx(["sm_90", "compute_90"], "sm_80")).toBeUndefined();
    expect(jitPtx(["sm_90"], "sm_80")).toBeUndefined();
    expect(jitPtx(["compute_80"], "sm_100")).toBe("compute_80");
  });
});
