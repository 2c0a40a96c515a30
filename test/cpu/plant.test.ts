/** test/gpu/plant.ts (the verdict tests' planted change) on a synthetic capture: the value moves by k ulp and the capture's checksums still hold. */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { verifyRegions, readManifest } from "../../src/format/capture-dir.ts";
import { plantUlps } from "../gpu/plant.ts";
import { makeCapture, tempDir } from "./fixtures.ts";

test("a value planted k ulp away in the after state, its chunk's kc64 re-sealed: the capture still verifies; an unchanged region is refused", async () => {
  const dir = join(tempDir(), "cap");
  await makeCapture(dir);
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  const r = plantUlps(dir, 0, 5, 3);
  f[0] = r.was;
  u[0]! += 3;
  expect(r.now).toBe(f[0]!);
  expect(r.now).not.toBe(r.was);
  expect(() => verifyRegions(dir, readManifest(dir))).not.toThrow();
  expect(() => plantUlps(dir, 1, 0, 1)).toThrow(/not changed/);
});
