import { describe, expect, test } from "bun:test";
import { bf16ToNumber, decode, elementType, halfToNumber, overallVerdict, RegionAccumulator, regionTypesFromParams } from "../../../src/replay/tolerance.ts";
import { tritonParamTypes } from "../../../src/frontends/triton/numerics.ts";

const f32 = (xs: number[]) => new Uint8Array(new Float32Array(xs).buffer);
const region = (changedInApp = true) => ({ va: "0x1000", kind: "device", size: 16, changedInApp });

describe("tolerance compare", () => {
  test("bit-exact, within tolerance, mismatch with max abs/rel and count", () => {
    const exp = f32([1, 2, 3, 4]);
    const before = f32([0, 0, 0, 0]);
    const a = new RegionAccumulator(region(), "fp32", "default", { atol: 0, rtol: 0 });
    a.add(0, f32([1, 2, 3, 4]), exp, before);
    expect(a.result().verdict).toBe("bit-exact");

    const b = new RegionAccumulator(region(), "fp32", "signature", { atol: 1e-3, rtol: 0 });
    b.add(0, f32([1, 2.0005, 3, 4]), exp, before);
    const rb = b.result();
    expect(rb.verdict).toBe("within-tolerance");
    expect(rb.overTolerance).toBe(0);
    expect(rb.maxAbsError).toBeCloseTo(0.0005, 6);
    expect(rb.bytesDiffering).toBeGreaterThan(0);

    const c = new RegionAccumulator(region(), "fp32", "signature", { atol: 1e-3, rtol: 1e-2 });
    c.add(0, f32([1, 2, 3.5, 4.02]), exp, before); // 0.5 > 1e-3 + 0.03; 0.02 ≤ 1e-3 + 0.04
    const rc = c.result();
    expect(rc.verdict).toBe("mismatch");
    expect(rc.overTolerance).toBe(1);
    expect(rc.firstOverOffset).toBe(8);
    expect(rc.maxRelError).toBeCloseTo(0.5 / 3, 6);
  });

  test("trivial passes fail: unchanged where the app wrote, all zeros where the app wrote data", () => {
    const exp = f32([1e-9, 0, 0, 0]);
    const before = f32([0, 0, 0, 0]);
    const a = new RegionAccumulator(region(), "fp32", "default", { atol: 1, rtol: 0 });
    a.add(0, f32([0, 0, 0, 0]), exp, before);
    expect(a.result()).toMatchObject({ verdict: "mismatch", trivial: "unchanged", overTolerance: 0 });
    const b = new RegionAccumulator(region(), "fp32", "default", { atol: 1, rtol: 0 });
    b.add(0, f32([0, 0, 0, 0]), exp, f32([5, 5, 5, 5]));
    expect(b.result()).toMatchObject({ verdict: "mismatch", trivial: "all-zeros" });
    // a region the app did not change may stay unchanged
    const c = new RegionAccumulator(region(false), "fp32", "default", { atol: 0, rtol: 0 });
    c.add(0, before, before);
    expect(c.result().verdict).toBe("bit-exact");
  });

  test("NaN and infinities; -0 equals 0 within zero tolerance", () => {
    const a = new RegionAccumulator(region(), "fp32", "default", { atol: 0, rtol: 0 });
    a.add(0, f32([NaN, Infinity, -0, 1]), f32([NaN, Infinity, 0, 1]), f32([9, 9, 9, 9]));
    expect(a.result().verdict).toBe("within-tolerance");
    const b = new RegionAccumulator(region(), "fp32", "default", { atol: 100, rtol: 0 });
    b.add(0, f32([NaN, 1, 1, 1]), f32([1, 1, 1, 1]), f32([9, 9, 9, 9]));
    expect(b.result().overTolerance).toBe(1);
    expect(overallVerdict([a.result(), b.result()])).toBe("mismatch");
  });

  test("element decoding: fp16, bf16, ints; type names", () => {
    expect(halfToNumber(0x3c00)).toBe(1);
    expect(halfToNumber(0xc000)).toBe(-2);
    expect(halfToNumber(0x0001)).toBe(2 ** -24);
    expect(bf16ToNumber(0x3f80)).toBe(1);
    expect(Array.from(decode(new Uint8Array([0xff, 0xff, 0xff, 0xff]), "i32"))).toEqual([-1]);
    expect(elementType("*fp16")).toBe("fp16");
    expect(elementType("bfloat16")).toBe("bf16");
    expect(elementType("*fp8e4nv")).toBe("u8");
    expect(elementType("nonsense")).toBeUndefined();
    // the names of an object's inherited keys are no types (adversary 80 #21: "constructor" in a judge file compared nothing)
    for (const inherited of ["constructor", "__proto__", "toString", "hasOwnProperty", "valueOf"]) expect(elementType(inherited), inherited).toBeUndefined();
  });

  test("region types from the Triton signature through the parameter bytes", () => {
    const params = new Uint8Array(32);
    const dv = new DataView(params.buffer);
    dv.setBigUint64(0, 0x1000n, true); // x_ptr → region 0
    dv.setBigUint64(8, 0x2008n, true); // out_ptr → inside region 1
    dv.setInt32(16, 7, true);
    const layout = [
      { index: 0, offset: 0, size: 8 },
      { index: 1, offset: 8, size: 8 },
      { index: 2, offset: 16, size: 4 },
      { index: 3, offset: 24, size: 8 },
    ];
    const types = tritonParamTypes({ x_ptr: "*fp16", out_ptr: "*bf16", n: "i32", BLOCK: "constexpr" });
    expect(types).toEqual(["*fp16", "*bf16", "i32"]);
    const regions = [
      { va: "0x1000", size: 256 },
      { va: "0x2000", size: 256 },
      { va: "0x3000", size: 64 },
    ];
    expect(regionTypesFromParams(params, layout, types, regions)).toEqual(["fp16", "bf16", undefined]);
  });

  test("tensors of different types in one allocator segment: the type of the tensor the launch wrote", () => {
    // a (fp16) and b (fp16) are read, c (fp32) is written; all three live in one 2 MiB region
    const params = new Uint8Array(24);
    const dv = new DataView(params.buffer);
    dv.setBigUint64(0, 0x10000n, true);
    dv.setBigUint64(8, 0x20000n, true);
    dv.setBigUint64(16, 0x30000n, true);
    const layout = [0, 8, 16].map((offset, index) => ({ index, offset, size: 8 }));
    const types = tritonParamTypes({ a_ptr: "*fp16", b_ptr: "*fp16", c_ptr: "*fp32", BLOCK_M: "constexpr" });
    const regions = [{ va: "0x0", size: 2 << 20 }];
    expect(regionTypesFromParams(params, layout, types, regions)).toEqual([undefined]); // ambiguous without memory
    const writtenAt = (ri: number, off: number) => ri === 0 && off === 0x30000;
    expect(regionTypesFromParams(params, layout, types, regions, writtenAt)).toEqual(["fp32"]);
    const bothWritten = (_: number, off: number) => off !== 0x20000;
    expect(regionTypesFromParams(params, layout, types, regions, bothWritten)).toEqual([undefined]); // still ambiguous: says so
  });
});
