/**
 * Rebuild time of a CUDA reproducer: slice vs whole TU, on a generated single-TU application with
 * many non-template kernels (no GPU needed: nvcc only).
 *
 * Usage: node_modules/.bin/bun scripts/bench-slice.ts [KERNELS=48] [RUNS=3]
 * Generates app.cu (KERNELS kernels of unrolled math + a shared-memory reduction, and a main that
 * launches each), compiles it as the application would (-fatbin -lineinfo, sm_90), renders the
 * reproducer of the first, middle and last kernel with and without slicing, and times build.sh
 * (median of RUNS). Prints one line per case and the ratio; exit 2 without nvcc.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cubinKernels } from "../src/codeobj/cubin.ts";
import { pickCubin } from "../src/codeobj/fatbin.ts";
import { findNvcc } from "../src/frontends/cuda/nvcc.ts";
import { renderCudaReproducer } from "../src/frontends/cuda/repro.ts";
import { locateKernelSource } from "../src/frontends/cuda/locate.ts";

const N = Number(process.argv[2] ?? 48);
const RUNS = Number(process.argv[3] ?? 3);
let nvcc: string;
try {
  nvcc = findNvcc();
} catch {
  console.error("bench-slice: nvcc not found");
  process.exit(2);
}
const work = mkdtempSync(join(tmpdir(), "kerncap-bench-slice-"));
process.on("exit", () => rmSync(work, { recursive: true, force: true }));

const kernel = (i: number) => `
__global__ void k${i}(float* __restrict__ y, const float* __restrict__ x, int n, float a) {
  __shared__ float s[256];
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  float acc = 0.f, b = a * ${i + 1}.0f;
#pragma unroll
  for (int j = 0; j < 48; j++) {
    float v = x[(i + j * ${i + 3}) % n];
    acc = fmaf(__sinf(v * b + j), __expf(-v * ${i % 7}.25f), acc);
    b = b * 0.999f + (j & ${(i % 5) + 1});
  }
  s[t] = acc;
  __syncthreads();
  for (int o = 128; o > 0; o >>= 1) {
    if (t < o) s[t] += s[t + o];
    __syncthreads();
  }
  if (i < n) y[i] = s[0] * ${i}.5f + acc;
}`;
const app = [
  "#include <cstdio>",
  "#include <cuda_runtime.h>",
  ...Array.from({ length: N }, (_, i) => kernel(i)),
  "int main() {",
  "  float *y, *x;",
  "  cudaMalloc(&y, 1 << 16); cudaMalloc(&x, 1 << 16);",
  ...Array.from({ length: N }, (_, i) => `  k${i}<<<16, 256>>>(y, x, 4096, 1.0f);`),
  "  cudaDeviceSynchronize();",
  "  return 0;",
  "}",
  "",
].join("\n");
const src = join(work, "app");
mkdirSync(src);
writeFileSync(join(src, "app.cu"), app);
const fat = join(work, "app.fatbin");
const t0 = performance.now();
const p = Bun.spawnSync([nvcc, "-fatbin", "-O3", "-lineinfo", "-gencode", "arch=compute_90,code=sm_90", "-o", fat, join(src, "app.cu")], { stderr: "pipe" });
if (p.exitCode !== 0) {
  console.error(p.stderr.toString());
  process.exit(2);
}
console.log(`app: ${N} kernels in one TU; application compile (fatbin) ${((performance.now() - t0) / 1000).toFixed(2)} s`);
const module = new Uint8Array(readFileSync(fat));

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const timeBuild = (dir: string): { s: number; kernels: number } => {
  const ts: number[] = [];
  let out = "";
  for (let r = 0; r < RUNS; r++) {
    const a = performance.now();
    const b = Bun.spawnSync(["bash", join(dir, "build.sh")], { cwd: dir, stdout: "pipe", stderr: "pipe" });
    ts.push((performance.now() - a) / 1000);
    if (b.exitCode !== 0) throw new Error(b.stderr.toString());
    out = b.stdout.toString().trim().split("\n").pop()!;
  }
  return { s: median(ts), kernels: cubinKernels(pickCubin(new Uint8Array(readFileSync(out)), "sm_90").cubin).length };
};
for (const i of [0, Math.floor(N / 2), N - 1]) {
  const name = `_Z${`k${i}`.length}k${i}PfPKfif`;
  const demangled = `k${i}(float*, float const*, int, float)`;
  const loc = await locateKernelSource({ kernel: name, demangled, module, arch: "sm_90" });
  const res: Record<string, { s: number; kernels: number }> = {};
  for (const slice of [true, false]) {
    const dir = join(work, `k${i}-${slice ? "slice" : "whole"}`);
    renderCudaReproducer({ outDir: dir, kernelName: name, demangledName: demangled, arch: "sm_90", location: loc, slice, nvcc });
    res[slice ? "slice" : "whole"] = timeBuild(dir);
  }
  const s = res.slice!;
  const w = res.whole!;
  console.log(
    `k${i}: slice ${s.s.toFixed(2)} s (${s.kernels} kernel${s.kernels === 1 ? "" : "s"} in the cubin), whole TU ${w.s.toFixed(2)} s (${w.kernels} kernels): ${(w.s / s.s).toFixed(1)}x faster`,
  );
}
