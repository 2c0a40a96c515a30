/**
 * HSA replay backend without an AMD GPU: the library lookup, the refusal on a machine without a
 * GPU agent, and the pure helpers (span merging, AQL packet encoding). Nothing here dispatches
 * (test/cpu/hsa-replay.test.ts replays against a fake runtime).
 */
import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { KerncapError } from "../../../src/errors.ts";
import type { Manifest } from "../../../src/format/manifest.ts";
import { vaSpans } from "../../../src/replay/compare.ts";
import { hsaBackend } from "../../../src/replay/backends/hsa.ts";
import { encodeDispatchPacket } from "../../../src/native/hsa-packet.ts";
import { hsaLibraryCandidates, loadHsa } from "../../../src/native/libhsa.ts";

const manifest = {
  format: "kerncap-capture",
  version: 1,
  kernel: { name: "saxpy", demangled: "saxpy", frontend: "hip", match: "saxpy", matchIndex: 0, launchIndex: 0 },
  device: { vendor: "amd", name: "AMD Instinct MI210", arch: "gfx90a", driverVersion: 0, ordinal: 0 },
  launch: { api: "hsa_queue", grid: [4096, 1, 1], block: [256, 1, 1], sharedMemBytes: 0, cluster: [1, 1, 1], attributes: [] },
  regions: [],
  globals: [],
} as unknown as Manifest;

const haveLib = hsaLibraryCandidates().some((p) => p.includes("/") && existsSync(p));
const haveKfd = existsSync("/dev/kfd");

describe("HSA replay on a machine without an AMD GPU", () => {
  test.skipIf(haveKfd)("the HSA backend refuses with 'no HSA GPU agent found' or 'libhsa-runtime64 not found'", () => {
    let err: unknown;
    try {
      hsaBackend(manifest);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(KerncapError);
    const k = err as KerncapError;
    if (haveLib) {
      expect(k.code).toBe("E_NO_GPU");
      expect(k.message).toStartWith("no HSA GPU agent found");
      expect(k.message).toContain("/dev/kfd is absent");
    } else {
      expect(k.code).toBe("E_HSA_NOT_FOUND");
      expect(k.message).toStartWith("libhsa-runtime64 not found: looked in");
    }
  });

  test("a missing library names every path tried", () => {
    expect(() => loadHsa(["/nonexistent/a/libhsa-runtime64.so.1", "/nonexistent/b/libhsa-runtime64.so.1"])).toThrow(
      "libhsa-runtime64 not found: looked in /nonexistent/a/libhsa-runtime64.so.1 (absent), /nonexistent/b/libhsa-runtime64.so.1 (absent)",
    );
  });

  test.skipIf(!haveLib)("ROCm 5.2 runtime: the binding table resolves; vmem API is detected as absent", () => {
    const l = loadHsa(hsaLibraryCandidates().filter((p) => p.includes("/") && existsSync(p)));
    expect(typeof l.lib.hsa_init).toBe("function");
    // Debian 12 ships ROCm 5.2: no hsa_amd_vmem_* (ROCm 6.0+). A newer runtime has it.
    expect(l.vmem === null || typeof l.vmem.hsa_amd_vmem_address_reserve === "function").toBe(true);
  });
});

describe("pure helpers", () => {
  test("vaSpans (the spans both backends reserve) rounds to the granule and merges touching regions", () => {
    expect(
      vaSpans(
        [
          { va: 0x7f0000201000n, size: 100 },
          { va: 0x7f0000200000n, size: 4096 },
          { va: 0x7f0000400000n, size: 0x200001 },
          { va: 0x7f0000a00000n, size: 1 },
        ],
        0x200000,
      ),
    ).toEqual([
      { va: 0x7f0000200000n, size: 0x600000 },
      { va: 0x7f0000a00000n, size: 0x200000 },
    ]);
  });

  test("encodeDispatchPacket lays out hsa_kernel_dispatch_packet_t", () => {
    const { bytes, headerWord } = encodeDispatchPacket({
      grid: [4096, 2, 1],
      block: [256, 1, 1],
      groupSegmentSize: 1024,
      privateSegmentSize: 16,
      kernelObject: 0x7f00_1234_5600n,
      kernargAddress: 0x7f00_aaaa_0000n,
      completionSignal: 0x55n,
    });
    const dv = new DataView(bytes.buffer);
    expect(bytes.length).toBe(64);
    expect(dv.getUint32(0, true)).toBe(0); // header written last, separately
    expect([dv.getUint16(4, true), dv.getUint16(6, true), dv.getUint16(8, true)]).toEqual([256, 1, 1]);
    expect([dv.getUint32(12, true), dv.getUint32(16, true), dv.getUint32(20, true)]).toEqual([4096, 2, 1]);
    expect(dv.getUint32(24, true)).toBe(16);
    expect(dv.getUint32(28, true)).toBe(1024);
    expect(dv.getBigUint64(32, true)).toBe(0x7f00_1234_5600n);
    expect(dv.getBigUint64(40, true)).toBe(0x7f00_aaaa_0000n);
    expect(dv.getBigUint64(56, true)).toBe(0x55n);
    // type 2 (kernel dispatch), barrier, system acquire/release scopes; setup = 2 dimensions.
    expect(headerWord & 0xffff).toBe(2 | (1 << 8) | (2 << 9) | (2 << 11));
    expect(headerWord >>> 16).toBe(2);
  });
});

test("KERNCAP_HSA_PATH naming a file that does not exist is the only candidate (no fallback to the system's runtime)", () => {
  expect(hsaLibraryCandidates({ KERNCAP_HSA_PATH: "/nonexistent/libhsa-runtime64.so.1" })).toEqual(["/nonexistent/libhsa-runtime64.so.1"]);
  expect(hsaLibraryCandidates({ KERNCAP_HSA_PATH: "/nonexistent/libhsa-runtime64.so.1" }).length).toBe(1);
  expect(hsaLibraryCandidates({}).length).toBeGreaterThan(1);
});
