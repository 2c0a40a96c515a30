/**
 * End-to-end GPU tests: real applications (CUDA C++, PyTorch eager, Triton) run under the
 * compiled kerncap binary; each capture is replayed in a separate process, bit-exact, at the
 * captured VAs. Skipped (and counted as skipped) where no NVIDIA GPU is present.
 *
 * Needs: KERNCAP_BIN (default dist/kerncap), nvcc, python3 with torch and triton.
 * Writes measurements to $KERNCAP_GPU_OUT/measurements.json when that is set.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { APPS, BIN, json, kerncap, skipReason, workDir } from "./harness.ts";
import { kc64 } from "../../src/format/kc64.ts";

const SKIP = !!skipReason("gpu tests");
const WORK = workDir("kerncap-gpu-");
const measurements: Record<string, unknown> = {};
const kc = (args: string[], env: Record<string, string> = {}) => kerncap(WORK, args, env);

/** Capture with --json, then replay in a new process; returns both documents. */
function captureAndReplay(label: string, kernel: string, dispatch: number, app: string[], iters = 20, env: Record<string, string> = {}) {
  const out = join(WORK, label);
  const cap = kc(["run", "--kernel", kernel, "--dispatch", String(dispatch), "--out", out, "--json", "--", ...app], env);
  expect(cap.code, cap.stderr).toBe(0);
  const c = json(cap);
  const rep = kc(["replay", out, "--iters", String(iters), "--json"]);
  const r = rep.code <= 1 ? json(rep) : undefined;
  measurements[label] = {
    kernel: c.kernel,
    captureSeconds: cap.seconds,
    appSeconds: c.appSeconds,
    regions: c.regions,
    globals: c.globals,
    beforeBytes: c.beforeBytes,
    afterBytes: c.afterBytes,
    captureTiming: c.timing,
    replaySeconds: rep.seconds,
    verdict: r?.verdict,
    kernelUsMedian: r?.timing.medianUs,
    kernelUsMin: r?.timing.minUs,
    kernelUsInApp: r?.timing.appUs,
    restoreGBps: r?.restore.gbPerS,
    restoreBytes: r?.restore.bytes,
    restorePinned: r?.restore.hostRegistered,
    mismatches: r?.mismatches,
  };
  expect(rep.code, rep.stderr + rep.stdout).toBe(0);
  expect(r.verdict).toBe("match");
  expect(r.regionsChecked).toBe(c.regions + c.globals); // every region and module global compared
  // memory/before.bin is mapped through the descriptor the capture path rule opened (/proc/self/fd, MAP_SHARED): a capture
  // of the user's own with 8 MiB or more stored is restored from pinned windows, not staged (src/replay/restore.ts Restorer)
  if (r.restore.storedBytes >= 8 << 20) expect(r.restore.hostRegistered, label).toBe(true);
  return { out, c, r };
}

const apps = APPS;
let structsBin = "";

