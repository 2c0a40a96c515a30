/**
 * The stand-in HSA runtime and a synthetic hip capture, for the CPU tests of AMD captures without an
 * AMD GPU (test/cpu/hsa-replay.test.ts, test/cpu/export-hsa.test.ts): test/apps/hip/fake_libhsa.c
 * (host memory for device memory, the captured VAs mapped at their addresses, the kernel `scale`
 * run as a C function on the dispatch packet's kernarg), a real gfx90a code object of
 * test/apps/hip/scale.hip from hipcc (an offload bundle), and a capture of scale(data, 2, N)
 * finalized from raw_version 2 files hashed on the CPU (test/raw-fixture.ts), as c/hsa/kerncap_hsa.c
 * writes them.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { finalizeCapture } from "../src/capture/finalize.ts";
import { chunkedRanges } from "./raw-fixture.ts";

const ROOT = resolve(import.meta.dir, "..");
/** The stand-in runtime's source. */
export const FAKE_LIBHSA = join(ROOT, "test/apps/hip/fake_libhsa.c");
/** Floats in the data region of hipScaleCapture. */
export const SCALE_N = 3000;

/** A command's exit code (-1 when killed) and output, run to its end (at most 120 s). */
function run(cmd: string[], env: Record<string, string> = {}): { code: number; err: string } {
  const p = Bun.spawnSync(cmd, { env: { ...process.env, ...env }, stdout: "pipe", stderr: "pipe", timeout: 120_000 });
  return { code: p.exitCode ?? -1, err: p.stderr.toString() };
}

/**
 * The stand-in runtime built as the shared library `so` (gcc -shared).
 * @throws Error with gcc's messages
 */
export function buildFakeHsa(so: string): void {
  const cc = run(["gcc", "-shared", "-fPIC", "-Wall", "-Wextra", "-o", so, FAKE_LIBHSA]);
  if (cc.code !== 0) throw new Error(cc.err);
}

/**
 * The stand-in HSA application (test/apps/hip/fake_hsa_runtime.c: loads HSA_TOOLS_LIB as the ROCm
 * runtime would and dispatches `scale`) built as `exe` against the HSA headers under `inc`.
 * @returns gcc's messages (empty for a build without warnings)
 * @throws Error with gcc's messages when it fails
 */
export function buildFakeHsaApp(exe: string, inc: string): string {
  const cc = run([
    "gcc",
    "-std=gnu11",
    "-Wall",
    `-I${inc}`,
    `-I${join(ROOT, "c/hsa")}`,
    `-I${join(ROOT, "c/common")}`,
    "-o",
    exe,
    join(ROOT, "test/apps/hip/fake_hsa_runtime.c"),
    "-ldl",
    "-Wl,--no-as-needed",
    "-lstdc++",
  ]);
  if (cc.code !== 0) throw new Error(cc.err);
  return cc.err;
}

/**
 * test/apps/hip/scale.hip compiled for gfx90a into `out` (hipcc --cuda-device-only: a clang offload bundle).
 * @throws Error with hipcc's messages
 */
export function compileScale(out: string): void {
  const hip = run(["hipcc", "--cuda-device-only", "-c", "-O2", "--offload-arch=gfx90a", join(ROOT, "test/apps/hip/scale.hip"), "-o", out], {
    HIP_PLATFORM: "amd",
  });
  if (hip.code !== 0) throw new Error(hip.err);
}

/**
 * A hip capture of scale(data, 2, N) in `tmp`/`name` (its raw files in `name`.raw): the data region
 * (N floats at `dataVa`) holds k before and `after(k)` after (2k: what the kernel computes), and
 * an input region of 4096 bytes at `inputVa` the kernel does not touch. `module`: the code
 * object (compileScale's bytes); `chunkBytes`: the chunk size of the stored states (raw-fixture's default).
 * @returns the capture folder
 */
export async function hipScaleCapture(
  tmp: string,
  name: string,
  o: { module: Uint8Array; dataVa: bigint; inputVa: bigint; after?: (k: number) => number; chunkBytes?: number },
): Promise<string> {
  const after = o.after ?? ((k: number) => 2 * k);
  const N = SCALE_N;
  const raw = join(tmp, `${name}.raw`);
  mkdirSync(join(raw, "kernel"), { recursive: true });
  mkdirSync(join(raw, "memory"), { recursive: true });
  writeFileSync(join(raw, "kernel/module.hsaco"), o.module);
  const params = new Uint8Array(16);
  const dv = new DataView(params.buffer);
  dv.setBigUint64(0, o.dataVa, true);
  dv.setFloat32(8, 2, true);
  dv.setInt32(12, N, true);
  writeFileSync(join(raw, "kernel/params.bin"), params);
  const before = new Uint8Array(65536 + 4096);
  const after_ = new Uint8Array(65536 + 4096);
  const b = new Float32Array(before.buffer, 0, N);
  const a = new Float32Array(after_.buffer, 0, N);
  for (let k = 0; k < N; k++) {
    b[k] = k;
    a[k] = after(k);
  }
  for (let i = 0; i < 4096; i++) before[65536 + i] = after_[65536 + i] = (i * 7) & 0xff;
  writeFileSync(join(raw, "memory/before.bin"), before);
  writeFileSync(join(raw, "memory/after.bin"), after_);
  const rawJson = {
    raw_version: 2,
    library: "kerncap_hsa test",
    frontend: "hip",
    kernel: { name: "_Z5scalePffi", demangled: "scale(float*, float, int)", match_index: 0, launch_index: 0 },
    device: { vendor: "amd", name: "Fake MI210", arch: "gfx90a", driver_version: 0, ordinal: 0 },
    launch: { api: "hsa_kernel_dispatch_packet", grid: [3072, 1, 1], block: [256, 1, 1], shared_mem_bytes: 0, cluster: [1, 1, 1], attributes: [] },
    function_attributes: [],
    params: { file: "kernel/params.bin", size: 16, layout_source: "amdgpu metadata (kerncap reads kernel/module.hsaco)", layout: [] },
    module: { file: "kernel/module.hsaco", kind: "hsaco", size: o.module.length, source: "test" },
    ...chunkedRanges(
      raw,
      [
        { va: `0x${o.dataVa.toString(16)}`, size: N * 4, kind: "device", offset: 0, changed: true },
        { va: `0x${o.inputVa.toString(16)}`, size: 4096, kind: "device", offset: 65536, changed: false },
      ],
      [],
      o.chunkBytes,
    ),
    timing: { sync_us: 1, before_us: 1, app_launch_us: 5, after_us: 1, app_to_capture_s: 0 },
    hsa: { kernel_object: "0x1001", group_segment_size: 0, private_segment_size: 0, kernarg_address: "0x0", runtime_version: 1 },
  };
  const dir = join(tmp, name);
  await finalizeCapture(rawJson, { tmpDir: raw, finalDir: dir, force: false, command: ["./app"], match: "scale" });
  return dir;
}
