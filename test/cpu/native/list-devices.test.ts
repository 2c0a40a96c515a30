/**
 * listDevices (src/native/libcuda.ts), what `kerncap doctor --json` gives as `gpus`, against a stub
 * driver compiled here (no GPU needed): the driver calls, their arguments and the fields read back.
 */
import { expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { listDevices } from "../../../src/native/libcuda.ts";
import { tempDir } from "../fixtures.ts";

/** A libcuda stub of two devices (ordinals 0 and 1, named by ordinal; sm_90 and sm_80; 80 and 40 GiB), or none with `count` 0. */
const STUB = (count: number) => `
#include <string.h>
#include <stddef.h>
int cuInit(unsigned f) { return 0; }
int cuDeviceGetCount(int *n) { *n = ${count}; return 0; }
int cuDeviceGet(int *d, int i) { *d = 10 + i; return 0; }
int cuDeviceGetName(char *b, int len, int d) { strncpy(b, d == 10 ? "NVIDIA H100 80GB HBM3" : "NVIDIA A100-SXM4-40GB", len); return 0; }
int cuDeviceGetAttribute(int *v, int a, int d) { *v = a == 75 ? (d == 10 ? 9 : 8) : a == 76 ? 0 : -1; return a == 75 || a == 76 ? 0 : 1; }
int cuDeviceTotalMem_v2(size_t *b, int d) { *b = (size_t)(d == 10 ? 80 : 40) << 30; return 0; }
`;

function stub(count: number): string {
  const d = tempDir();
  writeFileSync(join(d, "stub.c"), STUB(count));
  const cc = Bun.spawnSync(["gcc", "-shared", "-fPIC", "-o", join(d, "libcuda.so.1"), join(d, "stub.c")], { stderr: "pipe" });
  expect(cc.exitCode, cc.stderr.toString()).toBe(0);
  return join(d, "libcuda.so.1");
}

test.skipIf(!Bun.which("gcc"))("each device's ordinal, name, architecture and memory; none without a device", () => {
  expect(listDevices(stub(2))).toEqual([
    { index: 0, name: "NVIDIA H100 80GB HBM3", arch: "sm_90", memoryBytes: 80 * 2 ** 30 },
    { index: 1, name: "NVIDIA A100-SXM4-40GB", arch: "sm_80", memoryBytes: 40 * 2 ** 30 },
  ]);
  expect(listDevices(stub(0))).toEqual([]);
});
