import { describe, expect, test } from "bun:test";
import { inferGrid, nameScore } from "../../../../src/frontends/triton/grid.ts";
import { tritonScalarArgs } from "../../../../src/frontends/triton/tune.ts";

/**
 * Grid inference on what captures hold: the captured grid, the integer arguments (from the
 * parameter bytes through the signature, as tune reads them) and the app's constexprs. The
 * kernels are those of test/apps (triton_matmul_autotune.py: M, N, K = 512, 384, 256 and the
 * grid lambda (cdiv(M, BLOCK_M), cdiv(N, BLOCK_N)); triton_app.py's 1-D add) and an inductor
 * pointwise kernel (xnumel, XBLOCK).
 */
const MATMUL_SIG = {
  a_ptr: "*fp16",
  b_ptr: "*fp16",
  c_ptr: "*fp32",
  M: "i32",
  N: "i32",
  K: "i32",
  stride_am: "i32",
  stride_ak: "constexpr",
  stride_bk: "i32",
  stride_bn: "constexpr",
  stride_cm: "i32",
  stride_cn: "constexpr",
  BLOCK_M: "constexpr",
  BLOCK_N: "constexpr",
  BLOCK_K: "constexpr",
};
/** The parameter bytes Triton's launcher packs for the matmul: 3 pointers, then M, N, K, stride_am, stride_bk, stride_cm (the strides equal to 1 are constexprs). */
function matmulArgs(): Record<string, number> {
  const p = new Uint8Array(48);
  const dv = new DataView(p.buffer);
  [0x7f00n, 0x7f10n, 0x7f20n].forEach((x, i) => dv.setBigUint64(i * 8, x, true));
  [512, 384, 256, 256, 384, 384].forEach((x, i) => dv.setInt32(24 + i * 4, x, true));
  const layout = [0, 8, 16, 24, 28, 32, 36, 40, 44].map((offset, index) => ({ index, offset, size: index < 3 ? 8 : 4 }));
  return tritonScalarArgs(MATMUL_SIG, p, layout);
}
const MATMUL_SPACE = [
  { BLOCK_M: 64, BLOCK_N: 64, BLOCK_K: 32 },
  { BLOCK_M: 128, BLOCK_N: 64, BLOCK_K: 32 },
  { BLOCK_M: 64, BLOCK_N: 128, BLOCK_K: 64 },
  { BLOCK_M: 128, BLOCK_N: 128, BLOCK_K: 32 },
];

describe("tune: the launch grid inferred from the capture", () => {
  test("names: BLOCK_M goes with M, BLOCK_SIZE_N with n_cols, XBLOCK with xnumel, BLOCK with anything; K less (a reduction)", () => {
    expect(nameScore("M", "BLOCK_M")).toBe(2);
    expect(nameScore("n_cols", "BLOCK_SIZE_N")).toBe(2);
    expect(nameScore("xnumel", "XBLOCK")).toBe(2);
    expect(nameScore("n_elements", "BLOCK_SIZE")).toBe(1);
    expect(nameScore("N", "BLOCK_M")).toBe(0);
    expect(nameScore("K", "BLOCK_K")).toBe(1.5);
  });

  test("the autotuned matmul, whichever config the app chose: (cdiv(M, BLOCK_M), cdiv(N, BLOCK_N)), checked on the captured grid", () => {
    const args = matmulArgs();
    expect(args).toEqual({ M: 512, N: 384, K: 256, stride_am: 256, stride_bk: 384, stride_cm: 384 });
    for (const chosen of MATMUL_SPACE) {
      const captured: [number, number, number] = [Math.ceil(512 / chosen.BLOCK_M), Math.ceil(384 / chosen.BLOCK_N), 1];
      const r = inferGrid(captured, args, chosen, MATMUL_SPACE);
      expect(r.grid, JSON.stringify(r)).toBe("cdiv(M, BLOCK_M), cdiv(N, BLOCK_N)");
    }
  });

  test("a flattened matmul grid: cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N) on axis x", () => {
    const r = inferGrid([8 * 6, 1, 1], { M: 512, N: 384, K: 256 }, { BLOCK_M: 64, BLOCK_N: 64, GROUP_M: 8 }, [{ BLOCK_M: 128, BLOCK_N: 64, GROUP_M: 8 }]);
    expect(r.grid).toBe("cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)");
  });

  test("1-D: cdiv(n_elements, BLOCK_SIZE); inductor: cdiv(xnumel, XBLOCK); a batch axis: the argument itself", () => {
    expect(inferGrid([4096, 1, 1], { n_elements: 1 << 20 }, { BLOCK_SIZE: 256 }, [{ BLOCK_SIZE: 1024 }]).grid).toBe("cdiv(n_elements, BLOCK_SIZE)");
    expect(inferGrid([2048, 1, 1], { xnumel: 262144, rnumel: 512 }, { XBLOCK: 128, RBLOCK: 512 }, [{ XBLOCK: 64, RBLOCK: 512 }]).grid).toBe(
      "cdiv(xnumel, XBLOCK)",
    );
    expect(inferGrid([16, 12, 1], { N_CTX: 1024, H: 12 }, { BLOCK_M: 64 }, [{ BLOCK_M: 128 }]).grid).toBe("cdiv(N_CTX, BLOCK_M), H");
  });

  test("no formula fits: refused with what was tried; formulas that fit and differ: refused, listing them", () => {
    const none = inferGrid([7, 1, 1], { n: 1000 }, { BLOCK: 256 }, [{ BLOCK: 128 }]);
    expect(none.grid).toBeNull();
    if (none.grid === null) {
      expect(none.why).toContain("no axis of the captured grid 7x1x1 is cdiv(ARG, TILE)");
      expect(none.why).toContain("n=1000");
      expect(none.tried.join(" ")).toContain("axis x = 7: cdiv(ARG, TILE), cdiv(ARG, TILE) * cdiv(ARG, TILE)");
    }
    // two 1-D sizes, one generic tile: cdiv(a, BLOCK) and cdiv(b, BLOCK) both give 4, and differ at BLOCK = 64 (16, 15)
    const two = inferGrid([4, 1, 1], { a: 1024, b: 900 }, { BLOCK: 256 }, [{ BLOCK: 64 }]);
    expect(two.grid).toBeNull();
    if (two.grid === null) expect(two.why).toContain("cdiv(a, BLOCK); cdiv(b, BLOCK)");
    // the same two when the space never tells them apart: either is the answer
    expect(inferGrid([4, 1, 1], { a: 1024, b: 900 }, { BLOCK: 256 }, [{ BLOCK: 256 }]).grid).toBe("cdiv(a, BLOCK)");
  });
});