beforeAll(() => {
  if (SKIP) return;
  structsBin = join(WORK, "structs");
  const p = Bun.spawnSync(["nvcc", "-O2", "-lineinfo", "-arch=sm_90", "-o", structsBin, join(apps, "structs.cu")], { stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`nvcc failed: ${p.stderr}`);
});

afterAll(() => {
  if (process.env.KERNCAP_GPU_OUT) writeFileSync(join(process.env.KERNCAP_GPU_OUT, "measurements.json"), JSON.stringify(measurements, null, 2));
});

describe.skipIf(SKIP)("CUDA C++ app with pointers inside structs", () => {
  test("list shows both kernels with counts, grid and block", () => {
    const r = kc(["list", "--json", "--", structsBin, "3"]);
    expect(r.code, r.stderr).toBe(0);
    const l = json(r);
    const sj = l.kernels.find((k: any) => k.demangled.startsWith("scale_jobs"));
    const ax = l.kernels.find((k: any) => k.demangled.includes("axpy_inplace<float, 4>"));
    expect(sj.count).toBe(3);
    expect(sj.grid).toEqual([64, 8, 1]);
    expect(sj.block).toEqual([256, 1, 1]);
    expect(ax.count).toBe(3);
  });

  test("scale_jobs #1: buffers reached only through a struct array replay bit-exact", () => {
    const { out, r } = captureAndReplay("structs-scale_jobs", "scale_jobs", 1, [structsBin, "3"]);
    const m = JSON.parse(readFileSync(join(out, "kerncap.json"), "utf8"));
    expect(m.params.layout).toEqual([
      { index: 0, offset: 0, size: 8 },
      { index: 1, offset: 8, size: 4 },
    ]);
    expect(m.kernel.matchIndex).toBe(1);
    // 16 job buffers + the job table + x, y: all live regions, not only the parameter's target
    expect(m.regions.length).toBeGreaterThanOrEqual(19);
    expect(m.regions.filter((x: any) => x.changed).length).toBe(8);
    // module globals: the __constant__ table the host rewrote (round 1 values, not the
    // initializer's) and the __device__ launch counter the kernel bumps (1 before, 2 after)
    const gain = m.globals.find((g: any) => g.name === "c_gain");
    const calls = m.globals.find((g: any) => g.name === "d_launches");
    expect(gain, JSON.stringify(m.globals)).toMatchObject({ size: 16, changed: false });
    expect(calls).toMatchObject({ size: 4, changed: true });
    // chunked snapshot: the constant table is one stored chunk; the counter's before state (1) and after state (2)
    const before = readFileSync(join(out, m.memory.before));
    const gOff = gain.before.extents[0][2];
    expect([...new Float32Array(before.buffer.slice(before.byteOffset + gOff, before.byteOffset + gOff + 16))]).toEqual([2.25, 0.75, 2, 0.75]);
    expect(before.readUInt32LE(calls.before.extents[0][2])).toBe(1);
    expect(readFileSync(join(out, m.memory.after)).readUInt32LE(calls.after.extents[0][2])).toBe(2);
    // hashed on the GPU by the scan kernel, and the CPU's kc64 agrees (inspect --verify)
    expect(m.memory.gpuScanUnavailable).toBeUndefined();
    expect(kc(["inspect", out, "--verify"]).code).toBe(0);
    expect(r.regionsChecked).toBe(m.regions.length + m.globals.length);
    expect(r.mismatches).toEqual([]);
  });

  test("in-place templated kernel replays from the before state on every timed launch", () => {
    const { c, r } = captureAndReplay("structs-axpy", "axpy_inplace", 2, [structsBin, "3"], 10);
    expect(c.kernel).toContain("axpy_inplace<float, 4>");
    expect(r.timing.iters).toBe(10);
    expect(r.timing.medianUs).toBeGreaterThan(0);
  });

  test("cudaLaunchKernelEx with a cluster attribute and 64 KiB dynamic shared memory: both re-applied", () => {
    const { out } = captureAndReplay("structs-cluster", "cluster_rank", 0, [structsBin, "1"], 5);
    const m = JSON.parse(readFileSync(join(out, "kerncap.json"), "utf8"));
    expect(m.launch.api).toBe("cuLaunchKernelEx");
    expect(m.launch.cluster).toEqual([4, 1, 1]);
    expect(m.launch.sharedMemBytes).toBe(65536);
    expect(m.launch.attributes.map((a: any) => a.name)).toContain("CLUSTER_DIMENSION");
    expect(m.functionAttributes.find((a: any) => a.name === "MAX_DYNAMIC_SHARED_SIZE_BYTES").value).toBe(65536);
  });

  test("replay detects a kernel whose result differs (altered after state)", () => {
    const out = join(WORK, "structs-scale_jobs");
    const m = JSON.parse(readFileSync(join(out, "kerncap.json"), "utf8"));
    const ch = m.regions.find((x: any) => x.changed);
    // flip one byte of the after image and re-seal its chunk's kc64, so only the comparison can catch it
    const f = join(out, m.memory.after);
    const bytes = readFileSync(f);
    const [first, , off] = ch.after.extents[0];
    const len = Math.min(m.memory.chunkBytes, ch.size - first * m.memory.chunkBytes);
    bytes[off + 100] ^= 0xff;
    writeFileSync(f, bytes);
    ch.after.hashes = kc64(bytes.subarray(off, off + len)).hex + ch.after.hashes.slice(16);
    writeFileSync(join(out, "kerncap.json"), JSON.stringify(m));
    const rep = kc(["replay", out, "--json", "--iters", "1"]);
    expect(rep.code).toBe(1);
    const r = json(rep);
    expect(r.verdict).toBe("mismatch");
    expect(r.mismatches[0].va).toBe(ch.va);
    expect(r.mismatches[0].firstDiffOffset).toBe(first * m.memory.chunkBytes + 100);
    expect(r.mismatches[0].bytesDiffering).toBe(1);
  });

  test("a module the GPU cannot run: exit 2, names the architectures in the module", () => {
    const src = join(WORK, "structs-scale_jobs");
    const out = join(WORK, "structs-wrong-arch");
    Bun.spawnSync(["cp", "-r", src, out]);
    // the captured module (the cubin, or the app's fatbin where it had PTX) replaced by an sm_100a cubin
    const m = JSON.parse(readFileSync(join(out, "kerncap.json"), "utf8"));
    const cubin = join(out, m.module.file);
    const p = Bun.spawnSync(["nvcc", "-cubin", "-arch=sm_100a", "-o", cubin, join(apps, "structs.cu")], { stderr: "pipe" });
    expect(p.exitCode, p.stderr.toString()).toBe(0);
    const bytes = readFileSync(cubin);
    const f = m.files.find((x: any) => x.path === m.module.file);
    f.size = bytes.length;
    f.sha256 = new Bun.CryptoHasher("sha256").update(bytes).digest("hex");
    m.module.size = bytes.length;
    writeFileSync(join(out, "kerncap.json"), JSON.stringify(m));
    const r = kc(["replay", out]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("cannot run on this GPU");
    expect(r.stderr).toContain("sm_100a");
    expect(r.stderr).toContain("sm_90");
  });

  test("a captured VA range already taken in the replay process: exit 2, names the range", () => {
    const r = kc(["replay", join(WORK, "structs-axpy")], { KERNCAP_FAULT_VA_TAKEN: "1" });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/captured VA range 0x[0-9a-f]+-0x[0-9a-f]+ \(\d+ bytes\) is not free/);
    // tried once more in a process without address-space randomization (the fault follows it there)
    expect(r.stderr).toContain("without address-space randomization");
  });

  test("an interrupted capture leaves no folder under the final name (nor a temporary one)", async () => {
    const out = join(WORK, "interrupted");
    const { BUN_BE_BUN: _, ...env } = process.env; // BUN_BE_BUN must not reach the kerncap under test
    const p = Bun.spawn(
      [BIN, "run", "--kernel", "never_launched", "--out", out, "--", "python3", "-c", "import torch,time; torch.zeros(1,device='cuda'); time.sleep(60)"],
      { cwd: WORK, env, stdout: "pipe", stderr: "pipe" },
    );
    await Bun.sleep(6000);
    p.kill("SIGINT");
    const code = await p.exited;
    expect(code).toBe(130);
    expect(existsSync(out)).toBe(false);
    expect(
      require("node:fs")
        .readdirSync(WORK)
        .filter((n: string) => n.startsWith("interrupted")),
    ).toEqual([]);
  });

  test("existing output folder is refused without --force, replaced with it", () => {
    const out = join(WORK, "structs-axpy");
    const r = kc(["run", "--kernel", "axpy", "--out", out, "--", structsBin, "1"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("already exists");
    const f = kc(["run", "--kernel", "axpy", "--out", out, "--force", "--", structsBin, "1"]);
    expect(f.code, f.stderr).toBe(0);
  });

  test("a kernel that never runs: exit 2 with the closest names", () => {
    const r = kc(["run", "--kernel", "scale_job_typo", "--out", join(WORK, "nope"), "--", structsBin, "1"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("closest names");
    expect(r.stderr).toContain("scale_jobs");
    expect(existsSync(join(WORK, "nope"))).toBe(false);
  });

  test("--exit-after-capture ends the app right after the capture", () => {
    const out = join(WORK, "exit-after");
    const r = kc(["run", "--kernel", "scale_jobs", "--exit-after-capture", "--out", out, "--json", "--", structsBin, "3"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).not.toContain("checksum"); // the app's final print never happened
    expect(existsSync(join(out, "kerncap.json"))).toBe(true);
  });
});

describe.skipIf(SKIP)("PyTorch eager", () => {
  const app = ["python3", join(apps, "torch_app.py"), "3"];
  test("elementwise kernel", () => {
    const { c } = captureAndReplay("torch-elementwise", "elementwise_kernel", 1, app);
    expect(c.kernel).toContain("elementwise");
  });
  test("softmax reduction", () => {
    const { c } = captureAndReplay("torch-softmax", "softmax", 1, app);
    expect(c.kernel.toLowerCase()).toContain("softmax");
  });
  test("cuBLAS GEMM behind torch.matmul (large fatbin module)", () => {
    const l = json(kc(["list", "--json", "--", ...app]));
    const gemm = l.kernels.find((k: any) => /gemm|nvjet|xmma|cutlass/i.test(k.name));
    expect(gemm, JSON.stringify(l.kernels.map((k: any) => k.name))).toBeDefined();
    const { out } = captureAndReplay("torch-gemm", gemm.name.replace(/[$^.*+?()[\]{}|\\]/g, "\\$&"), 1, app);
    const m = JSON.parse(readFileSync(join(out, "kerncap.json"), "utf8"));
    measurements["torch-gemm-module"] = { kind: m.module.kind, bytes: m.module.size, name: m.kernel.name };
  });
});

describe.skipIf(SKIP)("allocation kinds beyond cudaMalloc", () => {
  const kinds = (out: string) => new Set(JSON.parse(readFileSync(join(out, "kerncap.json"), "utf8")).regions.map((r: any) => r.kind));
  test("managed, mapped pinned host and stream-ordered (cudaMallocAsync) memory: at their VAs, bit-exact", () => {
    const bin = join(WORK, "allocs");
    const b = Bun.spawnSync(["nvcc", "-O2", "-arch=sm_90", "-o", bin, join(apps, "allocs.cu")], { stderr: "pipe" });
    expect(b.exitCode, b.stderr.toString()).toBe(0);
    const { out, r } = captureAndReplay("allocs-mix", "mix_kinds", 1, [bin, "3"]);
    const k = kinds(out);
    for (const want of ["managed", "host-mapped", "async"]) expect([...k]).toContain(want);
    expect(r.verdict).toBe("match");
    expect(r.mismatches).toEqual([]);
  });
  test("PyTorch with expandable segments (cuMemCreate/cuMemMap: VMM)", () => {
    const { out, r } = captureAndReplay("torch-vmm", "elementwise_kernel", 1, ["python3", join(apps, "torch_app.py"), "3"], 20, {
      PYTORCH_CUDA_ALLOC_CONF: "expandable_segments:True",
    });
    expect([...kinds(out)]).toContain("vmm");
    expect(r.verdict).toBe("match");
  });
  test("PyTorch with the cudaMallocAsync allocator backend", () => {
    const { out, r } = captureAndReplay("torch-async", "elementwise_kernel", 1, ["python3", join(apps, "torch_app.py"), "3"], 20, {
      PYTORCH_CUDA_ALLOC_CONF: "backend:cudaMallocAsync",
    });
    expect([...kinds(out)]).toContain("async");
    expect(r.verdict).toBe("match");
  });
});

describe.skipIf(SKIP)("Triton", () => {
  test("kernel launched by Triton's launcher (cuLaunchKernelEx)", () => {
    const { out } = captureAndReplay("triton-add-relu", "fused_add_relu", 1, ["python3", join(apps, "triton_app.py"), "3"]);
    const m = JSON.parse(readFileSync(join(out, "kerncap.json"), "utf8"));
    expect(m.launch.api).toBe("cuLaunchKernelEx");
    expect(m.module.kind).toBe("cubin");
  });
});
