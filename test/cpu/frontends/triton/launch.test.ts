import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "../../fixtures.ts";
import type { Manifest } from "../../../../src/format/manifest.ts";
import { withRebuiltLaunch } from "../../../../src/replay/engine.ts";
import { tritonRebuiltLaunch } from "../../../../src/frontends/triton/launch.ts";

// a captured Triton launch: num_warps 4 (128 threads), no dynamic shared memory
const m = {
  launch: { grid: [4096, 1, 1], block: [128, 1, 1], sharedMemBytes: 0, stream: "0x0", attributes: [] },
  functionAttributes: [{ id: 8, name: "MAX_DYNAMIC_SHARED_SIZE_BYTES", value: 0 }],
} as unknown as Manifest;

describe("the launch of a rebuilt Triton kernel (repro.py's CUBIN.json)", () => {
  const dir = tempDir();
  const cubin = join(dir, "k.cubin");
  test("compiled with other num_warps: its block is num_warps × 32, with its shared memory", () => {
    writeFileSync(cubin + ".json", JSON.stringify({ shared: 2048, num_warps: 1, num_ctas: 1 }));
    expect(tritonRebuiltLaunch(cubin, m)).toEqual({ block: [32, 1, 1], sharedMemBytes: 2048 });
  });
  test("compiled as captured, no metadata, or not repro.py's shape: the captured launch (undefined)", () => {
    writeFileSync(cubin + ".json", JSON.stringify({ shared: 0, num_warps: 4, num_ctas: 1 }));
    expect(tritonRebuiltLaunch(cubin, m)).toBeUndefined();
    expect(tritonRebuiltLaunch(join(dir, "none.cubin"), m)).toBeUndefined();
    for (const bad of [
      "{",
      JSON.stringify({ shared: -1, num_warps: 8 }),
      JSON.stringify({ shared: 0, num_warps: 0 }),
      JSON.stringify({ shared: 0, num_warps: 2.5 }),
      "x".repeat(5000),
    ]) {
      writeFileSync(cubin + ".json", bad);
      expect(tritonRebuiltLaunch(cubin, m)).toBeUndefined();
    }
  });
  test("the engine's launch: block and shared memory replaced, the dynamic shared limit raised only where needed", () => {
    const a = withRebuiltLaunch(m, { block: [256, 1, 1], sharedMemBytes: 65536 });
    expect(a.launch).toMatchObject({ grid: [4096, 1, 1], block: [256, 1, 1], sharedMemBytes: 65536 });
    expect(a.functionAttributes).toEqual([{ id: 8, name: "MAX_DYNAMIC_SHARED_SIZE_BYTES", value: 65536 }]);
    expect(withRebuiltLaunch(m, { block: [32, 1, 1], sharedMemBytes: 0 }).functionAttributes).toEqual(m.functionAttributes);
    expect(m.launch.block).toEqual([128, 1, 1]); // the manifest itself is left alone
  });
});
